/**
 * Reading an inference request: the JSON object, optionally followed by binary tensor data, validated against the
 * model's signature — names, datatypes, shapes (integers, no overflow), element counts and byte sizes — before
 * any device work.
 *
 * Spec: inference_rest.md "Inference Request JSON Object", "Tensor Data"; Triton's binary tensor data extension
 * (`Inference-Header-Content-Length`; `parameters.binary_data_size` on an input; `binary_data` on a requested
 * output; `binary_data_output` on the request).
 *
 * @module
 */
import type { NeffTensor } from "@nrt/core";
import { parseJson } from "./body.ts";
import { type DatatypeInfo, datatypeInfo, decodeJsonData, dtypeInfo, shown } from "./datatype.ts";
import { HttpError } from "./http_error.ts";

/** The limits that bound the work one request can cause. */
export interface RequestLimits {
  /** Deepest JSON nesting accepted. */
  readonly maxJsonDepth: number;
  /** Most entries accepted in `outputs`. */
  readonly maxRequestedOutputs: number;
  /** Largest JSON part of a request, in bytes (tensor data beyond it travels as binary). */
  readonly maxJsonBytes?: number;
}

/** JSON text allowed per tensor element when bounding a request by its model's signature (ours). */
export const JSON_BYTES_PER_ELEMENT = 48;
/** JSON text allowed beyond the elements: names, datatypes, shapes, parameters, requested outputs (ours). */
export const JSON_OVERHEAD_BYTES = 64 * 1024;

/**
 * The largest request body a model can need: its inputs as binary data plus their elements as JSON text (at
 * {@linkcode JSON_BYTES_PER_ELEMENT} each), plus {@linkcode JSON_OVERHEAD_BYTES}, never more than `maxBodyBytes`.
 * A body past it is refused before it is read, whatever the server-wide limit (docs/security.md).
 *
 * @param sig The model signature.
 * @param maxBodyBytes The server-wide body limit.
 * @returns The body limit for this model.
 */
export function requestBodyLimit(sig: TensorSignature, maxBodyBytes: number): number {
  let bytes = JSON_OVERHEAD_BYTES;
  for (const t of sig.inputs) {
    const elements = t.shape.reduce((a, b) => a * b, 1);
    bytes += t.size + elements * JSON_BYTES_PER_ELEMENT;
  }
  return Math.min(bytes, maxBodyBytes);
}

/** The signature a request is checked against. */
export interface TensorSignature {
  /** Inputs. */
  readonly inputs: readonly NeffTensor[];
  /** Outputs. */
  readonly outputs: readonly NeffTensor[];
}

/** One output to return. */
export interface PlannedOutput {
  /** The model's output. */
  readonly tensor: NeffTensor;
  /** Its datatype row. */
  readonly info: DatatypeInfo;
  /** Return it as binary data (the extension) rather than JSON `data`. */
  readonly binary: boolean;
}

/** A validated request. */
export interface InferPlan {
  /** The request `id`, echoed in the response. */
  readonly id: string | undefined;
  /** Input bytes by name, each exactly its tensor's size. */
  readonly inputs: Map<string, Uint8Array>;
  /** Outputs to return, in order. */
  readonly outputs: PlannedOutput[];
}

/** The largest rank accepted (a NEFF tensor has at most a handful of dimensions). */
export const MAX_RANK = 32;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function parametersOf(where: string, v: unknown): Record<string, unknown> {
  if (v === undefined) return {};
  if (!isObject(v)) throw new HttpError(400, `Cannot read ${where}: "parameters" must be an object`);
  return v;
}

function optionalBoolean(where: string, key: string, v: unknown): boolean | undefined {
  if (v === undefined || typeof v === "boolean") return v;
  throw new HttpError(400, `Cannot read ${where}: parameter "${key}" must be a boolean`);
}

/**
 * Checks a requested shape: an array of at most {@linkcode MAX_RANK} integers from 0 to 2^53-1 whose element
 * count and byte size do not overflow.
 *
 * @param where The tensor, for messages.
 * @param shape The `shape` member.
 * @param elementBytes Bytes per element.
 * @returns The element count.
 * @throws {HttpError} 400 for anything else.
 */
export function checkShape(where: string, shape: unknown, elementBytes: number): number {
  if (!Array.isArray(shape)) throw new HttpError(400, `Cannot read ${where}: "shape" must be an array of integers`);
  if (shape.length > MAX_RANK) {
    throw new HttpError(400, `Cannot read ${where}: rank ${shape.length} is over ${MAX_RANK}`);
  }
  let n = 1;
  for (const [i, d] of shape.entries()) {
    if (typeof d !== "number" || !Number.isSafeInteger(d) || d < 0) {
      throw new HttpError(
        400,
        `Cannot read ${where}: dimension ${i} is ${shown(d)}, expected an integer from 0 to 2^53-1`,
      );
    }
    if (d !== 0 && n > Number.MAX_SAFE_INTEGER / d) {
      throw new HttpError(400, `Cannot read ${where}: the shape [${shape.join(", ")}] has too many elements`);
    }
    n *= d;
  }
  if (n > Number.MAX_SAFE_INTEGER / elementBytes) {
    throw new HttpError(400, `Cannot read ${where}: the shape [${shape.join(", ")}] has too many bytes`);
  }
  return n;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return false;
  return true;
}

