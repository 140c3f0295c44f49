/**
 * `nrt profile MODEL.neff [--input NAME=FILE.json ...] [-o trace.json] [--arch A]`: loads a NEFF on the embedded
 * simulator, executes it once with the device's timeline on, and writes that execution as a Chrome Trace Event
 * document (`neuron/chrome_trace.ts`) for Perfetto, `chrome://tracing`, or the viewer `nrt serve` serves with
 * `NEURON_RT_INSPECT_ENABLE=1` (docs/neuron-tools.md). The host's steps come from the runtime's `onSpan` hook, the
 * device's from its timeline ring (`DeviceSimPortal.setTimeline` / `takeTimeline`).
 *
 * Ours: an input not given is zeros (a profile is about time, not values); the trace holds the load and the one
 * execution; `-o -` (the default) writes to stdout.
 *
 * @module
 */
import {
  envFromProcess,
  type HostSpan,
  NrtError,
  NrtStatus,
  resolveRuntimeConfig,
  Runtime,
  TensorSet,
} from "@nrt/core";
import { DeviceSimPortal, type NcTimelineEvent } from "@nrt/device-sim";
import { writeFile } from "node:fs/promises";
import { type CommandSpec, formatHelp, parseCommandArgs, usageError } from "./command_args.ts";
import { createNrtContainer, nrtPlugins, PortalToken } from "./container.ts";
import { neffFileCap, overwritesInput, printable, readFileCapped, terminalJson } from "./inspect.ts";
import { buildChromeTrace, type ChromeTrace } from "./neuron/chrome_trace.ts";
import { inputBytes, inputFiles } from "./run_model.ts";

/** How `nrt profile` is called. */
export const PROFILE_COMMAND = {
  name: "profile",
  usage: "nrt profile MODEL.neff [--input NAME=FILE.json ...] [-o trace.json] [--arch A]",
  summary: "Execute a NEFF once on the embedded simulator and write the execution as a Chrome Trace Event file: the\n" +
    "host's API calls and steps, the sequencer's instructions, each DMA queue, each Q7 core, the notification\n" +
    "records and the stdio drain, in real µs (open it in Perfetto or chrome://tracing; docs/neuron-tools.md).",
  options: {
    input: {
      type: "string",
      multiple: true,
      value: "NAME=FILE.json",
      description: "the values of input NAME (default: zeros)",
    },
    output: { type: "string", short: "o", value: "FILE", description: "where the trace goes (default -: stdout)" },
    arch: { type: "string", value: "A", description: "the generation to simulate (default: NRT_ARCH, else cayman)" },
  },
  positionals: { min: 1, max: 1, name: "MODEL.neff" },
} as const satisfies CommandSpec;

/** What to profile. */
export interface ProfileOptions {
  /** The NEFF. */
  readonly neff: Uint8Array;
  /** Its file name, for messages. */
  readonly file: string;
  /** Input name → JSON file. */
  readonly inputs?: ReadonlyMap<string, string>;
  /** Generation to simulate. */
  readonly arch?: string;
}

/**
 * Loads and executes the NEFF once with every recorder on, and builds the trace.
 *
 * @param options The NEFF, its inputs and the generation.
 * @returns The trace.
 * @throws {NrtError} `NRT_INVALID` for an input the model does not have or cannot take; the runtime's status when
 * the load or the execution fails.
 */
