/**
 * Ours: an ONNX `ModelProto` read on the wire before it is decoded. A decoded message costs far more memory than its
 * bytes: protobufjs (through `onnx-proto`) makes every message an object with a fresh array for each of its repeated
 * fields, every string a string, every `bytes` field a view, every 64-bit integer a `Long`. An empty initializer is
 * 2 bytes on the wire and an object with 8 arrays decoded (about 600 bytes on Bun): 20 MiB of them passed 5 GB of
 * memory before any cap of `parseModel` was looked at. So the parser first walks the message's wire form with
 * protobufjs's `Reader`, which allocates nothing per field, and decodes only a message whose framing is sound and
 * whose counts fit the {@linkcode OnnxLimits}:
 *
 * - **framing**: every length-delimited field (a sub-message, a string, a packed run) within its message, every
 *   packed run a whole number of values, each known field in a wire type its proto type allows, no group and no
 *   field number 0 (the decoder would otherwise read a sub-message past its end into its parent, or read a value in
 *   the wrong wire type as something else);
 * - **counts**: the nodes everywhere in the file (graphs, subgraphs, functions, training graphs) at most
 *   `maxNodes`; graphs nested at most `maxGraphDepth` deep (a `GraphProto` in an `AttributeProto`'s `g` or
 *   `graphs` is one level deeper than the graph of its node; a function's body counts as a graph); types
 *   (`TypeProto` in a sequence, map or optional) nested at most {@linkcode MAX_TYPE_DEPTH} deep; and at most
 *   `maxEntries` decoded entries: 1 for each object the decoder makes (a message and each array its constructor
 *   makes, a string, a 64-bit integer), 5 for a `bytes` value (a view, or for an empty one a new array with a buffer
 *   of its own: about 400 bytes on Deno). At the default cap the costliest of these files measured about 0.7 GB
 *   decoded, on Bun and on Deno.
 *
 * - **numbers**: at most `maxNumbers` values in repeated fields of numbers that are not 64-bit (`float_data`,
 *   `int32_data`, `double_data`, attribute `floats`; `int64_data` and `uint64_data` are counted as entries), packed
 *   or not. Each becomes a slot of a growing array: 20 MiB of one-byte `int32_data` values decoded into 305–353 MB
 *   (15–17 bytes a value), 20 MiB of `float_data` into 112–146 MB, on Bun and Deno. A single number (a field that
 *   is not repeated, an enum) is a property of its message and costs nothing more.
 *
 * Fields the decoder does not know (newer ONNX versions) are skipped by it without allocating, so they are only
 * checked for framing.
 *
 * The field numbers and types are onnx.proto's as `onnx-proto` 8.0.1 compiles them (its `dist/onnx.js` decoders,
 * ONNX 1.10.2); the wire format is protobuf's encoding.md (tags, varints, wire types 0, 1, 2 and 5, packed
 * repeated scalars). The reader is the decoder's own kind (`Reader.uint32` reads a length or a 32-bit value exactly
 * as the decoder will), so what is checked here is what the decoder will read.
 *
 * @module
 */
import protobuf from "protobufjs/minimal.js";
import { OnnxCompileError } from "./error.ts";
import type { OnnxLimits } from "./parse.ts";

/** Deepest nesting of `TypeProto`s (a sequence of maps of …). The compiler reads tensor types only. Ours. */
export const MAX_TYPE_DEPTH = 16;

/** What {@linkcode scanModel} counted in a file it accepted. */
export interface WireCounts {
  /** Nodes, in every graph and function of the file. */
  readonly nodes: number;
  /** Decoded entries: messages and their arrays, strings, 64-bit integers (1 each), `bytes` values (5 each). */
  readonly entries: number;
  /** Deepest graph nesting (0: the main graph has no subgraph). */
  readonly graphDepth: number;
  /** Values in repeated fields of 32-bit integers, floats and doubles. */
  readonly numbers: number;
}

// How a field is read and what it costs decoded.
/** A string: 1 entry. */
const STRING = 0;
/** A `bytes` value: {@linkcode BYTES_ENTRIES} entries. */
const BYTES = 1;
/** A 64-bit integer (a `Long`): 1 entry. */
const INT64 = 2;
/** A 32-bit integer or enum: no entry. */
const INT32 = 3;
/** A float: no entry. */
const FLOAT = 4;
/** A sub-message: 1 entry plus its arrays, and what it holds. */
const MESSAGE = 5;
/** A repeated 64-bit integer, packed or not: 1 entry each. */
const REPEATED_INT64 = 6;
/** A repeated 32-bit integer, packed or not: no entry. */
const REPEATED_INT32 = 7;
/** A repeated float, packed or not: no entry. */
const REPEATED_FLOAT = 8;
/** A repeated double, packed or not: no entry. */
const REPEATED_DOUBLE = 9;

