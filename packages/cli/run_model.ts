/**
 * `nrt run FILE.neff --input NAME=FILE.json … [--json]` (ours): executes a NEFF on the embedded simulator and prints
 * its outputs. Inputs are JSON arrays (nested arrays are flattened row-major) of the input's dtype; a value the dtype
 * cannot hold (an integer out of range or with a fraction, a float past the dtype's finite range) is refused.
 *
 * @module
 */
import { envFromProcess, NrtError, NrtStatus, Runtime, TensorSet } from "@nrt/core";
import { readFile } from "node:fs/promises";
import { type CommandSpec, formatHelp, parseCommandArgs, usageError } from "./command_args.ts";
import { createNrtContainer, nrtPlugins, PortalToken } from "./container.ts";

/** How `nrt run` is called. */
export const RUN_COMMAND = {
  name: "run",
  usage: "nrt run FILE.neff [--input NAME=FILE.json ...] [--json]",
  summary: "Execute a NEFF on the embedded simulator and print its outputs. Each input is a JSON array of numbers\n" +
    "(nested arrays are read row-major), one per element of the input's shape.",
  options: {
    input: { type: "string", multiple: true, value: "NAME=FILE.json", description: "the values of input NAME" },
    json: { type: "boolean", description: 'print one JSON document, {"model", "outputs": {NAME: [...]}}' },
  },
  positionals: { min: 1, max: 1, name: "FILE.neff" },
} as const satisfies CommandSpec;

type NumberArray = ArrayLike<number> & {
  [k: number]: number;
  readonly buffer: ArrayBufferLike;
  readonly BYTES_PER_ELEMENT: number;
};
const DTYPE_ARRAYS: Readonly<
  Record<string, { new (b: ArrayBuffer): NumberArray; readonly BYTES_PER_ELEMENT: number } | undefined>
> = {
  float32: Float32Array,
  float64: Float64Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int8: Int8Array,
  uint8: Uint8Array,
};

/** Reads `--input NAME=FILE` arguments into a map from input name to file (`spec` names the command in errors). */
export function inputFiles(specs: readonly string[], spec: CommandSpec = RUN_COMMAND): Map<string, string> {
  const inputs = new Map<string, string>();
  for (const text of specs) {
    const m = /^([^=]+)=(.+)$/.exec(text);
    if (m === null) throw usageError(spec, `--input ${text} is not NAME=FILE.json`);
    if (inputs.has(m[1])) throw usageError(spec, `--input names "${m[1]}" twice`);
    inputs.set(m[1], m[2]);
  }
  return inputs;
}

/**
 * The bytes of one input: the numbers of a JSON file, checked against the tensor's element count and dtype.
 *
 * @throws {NrtError} `NRT_INVALID` naming the element the dtype cannot hold: an integer dtype's value that is out of
 * range or not whole, a float dtype's value that would become ±Infinity (1e39 as float32).
 */
export async function inputBytes(
  model: string,
  t: { name: string; dtype: string; size: number },
  file: string,
): Promise<Uint8Array> {
  const cannot = (why: string, cause?: unknown) =>
    new NrtError(NrtStatus.NRT_INVALID, `Cannot run ${model}: input "${t.name}" ${why}`, { cause });
  const Ctor = DTYPE_ARRAYS[t.dtype];
  if (Ctor === undefined) throw cannot(`has dtype ${t.dtype}, which --input cannot read`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, "utf8"));
  } catch (e) {
    throw cannot(`cannot be read from ${file}: ${e instanceof Error ? e.message : String(e)}`, e);
  }
  const values = Array.isArray(parsed) ? parsed.flat(Infinity) : [parsed];
  // Counted before anything is allocated: a NEFF may declare an input larger than this process can hold.
  const count = t.size / Ctor.BYTES_PER_ELEMENT;
  if (values.length !== count) throw cannot(`needs ${count} numbers; ${file} holds ${values.length}`);
  const arr = new Ctor(new ArrayBuffer(t.size));
  const integral = !(arr instanceof Float32Array || arr instanceof Float64Array);
  values.forEach((v, k) => {
    if (typeof v !== "number") throw cannot(`needs numbers; ${file} holds ${JSON.stringify(v)} at index ${k}`);
    arr[k] = v;
    // An integer the dtype cannot hold exactly, and a float the dtype turns into ±Infinity (1e39 as float32, 1e999
    // as any float): refused, as REST refuses them (ours).
    if (integral ? arr[k] !== v : !Number.isFinite(arr[k])) {
      throw cannot(`is ${t.dtype}; ${file} holds ${v} at index ${k}`);
    }
  });
  return new Uint8Array(arr.buffer);
}