/** The tensor of `list` named `name` (a loop, not `find` with a closure: this runs for every tensor of a request). */
function tensorNamed(list: readonly NeffTensor[], name: string): NeffTensor | undefined {
  for (let k = 0; k < list.length; k++) if (list[k].name === name) return list[k];
  return undefined;
}

function modelInfo(t: NeffTensor): DatatypeInfo {
  const info = dtypeInfo(t.dtype);
  if (info === undefined) {
    throw new HttpError(400, `Cannot serve tensor "${t.name}": its dtype ${t.dtype} has no protocol datatype`);
  }
  return info;
}

/**
 * One input of a request whose transport has already been decoded (the REST JSON object, a gRPC message): its
 * name, datatype and shape as sent, and a way to read its bytes once they have been checked against the model.
 */
export interface DecodedInput {
  /** The input's name. */
  readonly name: string;
  /** The protocol datatype as sent (checked to be a supported name). */
  readonly datatype: unknown;
  /** The shape as sent (checked with {@linkcode checkShape} and against the model's). */
  readonly shape: unknown;
  /**
   * The input's little-endian bytes, called once its datatype and shape match the model's; it must return exactly
   * `count * info.bytes` bytes or throw the transport's error for data that does not fit.
   *
   * @param where The input, for messages (`input "x"`).
   * @param info The datatype row.
   * @param count The element count of the shape.
   * @param shape The shape.
   */
  bytes(where: string, info: DatatypeInfo, count: number, shape: readonly number[]): Uint8Array;
}

/** One requested output of a decoded request. */
export interface DecodedOutput {
  /** The output's name. */
  readonly name: string;
  /** Return it as binary data (REST extension; gRPC raw contents); default: the request's `binaryOutput`. */
  readonly binary?: boolean;
}

/** A request whose transport has already been decoded, to be checked against a model by {@linkcode planInfer}. */
export interface DecodedRequest {
  /** The request id, echoed in the response. */
  readonly id?: string;
  /** The inputs, in the order sent. */
  readonly inputs: readonly DecodedInput[];
  /** The outputs to return, in order; `undefined` for all of the model's, in its order. */
  readonly outputs?: readonly DecodedOutput[];
  /** Return outputs as binary data unless an output says otherwise (default false). */
  readonly binaryOutput?: boolean;
}

/**
 * Checks a decoded request against a model's signature and reads its inputs: every input of the model once, with
 * the model's datatype and exactly its shape, before any device work; then the requested outputs. Both protocols
 * run their requests through it, so they accept and refuse the same requests with the same messages.
 *
 * @param req The decoded request.
 * @param sig The model signature.
 * @param limits Request limits (`maxRequestedOutputs`).
 * @returns The plan: input bytes and the outputs to return.
 * @throws {HttpError} 400 for every malformed or mismatched request; what an input's `bytes` throws.
 *
 * @example Plan a request for a one-input model
 * ```ts
 * import { planInfer } from "@nrt/http-api";
 * const sig = { inputs: [{ name: "x", dtype: "float32", shape: [2], size: 8 }], outputs: [] };
 * const plan = planInfer(
 *   { inputs: [{ name: "x", datatype: "FP32", shape: [2], bytes: () => new Uint8Array(8) }] },
 *   sig,
 *   { maxJsonDepth: 64, maxRequestedOutputs: 8 },
 * );
 * console.log(plan.inputs.get("x")?.byteLength); // 8
 * ```
 */
