/**
 * Fault injection: what a real device does wrong, on purpose. A fault targets a device, a NeuronCore, an engine or a
 * Q7 core, and fires now or at the Nth run started on its NeuronCore; the sequencer then produces exactly what the
 * hardware would — a 16-byte TPB_ERROR or HW_ERROR record in the notification queue with the engine's
 * instruction-pointer latch, a DMA engine state of 3, a flooded NQ, or a run that never posts its completion — and
 * the host runtime answers through its one classification funnel. `docs/faults.md` is the prose and the table of
 * kinds → records → statuses.
 *
 * Seed: lifecycle-error-model §4.3–§4.5 (the record and register inputs of `exec_request_process_errors`), §5.3 (NQ
 * overflow), §5.4 (a hang is a device that never posts completion; the collectives "Suspected hang" variants), §5.5
 * (1003/1004 complete; every other fault is fail-stop), §7 (the device packs a 16-byte TPB_ERROR with error_id 0x09
 * NONFATAL / 0x0a FATAL plus a subtype, latches it and self-halts).
 *
 * @example Make the next run on NeuronCore 1 hit an unrepairable HBM error
 * ```ts
 * import { DeviceSimPortal } from "@nrt/device-sim";
 * const portal = new DeviceSimPortal();
 * const fault = portal.faults.inject({ kind: "hbm-ue", nc: 1, atExecution: 1 });
 * console.log(portal.faults.pending().map((f) => f.id).includes(fault.id)); // true
 * await portal.close();
 * ```
 *
 * @module
 */
import { type CollectivesHang, CollectivesHang as Hang } from "@nrt/core/isa";

/** The fault kinds the simulator can inject. */
export const FaultKind = {
  /** A TPB_ERROR record: `fatal` (default) → error_id 0x0a and the stream halts; else 0x09 and the run completes. */
  TPB_ERROR: "tpb-error",
  /** An uncorrectable HBM ECC error (`repairable` or not): HW_ERROR record, the stream halts. */
  HBM_UE: "hbm-ue",
  /** An uncorrectable NeuronCore memory error with a metadata word: HW_ERROR record, the stream halts. */
  NC_UE: "nc-ue",
  /** A DMA engine abort: the engine's state register reads 3, a fatal TPB_ERROR (mask DMA), the stream halts. */
  DMA_ABORT: "dma-abort",
  /** An out-of-bounds access: a fatal TPB_ERROR with mask Q7_OOB, the stream halts. */
  OOB: "oob",
  /** More records than the NQ ring holds, at once: the host's ring overflows, the stream halts. */
  NQ_OVERFLOW: "nq-overflow",
  /** The core never posts its completion: the run stalls until the device's watchdog (or an unload) drops it. */
  HANG: "hang",
  /** The collectives proxy reports a stuck barrier / operation, and the run never completes. */
  COLLECTIVES_HANG: "collectives-hang",
  /** The network (EFA) proxy fails: HW_ERROR record, the stream halts. */
  NETWORK_PROXY: "network-proxy",
  /** An FP numerical error (NaN): a non-fatal TPB_ERROR with mask NUMERICAL; the run completes. */
  FP_NAN: "fp-nan",
  /** A recoverable error: a non-fatal TPB_ERROR with mask RECOVERABLE; the run completes. */
  RECOVERABLE: "recoverable",
} as const;
/** One fault kind. */
export type FaultKind = typeof FaultKind[keyof typeof FaultKind];

const KINDS: ReadonlySet<string> = new Set(Object.values(FaultKind));

/** The fields of a {@linkcode FaultSpec}. */
const SPEC_FIELDS: ReadonlySet<string> = new Set([
  "kind",
  "device",
  "nc",
  "engine",
  "q7",
  "atExecution",
  "fatal",
  "mask",
  "repairable",
  "metadata",
  "collectives",
]);

/** What to inject. */
export interface FaultSpec {
  /** The kind. */
  readonly kind: FaultKind;
  /** Device index (default 0). */
  readonly device?: number;
  /** NeuronCore; omitted: every NeuronCore of the device (one firing each). */
  readonly nc?: number;
  /**
   * The engine: for `dma-abort` the DMA engine whose state goes to 3 (default: the engine of Q7 core 0's custom-op
   * queue); for the
   * record kinds the `al_hal_tpb_eng_type` that reports (default POOL = 2) and whose instruction pointer latches.
   */
  readonly engine?: number;
  /** A Q7 core 0..7: the fault happens on that core and surfaces at the DRAIN join of the run (record `q7` = core). */
  readonly q7?: number;
  /** Fire at the Nth run (1 = the next) started on the NeuronCore after injection; omitted: now (the next instruction). */
  readonly atExecution?: number;
  /** `tpb-error`: fatal (error_id 0x0a, default) or not (0x09). */
  readonly fatal?: boolean;
  /** `tpb-error`: the subtype mask (default 0). */
  readonly mask?: number;
  /** `hbm-ue`: the failing row is repairable (→ 1205) or not (→ 1201, default). */
  readonly repairable?: boolean;
  /** `nc-ue`: metadata word; `hbm-ue`: failing address (low 32 bits); `network-proxy`: proxy error code. */
  readonly metadata?: number;
  /** `collectives-hang`: where the proxy stopped (default: waiting for the barrier) and its op progress. */
  readonly collectives?: { readonly variant?: CollectivesHang; readonly op?: number; readonly total?: number };
}

