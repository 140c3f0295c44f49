/**
 * Ours: a `ModelInferRequest` read on the wire before it is decoded. A decoded message costs far more memory than its
 * bytes: every empty input tensor (2 bytes on the wire) becomes an object with its name, datatype, shape, parameters
 * and contents, every map entry and every `bytes_contents` entry an object, every 64-bit integer a decimal string.
 * An 8 MiB message of empty inputs decoded into 2.3 GB. So the server first walks the message's wire form, which
 * allocates nothing per field, and decodes only a message whose framing is sound and whose counts fit the model it
 * names:
 *
 * - **framing**: every field's length within its message, every varint at most 10 bytes, each known field in a wire
 *   type its proto type allows, no group (the decoder would otherwise read a truncated length as far as the bytes
 *   go, and answer a request the client did not send);
 * - **counts**: inputs and `raw_input_contents` entries at most the model's inputs plus {@linkcode INPUT_SLACK}
 *   (fewer extra ones reach the planner, which names the unknown or duplicate input), requested outputs at most
 *   `maxRequestedOutputs`, at most {@linkcode MAX_PARAMETERS} entries in each `parameters` map, a rank of at most
 *   {@linkcode MAX_RANK}, and at most as many typed elements in an input's `contents` as the model's input of that
 *   name holds (the largest of its inputs for a name it does not have).
 *
 * What is left of a request that passes costs a bounded multiple of what the model needs. Every refusal is
 * `INVALID_ARGUMENT`, as the planner's refusals are.
 *
 * Spec: grpc_predict_v2.proto (the field numbers and types) and the protobuf wire format (encoding.md: tags, varints,
 * wire types 0, 1, 2 and 5, packed repeated scalars).
 *
 * @module
 */
import { MAX_RANK, type TensorSignature } from "@nrt/http-api";
import { GrpcCode, GrpcError } from "./grpc_status.ts";

export { MAX_RANK };

/** Entries allowed in one `parameters` map (the request's, an input's, a requested output's). Ours. */
export const MAX_PARAMETERS = 64;

/** Inputs (and raw contents entries) allowed beyond the model's own inputs before the message is decoded. Ours. */
export const INPUT_SLACK = 16;

/** The bounds a message is checked against: from the model it names and the server's limits. */
export interface InferBounds {
  /** Most inputs, and most `raw_input_contents` entries. */
  readonly inputs: number;
  /** Most requested outputs. */
  readonly outputs: number;
  /** Most typed elements in the contents of the input of this name. */
  elements(name: string): number;
}

/**
 * The bounds of requests for a model: its inputs plus {@linkcode INPUT_SLACK}, `maxRequestedOutputs`, and each
 * input's element count (the largest of them for a name the model does not have).
 *
 * @param sig The model's signature.
 * @param maxRequestedOutputs The server's limit on requested outputs.
 * @returns The bounds.
 */
export function inferBounds(sig: TensorSignature, maxRequestedOutputs: number): InferBounds {
  const counts = new Map(sig.inputs.map((t) => [t.name, t.shape.reduce((a, b) => a * b, 1)]));
  let most = 0;
  for (const n of counts.values()) most = Math.max(most, n);
  return {
    inputs: sig.inputs.length + INPUT_SLACK,
    outputs: maxRequestedOutputs,
    elements: (name) => counts.get(name) ?? most,
  };
}

/** What is read of a message's top level before the model is known. */
export interface InferHead {
  /** `model_name` (the last one, as a decoder keeps it). */
  readonly modelName: string;
  /** `model_version`. */
  readonly modelVersion: string;
  /** `id`. */
  readonly id: string;
}

/** The top level's fields by number (1–7). */
const TOP_FIELDS = ["model_name", "model_version", "id", "parameters", "inputs", "outputs", "raw_input_contents"];

// Wire types (encoding.md).
const VARINT = 0, I64 = 1, LEN = 2, I32 = 5;

const utf8 = new TextDecoder();

function malformed(detail: string): GrpcError {
  return new GrpcError(
    GrpcCode.INVALID_ARGUMENT,
    `Cannot read the request: the message is not a well-formed ModelInferRequest (${detail})`,
    { httpStatus: 400 },
  );
}