/** Largest output `nrt run` prints (64 MiB, ours). */
export const MAX_PRINTED_OUTPUT_BYTES: number = 64 * 1024 * 1024;

/**
 * Refuses an output over {@linkcode MAX_PRINTED_OUTPUT_BYTES} before anything runs: every output is printed as text,
 * and a NEFF of a few KB can declare a 2 GiB output (gigabytes of text, held in memory first). Ours.
 *
 * @param file The NEFF, for the message.
 * @param outputs The model's outputs.
 * @throws {NrtError} `NRT_INVALID` naming the first output over the bound.
 */
export function checkPrintable(file: string, outputs: readonly { name: string; size: number }[]): void {
  const big = outputs.find((t) => t.size > MAX_PRINTED_OUTPUT_BYTES);
  if (big === undefined) return;
  throw new NrtError(
    NrtStatus.NRT_INVALID,
    `Cannot run ${file}: output "${big.name}" is ${big.size} bytes; nrt run prints outputs of at most ` +
      `${MAX_PRINTED_OUTPUT_BYTES} bytes`,
  );
}

/**
 * `nrt run`: loads a NEFF on the embedded simulator, executes it once with the given inputs and prints the outputs.
 *
 * @param args The arguments after `run`.
 * @param log Where the outputs go.
 * @returns 0.
 * @throws {UsageError} For a missing or extra FILE, an unknown option, or an `--input` that is not NAME=FILE.
 * @throws {NrtError} `NRT_INVALID` when an input is missing, unknown to the model, unreadable or of the wrong size;
 * the runtime's status when the load or the execution fails.
 */
export async function runModel(args: readonly string[], log: (s: string) => void = console.log): Promise<number> {
  const { help, values, positionals } = parseCommandArgs(RUN_COMMAND, args);
  if (help) {
    log(formatHelp(RUN_COMMAND));
    return 0;
  }
  const file = positionals[0];
  const inputs = inputFiles(values.input ?? []);
  let neff: Uint8Array;
  try {
    neff = new Uint8Array(await readFile(file));
  } catch (e) {
    throw new Error(`Cannot run ${file}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  const container = createNrtContainer({ env: envFromProcess() });
  const rt = await Runtime.init({ ...nrtPlugins(container), env: envFromProcess() });
  try {
    const model = await rt.load(neff);
    const known = new Set(model.inputs.map((t) => t.name));
    for (const name of inputs.keys()) {
      if (!known.has(name)) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot run ${file}: the model has no input "${name}"; its inputs are ${[...known].join(", ")}`,
        );
      }
    }
    checkPrintable(file, model.outputs);
    const ins = new TensorSet(), outs = new TensorSet();
    for (const t of model.inputs) {
      const src = inputs.get(t.name);
      if (src === undefined) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot run ${file}: input "${t.name}" is missing; pass --input ${t.name}=FILE.json`,
        );
      }
      const bytes = await inputBytes(file, t, src);
      const x = await rt.allocateTensor({ location: "host", vnc: model.vnc, size: t.size, name: t.name });
      await x.write(bytes);
      ins.add(t.name, x);
    }
    for (const t of model.outputs) {
      outs.add(t.name, await rt.allocateTensor({ location: "host", vnc: model.vnc, size: t.size, name: t.name }));
    }
    await model.execute(ins, outs);
    const result: Record<string, number[]> = {};
    for (const t of model.outputs) {
      const Ctor = DTYPE_ARRAYS[t.dtype] ?? Uint8Array;
      const bytes = await outs.get(t.name).read();
      result[t.name] = Array.from(new Ctor(bytes.slice().buffer as ArrayBuffer));
    }
    log(
      values.json === true
        ? JSON.stringify({ model: model.name, outputs: result })
        : Object.entries(result).map(([k, v]) => `${k}: ${v.join(" ")}`).join("\n"),
    );
    return 0;
  } finally {
    await rt.close();
    await container.resolve(PortalToken).close(); // the simulated device's Q7 Workers
  }
}
