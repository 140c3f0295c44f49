/**
 * `nrt run FILE.neff --input NAME=FILE.json … [--json]` (ours): executes a NEFF on the embedded simulator and prints
 * its outputs. Inputs are JSON arrays (nested arrays are flattened row-major) of the input's dtype; a value the dtype
 * cannot hold (an integer out of range or with a fraction, a float past the dtype's finite range) is refused.
 *
 * Outputs of every NEFF dtype are printed as values ({@linkcode outputValues}): a non-finite float as the bare token
 * `NaN`, `Infinity` or `-Infinity` in text and in `--json` alike, as the REST server writes it (`jsonDataText` of
 * `@nrt/http-api`, docs/rest-api.md "Non-finite values"), never `null`; a 64-bit integer exactly. Names from the
 * NEFF are printed with their control characters escaped ({@linkcode printable}).
 *
 * @module
 */
import { envFromProcess, fromBfloat16, NrtError, NrtStatus, Runtime, TensorSet } from "@nrt/core";
import { dtypeInfo, encodeJsonData, JSON_BYTES_PER_ELEMENT, JSON_OVERHEAD_BYTES } from "@nrt/http-api";
import { type CommandSpec, formatHelp, parseCommandArgs, usageError } from "./command_args.ts";
import { createNrtContainer, nrtPlugins, PortalToken } from "./container.ts";
import { neffFileCap, printable, readFileCapped, terminalSafeJson } from "./inspect.ts";

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
 * The scalars of a parsed JSON value in row-major order: nested arrays flattened at any depth with an explicit stack
 * (`Array.prototype.flat` recurses, and a file nesting 200 000 arrays overflowed the call stack).
 */
function flatten(parsed: unknown): unknown[] {
  if (!Array.isArray(parsed)) return [parsed];
  const out: unknown[] = [];
  const stack: Array<{ a: unknown[]; i: number }> = [{ a: parsed, i: 0 }];
  while (stack.length > 0) {
    const top = stack[stack.length - 1];
    if (top.i === top.a.length) {
      stack.pop();
      continue;
    }
    const x = top.a[top.i++];
    if (Array.isArray(x)) stack.push({ a: x, i: 0 });
    else out.push(x);
  }
  return out;
}

/** A JSON value that is not a number, for a message: short, and never recursing into an object. */
function described(v: unknown): string {
  if (typeof v === "string") return printable(JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v));
  if (typeof v === "object" && v !== null) return "an object";
  return String(JSON.stringify(v));
}

/**
 * The bytes of one input: the numbers of a JSON file, checked against the tensor's element count and dtype. The
 * file is read up to the bound REST puts on a request's JSON for as many elements (`JSON_BYTES_PER_ELEMENT` each,
 * plus `JSON_OVERHEAD_BYTES`, from `@nrt/http-api`), so `--input x=/dev/zero` or a 2 GB file is refused unread.
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
    new NrtError(NrtStatus.NRT_INVALID, `Cannot run ${printable(model)}: input "${printable(t.name)}" ${why}`, {
      cause,
    });
  const Ctor = DTYPE_ARRAYS[t.dtype];
  if (Ctor === undefined) throw cannot(`has dtype ${printable(t.dtype)}, which --input cannot read`);
  const shown = printable(file);
  // Counted before anything is allocated: a NEFF may declare an input larger than this process can hold.
  const count = t.size / Ctor.BYTES_PER_ELEMENT;
  let parsed: unknown;
  try {
    const cap = count * JSON_BYTES_PER_ELEMENT + JSON_OVERHEAD_BYTES;
    const bytes = await readFileCapped(file, cap, `the JSON of ${count} elements`);
    parsed = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw cannot(`cannot be read from ${shown}: ${printable(e instanceof Error ? e.message : String(e))}`, e);
  }
  const values = flatten(parsed);
  if (values.length !== count) throw cannot(`needs ${count} numbers; ${shown} holds ${values.length}`);
  const arr = new Ctor(new ArrayBuffer(t.size));
  const integral = !(arr instanceof Float32Array || arr instanceof Float64Array);
  values.forEach((v, k) => {
    if (typeof v !== "number") throw cannot(`needs numbers; ${shown} holds ${described(v)} at index ${k}`);
    arr[k] = v;
    // An integer the dtype cannot hold exactly, and a float the dtype turns into ±Infinity (1e39 as float32, 1e999
    // as any float): refused, as REST refuses them (ours).
    if (integral ? arr[k] !== v : !Number.isFinite(arr[k])) {
      throw cannot(`is ${t.dtype}; ${shown} holds ${v} at index ${k}`);
    }
  });
  return new Uint8Array(arr.buffer);
}

/**
 * An 8-bit float's value (ours: the project defines no FP8 arithmetic, these are the formats' published meanings,
 * as ml_dtypes reads them). `float8_e5m2` and `float8_e4m3` are IEEE-style: the top exponent holds ±Infinity
 * (mantissa 0) and NaN (largest finite 57344 and 240); `float8_e4m3fn` has no infinity, only `S.1111.111` is NaN
 * (largest finite 448).
 */
function float8(bits: number, exponentBits: number, mantissaBits: number, finiteOnly: boolean): number {
  const sign = bits & 0x80 ? -1 : 1;
  const top = (1 << exponentBits) - 1, bias = (1 << (exponentBits - 1)) - 1, full = (1 << mantissaBits) - 1;
  const e = (bits >> mantissaBits) & top, m = bits & full;
  if (e === top && (finiteOnly ? m === full : true)) return m === 0 && !finiteOnly ? sign * Infinity : NaN;
  if (e === 0) return sign * m * 2 ** (1 - bias - mantissaBits);
  return sign * (1 + m / (full + 1)) * 2 ** (e - bias);
}