function refused(message: string): GrpcError {
  return new GrpcError(GrpcCode.INVALID_ARGUMENT, message, { httpStatus: 400 });
}

/** A cursor over one message's bytes `[pos, end)`. */
class Cursor {
  pos: number;
  constructor(readonly buf: Uint8Array, start: number, readonly end: number) {
    this.pos = start;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** A varint's value (exact up to 2^53; larger ones read as at least 2^53, which is past every bound here). */
  varint(): number {
    let value = 0, scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw malformed("a varint runs past the end of its message");
      const b = this.buf[this.pos++];
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return value;
      scale *= 128;
    }
    throw malformed("a varint is longer than 10 bytes");
  }

  /** The next field's number and wire type. */
  tag(): { field: number; wire: number } {
    const t = this.varint();
    const field = Math.floor(t / 8), wire = t % 8;
    if (field < 1 || field > 0x1fffffff) throw malformed(`field number ${field} is out of range`);
    return { field, wire };
  }

  /** Moves past `n` bytes. */
  advance(n: number, what: string): void {
    if (n > this.end - this.pos) throw malformed(`${what} runs past the end of its message`);
    this.pos += n;
  }

  /** A length-delimited field's extent: the cursor moves past it. */
  delimited(what: string): { start: number; end: number } {
    const n = this.varint();
    const start = this.pos;
    this.advance(n, what);
    return { start, end: start + n };
  }

  /** Skips one field of an unknown number by its wire type. */
  skipField(wire: number, field: number): void {
    switch (wire) {
      case VARINT:
        this.varint();
        return;
      case I64:
        return this.advance(8, `field ${field}`);
      case LEN:
        this.delimited(`field ${field}`);
        return;
      case I32:
        return this.advance(4, `field ${field}`);
      default:
        throw malformed(`field ${field} has wire type ${wire}`);
    }
  }
}

function expectWire(field: string, wire: number, allowed: number): void {
  if (wire !== allowed) throw malformed(`${field} has wire type ${wire}`);
}

/** Varints in `[start, end)`: the elements of a packed varint field. */
function packedVarints(c: Cursor, what: string): number {
  const { start, end } = c.delimited(what);
  let n = 0;
  for (let i = start; i < end; i++) if ((c.buf[i] & 0x80) === 0) n++;
  // A packed run ends on a varint's last byte, and no varint is longer than 10 bytes.
  if (end > start && (c.buf[end - 1] & 0x80) !== 0) throw malformed(`${what} ends inside a varint`);
  if (end - start > n * 10) throw malformed(`${what} holds a varint longer than 10 bytes`);
  return n;
}

/** Elements of a packed fixed-size field. */
function packedFixed(c: Cursor, what: string, size: number): number {
  const { start, end } = c.delimited(what);
  if ((end - start) % size !== 0) throw malformed(`${what} is ${end - start} bytes, not a multiple of ${size}`);
  return (end - start) / size;
}

/** Checks an `InferParameter` message (`bool_param` 1, `int64_param` 2, `string_param` 3). */
function walkParameter(c: Cursor): void {
  while (!c.done) {
    const { field, wire } = c.tag();
    if (field === 1 || field === 2) {
      expectWire("an InferParameter value", wire, VARINT);
      c.varint();
    } else if (field === 3) {
      expectWire("an InferParameter string", wire, LEN);
      c.delimited("an InferParameter string");
    } else c.skipField(wire, field);
  }
}

/** Checks one `map<string, InferParameter>` entry (`key` 1, `value` 2). */
function walkParameterEntry(c: Cursor): void {
  while (!c.done) {
    const { field, wire } = c.tag();
    if (field === 1) {
      expectWire("a parameter's key", wire, LEN);
      c.delimited("a parameter's key");
    } else if (field === 2) {
      expectWire("a parameter's value", wire, LEN);
      const v = c.delimited("a parameter's value");
      walkParameter(new Cursor(c.buf, v.start, v.end));
    } else c.skipField(wire, field);
  }
}

