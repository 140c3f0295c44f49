/**
 * `kmgr_exec` for one request on the physical cores of its model: `kmgr_exec_pre` (clone the tensor sets to device
 * memory where they are not there already, honouring `output_aliases_to`), `kbl_compute_setup` per core, the sync
 * exec of every core (one doorbell each, all polled), the priority-ranked verdict, fail-stop poisoning for Band C
 * only, and the copy-back of host-placed outputs.
 *
 * Seed: runtime-synthesis §3.3 (`kmgr_exec → kmgr_exec_pre → kmgr_sync_exec`, `kbl_compute_setup` re-materialises
 * the template DMA rings), §2.3 (the metaneff binding), lifecycle-error-model §1.3 (`exec_rets[2]` ranked by
 * `nrt_get_status_priority`), §4.1 ("Only Band-C codes carry the fail-stop posture"), §5.5 and §6 (a Band-C verdict
 * leaves the model RUNNING but poisoned for the operator's `nrt_unload`; a failed exec leaves it RUNNING), runtime-
 * synthesis §5.6 (the model is not freed on an exec error: "it may be re-run or explicitly unloaded").
 *
 * @module
 */
import { hostClockMs, type HostSpanListener } from "../host_span.ts";
import { isFailStop, NrtStatus, worseStatus } from "../status.ts";
import {
  type InstalledModel,
  type InstallServices,
  kblComputeSetup,
  kblComputeSetupNeeded,
} from "../tdrv/kbl_model_add.ts";
import type { Tensor } from "../tensor.ts";
import type { CoreQueue } from "../tdrv/core_queue.ts";
import type { Tpb } from "../tdrv/tpb.ts";
import type { DlrModel, ExecOutcome } from "./dlr_model.ts";
import { type ExecRequestState, type ExecServices, kmgrSyncExec } from "./kmgr_exec.ts";

/** What the requests of one model need from the runtime (made once per model, so a request allocates none of it). */
export interface KmgrExecDeps {
  /** The physical cores of the model, part by part. */
  readonly tpbs: readonly Tpb[];
  /** Their NeuronCore indices. */
  readonly ncs: readonly number[];
  /** Their execution FIFOs. */
  readonly queues: readonly CoreQueue[];
  /** Services of `kbl_compute_setup`. */
  readonly install: InstallServices;
  /** Services of the sync exec. */
  readonly exec: ExecServices;
  /** Allocates a device staging tensor for I/O ordinal `i` (kept by the model until unload). */
  readonly staging: (i: number, size: number, name: string) => Promise<Tensor>;
  /** Device index of the runtime. */
  readonly device: number;
}