const FLOAT8: Readonly<Record<string, [number, number, boolean] | undefined>> = {
  float8_e4m3: [4, 3, false],
  float8_e4m3fn: [4, 3, true],
  float8_e5m2: [5, 2, false],
};

/**
 * An output's elements, read from its little-endian bytes as its NEFF dtype says: the REST server's decoder
 * (`encodeJsonData` of `@nrt/http-api`) for bool, the 8- to 32-bit integers, float32 and float64; the platform's
 * `DataView.getFloat16` for float16; `fromBfloat16` of `@nrt/core` for bfloat16; `BigInt64Array`/`BigUint64Array`
 * for int64/uint64, exact beyond 2^53 (REST's JSON numbers round there); the FP8 formats as {@linkcode float8} reads
 * them.
 *
 * @param dtype The NEFF dtype.
 * @param bytes The output's bytes (a whole number of elements).
 * @returns The values: numbers, bigints (int64/uint64) or booleans (bool).
 * @throws {RangeError} For a dtype no NEFF signature may name (the loader refuses those first).
 *
 * @example A float16 output
 * ```ts
 * import { outputValues } from "./run_model.ts";
 * console.log(outputValues("float16", new Uint8Array([0x00, 0x3c, 0x00, 0x7c]))); // [1, Infinity]
 * ```
 */
export function outputValues(dtype: string, bytes: Uint8Array): ArrayLike<number | bigint | boolean> {
  const b = bytes.slice(); // a buffer of its own, at offset 0: every element view can start there
  const view = new DataView(b.buffer);
  const each = <T>(size: number, read: (at: number) => T): T[] =>
    Array.from({ length: b.byteLength / size }, (_, i) => read(i * size));
  if (dtype === "float16") return each(2, (at) => view.getFloat16(at, true));
  if (dtype === "bfloat16") return each(2, (at) => fromBfloat16(view.getUint16(at, true)));
  if (dtype === "int64") return new BigInt64Array(b.buffer);
  if (dtype === "uint64") return new BigUint64Array(b.buffer);
  const fp8 = FLOAT8[dtype];
  if (fp8 !== undefined) return each(1, (at) => float8(b[at], ...fp8));
  const info = dtypeInfo(dtype);
  if (info === undefined || !info.json) throw new RangeError(`Cannot print an output of dtype ${dtype}`);
  return encodeJsonData(info, b);
}

/**
 * The outputs as `nrt run` prints them: `NAME: v v …` lines, or with `json` one document
 * `{"model", "outputs": {NAME: [v, …]}}`. A value is written as `String` writes it — in JSON too, so a non-finite
 * float is the bare `NaN`, `Infinity` or `-Infinity` REST writes (`jsonDataText` of `@nrt/http-api`) and an int64
 * keeps every digit. Names are escaped: {@linkcode printable} in text, `\u00HH` for DEL and C1 in JSON.
 *
 * @example A float32 overflow, in both forms
 * ```ts
 * import { formatOutputs } from "./run_model.ts";
 * const outputs = [{ name: "y", values: [Infinity, 1.5] }];
 * console.log(formatOutputs("m.neff", outputs, false)); // y: Infinity 1.5
 * console.log(formatOutputs("m.neff", outputs, true)); // {"model":"m.neff","outputs":{"y":[Infinity,1.5]}}
 * ```
 */
export function formatOutputs(
  model: string,
  outputs: ReadonlyArray<{ name: string; values: ArrayLike<number | bigint | boolean> }>,
  json: boolean,
): string {
  if (!json) return outputs.map((o) => `${printable(o.name)}: ${Array.from(o.values, String).join(" ")}`).join("\n");
  const key = (s: string) => terminalSafeJson(JSON.stringify(s));
  const members = outputs.map((o) => `${key(o.name)}:[${Array.from(o.values, String).join(",")}]`);
  return `{"model":${key(model)},"outputs":{${members.join(",")}}}`;
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
  const name = printable(big.name);
  throw new NrtError(
    NrtStatus.NRT_INVALID,
    `Cannot run ${printable(file)}: output "${name}" is ${big.size} bytes; nrt run prints outputs of at most ` +
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
    // Never more than the cap nrt serve reads a NEFF with: a 1.5 GB file is refused by its size, unread.
    neff = await readFileCapped(file, neffFileCap());
  } catch (e) {
    throw new Error(`Cannot run ${printable(file)}: ${printable(e instanceof Error ? e.message : String(e))}`, {
      cause: e,
    });
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
          `Cannot run ${printable(file)}: the model has no input "${printable(name)}"; its inputs are ${
            printable([...known].join(", "))
          }`,
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
          `Cannot run ${printable(file)}: input "${printable(t.name)}" is missing; pass --input ${
            printable(t.name)
          }=FILE.json`,
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
    const printed: Array<{ name: string; values: ArrayLike<number | bigint | boolean> }> = [];
    for (const t of model.outputs) {
      printed.push({ name: t.name, values: outputValues(t.dtype, await outs.get(t.name).read()) });
    }
    log(formatOutputs(model.name, printed, values.json === true));
    return 0;
  } finally {
    await rt.close();
    await container.resolve(PortalToken).close(); // the simulated device's Q7 Workers
  }
}