/** Counts the `parameters` map entry at the cursor against {@linkcode MAX_PARAMETERS} and checks it. */
function parameterEntry(c: Cursor, count: number, where: string): number {
  const e = c.delimited(`a parameter of ${where}`);
  if (count + 1 > MAX_PARAMETERS) {
    throw refused(`Cannot read ${where}: it has more than ${MAX_PARAMETERS} parameters`);
  }
  walkParameterEntry(new Cursor(c.buf, e.start, e.end));
  return count + 1;
}

/** Typed elements of an `InferTensorContents` message (fields 1–8). */
function contentsElements(c: Cursor): number {
  let n = 0;
  while (!c.done) {
    const { field, wire } = c.tag();
    switch (field) {
      case 1: // bool
      case 2: // int32
      case 3: // int64
      case 4: // uint32
      case 5: // uint64
        if (wire === VARINT) (c.varint(), n++);
        else if (wire === LEN) n += packedVarints(c, "a packed contents field");
        else throw malformed(`contents field ${field} has wire type ${wire}`);
        break;
      case 6: // float
        if (wire === I32) (c.advance(4, "an fp32 element"), n++);
        else if (wire === LEN) n += packedFixed(c, "fp32_contents", 4);
        else throw malformed(`fp32_contents has wire type ${wire}`);
        break;
      case 7: // double
        if (wire === I64) (c.advance(8, "an fp64 element"), n++);
        else if (wire === LEN) n += packedFixed(c, "fp64_contents", 8);
        else throw malformed(`fp64_contents has wire type ${wire}`);
        break;
      case 8: // bytes
        expectWire("bytes_contents", wire, LEN);
        c.delimited("a bytes_contents entry");
        n++;
        break;
      default:
        c.skipField(wire, field);
    }
  }
  return n;
}

/** Checks one `InferInputTensor` (name 1, datatype 2, shape 3, parameters 4, contents 5) against the bounds. */
function walkInput(c: Cursor, k: number, bounds: InferBounds): void {
  let name: { start: number; end: number } | undefined;
  let rank = 0, parameters = 0, elements = 0;
  const nameText = () => name === undefined ? "" : utf8.decode(c.buf.subarray(name.start, name.end));
  // As the planner names an input (its first 128 characters).
  const where = () => `input "${nameText().slice(0, 128)}"`;
  while (!c.done) {
    const { field, wire } = c.tag();
    switch (field) {
      case 1:
        expectWire(`inputs[${k}].name`, wire, LEN);
        name = c.delimited(`inputs[${k}].name`);
        break;
      case 2:
        expectWire(`inputs[${k}].datatype`, wire, LEN);
        c.delimited(`inputs[${k}].datatype`);
        break;
      case 3:
        if (wire === VARINT) (c.varint(), rank++);
        else if (wire === LEN) rank += packedVarints(c, `inputs[${k}].shape`);
        else throw malformed(`inputs[${k}].shape has wire type ${wire}`);
        break;
      case 4:
        expectWire(`inputs[${k}].parameters`, wire, LEN);
        parameters = parameterEntry(c, parameters, `inputs[${k}]`);
        break;
      case 5: {
        expectWire(`inputs[${k}].contents`, wire, LEN);
        const e = c.delimited(`inputs[${k}].contents`);
        elements += contentsElements(new Cursor(c.buf, e.start, e.end));
        break;
      }
      default:
        c.skipField(wire, field);
    }
  }
  // The planner's own words for an over-long shape (checkShape).
  if (rank > MAX_RANK) throw refused(`Cannot read ${where()}: rank ${rank} is over ${MAX_RANK}`);
  const most = bounds.elements(nameText());
  if (elements > most) {
    throw refused(
      `Cannot read ${where()}: its contents hold ${elements} elements, more than the ${most} the model's input takes`,
    );
  }
}

/** Checks one `InferRequestedOutputTensor` (name 1, parameters 2). */
function walkOutput(c: Cursor, k: number): void {
  let parameters = 0;
  while (!c.done) {
    const { field, wire } = c.tag();
    if (field === 1) {
      expectWire(`outputs[${k}].name`, wire, LEN);
      c.delimited(`outputs[${k}].name`);
    } else if (field === 2) {
      expectWire(`outputs[${k}].parameters`, wire, LEN);
      parameters = parameterEntry(c, parameters, `outputs[${k}]`);
    } else c.skipField(wire, field);
  }
}