/** Entries a `bytes` value counts for: an empty one is a new array with a buffer of its own (~400 bytes on Deno). */
const BYTES_ENTRIES = 5;

// Wire types (encoding.md).
const VARINT = 0, I64 = 1, LEN = 2, I32 = 5;

/** One field of a message: its name, how it is read, and for a sub-message its type's name. */
type FieldSpec = readonly [name: string, kind: number, type?: string];

/** A message type as the decoder sees it. */
interface MessageSpec {
  readonly name: string;
  /** Arrays the generated constructor makes (one per repeated field). */
  readonly arrays: number;
  /** Fields by number. */
  readonly fields: Readonly<Record<number, FieldSpec>>;
}

/** onnx.proto's messages (onnx-proto 8.0.1, ONNX 1.10.2), by name. */
const SPECS: Readonly<Record<string, MessageSpec>> = {
  ModelProto: {
    name: "ModelProto",
    arrays: 4,
    fields: {
      1: ["ir_version", INT64],
      2: ["producer_name", STRING],
      3: ["producer_version", STRING],
      4: ["domain", STRING],
      5: ["model_version", INT64],
      6: ["doc_string", STRING],
      7: ["graph", MESSAGE, "GraphProto"],
      8: ["opset_import", MESSAGE, "OperatorSetIdProto"],
      14: ["metadata_props", MESSAGE, "StringStringEntryProto"],
      20: ["training_info", MESSAGE, "TrainingInfoProto"],
      25: ["functions", MESSAGE, "FunctionProto"],
    },
  },
  OperatorSetIdProto: {
    name: "OperatorSetIdProto",
    arrays: 0,
    fields: { 1: ["domain", STRING], 2: ["version", INT64] },
  },
  StringStringEntryProto: {
    name: "StringStringEntryProto",
    arrays: 0,
    fields: { 1: ["key", STRING], 2: ["value", STRING] },
  },
  TrainingInfoProto: {
    name: "TrainingInfoProto",
    arrays: 2,
    fields: {
      1: ["initialization", MESSAGE, "GraphProto"],
      2: ["algorithm", MESSAGE, "GraphProto"],
      3: ["initialization_binding", MESSAGE, "StringStringEntryProto"],
      4: ["update_binding", MESSAGE, "StringStringEntryProto"],
    },
  },
  FunctionProto: {
    name: "FunctionProto",
    arrays: 5,
    fields: {
      1: ["name", STRING],
      4: ["input", STRING],
      5: ["output", STRING],
      6: ["attribute", STRING],
      7: ["node", MESSAGE, "NodeProto"],
      8: ["doc_string", STRING],
      9: ["opset_import", MESSAGE, "OperatorSetIdProto"],
      10: ["domain", STRING],
    },
  },
  GraphProto: {
    name: "GraphProto",
    arrays: 7,
    fields: {
      1: ["node", MESSAGE, "NodeProto"],
      2: ["name", STRING],
      5: ["initializer", MESSAGE, "TensorProto"],
      10: ["doc_string", STRING],
      11: ["input", MESSAGE, "ValueInfoProto"],
      12: ["output", MESSAGE, "ValueInfoProto"],
      13: ["value_info", MESSAGE, "ValueInfoProto"],
      14: ["quantization_annotation", MESSAGE, "TensorAnnotation"],
      15: ["sparse_initializer", MESSAGE, "SparseTensorProto"],
    },
  },
  TensorAnnotation: {
    name: "TensorAnnotation",
    arrays: 1,
    fields: { 1: ["tensor_name", STRING], 2: ["quant_parameter_tensor_names", MESSAGE, "StringStringEntryProto"] },
  },
  NodeProto: {
    name: "NodeProto",
    arrays: 3,
    fields: {
      1: ["input", STRING],
      2: ["output", STRING],
      3: ["name", STRING],
      4: ["op_type", STRING],
      5: ["attribute", MESSAGE, "AttributeProto"],
      6: ["doc_string", STRING],
      7: ["domain", STRING],
    },
  },
  AttributeProto: {
    name: "AttributeProto",
    arrays: 7,
    fields: {
      1: ["name", STRING],
      2: ["f", FLOAT],
      3: ["i", INT64],
      4: ["s", BYTES],
      5: ["t", MESSAGE, "TensorProto"],
      6: ["g", MESSAGE, "GraphProto"],
      7: ["floats", REPEATED_FLOAT],
      8: ["ints", REPEATED_INT64],
      9: ["strings", BYTES],
      10: ["tensors", MESSAGE, "TensorProto"],
      11: ["graphs", MESSAGE, "GraphProto"],
      13: ["doc_string", STRING],
      14: ["tp", MESSAGE, "TypeProto"],
      15: ["type_protos", MESSAGE, "TypeProto"],
      20: ["type", INT32],
      21: ["ref_attr_name", STRING],
      22: ["sparse_tensor", MESSAGE, "SparseTensorProto"],
      23: ["sparse_tensors", MESSAGE, "SparseTensorProto"],
    },
  },
  ValueInfoProto: {
    name: "ValueInfoProto",
    arrays: 0,
    fields: { 1: ["name", STRING], 2: ["type", MESSAGE, "TypeProto"], 3: ["doc_string", STRING] },
  },
  TensorProto: {
    name: "TensorProto",
    arrays: 8,
    fields: {
      1: ["dims", REPEATED_INT64],
      2: ["data_type", INT32],
      3: ["segment", MESSAGE, "TensorProto.Segment"],
      4: ["float_data", REPEATED_FLOAT],
      5: ["int32_data", REPEATED_INT32],
      6: ["string_data", BYTES],
      7: ["int64_data", REPEATED_INT64],
      8: ["name", STRING],
      9: ["raw_data", BYTES],
      10: ["double_data", REPEATED_DOUBLE],
      11: ["uint64_data", REPEATED_INT64],
      12: ["doc_string", STRING],
      13: ["external_data", MESSAGE, "StringStringEntryProto"],
      14: ["data_location", INT32],
    },
  },
  "TensorProto.Segment": {
    name: "TensorProto.Segment",
    arrays: 0,
    fields: { 1: ["begin", INT64], 2: ["end", INT64] },
  },
  SparseTensorProto: {
    name: "SparseTensorProto",
    arrays: 1,
    fields: {
      1: ["values", MESSAGE, "TensorProto"],
      2: ["indices", MESSAGE, "TensorProto"],
      3: ["dims", REPEATED_INT64],
    },
  },
  TensorShapeProto: {
    name: "TensorShapeProto",
    arrays: 1,
    fields: { 1: ["dim", MESSAGE, "TensorShapeProto.Dimension"] },
  },
  "TensorShapeProto.Dimension": {
    name: "TensorShapeProto.Dimension",
    arrays: 0,
    fields: { 1: ["dim_value", INT64], 2: ["dim_param", STRING], 3: ["denotation", STRING] },
  },
  TypeProto: {
    name: "TypeProto",
    arrays: 0,
    fields: {
      1: ["tensor_type", MESSAGE, "TypeProto.Tensor"],
      4: ["sequence_type", MESSAGE, "TypeProto.Sequence"],
      5: ["map_type", MESSAGE, "TypeProto.Map"],
      6: ["denotation", STRING],
      8: ["sparse_tensor_type", MESSAGE, "TypeProto.SparseTensor"],
      9: ["optional_type", MESSAGE, "TypeProto.Optional"],
    },
  },
  "TypeProto.Tensor": {
    name: "TypeProto.Tensor",
    arrays: 0,
    fields: { 1: ["elem_type", INT32], 2: ["shape", MESSAGE, "TensorShapeProto"] },
  },
  "TypeProto.Sequence": { name: "TypeProto.Sequence", arrays: 0, fields: { 1: ["elem_type", MESSAGE, "TypeProto"] } },
  "TypeProto.Map": {
    name: "TypeProto.Map",
    arrays: 0,
    fields: { 1: ["key_type", INT32], 2: ["value_type", MESSAGE, "TypeProto"] },
  },
  "TypeProto.Optional": { name: "TypeProto.Optional", arrays: 0, fields: { 1: ["elem_type", MESSAGE, "TypeProto"] } },
  "TypeProto.SparseTensor": {
    name: "TypeProto.SparseTensor",
    arrays: 0,
    fields: { 1: ["elem_type", INT32], 2: ["shape", MESSAGE, "TensorShapeProto"] },
  },
};

