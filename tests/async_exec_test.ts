/**
 * The NRT_2.0.0 implicit-async engine (seed runtime-synthesis §6, lifecycle-error-model §5.1):
 * `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` turns on `KMGR_EXEC_MODE_ASYNC`; backpressure is `NRT_QUEUE_FULL`,
 * an empty poll `NRT_QUEUE_EMPTY`; `nrt_register_async_exec_callback` and `nrt_async_drain_queued_execs`.
 */
import { afterAll, describe, expect, test } from "bun:test";
import {
  type AsyncExecCompletion,
  MemoryLogger,
  type Model,
  NrtApi,
  type NrtAsyncExecCompletion,
  NrtError,
  NrtStatus,
  type Ref,
  Runtime,
  TensorSet,
} from "@nrt/core";
import { KmgrExecMode } from "../packages/core/state.ts";
import { createNrtContainer, type NrtContainer, nrtPlugins, PortalToken } from "@nrt/cli";
import { oneOpNeff } from "./_kernels.ts";

const containers: NrtContainer[] = [];
afterAll(async () => {
  for (const c of containers.splice(0)) await c.resolve(PortalToken).close();
});

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const N = 128;
const ADD = oneOpNeff("vector_add", "vector_add", [f32("a", N), f32("b", N)], [f32("out", N)]);

function container(): NrtContainer {
  const c = createNrtContainer();
  containers.push(c);
  return c;
}

async function init(depth: number): Promise<Runtime> {
  return await Runtime.init({
    ...nrtPlugins(container()),
    visibleCores: [0, 1],
    virtualCoreSize: 1,
    asyncExecMaxInflightRequests: depth,
    logger: new MemoryLogger(),
  });
}

async function addIo(rt: Runtime, model: Model, shift = 0) {
  const ins = new TensorSet(), outs = new TensorSet();
  for (const name of ["a", "b"]) {
    const t = await rt.allocateTensor({ vnc: model.vnc, size: N * 4, name });
    await t.write(new Uint8Array(Float32Array.from({ length: N }, (_, i) => (name === "a" ? i : shift)).buffer));
    ins.add(name, t);
  }
  outs.add("out", await rt.allocateTensor({ vnc: model.vnc, size: N * 4, name: "out" }));
  return { ins, outs };
}

