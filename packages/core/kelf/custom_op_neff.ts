/**
 * A NEFF builder for custom ops: name, inputs/outputs and custom-op calls (library `.wasm`, function, opcode,
 * total_cpus) → a NEFF in the real layout (`../neff/neff_builder.ts`), with our documented custom-op extension:
 * `sg00/Pool.json` lists `ucode_libs` with their function tables `{opcode, name}` plus `cpu_id`/`total_cpus`, the
 * images are tar members, and `sg00/Pool.bin` holds one EXTENDED_INST (0xF0) slot per call. A multi-op model (a
 * compiled ONNX graph) may also carry weights, intermediate buffers and views (docs/onnx.md, "What the NEFF
 * holds"): the weights are inputs the NEFF binds itself as `INPUT_WEIGHT` through its own `metaneff.json` and
 * `checkpoint/` members, each buffer is a `virtual` var the model allocates at load, and a view (Pool.json
 * `tensors`) names a byte range of an input, output, weight or buffer as a tensor a call can read or write.
 *
 * Seed: spmd-teardown §1.1 (a library declares cpu_id (must be 0) and total_cpus ∈ {1, 8}), runtime-synthesis §2.3
 * (var_id i == tensor-set ordinal i), §3.3 (EXTENDED_INST 0xF0 hands the op to the Q7 cluster).
 *
 * @module
 */
import { EXT_ISA_LIBRARY_NAME, EXT_ISA_OPCODE_FIRST, extIsaLibrary } from "./ext_isa.ts";
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
  /** Scalar arguments (i64; a bigint outside the safe-integer range is written as a decimal string). */
  readonly ints?: ReadonlyArray<number | bigint>;
}

/** A weight the NEFF carries: an input bound at load as `INPUT_WEIGHT` from the NEFF's own checkpoint. */
export interface CustomOpWeightSpec extends CustomOpTensorSpec {
  /** The data, little-endian, exactly the tensor's byte size. */
  readonly data: Uint8Array;
}

/** An intermediate device buffer (a `virtual` var of `def.json`), allocated when the model loads. */
export interface CustomOpBufferSpec {
  /** Var name (distinct from every tensor and view name). */
  readonly name: string;
  /** Size in bytes. */
  readonly size: number;
}

/** A tensor over a byte range of an input, output, weight or buffer; calls may name it like a tensor. */
export interface CustomOpViewSpec {
  /** View name. */
  readonly name: string;
  /** The input, output, weight or buffer it lies in. */
  readonly var: string;
  /** Byte offset in that var. */
  readonly offset: number;
  /** NEFF dtype name. */
  readonly dtype: string;
  /** Shape (rank at most 4: the kernel ABI's descriptor). */
  readonly shape: readonly number[];
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
  /**
   * The custom libraries. The builder bundles the base ext-ISA library ({@linkcode extIsaLibrary}) before them as
   * library 0, so a NEFF with custom libraries carries `num_libs > 1` (runtime-synthesis §3.1); with none, its calls
   * may use the base library's opcodes only.
   */
  readonly libraries: readonly CustomOpLibrarySpec[];
  /** Calls, executed in order. */
  readonly calls: readonly CustomOpCallSpec[];
  /** Header `lnc_size` (default 1). */
  readonly lncSize?: number;
  /** Weights, bound at load as `INPUT_WEIGHT` inputs after {@linkcode CustomOpModelSpec.inputs}. */
  readonly weights?: readonly CustomOpWeightSpec[];
  /** Intermediate buffers. */
  readonly buffers?: readonly CustomOpBufferSpec[];
  /** Views the calls may name besides the inputs, outputs and weights. */
  readonly views?: readonly CustomOpViewSpec[];
}

/** The folder of the checkpoint members a NEFF's own metaneff names by `checkpoint_key`. */
export const CHECKPOINT_DIR = "checkpoint/";

const enc = new TextEncoder();
const json = (v: unknown): Uint8Array => enc.encode(JSON.stringify(v, null, 2));

