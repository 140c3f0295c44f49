/**
 * The libnrt-compatible facade: the same lifecycle through `nrt_*` calls that return an `NrtStatus`, with
 * out-parameters as `{ value }` boxes — including the custom Pool image window of `nrt_set_pool_eng_ucode`.
 * Run with `bun examples/facade.ts` or `deno run -A examples/facade.ts`.
 *
 * @module
 */
import { type Model, NrtApi, NrtStatus, type Ref, type Tensor, TensorPlacement, type TensorSet } from "@nrt/core";
import { nrt_get_status_as_str } from "@nrt/core";
import { createNrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { readFile } from "node:fs/promises";
import { oneOpNeffBytes } from "./_neff.ts";

/** Runs ReLU through the facade; returns the statuses of each step, in order. */
export async function main(log: (s: string) => void = console.log): Promise<Record<string, number>> {
  const api = new NrtApi(); // `nrt_*` module functions use a process-wide default instance of the same class
  const steps: Record<string, number> = {};
  const check = (step: string, status: number) => {
    steps[step] = status;
    log(`${step.padEnd(28)} ${status} (${nrt_get_status_as_str(status)})`);
    if (status !== NrtStatus.NRT_SUCCESS) throw new Error(`${step} failed with ${status}`);
  };
  const stock = await readFile(new URL("../kernels/wasm/stock_pool.wasm", import.meta.url));
  // A custom Pool image is accepted only before nrt_init (seed: runtime-synthesis §2.1); it replaces the stock one.
  check(
    "nrt_set_pool_eng_ucode",
    api.nrt_set_pool_eng_ucode({ iram: new Uint8Array(stock), dram: new Uint8Array(16) }),
  );
  const container = createNrtContainer();
  check("nrt_init", await api.nrt_init({ ...nrtPlugins(container), visibleCores: [0, 1] }));
  log(
    `nrt_set_pool_eng_ucode again: ${
      api.nrt_set_pool_eng_ucode({ iram: new Uint8Array(stock), dram: new Uint8Array(16) })
    } (13: initialised)`,
  );
  try {
    const model: Ref<Model> = {};
    check("nrt_load", await api.nrt_load(await oneOpNeffBytes("relu", "relu", 8), 0, 1, model));
    const x: Ref<Tensor> = {}, y: Ref<Tensor> = {}, ins: Ref<TensorSet> = {}, outs: Ref<TensorSet> = {};
    check(
      "nrt_tensor_allocate(x)",
      await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, 0, 32, "x", x),
    );
    check(
      "nrt_tensor_allocate(y)",
      await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, 0, 32, "y", y),
    );
    check(
      "nrt_tensor_write",
      await api.nrt_tensor_write(x.value!, new Uint8Array(Float32Array.of(-2, -1, 0, 1, 2, 3, -4, 5).buffer), 0, 32),
    );
    check("nrt_allocate_tensor_set", api.nrt_allocate_tensor_set(ins));
    check("nrt_allocate_tensor_set", api.nrt_allocate_tensor_set(outs));
    check("nrt_add_tensor_to_tensor_set", api.nrt_add_tensor_to_tensor_set(ins.value!, "x", x.value!));
    check("nrt_add_tensor_to_tensor_set", api.nrt_add_tensor_to_tensor_set(outs.value!, "y", y.value!));
    check("nrt_execute", await api.nrt_execute(model.value!, ins.value!, outs.value!));
    const buf = new Uint8Array(32);
    check("nrt_tensor_read", await api.nrt_tensor_read(y.value!, buf, 0, 32));
    log(`y = ${Array.from(new Float32Array(buf.buffer)).join(" ")}`);
    check("nrt_unload", await api.nrt_unload(model.value!));
  } finally {
    check("nrt_close", await api.nrt_close());
    await container.resolve(PortalToken).close();
  }
  return steps;
}

if (import.meta.main) await main();
