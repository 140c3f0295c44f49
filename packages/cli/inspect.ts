/**
 * `nrt inspect FILE [--json]`: what a NEFF holds — header fields, hash check, target, graphs, member count,
 * input/output signature and, when present, custom-op libraries (`sgNN/Pool.json` `ucode_libs`, ARCHITECTURE §5).
 *
 * @module
 */
import { envFromProcess, NrtError, readNeff, resolveRuntimeConfig } from "@nrt/core";
import { toHex } from "@nrt/core/neff";
import { open, stat } from "node:fs/promises";
import { type CommandSpec, formatHelp, parseCommandArgs, UsageError } from "./command_args.ts";
import { NEFF_FILE_SLACK_BYTES } from "./repository_dir.ts";

// deno-lint-ignore no-control-regex
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * `s` safe to print to a terminal: every C0 control character (ESC, BEL, CR, LF, TAB…), DEL and every C1 control
 * character written as `\xHH` (ours). A NEFF's header name, tensor names, target and library names are the file's
 * text: printed raw, `ESC[2J` would clear the user's screen.
 *
 * @example An escape sequence in a tensor name
 * ```ts
 * import { printable } from "./inspect.ts";
 * console.log(printable("y\u001b[31m")); // y\x1b[31m
 * ```
 */
export function printable(s: string): string {
  return s.replace(CONTROLS, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

const JSON_UNESCAPED_CONTROLS = /[\u007f-\u009f]/g;

/**
 * `JSON.stringify(value)` with DEL and the C1 control characters written as `\u00HH` too (JSON.stringify escapes
 * only C0): the same document for a JSON reader, nothing a terminal acts on (ours).
 */
export function terminalJson(value: unknown): string {
  return terminalSafeJson(JSON.stringify(value));
}

/** JSON text with DEL and the C1 control characters written as `\u00HH` (see {@linkcode terminalJson}). */
export function terminalSafeJson(text: string): string {
  return text.replace(JSON_UNESCAPED_CONTROLS, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
}

/**
 * The largest NEFF file `nrt run`, `nrt inspect` and `nrt profile` read: `NRT_NEFF_MAX_BYTES` (default 20 MiB) plus
 * {@linkcode NEFF_FILE_SLACK_BYTES} (1 MiB), the cap `nrt serve` reads a repository's NEFFs with (ours).
 *
 * @param env The environment (only `NRT_NEFF_MAX_BYTES` is read).
 * @throws {NrtError} `NRT_INVALID` for a malformed `NRT_NEFF_MAX_BYTES`.
 */
export function neffFileCap(env: Record<string, string | undefined> = envFromProcess()): number {
  return resolveRuntimeConfig({}, { NRT_NEFF_MAX_BYTES: env.NRT_NEFF_MAX_BYTES }).maxNeffBytes + NEFF_FILE_SLACK_BYTES;
}

/**
 * Why writing `out` would destroy one of a command's inputs, or `undefined` when it would not: `out` and an input
 * are the same existing file (same device and inode, so a symbolic link, a hard link or another spelling of the path
 * is seen through). Ours: `nrt compile`, `nrt pack` and `nrt profile` replace an existing output without asking, as
 * compilers do, but never one of their inputs.
 *
 * @param out The output path (`-o`).
 * @param inputs Each input's path and what it is, for the message (`"the model being compiled"`).
 * @returns One line naming the input, for stderr.
 */
export async function overwritesInput(
  out: string,
  inputs: ReadonlyArray<readonly [path: string, what: string]>,
): Promise<string | undefined> {
  let o;
  try {
    o = await stat(out, { bigint: true });
  } catch {
    return undefined; // no such file yet (or not one we can look at): it is none of the inputs
  }
  for (const [path, what] of inputs) {
    try {
      const i = await stat(path, { bigint: true });
      if (i.dev === o.dev && i.ino === o.ino) {
        const named = path === out ? "" : ` (${printable(path)})`;
        return `-o ${printable(out)} is ${what}${named}: refusing to overwrite an input`;
      }
    } catch {
      // an input that does not exist is reported by the command when it reads it
    }
  }
  return undefined;
}

/** What a file that is not a regular file or a pipe is, for messages. */
function fileKind(st: { isDirectory(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean }): string {
  if (st.isDirectory()) return "a directory";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  return "a socket";
}

/**
 * Reads a file named on the command line, never more than `maxBytes + 1` bytes of it (ours): a regular file's size
 * is checked before anything is read, a pipe (`/dev/stdin` of a pipeline, a FIFO, a shell's `<(…)`) is read until
 * it ends or passes the cap, and anything else (a directory, `/dev/zero`, a terminal) is refused without being read.
 *
 * @param path The file.
 * @param maxBytes The largest size accepted.
 * @param what What the cap is for, for messages (default: a NEFF file, naming `NRT_NEFF_MAX_BYTES`).
 * @returns The bytes.
 * @throws {Error} Naming the file's kind or size and the cap; the platform's error when it cannot be opened.
 */
export async function readFileCapped(
  path: string,
  maxBytes: number,
  what = "a NEFF file (NRT_NEFF_MAX_BYTES raises it)",
): Promise<Uint8Array> {
  const over = (size: string) => new Error(`it is ${size} bytes, over the ${maxBytes}-byte cap for ${what}`);
  const refuse = (st: Parameters<typeof fileKind>[0] & { isFile(): boolean; isFIFO(): boolean; size: number }) => {
    if (!st.isFile() && !st.isFIFO()) throw new Error(`it is ${fileKind(st)}, not a file`);
    if (st.isFile() && st.size > maxBytes) throw over(String(st.size));
  };
  refuse(await stat(path)); // before opening: opening a device may act on it, opening a FIFO waits for a writer
  const fh = await open(path, "r");
  try {
    const st = await fh.stat(); // the file opened, which may not be the file checked
    refuse(st);
    const chunks: Uint8Array[] = [];
    let total = 0;
    // A regular file in one read of its size + 1 (one byte more shows it grew); a pipe in 1 MiB reads.
    let want = st.isFile() ? st.size + 1 : 1 << 20;
    for (;;) {
      const buf = new Uint8Array(Math.min(want, maxBytes + 1 - total));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      chunks.push(buf.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes) throw over(`more than ${maxBytes}`);
      want = 1 << 20;
    }
    if (chunks.length === 1) return chunks[0];
    const out = new Uint8Array(total);
    let at = 0;
    for (const c of chunks) {
      out.set(c, at);
      at += c.byteLength;
    }
    return out;
  } finally {
    await fh.close();
  }
}

/** One tensor of the signature. */
export interface InspectTensor {
  /** Tensor name. */
  name: string;
  /** Element type. */
  dtype: string;
  /** Shape. */
  shape: number[];
  /** Size in bytes. */
  size: number;
}

/** One custom-op library as `sgNN/Pool.json` lists it (reported as found; the format is not final). */
export interface InspectUcodeLib {
  /** The subgraph whose `Pool.json` lists it. */
  graph: string;
  /** Library name. */
  name?: unknown;
  /** The member holding the image. */
  file?: unknown;
  /** `total_cpus`. */
  total_cpus?: unknown;
  /** `cpu_id`. */
  cpu_id?: unknown;
  /** The function table. */
  functions?: unknown;
}

/** The report `nrt inspect --json` prints. */
export interface InspectReport {
  /** Header fields; `uuid` is lowercase hex, `feature_bits` a number when safe, else a decimal string. */
  header: {
    pkg_version: number;
    header_size: number;
    data_size: number;
    neff_version_major: number;
    neff_version_minor: number;
    num_tpb: number;
    name: string;
    uuid: string;
    requested_tpb_count: number;
    feature_bits: number | string;
    lnc_size: number;
  };
  /** The hash check. */
  hash: { algorithm: string; stored: string; computed: string; valid: boolean };
  /** `target` of `kelf-0.json`. */
  target: string;
  /** Graph names. */
  graphs: string[];
  /** Number of archive members. */
  members: number;
  /** Inputs. */
  inputs: InspectTensor[];
  /** Outputs. */
  outputs: InspectTensor[];
  /** Custom-op libraries, present only when a NEFF carries some. */
  ucode_libs?: InspectUcodeLib[];
}

function ucodeLibs(members: ReadonlyMap<string, Uint8Array>, graphs: readonly string[]): InspectUcodeLib[] {
  const libs: InspectUcodeLib[] = [];
  for (const graph of graphs) {
    const bytes = members.get(`${graph}/Pool.json`);
    if (bytes === undefined) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      continue; // reported by the loader, not by inspect
    }
    const list = (parsed as { ucode_libs?: unknown } | null)?.ucode_libs;
    if (!Array.isArray(list)) continue;
    for (const lib of list) {
      if (typeof lib !== "object" || lib === null) continue;
      const l = lib as Record<string, unknown>;
      libs.push({
        graph,
        name: l.name,
        file: l.file,
        total_cpus: l.total_cpus,
        cpu_id: l.cpu_id,
        functions: l.functions,
      });
    }
  }
  return libs;
}

/**
 * Reads a NEFF and summarises it. The hash is always checked and reported, never enforced.
 *
 * @param bytes The NEFF file.
 * @returns The report.
 * @throws {NrtError} When the file is not a readable NEFF.
 *
 * @example Summarise a NEFF
 * ```ts
 * import { inspectNeff } from "./inspect.ts";
 * import { buildCustomOpNeff } from "@nrt/core";
 * const bytes = buildCustomOpNeff({
 *   name: "relu", target: "cayman",
 *   inputs: [{ name: "x", dtype: "float32", shape: [4] }], outputs: [{ name: "y", dtype: "float32", shape: [4] }],
 *   libraries: [{ name: "relu", wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
 *   calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
 * });
 * console.log(inspectNeff(bytes).target); // "cayman"
 * ```
 */
export function inspectNeff(bytes: Uint8Array, options: { maxDecompressedBytes?: number } = {}): InspectReport {
  const n = readNeff(bytes, { maxDecompressedBytes: options.maxDecompressedBytes });
  const h = n.header;
  const fb = h.featureBits <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(h.featureBits) : h.featureBits.toString();
  const graphs = n.graphs.map((g) => g.name);
  const report: InspectReport = {
    header: {
      pkg_version: h.pkgVersion,
      header_size: h.headerSize,
      data_size: h.dataSize,
      neff_version_major: h.neffVersionMajor,
      neff_version_minor: h.neffVersionMinor,
      num_tpb: h.numTpb,
      name: h.name,
      uuid: toHex(h.uuid),
      requested_tpb_count: h.requestedTpbCount,
      feature_bits: fb,
      lnc_size: h.lncSize,
    },
    hash: { algorithm: n.hash.algorithm, stored: n.hash.stored, computed: n.hash.computed, valid: n.hash.valid },
    target: n.target,
    graphs,
    members: n.members.size,
    inputs: n.inputs.map((t) => ({ name: t.name, dtype: t.dtype, shape: [...t.shape], size: t.size })),
    outputs: n.outputs.map((t) => ({ name: t.name, dtype: t.dtype, shape: [...t.shape], size: t.size })),
  };
  const libs = ucodeLibs(n.members, graphs);
  if (libs.length > 0) report.ucode_libs = libs;
  return report;
}

/** Rows as aligned columns; every cell goes through {@linkcode printable} (cells hold the file's text). */
function table(cells: string[][]): string {
  const rows = cells.map((r) => r.map(printable));
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c])).join("  ").trimEnd()).join("\n");
}