describe("async execution (NRT_2.0.0, KMGR_EXEC_MODE_ASYNC)", () => {
  test(
    "with a queue depth of Q, submitting Q + k at once gives exactly k NRT_QUEUE_FULL; an empty poll returns NRT_QUEUE_EMPTY at once",
    async () => {
      const Q = 4, k = 3;
      const rt = await init(Q);
      try {
        expect(rt.execMode).toBe(KmgrExecMode.KMGR_EXEC_MODE_ASYNC);
        const model = await rt.load(ADD);
        const { ins, outs } = await addIo(rt, model, 1);
        expect(rt.poll(0)).toBeUndefined(); // synchronous: nothing to await
        const ids: number[] = [];
        const full: unknown[] = [];
        for (let i = 0; i < Q + k; i++) {
          try {
            ids.push(rt.submit(model, ins, outs));
          } catch (e) {
            full.push(e);
          }
        }
        expect(ids).toHaveLength(Q);
        expect(full).toHaveLength(k);
        for (const e of full) expect((e as NrtError).status).toBe(NrtStatus.NRT_QUEUE_FULL);
        await rt.drainAsync(0);
        const done: AsyncExecCompletion[] = [];
        for (let c = rt.poll(0); c !== undefined; c = rt.poll(0)) done.push(c);
        expect(done.map((c) => [c.id, c.model, c.vnc, c.status])).toEqual(
          ids.map((id) => [id, model.handle, 0, NrtStatus.NRT_SUCCESS]),
        );
        expect(rt.poll(0)).toBeUndefined();
        expect(Array.from(new Float32Array((await outs.get("out").read()).slice().buffer))).toEqual(
          Array.from({ length: N }, (_, i) => i + 1),
        );
      } finally {
        await rt.close();
      }
    },
    30_000,
  );

  test("a submission refused with NRT_QUEUE_FULL succeeds once one request completed", async () => {
    const Q = 3;
    const rt = await init(Q);
    try {
      const model = await rt.load(ADD);
      const { ins, outs } = await addIo(rt, model);
      let first!: () => void;
      const oneDone = new Promise<void>((res) => (first = res));
      const seen: AsyncExecCompletion[] = [];
      rt.setAsyncListener((c) => {
        seen.push(c);
        first();
      });
      for (let i = 0; i < Q; i++) rt.submit(model, ins, outs);
      expect(() => rt.submit(model, ins, outs)).toThrow(NrtError);
      await oneDone;
      expect(typeof rt.submit(model, ins, outs)).toBe("number");
      await rt.drainAsync(0);
      expect(seen).toHaveLength(Q + 1);
      expect(rt.poll(0)).toBeUndefined(); // the listener took every completion
    } finally {
      await rt.close();
    }
  }, 30_000);

  test("queues are per logical core, and unload waits for the model's queued executions", async () => {
    const rt = await init(2);
    try {
      const m0 = await rt.load(ADD, 0), m1 = await rt.load(ADD, 1);
      const io0 = await addIo(rt, m0, 2), io1 = await addIo(rt, m1, 3);
      rt.submit(m0, io0.ins, io0.outs);
      rt.submit(m0, io0.ins, io0.outs);
      expect(() => rt.submit(m0, io0.ins, io0.outs)).toThrow(
        expect.objectContaining({ status: NrtStatus.NRT_QUEUE_FULL }),
      );
      rt.submit(m1, io1.ins, io1.outs); // core 1 has its own queue
      await m0.unload(); // waits for both queued executions of m0
      const c0 = [rt.poll(0), rt.poll(0)];
      expect(c0.map((c) => c?.status)).toEqual([NrtStatus.NRT_SUCCESS, NrtStatus.NRT_SUCCESS]);
      await rt.drainAsync(1);
      expect(rt.poll(1)?.status).toBe(NrtStatus.NRT_SUCCESS);
      expect(() => rt.submit(m0, io0.ins, io0.outs)).toThrow(
        expect.objectContaining({ status: NrtStatus.NRT_INVALID_HANDLE }),
      );
    } finally {
      await rt.close();
    }
  }, 30_000);

  test(
    "nrt_execute queues and returns at once; nrt_register_async_exec_callback and nrt_async_drain_queued_execs",
    async () => {
      const api = new NrtApi();
      expect(
        await api.nrt_init({
          ...nrtPlugins(container()),
          visibleCores: [0, 1],
          virtualCoreSize: 1,
          asyncExecMaxInflightRequests: 2,
          logger: new MemoryLogger(),
        }),
      )
        .toBe(NrtStatus.NRT_SUCCESS);
      try {
        const rt = api.runtime!;
        const model: Ref<Model> = {};
        expect(await api.nrt_load(ADD, 0, 1, model)).toBe(NrtStatus.NRT_SUCCESS);
        const { ins, outs } = await addIo(rt, model.value!);
        const calls: unknown[][] = [];
        const params = { tag: "p" };
        expect(api.nrt_register_async_exec_callback((...args) => calls.push(args), params)).toBe(NrtStatus.NRT_SUCCESS);
        expect(await api.nrt_execute(model.value!, ins, outs)).toBe(NrtStatus.NRT_SUCCESS);
        expect(await api.nrt_execute(model.value!, ins, outs)).toBe(NrtStatus.NRT_SUCCESS);
        expect(await api.nrt_execute(model.value!, ins, outs)).toBe(NrtStatus.NRT_QUEUE_FULL);
        expect(calls).toHaveLength(0); // nrt_execute returned before the device finished
        expect(await api.nrt_async_drain_queued_execs(0)).toBe(NrtStatus.NRT_SUCCESS);
        expect(calls.map(([p, id, vnc, , status]) => [p, id, vnc, status])).toEqual([
          [params, model.value!.handle, 0, NrtStatus.NRT_SUCCESS],
          [params, model.value!.handle, 0, NrtStatus.NRT_SUCCESS],
        ]);
        expect(calls[1][3]).toBeGreaterThan(calls[0][3] as number);
        expect(await api.nrt_async_drain_queued_execs(5)).toBe(NrtStatus.NRT_INVALID);
      } finally {
        await api.nrt_close();
      }
    },
    30_000,
  );

  test(
    "an empty poll is NRT_QUEUE_EMPTY (15) through nrt_async_exec_poll and Runtime.tryPoll; a ready one is 0 with the completion",
    async () => {
      const api = new NrtApi();
      expect(
        await api.nrt_init({
          ...nrtPlugins(container()),
          visibleCores: [0, 1],
          virtualCoreSize: 1,
          asyncExecMaxInflightRequests: 2,
          logger: new MemoryLogger(),
        }),
      )
        .toBe(0);
      try {
        const rt = api.runtime!;
        const model: Ref<Model> = {};
        expect(await api.nrt_load(ADD, 0, 1, model)).toBe(0);
        const { ins, outs } = await addIo(rt, model.value!);
        const got: Ref<NrtAsyncExecCompletion> = {};
        // Seed runtime-synthesis §6: "an empty poll as NRT_QUEUE_EMPTY(15)".
        expect(api.nrt_async_exec_poll(0, got)).toBe(15);
        expect(got.value).toBeUndefined();
        expect(rt.tryPoll(0)).toEqual({ status: 15 });
        expect(rt.tryPoll(1)).toEqual({ status: 15 });
        const id = rt.submit(model.value!, ins, outs);
        await rt.drainAsync(0);
        expect(api.nrt_async_exec_poll(0, got)).toBe(0);
        expect(got.value).toEqual({ model_id: model.value!.handle, vnc: 0, job_id: id, status: 0 });
        expect(api.nrt_async_exec_poll(0, got)).toBe(15);
        const id2 = rt.submit(model.value!, ins, outs);
        await rt.drainAsync(0);
        const typed = rt.tryPoll(0);
        expect(typed.status).toBe(0);
        if (typed.status === NrtStatus.NRT_SUCCESS) {
          expect([typed.completion.id, typed.completion.status]).toEqual([id2, 0]);
        }
        expect(rt.tryPoll(0)).toEqual({ status: 15 });
        // Bad input: a logical core that is not visible is NRT_INVALID (2), not an empty queue.
        expect(api.nrt_async_exec_poll(7, got)).toBe(2);
        expect(() => rt.tryPoll(7)).toThrow(expect.objectContaining({ status: 2 }));
      } finally {
        await api.nrt_close();
      }
      // After close: NRT_CLOSED (14).
      expect(api.nrt_async_exec_poll(0, {})).toBe(14);
    },
    30_000,
  );

  test("an empty poll in synchronous mode is refused with NRT_INVALID (2): there is no async queue", async () => {
    const api = new NrtApi();
    expect(
      await api.nrt_init({
        ...nrtPlugins(container()),
        visibleCores: [0],
        virtualCoreSize: 1,
        logger: new MemoryLogger(),
      }),
    ).toBe(0);
    try {
      expect(api.nrt_async_exec_poll(0, {})).toBe(2);
    } finally {
      await api.nrt_close();
    }
  }, 30_000);

  test("Runtime.submit() is refused in synchronous mode", async () => {
    const rt = await init(0);
    try {
      expect(rt.execMode).toBeUndefined();
      const model = await rt.load(ADD);
      const { ins, outs } = await addIo(rt, model);
      expect(() => rt.submit(model, ins, outs)).toThrow(expect.objectContaining({ status: NrtStatus.NRT_INVALID }));
    } finally {
      await rt.close();
    }
  }, 30_000);
});

