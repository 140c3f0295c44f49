/**
 * The messages of `inference.GRPCInferenceService` (grpc_predict_v2.proto) as plain objects, in the form the
 * server's loader options give them ({@linkcode PROTO_LOADER_OPTIONS}): field names as in the proto, every field
 * present (defaults filled, repeated fields as arrays, an unset message as `null`), 64-bit integers as decimal
 * strings so no precision is lost, `bytes` as `Uint8Array`, and the `InferParameter` oneof named in
 * `parameter_choice`. Responses are written with the same names; 64-bit fields accept numbers or strings.
 *
 * Spec: grpc_predict_v2.proto (KServe's Open Inference Protocol, gRPC).
 *
 * @module
 */

/**
 * The `@grpc/proto-loader` options the server loads the proto with, which give the shapes in this module: proto
 * field names, 64-bit integers as strings, defaults, empty arrays and the oneof name.
 */
export const PROTO_LOADER_OPTIONS: {
  readonly keepCase: true;
  readonly longs: StringConstructor;
  readonly enums: StringConstructor;
  readonly defaults: true;
  readonly arrays: true;
  readonly oneofs: true;
} = { keepCase: true, longs: String, enums: String, defaults: true, arrays: true, oneofs: true };

/** A 64-bit integer as decoded (a decimal string) or as written (a number or a string). */
export type Int64 = string | number;

/** `InferParameter`: a bool, int64 or string value; `parameter_choice` names the one set. */
export interface InferParameter {
  /** A boolean value. */
  readonly bool_param?: boolean;
  /** An int64 value. */
  readonly int64_param?: Int64;
  /** A string value. */
  readonly string_param?: string;
  /** Which of the three is set (decoded messages only). */
  readonly parameter_choice?: "bool_param" | "int64_param" | "string_param";
}

/** `map<string, InferParameter>`. */
export type InferParameters = Readonly<Record<string, InferParameter>>;

/** `InferTensorContents`: the typed representation of a tensor, one repeated field per datatype family. */
export interface InferTensorContents {
  /** BOOL. */
  readonly bool_contents: readonly boolean[];
  /** INT8, INT16, INT32. */
  readonly int_contents: readonly number[];
  /** INT64. */
  readonly int64_contents: readonly Int64[];
  /** UINT8, UINT16, UINT32. */
  readonly uint_contents: readonly number[];
  /** UINT64. */
  readonly uint64_contents: readonly Int64[];
  /** FP32. */
  readonly fp32_contents: readonly number[];
  /** FP64. */
  readonly fp64_contents: readonly number[];
  /** BYTES (not supported: no NEFF dtype). */
  readonly bytes_contents: readonly Uint8Array[];
}

/** `ModelInferRequest.InferInputTensor`. */
export interface InferInputTensor {
  /** Tensor name. */
  readonly name: string;
  /** Protocol datatype, e.g. `"FP32"`. */
  readonly datatype: string;
  /** Shape. */
  readonly shape: readonly Int64[];
  /** Input parameters. */
  readonly parameters: InferParameters;
  /** Typed contents, or `null` when the request uses `raw_input_contents`. */
  readonly contents: InferTensorContents | null;
}

/** `ModelInferRequest.InferRequestedOutputTensor`. */
export interface InferRequestedOutputTensor {
  /** Output name. */
  readonly name: string;
  /** Output parameters. */
  readonly parameters: InferParameters;
}

/** `ModelInferRequest`. */
export interface ModelInferRequest {
  /** Model name. */
  readonly model_name: string;
  /** Model version; `""` lets the server choose. */
  readonly model_version: string;
  /** Request id, echoed in the response; `""` when not given. */
  readonly id: string;
  /** Request parameters. */
  readonly parameters: InferParameters;
  /** Inputs. */
  readonly inputs: readonly InferInputTensor[];
  /** Requested outputs; empty for all. */
  readonly outputs: readonly InferRequestedOutputTensor[];
  /** Raw input bytes, one entry per input in the order of `inputs`, or empty when the inputs carry `contents`. */
  readonly raw_input_contents: readonly Uint8Array[];
}

/** `ModelInferResponse.InferOutputTensor`. */
export interface InferOutputTensor {
  /** Tensor name. */
  readonly name: string;
  /** Protocol datatype. */
  readonly datatype: string;
  /** Shape. */
  readonly shape: readonly Int64[];
  /** Output parameters. */
  readonly parameters?: InferParameters;
  /** Typed contents, absent when the response uses `raw_output_contents`. */
  readonly contents?: Partial<InferTensorContents> | null;
}

/** `ModelInferResponse`. */
export interface ModelInferResponse {
  /** Model name. */
  readonly model_name: string;
  /** Model version. */
  readonly model_version: string;
  /** The request's id. */
  readonly id: string;
  /** Response parameters. */
  readonly parameters?: InferParameters;
  /** Outputs. */
  readonly outputs: readonly InferOutputTensor[];
  /** Raw output bytes in the order of `outputs`, or empty when the outputs carry `contents`. */
  readonly raw_output_contents: readonly Uint8Array[];
}

/** `ServerLiveRequest`, `ServerReadyRequest`, `ServerMetadataRequest`: empty. */
export type EmptyRequest = Readonly<Record<string, never>>;

/** `ServerLiveResponse`. */
export interface ServerLiveResponse {
  /** Whether the server is live. */
  readonly live: boolean;
}

/** `ServerReadyResponse`. */
export interface ServerReadyResponse {
  /** Whether the server is ready. */
  readonly ready: boolean;
}

/** `ModelReadyRequest` and `ModelMetadataRequest`. */
export interface ModelRequest {
  /** Model name. */
  readonly name: string;
  /** Model version; `""` lets the server choose. */
  readonly version: string;
}

/** `ModelReadyResponse`. */
export interface ModelReadyResponse {
  /** Whether the model is ready. */
  readonly ready: boolean;
}

/** `ServerMetadataResponse`. */
export interface ServerMetadataResponse {
  /** Server name. */
  readonly name: string;
  /** Server version. */
  readonly version: string;
  /** Extensions. */
  readonly extensions: readonly string[];
}

/** `ModelMetadataResponse.TensorMetadata`. */
export interface TensorMetadata {
  /** Tensor name. */
  readonly name: string;
  /** Protocol datatype. */
  readonly datatype: string;
  /** Shape. */
  readonly shape: readonly Int64[];
}

/** `ModelMetadataResponse`. */
export interface ModelMetadataResponse {
  /** Model name. */
  readonly name: string;
  /** Versions. */
  readonly versions: readonly string[];
  /** Platform. */
  readonly platform: string;
  /** Inputs. */
  readonly inputs: readonly TensorMetadata[];
  /** Outputs. */
  readonly outputs: readonly TensorMetadata[];
}