/** A field as the walk uses it: its message's spec resolved. */
interface Field {
  readonly what: string;
  readonly kind: number;
  readonly message: Message | undefined;
}

/** A message type with its fields indexed by number. */
interface Message {
  readonly name: string;
  readonly cost: number;
  readonly fields: (Field | undefined)[];
  /** Entering it is one level of graph nesting (a graph, or a function's body). */
  readonly graph: boolean;
  /** Entering it is one level of type nesting. */
  readonly type: boolean;
}

const MESSAGES: ReadonlyMap<string, Message> = (() => {
  const out = new Map<string, Message>();
  for (const spec of Object.values(SPECS)) {
    out.set(spec.name, {
      name: spec.name,
      cost: 1 + spec.arrays,
      fields: [],
      graph: spec.name === "GraphProto" || spec.name === "FunctionProto",
      type: spec.name === "TypeProto",
    });
  }
  for (const spec of Object.values(SPECS)) {
    const m = out.get(spec.name)!;
    for (const [num, [name, kind, type]] of Object.entries(spec.fields)) {
      m.fields[Number(num)] = {
        what: `${spec.name}.${name}`,
        kind,
        message: type === undefined ? undefined : out.get(type),
      };
    }
  }
  return out;
})();

const MODEL = MESSAGES.get("ModelProto")!, NODE = MESSAGES.get("NodeProto")!;