/** Runs one acquired request of `r` (the runtime's execution `seq`) with the tensors bound to its I/O ordinals. */
export async function kmgrExecOnCores(
  r: DlrModel,
  tensors: ReadonlyArray<Tensor | undefined>,
  d: KmgrExecDeps,
  seq?: number,
): Promise<ExecOutcome> {
  const io = r.kelf.io;
  const { aliases } = r.binding;
  const nIn = r.kelf.inputCount;
  const onSpan = d.exec.onSpan;
  // No closure here: a function whose locals a closure captures allocates their scope at every call, closure or not.
  const step = onSpan === undefined ? undefined : new StepTimer(onSpan, r.parts[0].tpb.nc, seq, r.name);
  // kmgr_exec_pre: clone the tensor sets to device memory where they are not there already.
  const pa: number[] = [];
  for (let i = 0; i < tensors.length; i++) {
    const t = tensors[i];
    const alias = i >= nIn ? aliases.get(i - nIn) : undefined;
    if (alias !== undefined) {
      pa.push(pa[alias]); // output_aliases_to: the output reuses its input's device buffer
      continue;
    }
    if (t === undefined) throw new RangeError("unreachable: a non-aliased tensor is missing");
    const dev = t.devicePa;
    if (dev !== undefined && t.device === d.device) {
      pa.push(dev);
      continue;
    }
    let st = r.staging.get(i);
    if (st === undefined) {
      st = await d.staging(i, t.size, `${r.name}:${io[i].name}`);
      r.staging.set(i, st);
    }
    if (i < nIn) await st.write(await t.read());
    pa.push(st.devicePa!);
  }
  step?.span("kmgr_exec_pre");
  for (const p of r.parts) if (kblComputeSetupNeeded(p, pa)) await kblComputeSetup(d.install, p, pa);
  step?.span("kbl_compute_setup");
  // One doorbell per physical NeuronCore of the request, all polled (seed: lifecycle-error-model §1.3 exec_rets[2]).
  const parts = r.parts;
  const reqs = parts.length === 1
    ? [await kmgrSyncExec(d.exec, parts[0], r.name, seq)]
    : await Promise.all(syncExecAll(d.exec, parts, r.name, seq));
  const execRets: number[] = [];
  let status: number = NrtStatus.NRT_SUCCESS;
  let fatal = false;
  for (const q of reqs) {
    let ret: number = NrtStatus.NRT_SUCCESS;
    for (const x of q.execRets) ret = worseStatus(ret, x);
    execRets.push(ret);
    status = worseStatus(status, ret);
    if (q.fatal) fatal = true;
  }
  step?.restart();
  // A fatal verdict ends the request without copy-out (the outputs are not valid). Only a Band-C status poisons the
  // model (RUNNING but poisoned until unload, seed §4.1/§5.5); Band A/B leave it re-runnable. The Band-C status is
  // looked for in every core's verdict: the ranking can put a soft 1004 (CRITICAL) above it (seed §4.2).
  if (fatal) {
    const failStop = execRets.filter(isFailStop);
    if (failStop.length > 0) r.poisoned = failStop.reduce(worseStatus);
    return { status, execRets };
  }
  for (let i = nIn; i < tensors.length; i++) {
    const t = tensors[i];
    const alias = aliases.get(i - nIn);
    if (alias !== undefined) {
      // In place: the data is in the input's buffer; a host-side input (staged) and a given output get copies.
      const src = r.staging.get(alias) ?? tensors[alias]!;
      const inT = tensors[alias]!;
      if (r.staging.has(alias) && inT.devicePa === undefined) await inT.write(await src.read());
      if (t !== undefined && t !== inT) await t.write(await src.read());
      continue;
    }
    const st = r.staging.get(i);
    if (st !== undefined && t !== undefined && t.devicePa === undefined) await t.write(await st.read());
  }
  step?.span("copy_out");
  return { status, execRets };
}

/** The sync exec of every part of an LNC-2 request, started together. */
function syncExecAll(
  s: ExecServices,
  parts: readonly InstalledModel[],
  name: string,
  seq: number | undefined,
): Array<Promise<ExecRequestState>> {
  const all: Array<Promise<ExecRequestState>> = [];
  for (const p of parts) all.push(kmgrSyncExec(s, p, name, seq));
  return all;
}

/** The timed steps of one execution (made only when someone hears them). */
class StepTimer {
  readonly #onSpan: HostSpanListener;
  readonly #nc: number;
  readonly #seq: number | undefined;
  readonly #detail: string;
  #t0 = hostClockMs();

  constructor(onSpan: HostSpanListener, nc: number, seq: number | undefined, detail: string) {
    this.#onSpan = onSpan;
    this.#nc = nc;
    this.#seq = seq;
    this.#detail = detail;
  }

  /** Reports the step `name`, from the last step's end (or the start) to now. */
  span(name: string): void {
    const now = hostClockMs();
    this.#onSpan({ name, start: this.#t0, end: now, nc: this.#nc, seq: this.#seq, detail: this.#detail });
    this.#t0 = now;
  }

  /** The next step starts now. */
  restart(): void {
    this.#t0 = hostClockMs();
  }
}
