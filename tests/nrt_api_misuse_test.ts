/**
 * The flat `nrt_*` facade under misuse (seed lifecycle-error-model §1.1: "The guard is at the top of every public
 * entry"): every entry answers 13 before `nrt_init` and 14 after `nrt_close` whatever its arguments, and only then
 * checks them — a handle that is not of its kind or an out-parameter that cannot take a value is `NRT_INVALID` (2),
 * never a throw, and a refused call leaves nothing behind. `nrt_init` and `nrt_close` racing each other leave exactly
 * one runtime, or none, and no device memory. The statuses are the seed's numbers, written as literals.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import {
  MemoryLogger,
  type Model,
  NrtApi,
  type NrtInitOptions,
  type Ref,
  type Tensor,
  TensorPlacement,
  TensorSet,
} from "@nrt/core";
import { DeviceSimPortal } from "@nrt/device-sim";
import { kernel, oneOpNeff } from "./_kernels.ts";

const portals: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of portals.splice(0)) await p.close();
});
function portal(): DeviceSimPortal {
  const p = new DeviceSimPortal();
  portals.push(p);
  return p;
}
/** Options on a portal the test keeps (and closes itself), so its memory can be read after `nrt_close`. */
const kept = (p: DeviceSimPortal): NrtInitOptions => ({
  portal: p,
  archPacks: [cayman],
  ownsPortal: false,
  logger: new MemoryLogger(),
});
const NOTHING = { hbm: 0, host: 0, allocations: 0 };
const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const N = 16;
const RELU = oneOpNeff("relu", "relu", [f32("x", N)], [f32("y", N)]);

/** What an entry did: its status (or return value), or the name of what it threw. */
async function outcome(f: () => unknown): Promise<unknown> {
  try {
    return await f();
  } catch (e) {
    return `threw ${e instanceof Error ? e.name : String(e)}`;
  }
}

/** Whether the portal refuses calls (it was closed). */
async function isClosed(p: DeviceSimPortal): Promise<boolean> {
  return await p.devices().then(() => false, () => true);
}