export async function profileNeff(options: ProfileOptions): Promise<ChromeTrace> {
  const env = envFromProcess();
  const config = resolveRuntimeConfig(options.arch === undefined ? {} : { arch: options.arch }, env);
  const container = createNrtContainer({ arch: config.arch, env });
  const portal = container.resolve(PortalToken);
  if (!(portal instanceof DeviceSimPortal)) throw new Error("Cannot profile: the device is not the embedded simulator");
  const spans: HostSpan[] = [];
  const rt = await Runtime.init({ ...nrtPlugins(container), env, onSpan: (s) => spans.push(s) });
  try {
    const model = await rt.load(options.neff);
    const inputs = options.inputs ?? new Map<string, string>();
    const known = new Set(model.inputs.map((t) => t.name));
    for (const name of inputs.keys()) {
      if (!known.has(name)) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot profile ${printable(options.file)}: the model has no input "${printable(name)}"; its inputs are ${
            printable([...known].join(", "))
          }`,
        );
      }
    }
    const ins = new TensorSet(), outs = new TensorSet();
    for (const t of model.inputs) {
      const x = await rt.allocateTensor({ location: "host", vnc: model.vnc, size: t.size, name: t.name });
      const src = inputs.get(t.name);
      await x.write(src === undefined ? new Uint8Array(t.size) : await inputBytes(options.file, t, src));
      ins.add(t.name, x);
    }
    for (const t of model.outputs) {
      outs.add(t.name, await rt.allocateTensor({ location: "host", vnc: model.vnc, size: t.size, name: t.name }));
    }
    const device = rt.device.index;
    portal.takeTimeline(device); // drop anything recorded before
    portal.setTimeline(device, true);
    try {
      await model.execute(ins, outs);
    } finally {
      portal.setTimeline(device, false);
    }
    const { events, lost } = await settledTimeline(portal, device);
    if (lost > 0) rt.log.warn(`The trace misses ${lost} device events: the timeline ring wrapped`);
    return buildChromeTrace({
      model: model.name,
      device: `${rt.spec.name} (${rt.spec.generation})`,
      spans,
      timeline: events,
    });
  } finally {
    await rt.close();
    await portal.close();
  }
}

/**
 * The device's timeline of the execution that just completed. The device records a run's own slice when the run
 * ends, just after the completion the host waited for, on its own thread: the timeline is read until every
 * NeuronCore that recorded something has recorded its run (or 5 s have passed).
 */
async function settledTimeline(
  portal: DeviceSimPortal,
  device: number,
): Promise<{ events: NcTimelineEvent[]; lost: number }> {
  const events: NcTimelineEvent[] = [];
  let lost = 0;
  const deadline = Date.now() + 5000;
  for (;;) {
    const t = portal.takeTimeline(device);
    events.push(...t.events);
    lost += t.lost;
    const ncs = new Set(events.map((e) => e.nc));
    const ran = new Set(events.filter((e) => e.kind === "run").map((e) => e.nc));
    if ((ncs.size > 0 && [...ncs].every((nc) => ran.has(nc))) || Date.now() > deadline) return { events, lost };
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/**
 * `nrt profile`. An existing `-o` file is replaced, except an input: `-o` naming the NEFF or an `--input` file (by
 * any path or link) is refused with exit 2 before anything runs.
 *
 * @param args The arguments after `profile`.
 * @param log Where the trace (with `-o -`) and the summary line go.
 * @param err Where the summary line (with `-o FILE`) and the refusal of an `-o` naming an input go.
 * @returns 0, or 2 when `-o` names an input.
 * @throws {UsageError} For a missing MODEL.neff, an unknown option or an `--input` that is not NAME=FILE.
 */
export async function runProfile(
  args: readonly string[],
  log: (s: string) => void = console.log,
  err: (s: string) => void = console.error,
): Promise<number> {
  const { help, values, positionals } = parseCommandArgs(PROFILE_COMMAND, args);
  if (help) {
    log(formatHelp(PROFILE_COMMAND));
    return 0;
  }
  const file = positionals[0];
  const inputs = inputFiles(values.input ?? [], PROFILE_COMMAND);
  const out = values.output ?? "-";
  if (out === "") throw usageError(PROFILE_COMMAND, "-o needs a file name or -");
  if (out !== "-") {
    const clash = await overwritesInput(out, [
      [file, "the NEFF being profiled"],
      ...[...inputs].map(([name, path]) => [path, `the file of input "${printable(name)}"`] as const),
    ]);
    if (clash !== undefined) {
      err(`nrt profile: ${clash}`);
      return 2;
    }
  }
  let neff: Uint8Array;
  try {
    // Never more than the cap nrt serve reads a NEFF with: a 1.5 GB file is refused by its size, unread.
    neff = await readFileCapped(file, neffFileCap());
  } catch (e) {
    throw new Error(`Cannot profile ${printable(file)}: ${printable(e instanceof Error ? e.message : String(e))}`, {
      cause: e,
    });
  }
  const trace = await profileNeff({ neff, file, inputs, arch: values.arch });
  const text = terminalJson(trace); // names from the NEFF: DEL and C1 escaped too, as JSON.stringify escapes C0
  if (out === "-") log(text);
  else {
    await writeFile(out, text);
    err(
      `nrt profile: ${trace.traceEvents.filter((e) => e.ph !== "M").length} events of ${
        printable(trace.otherData.model)
      } in ${printable(out)}`,
    );
  }
  return 0;
}
