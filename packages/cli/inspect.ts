/**
 * `nrt inspect FILE [--json]`: what a NEFF holds — header fields, hash check, target, graphs, member count,
 * input/output signature and, when present, custom-op libraries (`sgNN/Pool.json` `ucode_libs`, ARCHITECTURE §5).
 *
 * @module
 */
import { envFromProcess, NrtError, readNeff, resolveRuntimeConfig } from "@nrt/core";
import { toHex } from "@nrt/core/neff";
import { type CommandSpec, formatHelp, parseCommandArgs, UsageError } from "./command_args.ts";

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

function table(rows: string[][]): string {
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
  /** Reads a whole file. */
  readFile(path: string): Promise<Uint8Array>;
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
 * import { runInspect } from "./inspect.ts";
 * const code = await runInspect(["model.neff", "--json"], {
 *   readFile: (p) => Deno.readFile(p),
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
    bytes = await io.readFile(path);
  } catch (e) {
    io.stderr(`nrt inspect: cannot read ${path}: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
  let report: InspectReport;
  try {
    // The same cap as a load (NRT_NEFF_MAX_BYTES): a bomb stops at it instead of inflating.
    report = inspectNeff(bytes, { maxDecompressedBytes: resolveRuntimeConfig({}, envFromProcess()).maxNeffBytes });
  } catch (e) {
    if (!(e instanceof NrtError)) throw e;
    io.stderr(`nrt inspect: ${path}: ${e.message} (${e.statusName})\n`);
    return 1;
  }
  io.stdout(json ? `${JSON.stringify(report)}\n` : formatInspect(report));
  return 0;
}
