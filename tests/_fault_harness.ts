/** Shared set-up of the fault and stdio tests: a traced simulated Cayman device, a runtime on a virtual clock. */
import { mariana, MARIANA_SPEC } from "@nrt/arch-mariana";
import { sunda, SUNDA_SPEC } from "@nrt/arch-sunda";
import { type Clock, MemoryLogger, type Model, NrtError, NrtStatus, Runtime, TensorSet, VirtualClock } from "@nrt/core";
import { TracingPortal } from "@nrt/core/portal";
import { DeviceSimPortal, type FaultSpec } from "@nrt/device-sim";
import { oneOpNeff } from "./_kernels.ts";
import { cayman } from "@nrt/arch-cayman";

/** One runtime over one simulated device. */
export interface Harness {
  readonly rt: Runtime;
  readonly sim: DeviceSimPortal;
  readonly trace: TracingPortal;
  readonly log: MemoryLogger;
  readonly clock: VirtualClock;
}

/** A model with its tensor sets. */
export interface Loaded {
  readonly model: Model;
  readonly ins: TensorSet;
  readonly outs: TensorSet;
}

/** Options of {@linkcode harness}. */
export interface HarnessOptions {
  readonly visibleCores?: number[];
  readonly execTimeoutSeconds?: number;
  readonly gpsimdStdoutQueueSizeBytes?: number;
  readonly clock?: Clock;
  /** Physical NeuronCores per logical core (default 1). */
  readonly virtualCoreSize?: number;
  /** The generation to simulate (default Cayman). */
  readonly arch?: Arch;
}

/** A generation of the three arch packs. */
export type Arch = "sunda" | "cayman" | "mariana";

/** Every portal opened, so a file can close them all (no Q7 Worker outlives a test file). */
export const opened: DeviceSimPortal[] = [];

/** A runtime over a traced `DeviceSimPortal`, one logical core per NeuronCore, on a virtual clock by default. */
export async function harness(o: HarnessOptions = {}): Promise<Harness> {
  const arch = o.arch ?? "cayman";
  // The device's watchdog (ours) has the host's budget: a hung run is dropped by the device, the host only times out.
  const watchdogMs = (o.execTimeoutSeconds ?? 30) * 1000;
  const sim = new DeviceSimPortal(
    arch === "sunda"
      ? { spec: SUNDA_SPEC, watchdogMs }
      : arch === "mariana"
      ? { spec: MARIANA_SPEC, watchdogMs }
      : { watchdogMs },
  );
  opened.push(sim);
  const trace = new TracingPortal(sim);
  const log = new MemoryLogger();
  const clock = new VirtualClock();
  // The portal stays open for the harness (a test reads the simulator after close); `opened` closes it.
  const rt = await Runtime.init({
    portal: trace,
    archPacks: [{ sunda, cayman, mariana }[arch]],
    ownsPortal: false,
    visibleCores: o.visibleCores ?? [0, 1],
    virtualCoreSize: o.virtualCoreSize ?? 1,
    execTimeoutSeconds: o.execTimeoutSeconds ?? 30,
    gpsimdStdoutQueueSizeBytes: o.gpsimdStdoutQueueSizeBytes,
    logger: log,
    clock: o.clock ?? clock,
  });
  return { rt, sim, trace, log, clock };
}

const f32 = (name: string, n: number) => ({ name, dtype: "float32", shape: [n] });

/** The NEFF of a small ReLU on 8 cores (the cheapest real kernel) for a generation. */
export function reluNeff(arch: Arch): Uint8Array {
  return oneOpNeff("relu", "relu", [f32("x", 64)], [f32("y", 64)], 8, [], arch);
}

/**
 * A ReLU NEFF with other bytes (one unused scalar argument): a bystander model of its own on a core where
 * {@linkcode reluNeff} is loaded too — the same NEFF twice on a core is one interned model (`nrt_load_util` step 7).
 */
export function bystanderNeff(arch: Arch = "cayman"): Uint8Array {
  return oneOpNeff("relu", "relu", [f32("x", 64)], [f32("y", 64)], 8, [1], arch);
}

/** The Cayman {@linkcode reluNeff}. */
export const RELU_NEFF: Uint8Array = reluNeff("cayman");

/** Loads `neff` on logical core `vnc` and allocates host tensors for its I/O. */
export async function load(rt: Runtime, neff: Uint8Array, vnc: number): Promise<Loaded> {
  const model = await rt.load(neff, vnc);
  const ins = new TensorSet(), outs = new TensorSet();
  for (const t of model.inputs) {
    const x = await rt.allocateTensor({ location: "host", vnc: vnc, size: t.size, name: t.name });
    await x.write(new Uint8Array(Float32Array.from({ length: t.size / 4 }, (_, i) => i - 8).buffer));
    ins.add(t.name, x);
  }
  for (const t of model.outputs) {
    outs.add(t.name, await rt.allocateTensor({ location: "host", vnc: vnc, size: t.size, name: t.name }));
  }
  return { model, ins, outs };
}

/** Runs once and returns the status (0 on success); any other throw fails the test. */
export async function exec(l: Loaded): Promise<number> {
  try {
    await l.model.execute(l.ins, l.outs);
    return NrtStatus.NRT_SUCCESS;
  } catch (e) {
    if (e instanceof NrtError) return e.status;
    throw e;
  }
}

/** Lets pending I/O (Worker replies, promise chains) run: one macrotask. */
export function tick(): Promise<void> {
  return new Promise<void>((r) => setTimeout(r, 0));
}

