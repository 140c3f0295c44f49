/**
 * nrt_close's teardown as the simulated device shows it (seed spmd-teardown §6.2, §6.3, §6.7): each of the 13 cores
 * of a NeuronCore has its pending kernel output printed, then its image stopped and its IRAM/DRAM returned; the
 * stdio block detaches the Q7 file-IO table, and only when the exec-queue halt succeeded. Every assertion reads the
 * device (its mapped registers, BAR0, memory usage, Q7 events), not the runtime's event strings.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { cayman } from "@nrt/arch-cayman";
import { LogLevel, MemoryLogger, NrtStatus, Runtime, VirtualClock } from "@nrt/core";
import { ncBlock, ucodeCoreAddr, UcodeCoreCommand, UcodeCoreState } from "@nrt/core/hal";
import { TracingPortal } from "@nrt/core/portal";
import { defaultQ7Factory, DeviceSimPortal, NcStatus, type Q7ClusterFactory, Q7State } from "@nrt/device-sim";
import { exec, harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";
import { oneOpNeff } from "./_kernels.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });
const printf = (lines: number, totalCpus = 8) =>
  oneOpNeff("faults", "printf", [f32("x", 64)], [f32("y", 64)], totalCpus, [lines]);
const NX = cayman.spec.nxCoresPerNc;
const Q7 = cayman.spec.q7CoresPerNc;

/** The state word of every core of a NeuronCore, read over BAR0: 5 NX, then 8 Q7. */
async function coreStates(sim: DeviceSimPortal, nc: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < NX; i++) out.push(await sim.barRead32(0, 0, ucodeCoreAddr(cayman.spec, nc, "nx", i)));
  for (let c = 0; c < Q7; c++) out.push(await sim.barRead32(0, 0, ucodeCoreAddr(cayman.spec, nc, "q7", c)));
  return out;
}

/** Whether Q7 core `c` of `nc` holds an image in IRAM or DRAM. */
function imageResident(sim: DeviceSimPortal, nc: number, c: number): boolean {
  const r = sim.mappedRegisters(0, nc);
  return r.image("iram", c) !== undefined || r.image("dram", c) !== undefined;
}

