import { afterAll, describe, expect, test } from "bun:test";
import "reflect-metadata";
import {
  MemoryLogger,
  type Model,
  NrtApi,
  NrtStatus,
  type NrtTensorInfoArray,
  type Ref,
  type Tensor,
  TensorPlacement,
  type TensorSet,
} from "@nrt/core";
import { createNrtContainer, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { kernel, oneOpNeff } from "./_kernels.ts";

const containers: NrtContainer[] = [];
afterAll(async () => {
  for (const c of containers.splice(0)) await c.resolve(PortalToken).close();
});
function container(): NrtContainer {
  const c = createNrtContainer();
  containers.push(c);
  return c;
}
const opts = () => ({ ...nrtPlugins(container()), visibleCores: [0, 1], logger: new MemoryLogger() });
const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const bytesOf = (xs: number[]) => new Uint8Array(Float32Array.from(xs).buffer);

describe("nrt_* facade (seed lifecycle-error-model §1.1, runtime-synthesis §2.1)", () => {
  test("nrt_set_pool_eng_ucode() stores in START, returns 13 (0xd) once initialised and 14 (0xe) after close", async () => {
    const api = new NrtApi();
    const img = { iram: kernel("noop"), dram: new Uint8Array(16) };
    expect(api.nrt_set_pool_eng_ucode(img)).toBe(NrtStatus.NRT_SUCCESS);
    expect(await api.nrt_init(opts())).toBe(NrtStatus.NRT_SUCCESS);
    expect(api.nrt_set_pool_eng_ucode(img)).toBe(13);
    expect(await api.nrt_close()).toBe(NrtStatus.NRT_SUCCESS);
    expect(api.nrt_set_pool_eng_ucode(img)).toBe(14);
  });

  test("every entry returns 13 before nrt_init and 14 after nrt_close", async () => {
    const api = new NrtApi();
    const neff = oneOpNeff("relu", "relu", [f32("x", 8)], [f32("y", 8)]);
    const check = async (code: number) => {
      const m: Ref<Model> = {}, t: Ref<Tensor> = {}, s: Ref<TensorSet> = {};
      expect(await api.nrt_load(neff, 0, 1, m)).toBe(code);
      expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, 0, 8, "t", t)).toBe(code);
      expect(api.nrt_allocate_tensor_set(s)).toBe(code);
      expect(await api.nrt_close()).toBe(code);
    };
    await check(NrtStatus.NRT_UNINITIALIZED);
    expect(await api.nrt_init(opts())).toBe(0);
    const model: Ref<Model> = {};
    expect(await api.nrt_load(neff, 0, 1, model)).toBe(0);
    expect(await api.nrt_close()).toBe(0);
    await check(NrtStatus.NRT_CLOSED);
    expect(await api.nrt_execute(model.value!, {} as TensorSet, {} as TensorSet)).toBe(NrtStatus.NRT_CLOSED);
    expect(await api.nrt_unload(model.value!)).toBe(NrtStatus.NRT_CLOSED);
  });

  test("nrt_load → nrt_execute → nrt_tensor_read through the facade computes ReLU", async () => {
    const api = new NrtApi();
    expect(await api.nrt_init(opts())).toBe(0);
    const n = 100;
    const model: Ref<Model> = {};
    expect(await api.nrt_load(oneOpNeff("relu", "relu", [f32("x", n)], [f32("y", n)]), 0, 1, model)).toBe(0);
    const info: Ref<NrtTensorInfoArray> = {};
    expect(api.nrt_get_model_tensor_info(model.value!, info)).toBe(0);
    expect(info.value!.tensor_count).toBe(2);
    expect(info.value!.tensor_array.map((t) => [t.name, t.usage, t.size])).toEqual([["x", 0, 400], ["y", 1, 400]]);
    // Freed through its own pair (seed lifecycle-error-model §3.2): the out-parameter holds nothing afterwards.
    expect(api.nrt_free_model_tensor_info(info)).toBe(0);
    expect(info.value).toBeUndefined();
    const x: Ref<Tensor> = {}, y: Ref<Tensor> = {};
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, n * 4, "x", x)).toBe(0);
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, n * 4, "y", y)).toBe(0);
    const input = Array.from({ length: n }, (_, i) => i - 50);
    expect(await api.nrt_tensor_write(x.value!, bytesOf(input), 0, n * 4)).toBe(0);
    const ins: Ref<TensorSet> = {}, outs: Ref<TensorSet> = {};
    api.nrt_allocate_tensor_set(ins);
    api.nrt_allocate_tensor_set(outs);
    expect(api.nrt_add_tensor_to_tensor_set(ins.value!, "x", x.value!)).toBe(0);
    expect(api.nrt_add_tensor_to_tensor_set(outs.value!, "y", y.value!)).toBe(0);
    expect(await api.nrt_execute_repeat(model.value!, ins.value!, outs.value!, 3)).toBe(0);
    const buf = new Uint8Array(n * 4);
    expect(await api.nrt_tensor_read(y.value!, buf, 0, n * 4)).toBe(0);
    expect(Array.from(new Float32Array(buf.buffer))).toEqual(input.map((v) => Math.max(0, v)));
    // A missing input is a clear status, not a crash.
    api.nrt_allocate_tensor_set(ins);
    expect(await api.nrt_execute(model.value!, ins.value!, outs.value!)).toBe(NrtStatus.NRT_INVALID);
    expect(await api.nrt_tensor_free(x)).toBe(0);
    expect(x.value).toBeUndefined();
    expect(await api.nrt_unload(model.value!)).toBe(0);
    expect(await api.nrt_unload(model.value!)).toBe(NrtStatus.NRT_INVALID_HANDLE);
    expect(await api.nrt_close()).toBe(0);
  });

  test("nrt_load refuses a corrupt NEFF with NRT_INVALID and an unknown NEFF version with 10", async () => {
    const api = new NrtApi();
    expect(await api.nrt_init(opts())).toBe(0);
    const neff = oneOpNeff("relu", "relu", [f32("x", 8)], [f32("y", 8)]);
    const m: Ref<Model> = {};
    expect(await api.nrt_load(neff.slice(0, 2000), 0, 1, m)).toBe(NrtStatus.NRT_INVALID);
    const v9 = neff.slice();
    new DataView(v9.buffer).setUint32(0x18, 9, true);
    expect(await api.nrt_load(v9, 0, 1, m)).toBe(NrtStatus.NRT_UNSUPPORTED_NEFF_VERSION);
    expect(await api.nrt_load(neff, 7, 1, m)).toBe(NrtStatus.NRT_LOAD_NOT_ENOUGH_NC);
    expect(m.value).toBeUndefined();
    expect(await api.nrt_close()).toBe(0);
  });
});