describe("nrt_init and nrt_close racing (seed lifecycle-error-model §1.1)", () => {
  test("of two concurrent nrt_init the second is refused with 1, as a second nrt_init is, and nothing leaks", async () => {
    const api = new NrtApi();
    const p1 = portal(), p2 = portal();
    expect(await Promise.all([api.nrt_init(kept(p1)), api.nrt_init(kept(p2))])).toEqual([0, 1]);
    expect(await p2.memUsage(0)).toEqual(NOTHING); // the refused call brought nothing up
    expect(await api.nrt_init(kept(p2))).toBe(1); // a second nrt_init once initialised: the same status
    const count: Ref<number> = {};
    expect(api.nrt_get_visible_nc_count(count)).toBe(0);
    expect(await api.nrt_close()).toBe(0);
    expect(await p1.memUsage(0)).toEqual(NOTHING);
    expect(await p2.memUsage(0)).toEqual(NOTHING);
  });

  test("a refused nrt_init closes the portal it was given to own, never the portal in use", async () => {
    const api = new NrtApi();
    const p1 = portal(), p2 = portal(), p3 = portal();
    const owned = (p: DeviceSimPortal): NrtInitOptions => ({ ...kept(p), ownsPortal: true });
    // Concurrent: the second call's owned portal is closed; the first call's portal, passed again, is not.
    expect(await Promise.all([api.nrt_init(kept(p1)), api.nrt_init(owned(p2)), api.nrt_init(owned(p1))])).toEqual([
      0,
      1,
      1,
    ]);
    expect(await isClosed(p2)).toBe(true);
    expect(await isClosed(p1)).toBe(false);
    // Sequential: the same.
    expect(await api.nrt_init(owned(p3))).toBe(1);
    expect(await isClosed(p3)).toBe(true);
    expect(await api.nrt_init(owned(p1))).toBe(1);
    expect(await isClosed(p1)).toBe(false);
    const model: Ref<Model> = {};
    expect(await api.nrt_load(RELU, 0, 1, model)).toBe(0);
    expect(await api.nrt_close()).toBe(0);
    expect(await p1.memUsage(0)).toEqual(NOTHING);
  });

  test("nrt_close during an in-flight nrt_init waits for it and closes what it brought up", async () => {
    const api = new NrtApi();
    const p = portal();
    const init = api.nrt_init(kept(p));
    const close = api.nrt_close();
    expect(await close).toBe(0);
    expect(await init).toBe(0);
    expect(api.state).toBe(3); // NRT_STATE_CLOSED
    expect(api.runtime).toBeUndefined();
    expect(await p.memUsage(0)).toEqual(NOTHING);
    expect(api.nrt_allocate_tensor_set({})).toBe(14);
    // An init that fails leaves nothing to close: 13 before any init succeeded.
    const failing = new NrtApi();
    const bad = failing.nrt_init({ ...kept(portal()), archPacks: [] });
    expect(await failing.nrt_close()).toBe(13);
    expect(await bad).not.toBe(0);
    expect(failing.state).toBe(0); // NRT_STATE_START
  });

  test("nrt_init during an in-flight nrt_close brings up only once the teardown finished", async () => {
    const sim = portal();
    const calls: string[] = [];
    // Records the portal calls in order: bring-up allocates, only teardown frees.
    const traced = new Proxy(sim, {
      get(target, prop) {
        const v = Reflect.get(target, prop);
        if (typeof v !== "function") return v;
        return (...args: unknown[]) => {
          calls.push(String(prop));
          return v.apply(target, args);
        };
      },
    });
    const api = new NrtApi();
    expect(await api.nrt_init(kept(traced))).toBe(0);
    calls.length = 0;
    const close = api.nrt_close();
    const init = api.nrt_init(kept(traced));
    expect(await close).toBe(0);
    expect(await init).toBe(0);
    const bringUp = calls.indexOf("devices");
    expect(bringUp).toBeGreaterThan(0);
    expect(calls.slice(0, bringUp)).toContain("memFree");
    expect(calls.slice(bringUp)).not.toContain("memFree"); // no teardown after the new bring-up began
    expect(await api.nrt_close()).toBe(0);
    expect(await sim.memUsage(0)).toEqual(NOTHING);
  });

  test("nrt_set_pool_eng_ucode while nrt_init is in flight is refused with 13, not dropped", async () => {
    const api = new NrtApi();
    const init = api.nrt_init(kept(portal()));
    expect(api.nrt_set_pool_eng_ucode({ iram: kernel("noop"), dram: new Uint8Array(16) })).toBe(13);
    expect(await init).toBe(0);
    expect(await api.nrt_close()).toBe(0);
  });
});