/** Waits (in macrotasks, never in time) until `cond()` holds. */
export async function until(cond: () => boolean, what: string, turns = 20_000): Promise<void> {
  for (let i = 0; i < turns; i++) {
    if (cond()) return;
    await tick();
  }
  throw new Error(`Gave up waiting for ${what}`);
}

/**
 * Runs one execution that is expected to hang: waits until it sleeps on the virtual clock, checks it is still
 * pending one millisecond before the budget, moves the device's clock by the budget too (its watchdog then drops the
 * hung run: containment is the device's job), then moves the host's clock to the budget. Returns the status and the
 * virtual time the wait took. `ready` delays the clock until the device reached the state to test (default: the armed
 * fault fired; e.g. a kernel spinning).
 */
export async function execHung(
  h: Harness,
  l: Loaded,
  budgetMs: number,
  ready?: () => boolean,
): Promise<{ status: number; waitedMs: number }> {
  // By default the clock moves once the device has taken the doorbell and the armed fault fired: the device is an
  // agent of its own, and a budget that ran out before it even started the run would aim the fault at a later run.
  // Every firing so far: the list keeps only the newest FIRED_FAULTS_KEPT, the injector counts the older ones.
  const firings = (): number => h.sim.faults.fired().length + h.sim.faults.firedDropped();
  const firedBefore = firings();
  ready ??= () => firings() > firedBefore;
  let settled = false;
  const p = exec(l).finally(() => (settled = true));
  await until(() => (h.clock.pendingSleepers > 0 && ready()) || settled, "the execution to wait on the clock");
  const t0 = h.clock.now();
  if (budgetMs > 1) {
    await h.clock.advance(budgetMs - 1);
    if (settled) throw new Error(`The execution ended before its ${budgetMs} ms budget`);
  }
  await h.sim.elapse(0, budgetMs);
  await h.clock.advance(budgetMs > 1 ? 1 : budgetMs);
  const status = await p;
  return { status, waitedMs: h.clock.now() - t0 };
}

/** The fault kinds of the matrix with the status each must produce and a piece of its log line. */
export const FAULT_CASES: ReadonlyArray<
  { name: string; spec: Omit<FaultSpec, "nc">; status: number; line: RegExp; poisons: boolean }
> = [
  {
    name: "tpb-error",
    spec: { kind: "tpb-error", mask: 0x10 },
    status: NrtStatus.NRT_HW_ERROR,
    line: /\(FATAL-RT-UNDEFINED-STATE\) \[ND 0\]\[NC \d\] TPB_ERROR error_id 0x0a/,
    poisons: false,
  },
  {
    name: "hbm-ue unrepairable",
    spec: { kind: "hbm-ue" },
    status: NrtStatus.NRT_EXEC_HW_ERR_HBM_UE,
    line:
      /\[ND 0\] Uncorrectable HBM memory error is detected\. Execution results may be invalid\. Please terminate this instance/,
    poisons: true,
  },
  {
    name: "hbm-ue repairable",
    spec: { kind: "hbm-ue", repairable: true },
    status: NrtStatus.NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE,
    line: /Please reload the neuron driver or reboot your EC2 instance/,
    poisons: true,
  },
  {
    name: "nc-ue",
    spec: { kind: "nc-ue", metadata: 0xbeef },
    status: NrtStatus.NRT_EXEC_HW_ERR_NC_UE,
    line: /Uncorrectable memory error is detected, metadata: 0xbeef\. .*Please terminate or stop\/start this instance/,
    poisons: true,
  },
  {
    name: "dma-abort",
    spec: { kind: "dma-abort", engine: 3 },
    status: NrtStatus.NRT_EXEC_HW_ERR_DMA_ABORT,
    line: /DMA engine 3 is aborted \(engine state 3\)/,
    poisons: true,
  },
  {
    name: "oob",
    spec: { kind: "oob" },
    status: NrtStatus.NRT_EXEC_OOB,
    line: /out-of-bounds access on model/,
    poisons: false,
  },
  {
    name: "nq-overflow",
    spec: { kind: "nq-overflow" },
    status: NrtStatus.NRT_EXEC_SW_NQ_OVERFLOW,
    line: /notification queue overflow on model/,
    poisons: true,
  },
  {
    name: "hang",
    spec: { kind: "hang" },
    status: NrtStatus.NRT_TIMEOUT,
    line: /execution timeout \(30000 ms\) on model relu\.neff, waiting for execution completion notification/,
    poisons: false,
  },
  {
    name: "collectives-hang",
    spec: { kind: "collectives-hang" },
    status: NrtStatus.NRT_EXEC_HW_ERR_COLLECTIVES,
    line: /missing collectives status on model relu\.neff\. Suspected hang in waiting for barrier/,
    poisons: true,
  },
  {
    name: "network-proxy",
    spec: { kind: "network-proxy" },
    status: NrtStatus.NRT_NETWORK_PROXY_FAILURE,
    line: /network proxy failure/,
    poisons: true,
  },
  {
    name: "fp-nan",
    spec: { kind: "fp-nan" },
    status: NrtStatus.NRT_EXEC_COMPLETED_WITH_NUM_ERR,
    line: /TPB_ERROR error_id 0x09 .*the execution completes/,
    poisons: false,
  },
  {
    name: "recoverable",
    spec: { kind: "recoverable" },
    status: NrtStatus.NRT_EXEC_COMPLETED_WITH_ERR,
    line: /TPB_ERROR error_id 0x09 .*the execution completes/,
    poisons: false,
  },
];