/**
 * Formats a report as readable text: header fields, then the signature as a table.
 *
 * @example Print a report
 * ```ts
 * import { formatInspect, inspectNeff } from "./inspect.ts";
 * import { buildCustomOpNeff } from "@nrt/core";
 * const bytes = buildCustomOpNeff({
 *   name: "relu", target: "cayman",
 *   inputs: [{ name: "x", dtype: "float32", shape: [4] }], outputs: [{ name: "y", dtype: "float32", shape: [4] }],
 *   libraries: [{ name: "relu", wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
 *   calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
 * });
 * console.log(formatInspect(inspectNeff(bytes)));
 * ```
 */
export function formatInspect(report: InspectReport): string {
  const h = report.header;
  const hash = report.hash.algorithm === "md5"
    ? `md5 ${report.hash.stored} (${report.hash.valid ? "valid" : `INVALID, computed ${report.hash.computed}`})`
    : report.hash.algorithm;
  const fields = table([
    ["name", h.name],
    ["target", report.target],
    ["neff version", `${h.neff_version_major}.${h.neff_version_minor}`],
    ["pkg version", String(h.pkg_version)],
    ["data size", `${h.data_size} bytes`],
    ["hash", hash],
    ["uuid", h.uuid],
    ["lnc size", String(h.lnc_size)],
    ["num tpb", `${h.num_tpb} (requested ${h.requested_tpb_count})`],
    ["feature bits", `0x${BigInt(h.feature_bits).toString(16)}`],
    ["graphs", report.graphs.join(", ")],
    ["members", String(report.members)],
  ]);
  const sig = table([
    ["kind", "name", "dtype", "shape", "bytes"],
    ...report.inputs.map((t) => ["input", t.name, t.dtype, `[${t.shape.join(", ")}]`, String(t.size)]),
    ...report.outputs.map((t) => ["output", t.name, t.dtype, `[${t.shape.join(", ")}]`, String(t.size)]),
  ]);
  let out = `${fields}\n\n${sig}\n`;
  if (report.ucode_libs !== undefined) {
    const libs = table([
      ["graph", "library", "file", "cpus"],
      ...report.ucode_libs.map((
        l,
      ) => [l.graph, String(l.name), String(l.file), `${String(l.cpu_id)}/${String(l.total_cpus)}`]),
    ]);
    out += `\n${libs}\n`;
  }
  return out;
}