describe("the state guard comes before the argument checks (seed lifecycle-error-model §1.1)", () => {
  /** Calls every entry with arguments that are all wrong; returns what each answered. */
  async function everyEntry(api: NrtApi): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    const entries = Object.getOwnPropertyNames(NrtApi.prototype).filter((n) => /^nrta?_/.test(n)).sort();
    for (const name of entries) {
      if (name === "nrt_init") continue;
      const f = (api as unknown as Record<string, (...a: unknown[]) => unknown>)[name];
      out[name] = await outcome(() => f.call(api, 99, null, 99, null, null, null, null, null));
    }
    return out;
  }
  /** The entries that have no status to return, or whose window is the START state. */
  const noStatus = { nrt_destroy_tensor_set: undefined, nrta_error_tracker_destroy: undefined, nrt_tensor_get_size: 0 };

  test("before nrt_init every entry returns 13 whatever its arguments", async () => {
    const api = new NrtApi();
    const got = await everyEntry(api);
    for (const [name, status] of Object.entries(got)) {
      if (name in noStatus) expect([name, status]).toEqual([name, noStatus[name as keyof typeof noStatus]]);
      else if (name === "nrt_set_pool_eng_ucode") expect(status).toBe(2); // START is its window: the image is bad
      else expect([name, status]).toEqual([name, 13]);
    }
    expect(await api.nrt_tensor_allocate(99 as TensorPlacement, 0, 4, "t", {})).toBe(13);
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, 0, 4, "t", {})).toBe(13);
    expect(api.nrt_get_tensor_from_tensor_set(new TensorSet(), "x", {})).toBe(13);
  });

  test("after nrt_close every entry returns 14 whatever its arguments, and does nothing", async () => {
    const api = new NrtApi();
    const p = portal();
    expect(await api.nrt_init(kept(p))).toBe(0);
    const t: Ref<Tensor> = {};
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, 0, 4, "t", t)).toBe(0);
    const set = new TensorSet();
    set.add("x", t.value!);
    expect(await api.nrt_close()).toBe(0);
    const got = await everyEntry(api);
    for (const [name, status] of Object.entries(got)) {
      if (name in noStatus) expect([name, status]).toEqual([name, noStatus[name as keyof typeof noStatus]]);
      else expect([name, status]).toEqual([name, 14]);
    }
    expect(await api.nrt_tensor_allocate(99 as TensorPlacement, 0, 4, "t", {})).toBe(14);
    const got1: Ref<Tensor> = {};
    expect(api.nrt_get_tensor_from_tensor_set(set, "missing", got1)).toBe(14);
    expect(api.nrt_get_tensor_from_tensor_set(set, "x", got1)).toBe(14);
    expect(got1.value).toBeUndefined();
    const other = new TensorSet();
    expect(api.nrt_add_tensor_to_tensor_set(other, "x", t.value!)).toBe(14);
    expect(other.names()).toEqual([]);
    expect(api.nrt_tensor_get_size(t.value!)).toBe(0);
    expect(await p.memUsage(0)).toEqual(NOTHING);
  });
});

