/**
 * A subgraph definition, `sgNN/def.json`: the engines with their `*_instr` instruction streams, the DMA queues,
 * and the `var` table (dense `var_id`s; types `state-buffer|input|output|file|virtual|dge-table`), as read off
 * the real NEFFs (`../shared/fixtures/README.md`, ARCHITECTURE §5). The parsed JSON is kept whole in `raw`; the
 * typed view covers only what every real file carries.
 *
 * @module
 */
import {
  asArray,
  asCount,
  asObject,
  asString,
  invalid,
  type JsonObject,
  parseJsonMember,
  requireMember,
} from "./_json.ts";
import { type InstructionStream, instructionStream } from "./instruction_stream.ts";

/** The engines a subgraph may program, by their `def.json` key prefix. */
export const NEFF_ENGINES: readonly ["pe", "act", "pool", "dve", "sp"] = ["pe", "act", "pool", "dve", "sp"];
/** One engine key. */
export type NeffEngine = typeof NEFF_ENGINES[number];

/** The `type`s a `var` entry may have. */
export const SUBGRAPH_VAR_TYPES: readonly ["state-buffer", "input", "output", "file", "virtual", "dge-table"] = [
  "state-buffer",
  "input",
  "output",
  "file",
  "virtual",
  "dge-table",
];
/** One `var` type. */
export type SubgraphVarType = typeof SUBGRAPH_VAR_TYPES[number];

/** One entry of the `var` table. */
export interface SubgraphVar {
  /** The key in the table (a tensor name for inputs and outputs). */
  name: string;
  /** `var_id`. */
  varId: number;
  /** `type`. */
  type: SubgraphVarType;
  /** `size` in bytes, when given. */
  size?: number;
  /** `file_name` of a `file` var (a member in the subgraph's folder). */
  fileName?: string;
}

/** One engine of a subgraph. */
export interface SubgraphEngine {
  /** The engine key (`pe`, `act`, `pool`, `dve`, `sp`). */
  engine: NeffEngine;
  /** The member of the engine's JSON description (e.g. `sg00/PE.json`), when named. */
  config?: string;
  /** The engine's instruction stream (`<engine>_instr`). */
  instructions: InstructionStream;
}

/** One entry of `dma_queue`. */
export interface DmaQueue {
  /** The queue set's name, e.g. `qSPDynamicHW`. */
  name: string;
  /** The owning engine, when given. */
  owner?: string;
  /** `type`, e.g. `dynamic`. */
  type?: string;
  /** `num_queues`, when given. */
  numQueues?: number;
  /** `semaphore_set`, when given. */
  semaphoreSet?: number[];
}

/** A parsed `def.json`. */
export interface SubgraphDef {
  /** The graph name from `kelf-0.json` (e.g. `sg00`). */
  graph: string;
  /** The member path of the definition (e.g. `sg00/def.json`). */
  member: string;
  /** `version`, when given. */
  version?: string;
  /** Engines present, in {@linkcode NEFF_ENGINES} order. */
  engines: SubgraphEngine[];
  /** The DMA queue sets. */
  dmaQueues: DmaQueue[];
  /** The `var` table, ordered by `var_id`. */
  vars: SubgraphVar[];
  /** The whole parsed JSON. */
  raw: JsonObject;
}

/** The folder of a member path, with a trailing slash (`""` at the root). */
export function memberDir(path: string): string {
  const i = path.lastIndexOf("/");
  return i < 0 ? "" : path.slice(0, i + 1);
}

