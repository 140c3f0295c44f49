/**
 * Every exit of an execution frees what the execution took and drops its model reference (seed lifecycle-error-model
 * §5.1: "Resource cleanup on every exit: kbl_free_feature_map_set (in/out sets), kmgr_exec_resources_free,
 * nn_ref_decrement"). The reference is observed through the unload that follows: with no execution reference left,
 * `kmgr_unload_nn` finds the drain already done, so its `kmgr_async_exec_poll … drained` step is recorded before the
 * unload call returns its promise. The device memory booked for the model is the same before and after each exit.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { TensorSet } from "@nrt/core";
import {
  exec,
  execHung,
  FAULT_CASES,
  type Harness,
  harness,
  load,
  type Loaded,
  opened,
  RELU_NEFF,
} from "./_fault_harness.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

/** Unloads `l`'s model and reports whether the drain was already done when the call returned. */
async function unloadFindsNoReference(h: Harness, l: Loaded): Promise<boolean> {
  const before = h.rt.events.list().length;
  const unloading = h.rt.unload(l.model);
  const drainedAtOnce = h.rt.events.list().slice(before).some((e) =>
    e === `kmgr_async_exec_poll model=${l.model.handle} drained`
  );
  await unloading;
  return drainedAtOnce;
}

/** One exit of an execution on a fresh model; returns its status. */
type Exit = (h: Harness, l: Loaded) => Promise<number>;

const EXITS: ReadonlyArray<readonly [string, number, Exit]> = [
  ["success", 0, (_h, l) => exec(l)],
  // Refused before the device: an input missing from the set (NRT_INVALID).
  ["a missing input", 2, (_h, l) => exec({ ...l, ins: new TensorSet() })],
  // Every device fault of the matrix, each with the seed's status (the hang through the budget).
  ...FAULT_CASES.map((c): readonly [string, number, Exit] => [
    `fault ${c.name}`,
    c.status,
    async (h, l) => {
      h.sim.faults.inject({ ...c.spec, nc: 0, atExecution: 1 });
      const status = c.spec.kind === "hang" ? (await execHung(h, l, 30_000)).status : await exec(l);
      await h.sim.elapse(0, 30_000); // a run the device is stuck in is the device's own to drop
      return status;
    },
  ]),
];

describe("every exit of an execution drops its model reference and frees its resources (seed §5.1)", () => {
  for (const [name, want, run] of EXITS) {
    test(`${name}: status ${want}, no reference left, the same device memory booked`, async () => {
      const h = await harness({ visibleCores: [0] });
      try {
        const l = await load(h.rt, RELU_NEFF, 0);
        await exec(l); // staging made by a first run stays with the model until its unload
        const booked = h.rt.memory().total;
        expect(await run(h, l)).toBe(want);
        expect(h.rt.memory().total).toBe(booked);
        expect(await unloadFindsNoReference(h, l)).toBe(true);
      } finally {
        await h.rt.close();
      }
      expect(await h.sim.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
    }, 60_000);
  }

  test("a poisoned model's refused execution takes no reference either", async () => {
    const h = await harness({ visibleCores: [0] });
    try {
      const l = await load(h.rt, RELU_NEFF, 0);
      h.sim.faults.inject({ kind: "nc-ue", nc: 0, atExecution: 1 });
      expect(await exec(l)).toBe(1202); // NRT_EXEC_HW_ERR_NC_UE: Band C, the model is poisoned
      expect(await exec(l)).toBe(1202); // refused with the latched status, never reaching the device
      expect(await unloadFindsNoReference(h, l)).toBe(true);
    } finally {
      await h.rt.close();
    }
    expect(await h.sim.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
  }, 60_000);
});