export function planInfer(req: DecodedRequest, sig: TensorSignature, limits: RequestLimits): InferPlan {
  const inputs = new Map<string, Uint8Array>();
  for (const x of req.inputs) {
    const name = x.name;
    const where = `input "${name.slice(0, 128)}"`;
    const t = tensorNamed(sig.inputs, name);
    if (t === undefined) {
      throw new HttpError(
        400,
        `Cannot read ${where}: the model has no such input; its inputs are ${sig.inputs.map((i) => i.name).join(", ")}`,
      );
    }
    if (inputs.has(name)) throw new HttpError(400, `Cannot read ${where}: it is given twice`);
    if (typeof x.datatype !== "string") throw new HttpError(400, `Cannot read ${where}: "datatype" must be a string`);
    const info = datatypeInfo(x.datatype);
    if (info === undefined) {
      throw new HttpError(400, `Cannot read ${where}: datatype "${x.datatype.slice(0, 32)}" is not supported`);
    }
    const want = modelInfo(t);
    if (info !== want) {
      throw new HttpError(
        400,
        `Cannot read ${where}: datatype is ${info.datatype}, the model expects ${want.datatype}`,
      );
    }
    const count = checkShape(where, x.shape, info.bytes);
    if (!sameShape(x.shape as number[], t.shape)) {
      throw new HttpError(
        400,
        `Cannot read ${where}: shape is [${(x.shape as number[]).join(", ")}], the model expects [${
          t.shape.join(", ")
        }]`,
      );
    }
    const bytes = x.bytes(where, info, count, t.shape);
    if (bytes.byteLength !== count * info.bytes) {
      throw new TypeError(
        `Cannot plan ${where}: its reader returned ${bytes.byteLength} bytes for ${count * info.bytes}`,
      );
    }
    inputs.set(name, bytes);
  }
  for (let k = 0; k < sig.inputs.length; k++) {
    const t = sig.inputs[k];
    if (!inputs.has(t.name)) throw new HttpError(400, `Cannot run the request: input "${t.name}" is missing`);
  }

  const binaryOutput = req.binaryOutput ?? false;
  const outputs: PlannedOutput[] = [];
  const requested = req.outputs; // read once, after the inputs
  if (requested === undefined) {
    for (const t of sig.outputs) outputs.push({ tensor: t, info: modelInfo(t), binary: binaryOutput });
  } else {
    if (requested.length > limits.maxRequestedOutputs) {
      throw new HttpError(
        400,
        `Cannot read the request: ${requested.length} requested outputs is over the limit of ${limits.maxRequestedOutputs}`,
      );
    }
    for (const o of requested) {
      const where = `requested output "${o.name.slice(0, 128)}"`;
      const t = tensorNamed(sig.outputs, o.name);
      if (t === undefined) {
        throw new HttpError(
          400,
          `Cannot read ${where}: the model has no such output; its outputs are ${
            sig.outputs.map((i) => i.name).join(", ")
          }`,
        );
      }
      for (let k = 0; k < outputs.length; k++) {
        if (outputs[k].tensor === t) throw new HttpError(400, `Cannot read ${where}: it is requested twice`);
      }
      outputs.push({ tensor: t, info: modelInfo(t), binary: o.binary ?? binaryOutput });
    }
  }
  return { id: req.id, inputs, outputs };
}

/**
 * Splits, parses and validates a REST inference request: the JSON object (and the binary tensor data after it)
 * decoded into a {@linkcode DecodedRequest}, then checked by {@linkcode planInfer}.
 *
 * @param body The whole request body.
 * @param headerLength The `Inference-Header-Content-Length` header, or `null` (a JSON-only request).
 * @param sig The model signature.
 * @param limits Request limits.
 * @returns The plan: input bytes and the outputs to return.
 * @throws {HttpError} 400 for every malformed or mismatched request; 413 for a JSON part over `maxJsonBytes`.
 */
export function parseInferRequest(
  body: Uint8Array,
  headerLength: string | null,
  sig: TensorSignature,
  limits: RequestLimits,
): InferPlan {
  let json: Uint8Array = body, binary: Uint8Array = new Uint8Array(0);
  if (headerLength !== null) {
    const n = /^[0-9]{1,16}$/.test(headerLength) ? Number(headerLength) : NaN;
    if (!(n <= body.length)) {
      throw new HttpError(
        400,
        `Cannot read the request: Inference-Header-Content-Length "${
          headerLength.slice(0, 32)
        }" is not a byte count within the ${body.length}-byte body`,
      );
    }
    json = body.subarray(0, n);
    binary = body.subarray(n);
  }
  if (limits.maxJsonBytes !== undefined && json.length > limits.maxJsonBytes) {
    throw new HttpError(
      413,
      `Cannot read the request: its JSON is ${json.length} bytes, over the ${limits.maxJsonBytes}-byte limit; send tensor data with the binary tensor extension`,
    );
  }
  const req = parseJson(json, limits.maxJsonDepth);
  if (!isObject(req)) throw new HttpError(400, "Cannot read the request: the body must be a JSON object");
  if (req.id !== undefined && typeof req.id !== "string") {
    throw new HttpError(400, `Cannot read the request: "id" must be a string`);
  }
  const params = parametersOf("the request", req.parameters);
  const binaryOutput = optionalBoolean("the request", "binary_data_output", params.binary_data_output) ?? false;
  if (!Array.isArray(req.inputs)) throw new HttpError(400, `Cannot read the request: "inputs" must be an array`);

  const data = new JsonBinary(headerLength, binary);
  const inputs: DecodedInput[] = [];
  for (let k = 0; k < req.inputs.length; k++) {
    const x: unknown = req.inputs[k];
    if (!isObject(x) || typeof x.name !== "string") {
      throw new HttpError(400, `Cannot read input ${k}: it must be an object with a string "name"`);
    }
    inputs.push(new JsonInput(x, x.name, data));
  }
  const decoded = new JsonRequest(req.id as string | undefined, inputs, binaryOutput, req.outputs, limits);
  const plan = planInfer(decoded, sig, limits);
  if (data.cursor !== binary.length) {
    throw new HttpError(
      400,
      `Cannot read the request: ${binary.length - data.cursor} bytes of binary data belong to no input`,
    );
  }
  for (const o of plan.outputs) {
    if (!o.binary && !o.info.json) {
      throw new HttpError(
        400,
        `Cannot return output "${o.tensor.name}": ${o.info.datatype} has no JSON form; request it with "binary_data": true`,
      );
    }
  }
  return plan;
}