function readVars(v: unknown, where: string): SubgraphVar[] {
  if (v === undefined) return [];
  const table = asObject(v, `${where} var`);
  const vars: SubgraphVar[] = [];
  const ids = new Set<number>();
  for (const [name, entry] of Object.entries(table)) {
    const w = `${where} var "${name}"`;
    const e = asObject(entry, w);
    const varId = asCount(e.var_id, `${w} var_id`);
    if (ids.has(varId)) throw invalid(`${w} reuses var_id ${varId}`);
    ids.add(varId);
    const type = asString(e.type, `${w} type`);
    if (!(SUBGRAPH_VAR_TYPES as readonly string[]).includes(type)) throw invalid(`${w} has unknown type "${type}"`);
    const out: SubgraphVar = { name, varId, type: type as SubgraphVarType };
    if (e.size !== undefined) out.size = asCount(e.size, `${w} size`);
    if (e.file_name !== undefined) out.fileName = asString(e.file_name, `${w} file_name`);
    vars.push(out);
  }
  return vars.sort((a, b) => a.varId - b.varId);
}

function readDmaQueues(v: unknown, where: string): DmaQueue[] {
  if (v === undefined) return [];
  const table = asObject(v, `${where} dma_queue`);
  return Object.entries(table).map(([name, entry]) => {
    const w = `${where} dma_queue "${name}"`;
    const e = asObject(entry, w);
    const q: DmaQueue = { name };
    if (e.owner !== undefined) q.owner = asString(e.owner, `${w} owner`);
    if (e.type !== undefined) q.type = asString(e.type, `${w} type`);
    if (e.num_queues !== undefined) q.numQueues = asCount(e.num_queues, `${w} num_queues`);
    if (e.semaphore_set !== undefined) {
      q.semaphoreSet = asArray(e.semaphore_set, `${w} semaphore_set`).map((s, i) =>
        asCount(s, `${w} semaphore_set[${i}]`)
      );
    }
    return q;
  });
}

/**
 * Parses a subgraph's `def.json` and resolves its engines' instruction streams.
 *
 * @param members The NEFF members.
 * @param graph The graph name from `kelf-0.json`.
 * @param member The definition's member path.
 * @returns The typed view plus the raw JSON.
 * @throws {NrtError} `NRT_INVALID` naming the member for malformed JSON, a missing stream or a bad `var` entry.
 *
 * @example Read the first subgraph of a NEFF
 * ```ts
 * import { readSubgraphDef } from "./subgraph_def.ts";
 * import { readNeff } from "./neff_file.ts";
 * import { buildCustomOpNeff } from "@nrt/core";
 * const bytes = buildCustomOpNeff({
 *   name: "relu", target: "cayman",
 *   inputs: [{ name: "x", dtype: "float32", shape: [4] }], outputs: [{ name: "y", dtype: "float32", shape: [4] }],
 *   libraries: [{ name: "relu", wasm: new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]), totalCpus: 8, functions: [{ opcode: 1, name: "relu" }] }],
 *   calls: [{ opcode: 1, inputs: ["x"], outputs: ["y"] }],
 * });
 * const members = readNeff(bytes).members;
 * const def = readSubgraphDef(members, "sg00", "sg00/def.json");
 * console.log(def.engines.map((e) => `${e.engine}: ${e.instructions.slotCount} slots`));
 * ```
 */
export function readSubgraphDef(members: ReadonlyMap<string, Uint8Array>, graph: string, member: string): SubgraphDef {
  const raw = asObject(parseJsonMember(members, member, `definition of graph ${graph}`), member);
  const dir = memberDir(member);
  const engines: SubgraphEngine[] = [];
  for (const engine of NEFF_ENGINES) {
    const instr = raw[`${engine}_instr`];
    if (instr === undefined) continue;
    const path = dir + asString(instr, `${member} ${engine}_instr`);
    const bytes = requireMember(members, path, `${engine}_instr of ${member}`);
    const e: SubgraphEngine = { engine, instructions: instructionStream(path, bytes) };
    if (typeof raw[engine] === "string") e.config = dir + raw[engine];
    engines.push(e);
  }
  const def: SubgraphDef = {
    graph,
    member,
    engines,
    dmaQueues: readDmaQueues(raw.dma_queue, member),
    vars: readVars(raw.var, member),
    raw,
  };
  if (raw.version !== undefined) def.version = asString(raw.version, `${member} version`);
  return def;
}