/** An injected fault as the injector keeps it. */
export interface InjectedFault {
  /** Injector-unique id. */
  readonly id: number;
  /** The request. */
  readonly spec: FaultSpec;
  /** Device. */
  readonly device: number;
  /** NeuronCores it is (still) armed on. */
  readonly ncs: readonly number[];
}

/** A fault that fired. */
export interface FiredFault {
  /** Its id. */
  readonly id: number;
  /** Kind. */
  readonly kind: FaultKind;
  /** Device. */
  readonly device: number;
  /** NeuronCore. */
  readonly nc: number;
  /** The NeuronCore's run count (since the portal started) of the run it hit. */
  readonly run: number;
}

/** One armed fault on one NeuronCore. */
export interface ArmedFault {
  /** Fault id. */
  readonly id: number;
  /** The request. */
  readonly spec: FaultSpec;
  /** Runs still to start before it is due (0: due now). */
  remaining: number;
}

/** Where in a run a due fault is taken. */
export type FaultPhase = "run-start" | "instruction" | "join";

/** The per-NeuronCore port the sequencer polls. */
export class NcFaults {
  readonly #armed: ArmedFault[] = [];
  readonly #onFire: (f: ArmedFault, run: number) => void;
  #runs = 0;

  /** Creates an empty port; `onFire` records each firing. */
  constructor(onFire: (f: ArmedFault, run: number) => void) {
    this.#onFire = onFire;
  }

  /** Arms one fault. */
  arm(f: ArmedFault): void {
    this.#armed.push(f);
  }

  /** Armed faults (observability). */
  get armed(): readonly ArmedFault[] {
    return this.#armed;
  }

  /** Disarms faults by id (all when `id` is omitted); returns how many. */
  disarm(id?: number): number {
    let n = 0;
    for (let i = this.#armed.length - 1; i >= 0; i--) {
      if (id === undefined || this.#armed[i].id === id) {
        this.#armed.splice(i, 1);
        n++;
      }
    }
    return n;
  }

  /** A run starts: counts it down on every armed fault. */
  runStarted(): void {
    this.#runs++;
    for (const f of this.#armed) if (f.remaining > 0) f.remaining--;
  }

  /** Takes the faults due in `phase`: Q7-targeted faults only at the join, the others anywhere. */
  take(phase: FaultPhase): ArmedFault[] {
    const due: ArmedFault[] = [];
    for (let i = 0; i < this.#armed.length; i++) {
      const f = this.#armed[i];
      if (f.remaining !== 0 || (f.spec.q7 !== undefined) !== (phase === "join")) continue;
      due.push(f);
      this.#armed.splice(i--, 1);
      this.#onFire(f, this.#runs);
    }
    return due;
  }
}

/**
 * Where the host's injector arms and disarms faults: the device (its agent) owning each NeuronCore's
 * {@linkcode NcFaults} port, and where the firings come back from.
 */
export interface FaultSink {
  /** Arms `fault` on NeuronCore `nc` of `device`. */
  arm(device: number, nc: number, fault: ArmedFault): void;
  /** Disarms faults by id (all when `id` is undefined) on `device`. */
  disarm(device: number, id: number | undefined): void;
  /** The firings reported since the last call, oldest first. */
  firings(): FiredFault[];
}

/**
 * The most faults armed at once per device. Ours: it bounds the firings a device can have outstanding (this × its
 * NeuronCores ≤ the 8192 entries of its firing ring, `device_log.ts`), so no firing is ever lost.
 */
export const MAX_ARMED_FAULTS = 1024;

/**
 * The firings a {@linkcode FaultInjector} keeps (ours): the newest 500, as the dashboard keeps the newest 500 log lines;
 * the older ones are only counted ({@linkcode FaultInjector.firedDropped}). Before, every firing was kept and the
 * dashboard sent all of them in every state document and event: 2,500 firings made the document 274 KiB (11 KiB
 * without them).
 */
export const FIRED_FAULTS_KEPT = 500;

/**
 * A value as an operator sent it, for an error message: its JSON, except what JSON cannot spell — a number out of
 * range (`1e999` parses to `Infinity`, which JSON writes `null`), a bigint, a function.
 */
function shown(v: unknown): string {
  if (typeof v === "number" && !Number.isFinite(v)) return String(v);
  if (typeof v === "bigint") return `${v}n`;
  return JSON.stringify(v) ?? String(v);
}

/**
 * The fault-injection API of a simulated portal (`DeviceSimPortal.faults`): typed, synchronous, usable from tests and
 * from an operator endpoint. It validates and numbers the faults on the host and arms them on the device's
 * per-NeuronCore ports, which play them in the device's sequencer; firings come back through the sink.
 */
export class FaultInjector {
  readonly #ports: ReadonlyArray<number>;
  readonly #q7Cores: number;
  readonly #dmaEngines: number;
  readonly #sink: FaultSink;
  /** Faults armed and not yet fired or cleared: id → spec, device, NeuronCores still armed. */
  readonly #armed = new Map<number, { spec: FaultSpec; device: number; ncs: Set<number> }>();
  /** The newest {@linkcode FIRED_FAULTS_KEPT} firings, a ring: firing n is at n % FIRED_FAULTS_KEPT. */
  readonly #fired: FiredFault[] = [];
  /** Firings ever taken. */
  #firedTotal = 0;
  #nextId = 1;