/** What {@linkcode runInspect} needs from the platform. */
export interface InspectIo {
  /**
   * Reads a whole file, refusing one over `maxBytes` without reading it all ({@linkcode readFileCapped} does both).
   */
  readFile(path: string, maxBytes: number): Promise<Uint8Array>;
  /** Writes to standard output. */
  stdout(s: string): void;
  /** Writes to standard error. */
  stderr(s: string): void;
}

/** How `nrt inspect` is called. */
export const INSPECT_COMMAND = {
  name: "inspect",
  usage: "nrt inspect FILE [--json]",
  summary: "Show a NEFF's header, hash, graphs, members, signature and custom-op libraries.",
  options: {
    json: { type: "boolean", description: "print the report as one JSON document" },
  },
  positionals: { min: 1, max: 1, name: "FILE" },
} as const satisfies CommandSpec;

/**
 * `nrt inspect FILE [--json]`. Everything it prints goes through `io`, usage errors included.
 *
 * @param args The arguments after `inspect`.
 * @param io File reading and output.
 * @returns The exit code: 0 success (or `--help`), 1 the file could not be read as a NEFF, 2 usage error.
 *
 * @example Run from a Deno entry point
 * ```ts
 * import { readFileCapped, runInspect } from "./inspect.ts";
 * const code = await runInspect(["model.neff", "--json"], {
 *   readFile: (p, maxBytes) => readFileCapped(p, maxBytes),
 *   stdout: (s) => console.log(s.trimEnd()),
 *   stderr: (s) => console.error(s.trimEnd()),
 * });
 * ```
 */
