/**
 * Reading a `ModelInferRequest` and writing its `ModelInferResponse`. Every input's tensor bytes come from its
 * typed `contents` or from `raw_input_contents` (never both); the names, datatypes, shapes, byte sizes, missing and
 * duplicate inputs and the requested outputs are then checked by the REST server's own planner (`@nrt/http-api`'s
 * `parseInferRequest`), so both protocols accept and refuse the same requests with the same messages.
 *
 * Ours: the planner reads the REST binary-tensor form, so the request reaches it as a small JSON header (names,
 * datatypes, shapes, sizes) followed by the tensor bytes. That costs one copy of the input bytes; a planner over
 * already-decoded tensors exported by `@nrt/http-api` would remove it (README.md, "Shared with REST").
 *
 * The output rule (README.md, "Raw and typed contents"): outputs are raw when the request's `binary_data_output`
 * parameter says so; without it, when the request sent `raw_input_contents` or a returned output has no typed field
 * (FP16, BF16, FP8); otherwise they are typed `contents`.
 *
 * Spec: grpc_predict_v2.proto `ModelInferRequest`, `ModelInferResponse`.
 *
 * @module
 */
import {
  checkShape,
  datatypeInfo,
  type InferPlan,
  parseInferRequest,
  type RequestLimits,
  type TensorSignature,
} from "@nrt/http-api";
import { GrpcCode, GrpcError } from "./grpc_status.ts";
import type {
  InferOutputTensor,
  InferParameters,
  InferTensorContents,
  ModelInferRequest,
  ModelInferResponse,
} from "./messages.ts";
import { contentsField, decodeContents, encodeContents } from "./tensor_contents.ts";

/** A validated `ModelInferRequest`. */
export interface ModelInferPlan {
  /** Input bytes and the outputs to return, as the REST planner gives them. */
  readonly plan: InferPlan;
  /** Answer with `raw_output_contents` (true) or typed `contents` (false). */
  readonly raw: boolean;
}

/** The request parameter that chooses raw (`true`) or typed (`false`) outputs; named as the REST extension's. */
export const BINARY_DATA_OUTPUT = "binary_data_output";

const encoder = new TextEncoder();

function invalid(message: string): GrpcError {
  return new GrpcError(GrpcCode.INVALID_ARGUMENT, message, { httpStatus: 400 });
}

function hasContents(c: InferTensorContents | null): boolean {
  if (c === null) return false;
  for (const v of Object.values(c)) if (Array.isArray(v) && v.length > 0) return true;
  return false;
}

function rawOutputParameter(parameters: InferParameters): boolean | undefined {
  const p = parameters[BINARY_DATA_OUTPUT];
  if (p === undefined) return undefined;
  if (p.parameter_choice !== "bool_param") {
    throw invalid(`Cannot read the request: parameter "${BINARY_DATA_OUTPUT}" must be a bool_param`);
  }
  return p.bool_param === true;
}

/**
 * Validates a `ModelInferRequest` against a model signature and decodes its inputs.
 *
 * @param req The decoded request.
 * @param sig The model signature.
 * @param limits Request limits (`maxRequestedOutputs`; `maxJsonDepth` bounds nothing a gRPC client controls).
 * @returns The plan and whether to answer raw.
 * @throws {GrpcError} `INVALID_ARGUMENT` for contents that do not fit the request (both or neither kind, wrong
 *   field, wrong count, out of range).
 * @throws {HttpError} 400 from the shared planner for every other malformed or mismatched request.
 */
export function planModelInfer(req: ModelInferRequest, sig: TensorSignature, limits: RequestLimits): ModelInferPlan {
  const rawIn = req.raw_input_contents.length > 0;
  if (rawIn && req.raw_input_contents.length !== req.inputs.length) {
    throw invalid(
      `Cannot read the request: raw_input_contents has ${req.raw_input_contents.length} entries ` +
        `for ${req.inputs.length} inputs`,
    );
  }
  const rawOut = rawOutputParameter(req.parameters);
  const sections: Uint8Array[] = [];
  const inputs = req.inputs.map((x, k) => {
    const where = `input "${x.name.slice(0, 128)}"`;
    const shape = x.shape.map(Number);
    const info = datatypeInfo(x.datatype);
    let bytes: Uint8Array = new Uint8Array(0);
    if (rawIn && hasContents(x.contents)) {
      throw invalid(`Cannot read ${where}: it has contents while the request uses raw_input_contents`);
    }
    if (info !== undefined) { // an unsupported datatype is refused by the planner, in its order of checks
      const count = checkShape(where, shape, info.bytes);
      if (rawIn) {
        bytes = req.raw_input_contents[k];
        if (bytes.byteLength !== count * info.bytes) {
          const want = count * info.bytes;
          const why = `raw_input_contents[${k}] holds ${bytes.byteLength} bytes, its shape and datatype make ${want}`;
          throw invalid(`Cannot read ${where}: ${why}`);
        }
      } else {
        bytes = decodeContents(where, info, x.contents, count);
      }
    }
    sections.push(bytes);
    return { name: x.name, datatype: x.datatype, shape, parameters: { binary_data_size: bytes.byteLength } };
  });
  const header: Record<string, unknown> = { inputs };
  if (req.id !== "") header.id = req.id;
  if (req.outputs.length > 0) {
    header.outputs = req.outputs.map((o) => ({ name: o.name, parameters: { binary_data: true } }));
  } else header.parameters = { binary_data_output: true };
  const head = encoder.encode(JSON.stringify(header));
  const body = new Uint8Array(head.byteLength + sections.reduce((a, s) => a + s.byteLength, 0));
  body.set(head, 0);
  let o = head.byteLength;
  for (const s of sections) {
    body.set(s, o);
    o += s.byteLength;
  }
  const plan = parseInferRequest(body, String(head.byteLength), sig, limits);
  const untyped = plan.outputs.find((p) => contentsField(p.info.datatype) === undefined);
  if (rawOut === false && untyped !== undefined) {
    throw invalid(
      `Cannot return output "${untyped.tensor.name}": ${untyped.info.datatype} has no typed contents field; ` +
        `leave "${BINARY_DATA_OUTPUT}" unset or true`,
    );
  }
  return { plan, raw: rawOut ?? (rawIn || untyped !== undefined) };
}

/**
 * Builds the response of a successful inference.
 *
 * @param model Model name.
 * @param version Model version.
 * @param p The validated request.
 * @param outputs Output bytes by name.
 * @returns The response: the request's id, the outputs in the planned order, their bytes raw or typed.
 */
export function modelInferResponse(
  model: string,
  version: string,
  p: ModelInferPlan,
  outputs: ReadonlyMap<string, Uint8Array>,
): ModelInferResponse {
  const tensors: InferOutputTensor[] = p.plan.outputs.map((o) => ({
    name: o.tensor.name,
    datatype: o.info.datatype,
    shape: o.tensor.shape,
    contents: p.raw ? null : encodeContents(o.info, outputs.get(o.tensor.name)!),
  }));
  return {
    model_name: model,
    model_version: version,
    id: p.plan.id ?? "",
    outputs: tensors,
    raw_output_contents: p.raw ? p.plan.outputs.map((o) => outputs.get(o.tensor.name)!) : [],
  };
}
