/**
 * The metaneff host I/O binding: the JSON form of the metaneff protobuf that rides beside a NEFF and binds
 * MetaTensor i ↔ NEFF var_id i ↔ tensor-set ordinal i.
 *
 * Seed: runtime-synthesis §2.3 — "metaneff MetaTensor index i == NEFF var_id i == nrt tensor-set ordinal i ==
 * device mem_ref[i]. MetaTensor.name ("input{i}"/"output{i}") is the runtime lookup key; MetaTensor.type
 * {USER_INPUT, INPUT_STATE, INPUT_WEIGHT} partitions which device slots the host fills from user args vs from
 * checkpoint state/weights; output_aliases_to is the in-place/donated-buffer map."
 *
 * @module
 */
import { NrtError } from "../error.ts";
import type { NeffTensor } from "../neff/neff_signature.ts";
import { NrtStatus } from "../status.ts";

/** `MetaTensor.type`. */
export type MetaTensorType = "USER_INPUT" | "INPUT_STATE" | "INPUT_WEIGHT";

/** One `MetaTensor`. */
export interface MetaTensor {
  /** The runtime lookup key (`input{i}` / `output{i}` by convention). */
  readonly name: string;
  /** Shape. */
  readonly shape: readonly number[];
  /** Element type, spelled as in `neff.json` (`float32`, …). */
  readonly data_type: string;
  /** Inputs only: where the host gets the data (default `USER_INPUT`). */
  readonly type?: MetaTensorType;
  /** `INPUT_STATE` / `INPUT_WEIGHT`: the key of the data in the checkpoint map given at load. */
  readonly checkpoint_key?: string;
}

/** The metaneff, JSON form. */
export interface MetaNeff {
  /** Inputs, in var_id order. */
  readonly input_tensors: readonly MetaTensor[];
  /** Outputs, in var_id order after the inputs. */
  readonly output_tensors: readonly MetaTensor[];
  /** Output index → input index whose device buffer the output reuses (in place). */
  readonly output_aliases_to?: Readonly<Record<string, number>>;
}

/** A metaneff resolved against a NEFF's I/O: per I/O ordinal, its key and source. */
export interface IoBinding {
  /** Per ordinal (inputs then outputs): the tensor-set key. */
  readonly keys: readonly string[];
  /** Per input ordinal: `USER_INPUT`, `INPUT_STATE` or `INPUT_WEIGHT`. */
  readonly sources: readonly MetaTensorType[];
  /** Per input ordinal: checkpoint key for state/weights. */
  readonly checkpointKeys: ReadonlyArray<string | undefined>;
  /** Output ordinal (relative to the outputs) → input ordinal. */
  readonly aliases: ReadonlyMap<number, number>;
}

function bad(model: string, why: string): NrtError {
  return new NrtError(NrtStatus.NRT_INVALID, `Cannot bind metaneff to model "${model}": ${why}`);
}

/** The identity binding (no metaneff): keys are the NEFF's tensor names, every input comes from the caller. */
export function defaultBinding(io: readonly NeffTensor[], inputCount: number): IoBinding {
  return {
    keys: io.map((t) => t.name),
    sources: io.slice(0, inputCount).map(() => "USER_INPUT"),
    checkpointKeys: io.slice(0, inputCount).map(() => undefined),
    aliases: new Map(),
  };
}

/**
 * Validates a metaneff against the NEFF signature (counts, shapes, dtypes, alias targets, checkpoint keys) and
 * returns the binding. `checkpoint` holds the data of `INPUT_STATE` / `INPUT_WEIGHT` tensors by checkpoint key.
 */
export function bindMetaneff(
  model: string,
  io: readonly NeffTensor[],
  inputCount: number,
  meta: MetaNeff,
  checkpoint: ReadonlyMap<string, Uint8Array>,
): IoBinding {
  if (!Array.isArray(meta.input_tensors) || !Array.isArray(meta.output_tensors)) {
    throw bad(model, "input_tensors and output_tensors must be arrays");
  }
  const outCount = io.length - inputCount;
  if (meta.input_tensors.length !== inputCount) {
    throw bad(model, `it lists ${meta.input_tensors.length} inputs, the NEFF has ${inputCount}`);
  }
  if (meta.output_tensors.length !== outCount) {
    throw bad(model, `it lists ${meta.output_tensors.length} outputs, the NEFF has ${outCount}`);
  }
  const all = [...meta.input_tensors, ...meta.output_tensors];
  const keys = new Set<string>();
  all.forEach((m, i) => {
    const t = io[i];
    if (typeof m.name !== "string" || m.name === "") throw bad(model, `MetaTensor ${i} has no name`);
    if (keys.has(m.name)) throw bad(model, `MetaTensor name "${m.name}" is used twice`);
    keys.add(m.name);
    if (m.data_type !== t.dtype) {
      throw bad(model, `MetaTensor "${m.name}" is ${m.data_type}, var_id ${i} ("${t.name}") is ${t.dtype}`);
    }
    if (
      !Array.isArray(m.shape) || m.shape.length !== t.shape.length ||
      m.shape.some((d: number, k: number) => d !== t.shape[k])
    ) {
      throw bad(model, `MetaTensor "${m.name}" has shape [${m.shape}], var_id ${i} ("${t.name}") has [${t.shape}]`);
    }
  });
  const sources = meta.input_tensors.map((m) => {
    const type = m.type ?? "USER_INPUT";
    if (type !== "USER_INPUT" && type !== "INPUT_STATE" && type !== "INPUT_WEIGHT") {
      throw bad(model, `MetaTensor "${m.name}" has unknown type ${String(type)}`);
    }
    return type;
  });
  const checkpointKeys = meta.input_tensors.map((m, i) => {
    if (sources[i] === "USER_INPUT") return undefined;
    const key = m.checkpoint_key ?? m.name;
    const data = checkpoint.get(key);
    if (data === undefined) {
      throw bad(model, `${sources[i]} "${m.name}" needs checkpoint key "${key}", which the checkpoint does not hold`);
    }
    if (data.byteLength !== io[i].size) {
      throw bad(model, `checkpoint "${key}" is ${data.byteLength} bytes, "${m.name}" needs ${io[i].size}`);
    }
    return key;
  });
  const aliases = new Map<number, number>();
  for (const [k, v] of Object.entries(meta.output_aliases_to ?? {})) {
    const out = Number(k);
    if (!Number.isInteger(out) || out < 0 || out >= outCount) {
      throw bad(model, `output_aliases_to names output ${k}, which does not exist`);
    }
    if (!Number.isInteger(v) || v < 0 || v >= inputCount) {
      throw bad(model, `output_aliases_to maps output ${k} to input ${v}, which does not exist`);
    }
    if (io[inputCount + out].size !== io[v].size) {
      throw bad(model, `output ${k} (${io[inputCount + out].size} B) cannot alias input ${v} (${io[v].size} B)`);
    }
    aliases.set(out, v);
  }
  return { keys: all.map((m) => m.name), sources, checkpointKeys, aliases };
}
