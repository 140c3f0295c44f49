/**
 * How much work one kernel call does, in multiply-adds or element visits: what a compiler weighs against the cost
 * of dispatching a call to 8 Q7 cores and joining them (a call with little work runs faster on one core). The
 * figures are estimates, not timings: `gemm` and `conv2d` count multiply-adds from their scalar arguments, `pool2d`
 * window taps, and every other function the elements it reads and writes. Ours.
 *
 * @module
 */
import type { KernelCall } from "./op_node.ts";

/**
 * The estimated work of a call.
 *
 * @param call The call (its `ints` as the lowering produced them).
 * @param elementsOf The element count of a value the call names.
 * @returns Multiply-adds (gemm, conv2d), window taps (pool2d) or elements read and written (the rest).
 */
export function callWork(call: KernelCall, elementsOf: (name: string) => number): number {
  const i = call.ints.map(Number);
  if (call.library === "linalg" && call.fn === "gemm") return i[0] * i[1] * i[2] * i[3] * i[4]; // B1·B2·M·N·K
  if (call.library === "conv" && call.fn === "conv2d") {
    const [n, c, , , m, kh, kw, oh, ow] = i;
    return n * m * oh * ow * (c / i[15]) * kh * kw; // N·M·OH·OW·(C/group)·KH·KW
  }
  if (call.library === "conv" && call.fn === "pool2d") return i[1] * i[4] * i[5] * i[6] * i[7]; // planes·OH·OW·KH·KW
  return [...call.inputs, ...call.outputs].reduce((a, name) => a + elementsOf(name), 0);
}