describe("misuse of the async and flat APIs (ours: typed refusals, nothing left waiting)", () => {
  test("a completion listener that throws is logged, and the drain still settles", async () => {
    const logger = new MemoryLogger();
    const rt = await Runtime.init({
      ...nrtPlugins(container()),
      visibleCores: [0, 1],
      virtualCoreSize: 1,
      asyncExecMaxInflightRequests: 4,
      logger,
    });
    try {
      const model = await rt.load(ADD);
      const { ins, outs } = await addIo(rt, model);
      rt.setAsyncListener(() => {
        throw new Error("listener boom");
      });
      rt.submit(model, ins, outs);
      const settled = await Promise.race([
        rt.drainAsync(0).then(() => "drained"),
        new Promise((res) => setTimeout(() => res("stuck"), 10_000)),
      ]);
      expect(settled).toBe("drained");
      expect(logger.entries.some((e) => e.message.includes("listener boom"))).toBe(true);
    } finally {
      await rt.close();
    }
  }, 30_000);

  test("nrt_tensor_write and nrta_tensor_write refuse a size that is negative, NaN or fractional", async () => {
    const api = new NrtApi();
    expect(
      await api.nrt_init({
        ...nrtPlugins(container()),
        visibleCores: [0, 1],
        virtualCoreSize: 1,
        logger: new MemoryLogger(),
      }),
    )
      .toBe(NrtStatus.NRT_SUCCESS);
    try {
      const t = await api.runtime!.allocateTensor({ vnc: 0, size: 16 });
      const buf = new Uint8Array(16).fill(7);
      for (const size of [-1, NaN, 1.5]) {
        expect({ size, status: await api.nrt_tensor_write(t, buf, 0, size) }).toEqual({ size, status: 2 });
        const seq: Ref<bigint> = {};
        expect({ size, status: api.nrta_tensor_write(t, buf, 0, size, 0, null, seq) }).toEqual({ size, status: 2 });
      }
      const back = new Uint8Array(16);
      expect(await api.nrt_tensor_read(t, back, 0, 16)).toBe(NrtStatus.NRT_SUCCESS);
      expect([...back]).toEqual(new Array(16).fill(0)); // nothing was written
      // nrta_is_completed of a sequence never scheduled is NRT_INVALID (2), a negative one too.
      const done: Ref<boolean> = {};
      expect(api.nrta_is_completed(-1n, done)).toBe(2);
    } finally {
      await api.nrt_close();
    }
  }, 30_000);

  test("a refused configuration closes the portal the runtime was given to own", async () => {
    let closed = 0;
    const plugins = nrtPlugins(container());
    const portal = plugins.portal;
    const close = portal.close.bind(portal);
    portal.close = async () => {
      closed++;
      await close();
    };
    await expect(Runtime.init({ ...plugins, env: { NEURON_RT_EXEC_TIMEOUT: "-1" }, logger: new MemoryLogger() }))
      .rejects.toMatchObject({ status: 2 });
    expect(closed).toBe(1);
  }, 30_000);
});
