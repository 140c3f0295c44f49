/**
 * `dlr_model`: what the runtime keeps per loaded model, and the outcome of one execution request.
 *
 * Seed: lifecycle-error-model §1.2 (`DLR_MODEL_STATE`, the volatile state and ref count), §1.3 (`exec_rets[2]`),
 * §5.5 (the poisoned, fail-stop model), §3.2 (`kmgr_unload_nn`: per-handle `nn_ref_decrement`, teardown at 0), §2.2
 * step 7 (the interned model-id cache); runtime-synthesis §2.3 (the metaneff binding), §4.2 (ref counts).
 *
 * @module
 */
import type { KelfModel } from "../kelf/kelf_load.ts";
import type { IoBinding } from "../kelf/metaneff.ts";
import type { DlrModelState } from "../state.ts";
import type { InstalledModel } from "../tdrv/kbl_model_add.ts";
import type { Tensor } from "../tensor.ts";

/** The outcome of one execution request (`exec_request_state` after `EXEC_STATE_DONE`). */
export interface ExecOutcome {
  /** The request's status: the worst of `execRets` by `nrt_get_status_priority`. */
  readonly status: number;
  /** `exec_rets[2]`: one status per physical NeuronCore of the request (one entry for a single-core model). */
  readonly execRets: readonly number[];
}

/** Per-model state kept by the runtime (`dlr_model`; seed: lifecycle-error-model §1.2, `dlr_model.state` @+424). */
export interface DlrModel {
  readonly handle: number;
  readonly name: string;
  readonly kelf: KelfModel;
  readonly vnc: number;
  /** The install on the first physical core of the request. */
  readonly installed: InstalledModel;
  /** One install per physical core the model spans (graph k on core k; `lnc_size` 2 → both cores of the vNC). */
  readonly parts: readonly InstalledModel[];
  state: DlrModelState;
  /** References of executions in flight (`nn_ref_increment` per execute); an unload drains them. */
  refCount: number;
  drained?: () => void;
  /**
   * The load references: one per `Model` handle `nrt_load` returned for this interned model (ours: a set of handles
   * for the seed's per-handle `nn_ref_decrement`). `kmgr_unload_nn` tears down only when the last one goes (seed:
   * lifecycle-error-model §3.2).
   */
  readonly holders: Set<object>;
  /** The `nrt_load_util` step-7 model-id cache key this model is interned under (`undefined`: not shared). */
  cacheKey?: string;
  poisoned?: number;
  /** Device staging buffers for host-placed I/O, by io index. */
  readonly staging: Map<number, Tensor>;
  /** The metaneff binding (identity without a metaneff). */
  readonly binding: IoBinding;
  /** Device tensors of INPUT_STATE / INPUT_WEIGHT inputs, by input ordinal. */
  readonly resident: Map<number, Tensor>;
}