describe("nrt_close's device effects (seed spmd-teardown §6.2, §6.3, §6.7)", () => {
  test(
    "ucode_core_destroy stops every image and returns its IRAM/DRAM: 13 cores stopped, Q7 Workers gone, no allocation left",
    async () => {
      const h = await harness({ visibleCores: [0, 1] });
      const l = await load(h.rt, RELU_NEFF, 0);
      expect(await exec(l)).toBe(NrtStatus.NRT_SUCCESS);
      for (const nc of [0, 1]) {
        expect(await coreStates(h.sim, nc)).toEqual(new Array(NX + Q7).fill(UcodeCoreState.LIVE));
        for (let c = 0; c < Q7; c++) expect(imageResident(h.sim, nc, c)).toBe(true);
      }
      expect(h.sim.q7Started(0, 0)).toBe(true); // the relu ran on NeuronCore 0's 8 cores
      await h.rt.close();
      for (const nc of [0, 1]) {
        expect(await coreStates(h.sim, nc)).toEqual(new Array(NX + Q7).fill(UcodeCoreState.STOPPED));
        for (let c = 0; c < Q7; c++) {
          expect(imageResident(h.sim, nc, c)).toBe(false);
          // The windows read zero over BAR0 too: the image's memory is returned, not just forgotten.
          expect(
            await h.sim.barRead32(
              0,
              0,
              ncBlock(cayman.spec, nc) + cayman.spec.csr.q7Iram + c * cayman.spec.csr.q7IramStride,
            ),
          ).toBe(0);
        }
        expect(Atomics.load(h.sim.mappedRegisters(0, nc).status, NcStatus.Q7_STATE)).toBe(Q7State.STALLED);
        expect(h.sim.q7Started(0, nc)).toBe(false);
      }
      expect(
        h.sim.q7Events().filter((e) => e.kind === "cluster-terminated" && e.detail === "ucode_core_destroy").map((e) =>
          e.nc
        ),
      ).toEqual([0]);
      // A NeuronCore the runtime did not use keeps its cores: the teardown touches only its own.
      expect(await coreStates(h.sim, 2)).toEqual(new Array(NX + Q7).fill(UcodeCoreState.LIVE));
      expect(await h.sim.memUsage(0)).toEqual({ hbm: 0, host: 0, allocations: 0 });
    },
    30_000,
  );

  test(
    "pool_stdio_block_destroy detaches the Q7 file-IO table: the register reads 0 and the device sees no ring",
    async () => {
      const h = await harness({ visibleCores: [0] });
      const regs = h.sim.mappedRegisters(0, 0);
      const io = ncBlock(cayman.spec, 0) + cayman.spec.csr.swapFileIoTable;
      expect(regs.swapFileIoPa).not.toBe(0);
      expect(h.sim.stdioQueues(0, 0).stderr?.capacity).toBe(4);
      await h.rt.close();
      expect(regs.swapFileIoPa).toBe(0);
      expect([await h.sim.barRead32(0, 0, io), await h.sim.barRead32(0, 0, io + 4)]).toEqual([0, 0]);
      expect(h.sim.stdioQueues(0, 0)).toEqual({ stdout: undefined, stderr: undefined });
      expect((await h.sim.memUsage(0)).allocations).toBe(0);
    },
    30_000,
  );

  test(
    "ucode_core_print_logs: kernel output the host never drained reaches the logger at close, while the cores are still live",
    async () => {
      // Each stdout line records, as it reaches the logger, whether the device still had every Q7 core live.
      const sim = new DeviceSimPortal();
      opened.push(sim);
      const regs = sim.mappedRegisters(0, 0);
      const seen: Array<{ line: string; q7Live: boolean }> = [];
      const log = new (class extends MemoryLogger {
        override info(message: string, fields?: Record<string, unknown>): void {
          if (fields?.tag === 3) {
            let live = true;
            for (let c = 0; c < Q7; c++) {
              live &&= regs.ucodeCoreState(NX + c) === UcodeCoreState.LIVE && regs.image("iram", c) !== undefined;
            }
            seen.push({ line: message, q7Live: live });
          }
          super.info(message, fields);
        }
      })();
      const rt = await Runtime.init({
        portal: sim,
        archPacks: [cayman],
        ownsPortal: false,
        visibleCores: [0],
        virtualCoreSize: 1,
        logger: log,
        clock: new VirtualClock(),
      });
      const l = await load(rt, printf(2), 0);
      expect(await exec(l)).toBe(NrtStatus.NRT_SUCCESS);
      expect(seen.length).toBe(16); // the execute drained its own output
      seen.length = 0;
      // The device runs the stream once more on its own doorbell: its output lands in the HBM ring, and no host
      // progress step drains it.
      const slots = Array.from({ length: cayman.spec.csr.streamSlots }, (_, s) => regs.streamEntry(s)).filter((e) =>
        e !== undefined
      );
      expect(slots.length).toBe(1);
      await sim.semaphoreIncrement(0, 0, slots[0]!.doorbell, 1);
      await sim.whenIdle(0, 0);
      expect(sim.stdioQueues(0, 0).stdout).toMatchObject({ writeIndex: 32, readIndex: 16 });
      expect(seen).toEqual([]);
      await rt.close();
      const expected = Array.from({ length: 8 }, (_, c) => [0, 1].map((k) => `line ${k} from core ${c}`)).flat().sort();
      expect(seen.map((s) => s.line).sort()).toEqual(expected);
      expect(seen.every((s) => s.q7Live)).toBe(true);
      expect(log.entries.filter((e) => e.level === LogLevel.INFO && e.fields?.tag === 3).length).toBe(32);
      expect((await sim.memUsage(0)).allocations).toBe(0);
    },
    30_000,
  );

  test(
    "ucode_core_print_logs of Q7 core c moves only core c's staged output: each line reaches the logger at its own core's turn",
    async () => {
      // Output the kernels staged on the cores that no DRAIN has moved yet, handed out by the cluster's stdio ring.
      const staged: Array<{ cpu: number; stream: number; text: string }> = [];
      const factory: Q7ClusterFactory = async (o) => {
        const c = await defaultQ7Factory(o);
        return {
          get memory() {
            return c.memory;
          },
          boot: (fw) => c.boot(fw),
          prepare: (key, wasm) => c.prepare(key, wasm),
          dispatch: (op, signal) => c.dispatch(op, signal),
          drainStdio: () => [...c.drainStdio(), ...staged.splice(0)],
          terminate: () => c.terminate(),
        };
      };
      const sim = new DeviceSimPortal({ q7Factory: factory });
      opened.push(sim);
      const regs = sim.mappedRegisters(0, 0);
      const seen: Array<{ line: string; stopped: number[] }> = [];
      const log = new (class extends MemoryLogger {
        override info(message: string, fields?: Record<string, unknown>): void {
          if (fields?.tag === 3) {
            const stopped = Array.from({ length: Q7 }, (_, c) => c).filter((c) =>
              regs.ucodeCoreState(NX + c) === UcodeCoreState.STOPPED
            );
            seen.push({ line: message, stopped });
          }
          super.info(message, fields);
        }
      })();
      const rt = await Runtime.init({
        portal: sim,
        archPacks: [cayman],
        ownsPortal: false,
        visibleCores: [0],
        virtualCoreSize: 1,
        logger: log,
        clock: new VirtualClock(),
      });
      await load(rt, RELU_NEFF, 0); // the stream install starts the cluster
      expect(sim.q7Started(0, 0)).toBe(true);
      staged.push(
        { cpu: 5, stream: 1, text: "first from core 5\n" },
        { cpu: 2, stream: 1, text: "only from core 2\n" },
        { cpu: 5, stream: 1, text: "second from core 5\n" },
      );
      await rt.close();
      expect(seen).toEqual([
        { line: "only from core 2", stopped: [0, 1] },
        { line: "first from core 5", stopped: [0, 1, 2, 3, 4] },
        { line: "second from core 5", stopped: [0, 1, 2, 3, 4] },
      ]);
      expect((await sim.memUsage(0)).allocations).toBe(0);
    },
    30_000,
  );

  test(
    "the device sees the seed's order: print then destroy for 5 NX then 8 Q7 cores, then the NQ, then the file-IO detach, then the frees",
    async () => {
      const h = await harness({ visibleCores: [0] });
      await load(h.rt, printf(1, 1), 0); // total_cpus = 1: the teardown still destroys all 8 Q7 cores
      h.trace.clear();
      await h.rt.close();
      const c = cayman.spec.csr;
      const base = ncBlock(cayman.spec, 0);
      const coreName = (rel: number): string => {
        const w = (rel - c.ucodeCore) / 4;
        return w < NX ? `NX${w}` : `Q7_${w - NX}`;
      };
      const steps: string[] = [];
      for (const e of h.trace.entries) {
        const rel = e.target - base;
        if (e.op === "barWrite32" && rel >= c.ucodeCore && rel < c.ucodeCore + 4 * (NX + Q7)) {
          steps.push(
            `${coreName(rel)} ${
              e.value === UcodeCoreCommand.PRINT_LOGS
                ? "print"
                : e.value === UcodeCoreCommand.DESTROY
                ? "destroy"
                : e.value
            }`,
          );
        } else if (e.op === "barWrite" && rel === c.notificationQueue) steps.push("notification_destroy");
        else if (e.op === "barWrite" && rel === c.swapFileIoTable) steps.push("file-io detach");
        else if (e.op === "memFree" && steps.at(-1) !== "frees") steps.push("frees");
      }
      const cores = [
        ...Array.from({ length: NX }, (_, i) => `NX${i}`),
        ...Array.from({ length: Q7 }, (_, i) => `Q7_${i}`),
      ];
      expect(steps).toEqual([
        ...cores.flatMap((n) => [`${n} print`, `${n} destroy`]),
        "notification_destroy",
        "frees",
        "file-io detach",
        "frees",
      ]);
    },
    30_000,
  );

  test(
    "a failed halt request skips pool_stdio_block_destroy: the file-IO table keeps pointing at the block, which stays allocated; the cores still go",
    async () => {
      // The halt is acknowledged by the device answering a read of its NQ head (ours); this portal stops answering it.
      const sim = new DeviceSimPortal();
      opened.push(sim);
      const nqHead = ncBlock(cayman.spec, 0) + cayman.spec.csr.notificationQueue + 12;
      let refuse = false;
      const portal = new (class extends TracingPortal {
        override barRead32(device: number, bar: number, offset: number): Promise<number> {
          if (refuse && offset === nqHead) return Promise.reject(new Error("the device does not answer"));
          return super.barRead32(device, bar, offset);
        }
      })(sim);
      const log = new MemoryLogger();
      const rt = await Runtime.init({
        portal,
        archPacks: [cayman],
        ownsPortal: false,
        visibleCores: [0],
        virtualCoreSize: 1,
        logger: log,
        clock: new VirtualClock(),
      });
      const regs = sim.mappedRegisters(0, 0);
      const block = regs.swapFileIoPa;
      expect(block).not.toBe(0);
      refuse = true;
      await rt.close();
      expect(regs.swapFileIoPa).toBe(block);
      expect(sim.stdioQueues(0, 0).stderr).toMatchObject({ capacity: 4 });
      // The 0x440-byte block and its two rings (stdout, stderr); everything else was freed.
      expect((await sim.memUsage(0)).allocations).toBe(3);
      expect(
        log.messages(LogLevel.WARNING).some((m) =>
          m.includes("exec queue halt failed (the device does not answer): pool stdio block kept")
        ),
      ).toBe(true);
      expect(rt.events.list().some((e) => e.startsWith("pool_stdio_block_destroy"))).toBe(false);
      expect(await coreStates(sim, 0)).toEqual(new Array(NX + Q7).fill(UcodeCoreState.STOPPED));
    },
    30_000,
  );
});
