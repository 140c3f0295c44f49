/**
 * A NEFF builder for custom ops: name, inputs/outputs and custom-op calls (library `.wasm`, function, opcode,
 * total_cpus) → a NEFF in the real layout (`../neff/neff_builder.ts`), with our documented custom-op extension:
 * `sg00/Pool.json` lists `ucode_libs` with their function tables `{opcode, name}` plus `cpu_id`/`total_cpus`, the
 * images are tar members, and `sg00/Pool.bin` holds one EXTENDED_INST (0xF0) slot per call.
 *
 * Seed: spmd-teardown §1.1 (a library declares cpu_id (must be 0) and total_cpus ∈ {1, 8}), runtime-synthesis §2.3
 * (var_id i == tensor-set ordinal i), §3.3 (EXTENDED_INST 0xF0 hands the op to the Q7 cluster).
 *
 * @module
 */
import { encodeInstruction, Opcode } from "../isa.ts";
import { buildNeff } from "../neff/neff_builder.ts";
import { DTYPE_BYTES } from "../neff/neff_signature.ts";

/** An input or output of a custom-op model. */
export interface CustomOpTensorSpec {
  /** Tensor name (the tensor-set key). */
  readonly name: string;
  /** NEFF dtype name, e.g. `float32`. */
  readonly dtype: string;
  /** Shape. */
  readonly shape: readonly number[];
}

/** One Q7 library carried by the NEFF. */
export interface CustomOpLibrarySpec {
  /** Library name (a member-safe identifier). */
  readonly name: string;
  /** The library image (WebAssembly for the simulator's Q7). */
  readonly wasm: Uint8Array;
  /** Fan-out: 1 or 8 (validated at load, not here, so tests can build bad NEFFs). */
  readonly totalCpus: number;
  /** Must be 0 (validated at load). */
  readonly cpuId?: number;
  /** Exported functions and the custom opcodes bound to them. */
  readonly functions: ReadonlyArray<{ readonly opcode: number; readonly name: string }>;
}

/** One call of a custom op in the Pool stream. */
export interface CustomOpCallSpec {
  /** Opcode of EXTENDED_INST. */
  readonly opcode: number;
  /** Input tensor names, in the order the kernel reads them. */
  readonly inputs: readonly string[];
  /** Output tensor names. */
  readonly outputs: readonly string[];
  /** Scalar arguments. */
  readonly ints?: readonly number[];
}

/** Everything a custom-op NEFF holds. */
export interface CustomOpModelSpec {
  /** Model name (the header `name`). */
  readonly name: string;
  /** Target generation: `sunda`, `cayman`, `mariana`. */
  readonly target: string;
  /** Inputs. */
  readonly inputs: readonly CustomOpTensorSpec[];
  /** Outputs. */
  readonly outputs: readonly CustomOpTensorSpec[];
  /** Libraries. */
  readonly libraries: readonly CustomOpLibrarySpec[];
  /** Calls, executed in order. */
  readonly calls: readonly CustomOpCallSpec[];
  /** Header `lnc_size` (default 1). */
  readonly lncSize?: number;
}

const enc = new TextEncoder();
const json = (v: unknown): Uint8Array => enc.encode(JSON.stringify(v, null, 2));

/** Byte size of a tensor spec. */
export function tensorSpecBytes(t: CustomOpTensorSpec): number {
  const e = DTYPE_BYTES[t.dtype];
  if (e === undefined) throw new RangeError(`Unknown dtype "${t.dtype}"`);
  return t.shape.reduce((a, b) => a * b, 1) * e;
}

/**
 * Builds a custom-op NEFF.
 *
 * @example Build a vector-add model
 * ```ts
 * import { buildCustomOpNeff, readNeff } from "@nrt/core";
 * const wasm = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]);
 * const neff = buildCustomOpNeff({
 *   name: "add", target: "cayman",
 *   inputs: [{ name: "a", dtype: "float32", shape: [4] }, { name: "b", dtype: "float32", shape: [4] }],
 *   outputs: [{ name: "out", dtype: "float32", shape: [4] }],
 *   libraries: [{ name: "vector_add", wasm, totalCpus: 8, functions: [{ opcode: 1, name: "vector_add" }] }],
 *   calls: [{ opcode: 1, inputs: ["a", "b"], outputs: ["out"] }],
 * });
 * console.log(readNeff(neff).inputs.map((t) => t.name)); // ["a", "b"]
 * ```
 */