export async function runInspect(args: readonly string[], io: InspectIo): Promise<number> {
  let parsed;
  try {
    parsed = parseCommandArgs(INSPECT_COMMAND, args);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    io.stderr(`${e.message}\nUsage: ${INSPECT_COMMAND.usage}\n`);
    return 2;
  }
  if (parsed.help) {
    io.stdout(`${formatHelp(INSPECT_COMMAND)}\n`);
    return 0;
  }
  const json = parsed.values.json === true;
  const path = parsed.positionals[0];
  let bytes: Uint8Array;
  try {
    // The file is read up to the cap nrt serve reads a NEFF with: a 1.5 GB file or /dev/zero is refused unread.
    bytes = await io.readFile(path, neffFileCap());
  } catch (e) {
    io.stderr(
      `nrt inspect: cannot read ${printable(path)}: ${printable(e instanceof Error ? e.message : String(e))}\n`,
    );
    return 1;
  }
  let report: InspectReport;
  try {
    // The same cap as a load (NRT_NEFF_MAX_BYTES): a bomb stops at it instead of inflating.
    report = inspectNeff(bytes, { maxDecompressedBytes: resolveRuntimeConfig({}, envFromProcess()).maxNeffBytes });
  } catch (e) {
    if (!(e instanceof NrtError)) throw e;
    io.stderr(`nrt inspect: ${printable(path)}: ${printable(e.message)} (${e.statusName})\n`);
    return 1;
  }
  io.stdout(json ? `${terminalJson(report)}\n` : formatInspect(report));
  return 0;
}
