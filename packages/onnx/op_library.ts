/**
 * The op library {@linkcode compileOnnx} lowers onto by default: the rules of `kernels/ops/lowering.ts`, their
 * supported-op list, the activations the fused ops take and the work estimate of a call. Ours.
 *
 * @module
 */
import { Activation, callWork, lowerNode, SUPPORTED_OPS } from "@nrt/ops";
import type { Lowering } from "./lower.ts";

const qualified = (
  op: { readonly domain: string; readonly opType: string },
) => (op.domain === "" ? op.opType : `${op.domain}.${op.opType}`);

/** The kernels/ops library as a {@linkcode Lowering}. */
export const OP_LIBRARY: Lowering = {
  lowerNode: (node) => lowerNode(node),
  supportedOps: SUPPORTED_OPS.map(qualified),
  fusedActivations: Object.keys(Activation).filter((a) => a !== ""),
  callWork,
  fusedGemmPermutes: true,
  opDetails: Object.fromEntries(SUPPORTED_OPS.map((op) => {
    const attrs = Object.entries(op.attributes).map(([k, v]) => `${k} (${v})`).join(", ") || "none";
    return [qualified(op), `dtypes ${op.dtypes.join(", ")}; attributes ${attrs}${op.notes ? `; ${op.notes}` : ""}`];
  })),
};