  /**
   * Creates the injector over `devices` devices of `ncs` NeuronCores each.
   *
   * @param devices Device count.
   * @param ncs NeuronCores per device.
   * @param limits Q7 cores per NeuronCore and DMA engines, for validation.
   * @param sink Where faults are armed (the devices' ports). Default: local ports, as one device in one thread.
   */
  constructor(devices: number, ncs: number, limits: { q7Cores: number; dmaEngines: number }, sink?: FaultSink) {
    this.#q7Cores = limits.q7Cores;
    this.#dmaEngines = limits.dmaEngines;
    this.#ports = Array.from({ length: devices }, () => ncs);
    this.#sink = sink ?? localSink(devices, ncs);
  }

  /**
   * Arms a fault (docs/faults.md, "Injecting a fault").
   *
   * @param spec What, where and when.
   * @returns The armed fault's id and spec.
   * @throws {RangeError} When the spec names a kind, core, engine or Q7 core the device does not have.
   */
  inject(spec: FaultSpec): InjectedFault {
    const kindText = typeof (spec as { kind?: unknown })?.kind === "string" ? JSON.stringify(spec.kind) : "";
    const bad = (why: string): never => {
      throw new RangeError(`Cannot inject fault${kindText === "" ? "" : ` ${kindText}`}: ${why}`);
    };
    if (typeof spec !== "object" || spec === null || Array.isArray(spec)) bad("the spec must be an object");
    // Every field is checked for its type and range, and unknown fields are refused: an operator's typo must not
    // arm a different fault than the one asked for (docs/faults.md).
    for (const key of Object.keys(spec)) {
      if (!SPEC_FIELDS.has(key)) bad(`unknown field "${key}"; the fields are ${[...SPEC_FIELDS].join(", ")}`);
    }
    if (typeof spec.kind !== "string" || !KINDS.has(spec.kind)) bad(`"kind" must be one of ${[...KINDS].join(", ")}`);
    const integer = (field: string, v: unknown, lo: number, hi: number): number | undefined => {
      if (v === undefined) return undefined;
      if (typeof v !== "number" || !Number.isSafeInteger(v) || v < lo || v > hi) {
        bad(`"${field}" is ${shown(v)}, expected an integer from ${lo} to ${hi}`);
      }
      return v as number;
    };
    const boolean = (field: string, v: unknown): void => {
      if (v !== undefined && typeof v !== "boolean") bad(`"${field}" is ${shown(v)}, expected true or false`);
    };
    const device = integer("device", spec.device, 0, this.#ports.length - 1) ?? 0;
    integer("nc", spec.nc, 0, this.#ports[device] - 1);
    integer("q7", spec.q7, 0, this.#q7Cores - 1);
    integer("engine", spec.engine, 0, (spec.kind === FaultKind.DMA_ABORT ? this.#dmaEngines : 5) - 1);
    integer("atExecution", spec.atExecution, 1, 0x7fff_ffff);
    integer("mask", spec.mask, 0, 0xffff);
    integer("metadata", spec.metadata, 0, 0xffff_ffff);
    boolean("fatal", spec.fatal);
    boolean("repairable", spec.repairable);
    if (spec.collectives !== undefined) {
      const c = spec.collectives as Record<string, unknown>;
      if (typeof c !== "object" || c === null || Array.isArray(c)) bad(`"collectives" must be an object`);
      for (const key of Object.keys(c)) {
        if (!["variant", "op", "total"].includes(key)) {
          bad(`unknown field "collectives.${key}"; the fields are variant, op, total`);
        }
      }
      const v = integer("collectives.variant", c.variant, 0, 2);
      if (v !== undefined && v !== Hang.BARRIER && v !== Hang.IN_OPERATION && v !== Hang.BETWEEN_OPERATIONS) {
        bad(`collectives variant ${v} is not 0, 1 or 2`);
      }
      integer("collectives.op", c.op, 0, 0xffff);
      integer("collectives.total", c.total, 0, 0xffff);
    }
    this.#collect();
    const armedOnDevice = [...this.#armed.values()].filter((a) => a.device === device).length;
    if (armedOnDevice >= MAX_ARMED_FAULTS) {
      bad(`${MAX_ARMED_FAULTS} faults are already armed on device ${device}; clear some first`);
    }
    const id = this.#nextId++;
    const ncs = spec.nc === undefined ? Array.from({ length: this.#ports[device] }, (_, i) => i) : [spec.nc];
    const frozen = Object.freeze(structuredClone(spec));
    for (const nc of ncs) this.#sink.arm(device, nc, { id, spec: frozen, remaining: spec.atExecution ?? 0 });
    this.#armed.set(id, { spec: frozen, device, ncs: new Set(ncs) });
    return { id, spec: frozen, device, ncs };
  }

  /** Takes the firings the devices reported since the last look. */
  #collect(): void {
    for (const f of this.#sink.firings()) {
      this.#fired[this.#firedTotal++ % FIRED_FAULTS_KEPT] = f;
      const a = this.#armed.get(f.id);
      if (a === undefined) continue;
      a.ncs.delete(f.nc);
      if (a.ncs.size === 0) this.#armed.delete(f.id);
    }
  }

  /** Faults armed and not yet fired, optionally on one device. */
  pending(device?: number): InjectedFault[] {
    this.#collect();
    const out: InjectedFault[] = [];
    for (const [id, a] of this.#armed) {
      if (device !== undefined && a.device !== device) continue;
      out.push({ id, spec: a.spec, device: a.device, ncs: [...a.ncs].sort((x, y) => x - y) });
    }
    return out;
  }

  /**
   * The newest firings, oldest first: every firing until {@linkcode FIRED_FAULTS_KEPT} have fired, then the newest
   * that many ({@linkcode FaultInjector.firedDropped} counts the others).
   */
  fired(): readonly FiredFault[] {
    this.#collect();
    const ring = this.#fired;
    if (this.#firedTotal <= FIRED_FAULTS_KEPT) return ring.slice();
    const oldest = this.#firedTotal % FIRED_FAULTS_KEPT;
    return [...ring.slice(oldest), ...ring.slice(0, oldest)];
  }

  /** Firings no longer in {@linkcode FaultInjector.fired} (older than its newest {@linkcode FIRED_FAULTS_KEPT}). */
  firedDropped(): number {
    this.#collect();
    return Math.max(0, this.#firedTotal - FIRED_FAULTS_KEPT);
  }

  /**
   * Disarms faults: one by id, or all (optionally of one device).
   *
   * @returns How many armed (per-NeuronCore) faults were removed.
   */
  clear(selector: { id?: number; device?: number } = {}): number {
    this.#collect();
    let n = 0;
    for (const [id, a] of [...this.#armed]) {
      if (selector.id !== undefined && selector.id !== id) continue;
      if (selector.device !== undefined && selector.device !== a.device) continue;
      n += a.ncs.size;
      this.#armed.delete(id);
    }
    for (let device = 0; device < this.#ports.length; device++) {
      if (selector.device === undefined || selector.device === device) this.#sink.disarm(device, selector.id);
    }
    return n;
  }
}

/** Ports in this thread: what a device without an agent of its own plays faults through (and the tests' default). */
export function localSink(devices: number, ncs: number): FaultSink & { port(device: number, nc: number): NcFaults } {
  const fired: FiredFault[] = [];
  const ports = Array.from(
    { length: devices },
    (_, device) =>
      Array.from(
        { length: ncs },
        (_, nc) => new NcFaults((f, run) => fired.push({ id: f.id, kind: f.spec.kind, device, nc, run })),
      ),
  );
  return {
    port: (device, nc) => {
      const p = ports[device]?.[nc];
      if (p === undefined) throw new RangeError(`Cannot find NeuronCore ${nc} of device ${device}`);
      return p;
    },
    arm: (device, nc, fault) => ports[device][nc].arm(fault),
    disarm: (device, id) => {
      for (const p of ports[device]) p.disarm(id);
    },
    firings: () => fired.splice(0),
  };
}