export function buildCustomOpNeff(spec: CustomOpModelSpec): Uint8Array {
  const members = new Map<string, Uint8Array>();
  const all = [...spec.inputs, ...spec.outputs];
  const vars: Record<string, unknown> = {};
  all.forEach((t, i) => {
    vars[t.name] = { type: i < spec.inputs.length ? "input" : "output", var_id: i, size: tensorSpecBytes(t), ops: [] };
  });
  const tensorMap: Record<string, unknown> = {};
  all.forEach((t, i) => {
    tensorMap[t.name] = {
      dtype: t.dtype,
      is_const: false,
      kind: i < spec.inputs.length ? "input" : "output",
      tf_shape: [...t.shape],
    };
  });
  const nIn = spec.inputs.length, nOut = spec.outputs.length;
  const nodes = [
    ...spec.inputs.map((t) => ({ op: "null", name: t.name, inputs: [], output_names: [t.name], is_param: "0" })),
    {
      op: "tvm_op",
      name: "sg_custom_op",
      attrs: { func_name: "__kelf", flatten_data: "0", num_inputs: String(nIn), kelf: "kelf-0.json", num_outputs: String(nOut) },
      inputs: spec.inputs.map((_, i) => [i, 0, 0]),
      output_names: spec.outputs.map((t) => t.name),
    },
  ];
  const neffJson = {
    nodes,
    arg_nodes: spec.inputs.map((_, i) => i),
    heads: spec.outputs.map((_, i) => [nIn, i, 0]),
    node_row_ptr: [...spec.inputs.map((_, i) => i), nIn, nIn + nOut],
    attrs: {
      shape: ["list_shape", all.map((t) => [...t.shape])],
      storage_id: ["list_int", all.map((_, i) => i)],
      dltype: ["list_str", all.map((t) => t.dtype)],
    },
  };
  members.set("neff.json", json(neffJson));
  members.set("info.json", json({ name: spec.name, num_tpb: 1, custom_op: { version: 1 } }));
  members.set("kelf-0.json", json({ graphs: [{ name: "sg00", definition: "sg00/def.json" }], version: "0.5", target: spec.target }));
  members.set("sg00/def.json", json({
    name: "definition",
    version: "0.6",
    pool: "Pool.json",
    pool_instr: "Pool.bin",
    dma_queue: { qPoolCustomOp: { owner: "pool", type: "custom_op", num_queues: 8 } },
    var: vars,
  }));
  members.set("sg00/tensor_map.json", json(tensorMap));
  members.set("sg00/Pool.json", json({
    dma: [],
    instr: "Pool.bin",
    name: "Pool.json",
    ucode_libs: spec.libraries.map((l) => ({
      name: l.name,
      file: `ucode/${l.name}.wasm`,
      cpu_id: l.cpuId ?? 0,
      total_cpus: l.totalCpus,
      functions: l.functions.map((f) => ({ opcode: f.opcode, name: f.name })),
    })),
    calls: spec.calls.map((c) => ({ opcode: c.opcode, inputs: [...c.inputs], outputs: [...c.outputs], ints: [...(c.ints ?? [])] })),
  }));
  for (const l of spec.libraries) members.set(`sg00/ucode/${l.name}.wasm`, l.wasm);
  const bin = new Uint8Array(64 * spec.calls.length);
  spec.calls.forEach((c, i) => bin.set(encodeInstruction({ op: Opcode.EXTENDED_INST, opcode: c.opcode, call: i }), 64 * i));
  members.set("sg00/Pool.bin", bin);
  return buildNeff({ name: spec.name, members, lncSize: spec.lncSize ?? 1 });
}