/** A scalar argument as JSON: a number when it is exact as one, else its decimal string. */
function jsonInt(x: number | bigint): number | string {
  if (typeof x === "number") return x;
  return x >= BigInt(Number.MIN_SAFE_INTEGER) && x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : x.toString();
}

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
  for (const l of spec.libraries) {
    if (l.name === EXT_ISA_LIBRARY_NAME) {
      throw new RangeError(
        `Cannot build NEFF "${spec.name}": the library name "${EXT_ISA_LIBRARY_NAME}" is the base ext-ISA library's`,
      );
    }
    const reserved = l.functions.find((f) => f.opcode >= EXT_ISA_OPCODE_FIRST);
    if (reserved !== undefined) {
      throw new RangeError(
        `Cannot build NEFF "${spec.name}": library "${l.name}" binds opcode 0x${reserved.opcode.toString(16)}; ` +
          `0xff00..0xffff belong to the base ext-ISA library`,
      );
    }
  }
  const libraries: readonly CustomOpLibrarySpec[] = [extIsaLibrary(), ...spec.libraries];
  const weights = spec.weights ?? [];
  const inputs = [...spec.inputs, ...weights];
  const all = [...inputs, ...spec.outputs];
  const names = new Set<string>();
  for (const n of [...all, ...(spec.buffers ?? []), ...(spec.views ?? [])].map((t) => t.name)) {
    if (names.has(n)) throw new RangeError(`Cannot build NEFF "${spec.name}": the name "${n}" is used twice`);
    names.add(n);
  }
  for (const w of weights) {
    if (w.data.byteLength !== tensorSpecBytes(w)) {
      throw new RangeError(
        `Cannot build NEFF "${spec.name}": weight "${w.name}" has ${w.data.byteLength} bytes, its shape needs ${
          tensorSpecBytes(w)
        }`,
      );
    }
  }
  // Keyed by tensor name, so without a prototype: `vars["__proto__"] = …` on a plain object sets its prototype
  // instead of adding a var, and the NEFF is then refused at load.
  const vars: Record<string, unknown> = Object.create(null);
  all.forEach((t, i) => {
    vars[t.name] = { type: i < inputs.length ? "input" : "output", var_id: i, size: tensorSpecBytes(t), ops: [] };
  });
  (spec.buffers ?? []).forEach((b, i) => {
    vars[b.name] = { type: "virtual", var_id: all.length + i, size: b.size, ops: [] };
  });
  const tensorMap: Record<string, unknown> = Object.create(null);
  all.forEach((t, i) => {
    tensorMap[t.name] = {
      dtype: t.dtype,
      is_const: i >= spec.inputs.length && i < inputs.length,
      kind: i < inputs.length ? "input" : "output",
      tf_shape: [...t.shape],
    };
  });
  const nIn = inputs.length, nOut = spec.outputs.length;
  const nodes = [
    ...inputs.map((t, i) => ({
      op: "null",
      name: t.name,
      inputs: [],
      output_names: [t.name],
      is_param: i < spec.inputs.length ? "0" : "1",
    })),
    {
      op: "tvm_op",
      name: "sg_custom_op",
      attrs: {
        func_name: "__kelf",
        flatten_data: "0",
        num_inputs: String(nIn),
        kelf: "kelf-0.json",
        num_outputs: String(nOut),
      },
      inputs: inputs.map((_, i) => [i, 0, 0]),
      output_names: spec.outputs.map((t) => t.name),
    },
  ];
  const neffJson = {
    nodes,
    arg_nodes: inputs.map((_, i) => i),
    heads: spec.outputs.map((_, i) => [nIn, i, 0]),
    node_row_ptr: [...inputs.map((_, i) => i), nIn, nIn + nOut],
    attrs: {
      shape: ["list_shape", all.map((t) => [...t.shape])],
      storage_id: ["list_int", all.map((_, i) => i)],
      dltype: ["list_str", all.map((t) => t.dtype)],
    },
  };
  members.set("neff.json", json(neffJson));
  members.set("info.json", json({ name: spec.name, num_tpb: 1, custom_op: { version: 1 } }));
  members.set(
    "kelf-0.json",
    json({ graphs: [{ name: "sg00", definition: "sg00/def.json" }], version: "0.5", target: spec.target }),
  );
  members.set(
    "sg00/def.json",
    json({
      name: "definition",
      version: "0.6",
      pool: "Pool.json",
      pool_instr: "Pool.bin",
      dma_queue: { qPoolCustomOp: { owner: "pool", type: "custom_op", num_queues: 8 } },
      var: vars,
    }),
  );
  members.set("sg00/tensor_map.json", json(tensorMap));
  members.set(
    "sg00/Pool.json",
    json({
      dma: [],
      instr: "Pool.bin",
      name: "Pool.json",
      ucode_libs: libraries.map((l) => ({
        name: l.name,
        file: `ucode/${l.name}.wasm`,
        cpu_id: l.cpuId ?? 0,
        total_cpus: l.totalCpus,
        functions: l.functions.map((f) => ({ opcode: f.opcode, name: f.name })),
      })),
      calls: spec.calls.map((c) => ({
        opcode: c.opcode,
        inputs: [...c.inputs],
        outputs: [...c.outputs],
        ints: (c.ints ?? []).map(jsonInt),
      })),
      ...(spec.views === undefined || spec.views.length === 0 ? {} : {
        tensors: Object.fromEntries(
          spec.views.map((v) => [v.name, { var: v.var, offset: v.offset, dtype: v.dtype, shape: [...v.shape] }]),
        ),
      }),
    }),
  );
  if (weights.length > 0) {
    // The metaneff binding of runtime-synthesis §2.3, carried inside the NEFF (ours: the seed's rides beside it): the
    // weights are INPUT_WEIGHT inputs whose checkpoint data are the `checkpoint/` members, so the one file loads.
    const meta = (t: CustomOpTensorSpec) => ({ name: t.name, shape: [...t.shape], data_type: t.dtype });
    members.set(
      "metaneff.json",
      json({
        input_tensors: [
          ...spec.inputs.map((t) => ({ ...meta(t), type: "USER_INPUT" })),
          ...weights.map((w, i) => ({ ...meta(w), type: "INPUT_WEIGHT", checkpoint_key: `w${i}` })),
        ],
        output_tensors: spec.outputs.map(meta),
      }),
    );
    weights.forEach((w, i) => members.set(`${CHECKPOINT_DIR}w${i}`, w.data));
  }
  for (const l of libraries) members.set(`sg00/ucode/${l.name}.wasm`, l.wasm);
  const bin = new Uint8Array(64 * spec.calls.length);
  spec.calls.forEach((c, i) =>
    bin.set(encodeInstruction({ op: Opcode.EXTENDED_INST, opcode: c.opcode, call: i }), 64 * i)
  );
  members.set("sg00/Pool.bin", bin);
  return buildNeff({ name: spec.name, members, lncSize: spec.lncSize ?? 1 });
}