/** The wire type each kind is read in (repeated scalars: also packed, as LEN). */
const WIRE_OF: readonly number[] = [LEN, LEN, VARINT, VARINT, I32, LEN, VARINT, VARINT, I32, I64];

function malformed(detail: string): OnnxCompileError {
  return new OnnxCompileError({}, `the bytes are not an ONNX protobuf (${detail})`);
}

/** The caps {@linkcode scanModel} checks. */
export type ScanLimits = Pick<OnnxLimits, "maxNodes" | "maxGraphDepth" | "maxEntries" | "maxNumbers">;

class Scanner {
  readonly r: protobuf.Reader;
  readonly limits: ScanLimits;
  nodes = 0;
  entries = 0;
  numbers = 0;
  graphDepth = 0;

  constructor(bytes: Uint8Array, limits: ScanLimits) {
    this.r = protobuf.Reader.create(bytes);
    this.limits = limits;
  }

  count(n: number): void {
    this.entries += n;
    if (this.entries > this.limits.maxEntries) {
      throw new OnnxCompileError(
        {},
        `the file decodes into more than the limit of ${this.limits.maxEntries} entries (maxEntries: messages, ` +
          `strings, bytes and 64-bit integers)`,
      );
    }
  }

  numbersRead(n: number): void {
    this.numbers += n;
    if (this.numbers > this.limits.maxNumbers) {
      throw new OnnxCompileError(
        {},
        `the file decodes into more than the limit of ${this.limits.maxNumbers} numbers (maxNumbers: values of ` +
          `int32_data, float_data, double_data and floats; store large tensors in raw_data)`,
      );
    }
  }

  /** A length-delimited field's end, checked to lie within its message's. */
  extent(end: number, what: string): number {
    const n = this.r.uint32();
    if (n > end - this.r.pos) throw malformed(`${what} runs past the end of its message`);
    return this.r.pos + n;
  }

