/**
 * A model's metadata as the protocol gives it (`GET /v2/models/{m}`, gRPC `ModelMetadata`): name, versions, platform
 * `neuron`, and the inputs and outputs with protocol datatypes; and, over REST only, the model's instances.
 *
 * Spec: inference_rest.md "Model Metadata Response JSON Object", "$metadata_tensor"; grpc_predict_v2.proto
 * `ModelMetadataResponse`. The `instances` member is ours (docs/rest-api.md, "Instance groups").
 *
 * @module
 */
import type { NeffTensor } from "@nrt/core";
import { dtypeInfo } from "./datatype.ts";
import { notReadyError, type RepositoryModel } from "./model_repository.ts";

/** The platform name of every model. */
export const MODEL_PLATFORM = "neuron";

/** `$metadata_tensor`. */
export interface TensorMetadata {
  /** Tensor name. */
  readonly name: string;
  /** Protocol datatype, e.g. `"FP32"`. */
  readonly datatype: string;
  /** Shape. */
  readonly shape: readonly number[];
}

/** `$metadata_model_response`. */
export interface ModelMetadata {
  /** Model name. */
  readonly name: string;
  /** The version served. */
  readonly versions: readonly string[];
  /** `neuron`. */
  readonly platform: string;
  /** Inputs. */
  readonly inputs: readonly TensorMetadata[];
  /** Outputs. */
  readonly outputs: readonly TensorMetadata[];
}

/** One instance of a model's instance group, as REST metadata lists it. */
export interface InstanceMetadata {
  /** `<model>_<index>`, as Triton names instances. */
  readonly name: string;
  /** The logical NeuronCore it is loaded on. */
  readonly vnc: number;
  /** Whether it takes requests (false once a fault poisoned it). */
  readonly ready: boolean;
}

/**
 * A tensor's metadata: its protocol datatype (the NEFF dtype upper-cased when the protocol has none).
 *
 * @param t A NEFF tensor.
 * @returns Name, datatype, shape.
 *
 * @example
 * ```ts
 * import { tensorMetadata } from "@nrt/http-api";
 * console.log(tensorMetadata({ name: "x", dtype: "float32", shape: [8], size: 32 })); // { name: "x", datatype: "FP32", shape: [8] }
 * ```
 */
export function tensorMetadata(t: NeffTensor): TensorMetadata {
  return { name: t.name, datatype: dtypeInfo(t.dtype)?.datatype ?? t.dtype.toUpperCase(), shape: t.shape };
}

/**
 * A model's metadata, from the signature of its last successful load (so it outlives an unload).
 *
 * @param m The model.
 * @returns The metadata.
 * @throws {HttpError} 503 when the model was never loaded (its signature is unknown).
 */
export function modelMetadata(m: RepositoryModel): ModelMetadata {
  if (m.signature === undefined) throw notReadyError(m);
  return {
    name: m.name,
    versions: [m.version],
    platform: MODEL_PLATFORM,
    inputs: m.signature.inputs.map(tensorMetadata),
    outputs: m.signature.outputs.map(tensorMetadata),
  };
}

/**
 * The instances of a loaded model (empty when it is not loaded).
 *
 * @param m The model.
 * @returns One entry per instance, in the order of the instance group.
 */
export function instanceMetadata(m: RepositoryModel): InstanceMetadata[] {
  return (m.served?.instances ?? []).map((i) => ({
    name: `${m.name}_${i.index}`,
    vnc: i.vnc,
    ready: i.poisoned === undefined,
  }));
}
