/**
 * Reading a `ModelInferRequest` and writing its `ModelInferResponse`. The request is checked by the REST server's
 * own planner (`@nrt/http-api`'s `planInfer`: names, datatypes, shapes, missing and duplicate inputs, requested
 * outputs), so both protocols accept and refuse the same requests with the same messages; each input's bytes come,
 * once its datatype and shape match the model's, from its typed `contents` or from `raw_input_contents` (never
 * both), without an intermediate copy.
 *
 * The output rule (README.md, "Raw and typed contents"): outputs are raw when the request's `binary_data_output`
 * parameter says so; without it, when the request sent `raw_input_contents` or a returned output has no typed field
 * (FP16, BF16, FP8); otherwise they are typed `contents`.
 *
 * Spec: grpc_predict_v2.proto `ModelInferRequest`, `ModelInferResponse`.
 *
 * @module
 */
import { type InferPlan, planInfer, type RequestLimits, type TensorSignature } from "@nrt/http-api";
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

function invalid(message: string): GrpcError {
  return new GrpcError(GrpcCode.INVALID_ARGUMENT, message, { httpStatus: 400 });
}

/** A decoded int64 dimension as a number when it is one exactly, else as the decimal string it came as. */
function dimension(d: string | number): number | string {
  const n = Number(d);
  return Number.isSafeInteger(n) ? n : d;
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
  const plan = planInfer(
    {
      id: req.id === "" ? undefined : req.id,
      inputs: req.inputs.map((x, k) => ({
        name: x.name,
        datatype: x.datatype,
        // A dimension past 2^53 stays the client's decimal string, which the planner refuses quoting it exactly.
        shape: x.shape.map(dimension),
        bytes: (where, info, count) => {
          if (!rawIn) return decodeContents(where, info, x.contents, count);
          if (hasContents(x.contents)) {
            throw invalid(
              `Cannot read ${where}: it has contents while the request uses raw_input_contents`,
            );
          }
          const bytes = req.raw_input_contents[k];
          const want = count * info.bytes;
          if (bytes.byteLength !== want) {
            throw invalid(
              `Cannot read ${where}: raw_input_contents[${k}] holds ${bytes.byteLength} bytes, its shape and datatype make ${want}`,
            );
          }
          return bytes;
        },
      })),
      outputs: req.outputs.length > 0 ? req.outputs.map((o) => ({ name: o.name })) : undefined,
      binaryOutput: true, // the rule below picks raw or typed for the whole response
    },
    sig,
    limits,
  );
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