/**
 * Reads a `ModelInferRequest`'s `model_name`, `model_version` and `id`, checking the framing of its top level only.
 *
 * @param buf The message's bytes.
 * @returns The three strings (`""` when absent).
 * @throws {GrpcError} `INVALID_ARGUMENT` when the top level is not well formed.
 */
export function readInferHead(buf: Uint8Array): InferHead {
  const c = new Cursor(buf, 0, buf.byteLength);
  let modelName = "", modelVersion = "", id = "";
  while (!c.done) {
    const { field, wire } = c.tag();
    if (field >= 1 && field <= 3) {
      expectWire(TOP_FIELDS[field - 1], wire, LEN);
      const s = c.delimited(TOP_FIELDS[field - 1]);
      const text = utf8.decode(buf.subarray(s.start, s.end));
      if (field === 1) modelName = text;
      else if (field === 2) modelVersion = text;
      else id = text;
    } else if (field >= 4 && field <= 7) {
      expectWire(TOP_FIELDS[field - 1], wire, LEN);
      c.delimited(TOP_FIELDS[field - 1]);
    } else c.skipField(wire, field);
  }
  return { modelName, modelVersion, id };
}

/**
 * Checks a whole `ModelInferRequest` on the wire against `bounds`: its framing at every level and its counts. The
 * top level is counted first, so no input is looked into when there are too many of them.
 *
 * @param buf The message's bytes.
 * @param bounds Bounds from the model the message names and the server's limits.
 * @throws {GrpcError} `INVALID_ARGUMENT` naming the first thing that does not fit.
 */
export function checkInferRequest(buf: Uint8Array, bounds: InferBounds): void {
  let inputs = 0, outputs = 0, raw = 0;
  const top = new Cursor(buf, 0, buf.byteLength);
  while (!top.done) {
    const { field, wire } = top.tag();
    if (field >= 1 && field <= 7) {
      expectWire(TOP_FIELDS[field - 1], wire, LEN);
      top.delimited(TOP_FIELDS[field - 1]);
      if (field === 5) inputs++;
      else if (field === 6) outputs++;
      else if (field === 7) raw++;
    } else top.skipField(wire, field);
  }
  if (inputs > bounds.inputs) {
    throw refused(`Cannot read the request: it has ${inputs} inputs, more than the model's inputs allow`);
  }
  if (raw > bounds.inputs) {
    throw refused(`Cannot read the request: raw_input_contents has ${raw} entries for ${inputs} inputs`);
  }
  // The planner's own words for too many requested outputs.
  if (outputs > bounds.outputs) {
    throw refused(`Cannot read the request: ${outputs} requested outputs is over the limit of ${bounds.outputs}`);
  }
  const c = new Cursor(buf, 0, buf.byteLength);
  let k = 0, o = 0, parameters = 0;
  while (!c.done) {
    const { field, wire } = c.tag();
    if (field === 4) parameters = parameterEntry(c, parameters, "the request");
    else if (field === 5) {
      const e = c.delimited("an input");
      walkInput(new Cursor(buf, e.start, e.end), k++, bounds);
    } else if (field === 6) {
      const e = c.delimited("a requested output");
      walkOutput(new Cursor(buf, e.start, e.end), o++);
    } else c.skipField(wire, field);
  }
}

/**
 * Checks a flat message's framing: every field's extent within the message, no group. For the small requests of the
 * other RPCs, whose fields are strings.
 *
 * @param buf The message's bytes.
 * @param name The message's type, for the error.
 * @throws {GrpcError} `INVALID_ARGUMENT` when a field runs past the end or has no valid wire type.
 */
export function checkFraming(buf: Uint8Array, name: string): void {
  const c = new Cursor(buf, 0, buf.byteLength);
  try {
    while (!c.done) {
      const { field, wire } = c.tag();
      c.skipField(wire, field);
    }
  } catch (e) {
    if (e instanceof GrpcError) {
      throw new GrpcError(GrpcCode.INVALID_ARGUMENT, e.message.replace("ModelInferRequest", name), {
        httpStatus: 400,
      });
    }
    throw e;
  }
}