  /** Walks one message of type `m` up to `end`; `graphDepth` and `typeDepth` are those of the enclosing message. */
  walk(m: Message, end: number, graphDepth: number, typeDepth: number): void {
    this.count(m.cost);
    if (m.graph) {
      graphDepth++;
      if (graphDepth > this.limits.maxGraphDepth) {
        throw new OnnxCompileError({}, `subgraphs nest deeper than the limit of ${this.limits.maxGraphDepth}`);
      }
      if (graphDepth > this.graphDepth) this.graphDepth = graphDepth;
    }
    if (m.type && ++typeDepth > MAX_TYPE_DEPTH) {
      throw new OnnxCompileError({}, `types nest deeper than the limit of ${MAX_TYPE_DEPTH}`);
    }
    if (m === NODE && ++this.nodes > this.limits.maxNodes) {
      throw new OnnxCompileError({}, `the model has more than ${this.limits.maxNodes} nodes`);
    }
    const r = this.r;
    while (r.pos < end) {
      const tag = r.uint32();
      const num = tag >>> 3, wire = tag & 7;
      if (num === 0) throw malformed(`${m.name} has a field numbered 0`);
      const f = m.fields[num];
      if (f === undefined) this.skip(wire, end, `field ${num} of ${m.name}`);
      else if (wire === LEN && f.kind >= REPEATED_INT64) this.packed(f, end);
      else {
        if (wire !== WIRE_OF[f.kind]) throw malformed(`${f.what} has wire type ${wire}`);
        switch (f.kind) {
          case STRING:
            r.pos = this.extent(end, f.what);
            this.count(1);
            break;
          case BYTES:
            r.pos = this.extent(end, f.what);
            this.count(BYTES_ENTRIES);
            break;
          case MESSAGE: {
            const e = this.extent(end, f.what);
            this.walk(f.message!, e, graphDepth, typeDepth);
            break;
          }
          case INT64:
          case REPEATED_INT64:
            r.skip();
            this.count(1);
            break;
          case INT32:
            r.uint32(); // as the decoder reads it (a 6- to 9-byte varint takes 10 bytes)
            break;
          case REPEATED_INT32:
            r.uint32();
            this.numbersRead(1);
            break;
          case FLOAT:
            r.skip(4);
            break;
          case REPEATED_FLOAT:
            r.skip(4);
            this.numbersRead(1);
            break;
          case REPEATED_DOUBLE:
            r.skip(8);
            this.numbersRead(1);
            break;
        }
      }
      if (r.pos > end) throw malformed(`a field of ${m.name} runs past the end of its message`);
    }
  }

  /** A packed run of a repeated scalar field. */
  packed(f: Field, end: number): void {
    const r = this.r;
    const e = this.extent(end, f.what);
    switch (f.kind) {
      case REPEATED_INT64:
        while (r.pos < e) {
          r.skip();
          this.count(1);
        }
        break;
      case REPEATED_INT32: {
        let n = 0;
        while (r.pos < e) {
          r.uint32();
          // Counted as it goes, in steps: a run of a billion values is refused at the cap, not read to its end.
          if (++n === 65_536) {
            this.numbersRead(n);
            n = 0;
          }
        }
        this.numbersRead(n);
        break;
      }
      case REPEATED_FLOAT:
      case REPEATED_DOUBLE: {
        const size = f.kind === REPEATED_FLOAT ? 4 : 8;
        if ((e - r.pos) % size !== 0) throw malformed(`${f.what} is ${e - r.pos} bytes, not a multiple of ${size}`);
        this.numbersRead((e - r.pos) / size);
        r.pos = e;
        break;
      }
    }
    if (r.pos !== e) throw malformed(`${f.what} ends inside a value`);
  }

  /** Skips a field the decoder does not know, by its wire type. */
  skip(wire: number, end: number, what: string): void {
    const r = this.r;
    switch (wire) {
      case VARINT:
        r.skip();
        return;
      case I64:
        r.skip(8);
        return;
      case LEN:
        r.pos = this.extent(end, what);
        return;
      case I32:
        r.skip(4);
        return;
      default:
        throw malformed(`${what} has wire type ${wire}${wire === 3 || wire === 4 ? " (a group)" : ""}`);
    }
  }
}

/**
 * Walks an ONNX file's `ModelProto` on the wire, without decoding it, and checks its framing and counts against
 * `limits`. Allocates nothing per field: its cost is a pass over the tags, with `raw_data` and strings skipped.
 *
 * @param bytes The `.onnx` file.
 * @param limits `maxNodes`, `maxGraphDepth`, `maxEntries` and `maxNumbers`.
 * @returns What it counted.
 * @throws {OnnxCompileError} naming the first thing that does not fit: a field past its message's end, a wire type
 * the field's type does not allow, a group, too many nodes, graphs or types nested too deep, too many entries or numbers.
 */
export function scanModel(
  bytes: Uint8Array,
  limits: ScanLimits,
): WireCounts {
  const s = new Scanner(bytes, limits);
  try {
    s.walk(MODEL, bytes.byteLength, -1, 0);
  } catch (e) {
    if (e instanceof OnnxCompileError) throw e;
    if (e instanceof RangeError && /call stack/i.test(e.message)) throw malformed("messages nest too deeply");
    // The reader's own bound: a value runs past the last byte.
    if (e instanceof RangeError) throw malformed(`a value runs past the end of the file`);
    throw e;
  }
  return { nodes: s.nodes, entries: s.entries, graphDepth: Math.max(s.graphDepth, 0), numbers: s.numbers };
}