/** The binary part of a REST request after its JSON, and how far its inputs have read it. */
class JsonBinary {
  cursor = 0;
  constructor(readonly headerLength: string | null, readonly bytes: Uint8Array) {}
}

/**
 * One input of a REST request's JSON as {@linkcode planInfer} reads it: its data from the JSON `data` member, or its
 * `binary_data_size` bytes of the binary part (a class, not an object with a closure: one per input per request).
 */
class JsonInput implements DecodedInput {
  readonly datatype: unknown;
  readonly shape: unknown;
  readonly #x: Record<string, unknown>;
  readonly #data: JsonBinary;

  constructor(x: Record<string, unknown>, readonly name: string, data: JsonBinary) {
    this.datatype = x.datatype;
    this.shape = x.shape;
    this.#x = x;
    this.#data = data;
  }

  bytes(where: string, info: DatatypeInfo, count: number, shape: readonly number[]): Uint8Array {
    const bytes = count * info.bytes;
    const x = this.#x, data = this.#data;
    const p = parametersOf(where, x.parameters);
    if (p.binary_data_size === undefined) return decodeJsonData(this.name.slice(0, 128), info, x.data, count, shape);
    const size = p.binary_data_size;
    if (data.headerLength === null) {
      throw new HttpError(
        400,
        `Cannot read ${where}: "binary_data_size" needs the Inference-Header-Content-Length header`,
      );
    }
    if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
      throw new HttpError(400, `Cannot read ${where}: "binary_data_size" must be a byte count`);
    }
    if (x.data !== undefined) {
      throw new HttpError(400, `Cannot read ${where}: it has both "data" and "binary_data_size"`);
    }
    if (size !== bytes) {
      throw new HttpError(
        400,
        `Cannot read ${where}: "binary_data_size" is ${size}, its shape and datatype make ${bytes} bytes`,
      );
    }
    const binary = data.bytes;
    if (data.cursor + size > binary.length) {
      throw new HttpError(
        400,
        `Cannot read ${where}: the body ends ${data.cursor + size - binary.length} bytes short of its binary data`,
      );
    }
    const out = binary.subarray(data.cursor, data.cursor + size);
    data.cursor += size;
    return out;
  }
}

/** A REST request's JSON as {@linkcode planInfer} reads it; its requested outputs are checked when the planner asks. */
class JsonRequest implements DecodedRequest {
  readonly #requested: unknown;
  readonly #limits: RequestLimits;

  constructor(
    readonly id: string | undefined,
    readonly inputs: readonly DecodedInput[],
    readonly binaryOutput: boolean,
    requested: unknown,
    limits: RequestLimits,
  ) {
    this.#requested = requested;
    this.#limits = limits;
  }

  // Read by the planner after the inputs, so a request's problems are reported in the same order on both protocols.
  get outputs(): DecodedOutput[] | undefined {
    const requested = this.#requested;
    if (requested === undefined) return undefined;
    if (!Array.isArray(requested)) throw new HttpError(400, `Cannot read the request: "outputs" must be an array`);
    if (requested.length > this.#limits.maxRequestedOutputs) {
      throw new HttpError(
        400,
        `Cannot read the request: ${requested.length} requested outputs is over the limit of ${this.#limits.maxRequestedOutputs}`,
      );
    }
    return requested.map((o: unknown, k: number): DecodedOutput => {
      if (!isObject(o) || typeof o.name !== "string") {
        throw new HttpError(400, `Cannot read requested output ${k}: it must be an object with a string "name"`);
      }
      const where = `requested output "${o.name.slice(0, 128)}"`;
      return {
        name: o.name,
        binary: optionalBoolean(where, "binary_data", parametersOf(where, o.parameters).binary_data),
      };
    });
  }
}