describe("handles and out-parameters of the wrong kind are NRT_INVALID (2), never a throw", () => {
  test("every entry refuses null, undefined and garbage handles and out-parameters with 2", async () => {
    const api = new NrtApi();
    const p = portal();
    expect(await api.nrt_init(kept(p))).toBe(0);
    const model: Ref<Model> = {};
    expect(await api.nrt_load(RELU, 0, 1, model)).toBe(0);
    const m = model.value!;
    const x: Ref<Tensor> = {}, y: Ref<Tensor> = {}, v: Ref<Tensor> = {};
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, N * 4, "x", x)).toBe(0);
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, N * 4, "y", y)).toBe(0);
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_VIRTUAL, 0, N * 4, "v", v)).toBe(0);
    const t = x.value!;
    const ins = new TensorSet(), outs = new TensorSet();
    ins.add("x", t);
    outs.add("y", y.value!);
    const tracker: Ref<unknown> = {};
    expect(api.nrta_error_tracker_create(0, tracker as Ref<never>)).toBe(0);
    const buf = new Uint8Array(N * 4);
    const any = api as unknown as Record<string, (...a: unknown[]) => unknown>;

    const handles: unknown[] = [null, undefined, {}, 7, "bogus"];
    const refs: unknown[] = [null, undefined, 7, "bogus", Object.freeze({})];
    const trackers: unknown[] = [{}, 7, "bogus"];
    // [entry, arguments with the slot under test as a function of the bad value, the bad values]
    const cases: Array<[string, (g: unknown) => unknown[], unknown[]]> = [
      ["nrt_load", (g) => [RELU, 0, 1, g], refs],
      ["nrt_load_collectives", (g) => [RELU, 0, 1, 0, 1, g], refs],
      ["nrt_unload", (g) => [g], handles],
      ["nrt_execute", (g) => [g, ins, outs], handles],
      ["nrt_execute", (g) => [m, g, outs], handles],
      ["nrt_execute", (g) => [m, ins, g], handles],
      ["nrt_execute_repeat", (g) => [g, ins, outs, 1], handles],
      ["nrt_execute_repeat", (g) => [m, g, outs, 1], handles],
      ["nrt_get_model_tensor_info", (g) => [g, {}], handles],
      ["nrt_get_model_tensor_info", (g) => [m, g], refs],
      ["nrt_free_model_tensor_info", (g) => [g], refs],
      ["nrt_get_version", (g) => [g], refs],
      ["nrt_allocate_tensor_set", (g) => [g], refs],
      ["nrt_add_tensor_to_tensor_set", (g) => [g, "x", t], handles],
      ["nrt_add_tensor_to_tensor_set", (g) => [new TensorSet(), "x", g], handles],
      ["nrt_get_tensor_from_tensor_set", (g) => [g, "x", {}], handles],
      ["nrt_get_tensor_from_tensor_set", (g) => [ins, "x", g], refs],
      ["nrt_tensor_allocate", (g) => [TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", g], refs],
      ["nrt_tensor_free", (g) => [g], refs],
      ["nrt_tensor_free", (g) => [{ value: g }], [{}, 7, "bogus"]],
      ["nrt_tensor_read", (g) => [g, buf, 0, 4], handles],
      ["nrt_tensor_read", (g) => [t, g, 0, 4], handles],
      ["nrt_tensor_write", (g) => [g, buf, 0, 4], handles],
      ["nrt_tensor_write", (g) => [t, g, 0, 4], handles],
      ["nrt_tensor_copy", (g) => [g, 0, t, 0, 4], handles],
      ["nrt_tensor_copy", (g) => [t, 0, g, 0, 4], handles],
      ["nrt_tensor_memset", (g) => [g, 0, 0, 4], handles],
      ["nrt_tensor_allocate_slice", (g) => [g, 0, 4, "s", {}], handles],
      ["nrt_tensor_allocate_slice", (g) => [t, 0, 4, "s", g], refs],
      ["nrt_tensor_attach_buffer", (g) => [g, buf, 4], handles],
      ["nrt_tensor_attach_buffer", (g) => [v.value, g, 4], handles],
      ["nrt_get_total_nc_count", (g) => [g], refs],
      ["nrt_get_visible_nc_count", (g) => [g], refs],
      ["nrt_get_total_vnc_count", (g) => [g], refs],
      ["nrt_get_visible_vnc_count", (g) => [g], refs],
      ["nrt_get_vnc_memory_stats", (g) => [0, g], refs],
      ["nrt_async_exec_poll", (g) => [0, g], refs],
      ["nrt_register_async_exec_callback", (g) => [g], [{}, 7, "bogus"]],
      ["nrta_tensor_write", (g) => [g, buf, 0, 4, 0, null, {}], handles],
      ["nrta_tensor_write", (g) => [t, g, 0, 4, 0, null, {}], handles],
      ["nrta_tensor_write", (g) => [t, buf, 0, 4, 0, g, {}], trackers],
      ["nrta_tensor_write", (g) => [t, buf, 0, 4, 0, null, g], refs],
      ["nrta_tensor_read", (g) => [g, t, 0, 4, 0, null, {}], handles],
      ["nrta_tensor_read", (g) => [buf, g, 0, 4, 0, null, {}], handles],
      ["nrta_tensor_read", (g) => [buf, t, 0, 4, 0, null, g], refs],
      ["nrta_tensor_copy", (g) => [g, 0, t, 0, 4, 0, null, {}], handles],
      ["nrta_tensor_copy", (g) => [t, 0, g, 0, 4, 0, null, {}], handles],
      ["nrta_tensor_copy", (g) => [t, 0, t, 0, 4, 0, g, {}], trackers],
      ["nrta_execute_schedule", (g) => [g, ins, outs, 0, null, {}], handles],
      ["nrta_execute_schedule", (g) => [m, g, outs, 0, null, {}], handles],
      ["nrta_execute_schedule", (g) => [m, ins, outs, 0, g, {}], trackers],
      ["nrta_execute_schedule", (g) => [m, ins, outs, 0, null, g], refs],
      ["nrta_is_completed", (g) => [0n, g], refs],
      ["nrta_get_sequence", (g) => [0, 0, 0, g], refs],
      ["nrta_error_tracker_create", (g) => [0, g], refs],
      ["nrta_error_tracker_get_list", (g) => [g, {}, {}], handles],
      ["nrta_error_tracker_get_list", (g) => [tracker.value, g, {}], refs],
      ["nrta_error_tracker_get_list", (g) => [tracker.value, {}, g], refs],
      ["nrta_cc_prepare", (g) => [0, 0, 0, N, [t], [y.value], g], refs],
      ["nrta_cc_prepare", (g) => [0, 0, 0, N, [g], [y.value], {}], handles],
      ["nrta_cc_schedule", (g) => [g, 0, null, {}], handles],
      ["nrta_cc_release", (g) => [g], handles],
    ];
    const wrong: string[] = [];
    for (const [name, args, bad] of cases) {
      for (const g of bad) {
        const got = await outcome(() => any[name].apply(api, args(g)));
        if (got !== 2) {
          wrong.push(`${name}(${args(g).map((a) => a === g ? `<${String(g)}>` : "·").join(", ")}) → ${got}`);
        }
      }
    }
    expect(wrong).toEqual([]);
    // The entries without a status do not throw either.
    for (const g of handles) {
      expect(await outcome(() => api.nrt_tensor_get_size(g as Tensor))).toBe(0);
      expect(await outcome(() => api.nrt_destroy_tensor_set(g as Ref<TensorSet>))).toBeUndefined();
      expect(await outcome(() => any.nrta_error_tracker_destroy.call(api, g))).toBeUndefined();
    }
    expect(api.nrt_tensor_get_size(t)).toBe(N * 4);
    // The runtime is intact: the model runs and unloads.
    expect(await api.nrt_execute(m, ins, outs)).toBe(0);
    expect(await api.nrt_unload(m)).toBe(0);
    for (const r of [x, y, v]) expect(await api.nrt_tensor_free(r)).toBe(0);
    expect(await api.nrt_close()).toBe(0);
    expect(await p.memUsage(0)).toEqual(NOTHING);
  });

  test("a refused out-parameter is checked before the work: nothing is loaded, allocated, written or run", async () => {
    const api = new NrtApi();
    const p = portal();
    expect(await api.nrt_init(kept(p))).toBe(0);
    const up = await p.memUsage(0);
    expect(await api.nrt_load(RELU, 0, 1, null as unknown as Ref<Model>)).toBe(2);
    expect(await api.nrt_load(RELU, 0, 1, Object.freeze({}) as Ref<Model>)).toBe(2);
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_DEVICE, 0, 4096, "t", null!)).toBe(2);
    expect(await p.memUsage(0)).toEqual(up);

    const model: Ref<Model> = {}, x: Ref<Tensor> = {}, y: Ref<Tensor> = {};
    expect(await api.nrt_load(RELU, 0, 1, model)).toBe(0);
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, 0, N * 4, "x", x)).toBe(0);
    expect(await api.nrt_tensor_allocate(TensorPlacement.NRT_TENSOR_PLACEMENT_HOST, 0, N * 4, "y", y)).toBe(0);
    const ones = new Uint8Array(Float32Array.from({ length: N }, () => 1).buffer);
    expect(await api.nrt_tensor_write(x.value!, ones, 0, N * 4)).toBe(0);
    const ins = new TensorSet(), outs = new TensorSet();
    ins.add("x", x.value!);
    outs.add("y", y.value!);
    // Neither the write nor the execution is scheduled when its sequence cannot be returned.
    expect(api.nrta_tensor_write(y.value!, ones, 0, N * 4, 0, null, null!)).toBe(2);
    expect(api.nrta_execute_schedule(model.value!, ins, outs, 0, null, null!)).toBe(2);
    await api.runtime!.nrta.drain();
    const read = new Uint8Array(N * 4);
    expect(await api.nrt_tensor_read(y.value!, read, 0, N * 4)).toBe(0);
    expect(read).toEqual(new Uint8Array(N * 4));
    expect(await api.nrt_unload(model.value!)).toBe(0);
    expect(await api.nrt_close()).toBe(0);
    expect(await p.memUsage(0)).toEqual(NOTHING);
  });
});
