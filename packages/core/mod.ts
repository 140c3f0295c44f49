/**
 * `@nrt/core`: the nrt runtime — what an application uses. `Runtime.init` takes a device backend (a `Portal`) and
 * the NeuronCore generations it may drive (`ArchPack`s) and brings the device up; models load from NEFF bytes,
 * execute on tensors, and unload; every failure is an `NrtError` carrying libnrt's `NrtStatus`. The flat `nrt_*`
 * functions are the same runtime with libnrt's C shapes.
 *
 * Plug-in authors import the subpaths: `@nrt/core/hal` (arch packs), `@nrt/core/portal` (device backends),
 * `@nrt/core/isa` (the device contract), `@nrt/core/neff` (the NEFF container in full), `@nrt/core/testing`
 * (conformance suites).
 *
 * Seed: runtime-synthesis §7 (the end-to-end host model); each module cites its own sections.
 *
 * @example Load and run a model on the embedded simulator
 * ```ts ignore
 * import { Runtime, TensorSet } from "@nrt/core";
 * import { cayman } from "@nrt/arch-cayman";
 * import { DeviceSimPortal } from "@nrt/device-sim";
 *
 * await using rt = await Runtime.init({ portal: new DeviceSimPortal(), archPacks: [cayman] });
 * await using model = await rt.load(neffBytes);
 * const x = await rt.allocateTensor({ size: 32, name: "x" });
 * const y = await rt.allocateTensor({ size: 32, name: "y" });
 * await x.write(new Uint8Array(32));
 * const ins = new TensorSet(), outs = new TensorSet();
 * ins.add("x", x);
 * outs.add("y", y);
 * await model.execute(ins, outs);
 * console.log(await y.read());
 * ```
 *
 * @module
 */
export {
  type AllocateTensorOptions,
  type CoreInfo,
  type CoreMemory,
  type ExecutionEvent,
  type LoadCollectivesOptions,
  type LoadOptions,
  Model,
  Runtime,
  type RuntimeInitOptions,
  type RuntimeMemory,
  type VncMemoryStats,
} from "./runtime.ts";
export { RuntimeEvents } from "./runtime_events.ts";
export {
  INFER_ERROR_NAMES,
  InferErrorFlag,
  type InferErrorName,
  KBL_INFER_ERRORS_SIZE,
  type KblInferErrors,
  type ModelExecutionStats,
  type NcExecutionStats,
} from "./kmgr/kmetric.ts";
export { hostClockMs, type HostSpan, type HostSpanListener } from "./host_span.ts";
export { Tensor, type TensorLocation, TensorPlacement, TensorSet } from "./tensor.ts";
export type { ArchPack } from "./khal.ts";
export type { Portal } from "./portal.ts";
export {
  isNrtStatus,
  nrt_get_status_as_str,
  nrt_get_status_priority,
  NrtStatus,
  nrtStatusName,
  NrtStatusPriority,
  worseStatus,
} from "./status.ts";
export { DMA_MEM_USAGE_SLOTS, DMA_MEM_USAGE_TOTAL, DmaMemUsageType } from "./dmem/dmem.ts";
export { isNrtError, NrtError, type NrtErrorOptions } from "./error.ts";
export { DlrModelState, KmgrExecMode, NrtInitState } from "./state.ts";
export {
  DEFAULT_EXEC_TIMEOUT_SECONDS,
  DEFAULT_GPSIMD_STDOUT_QUEUE_SIZE_BYTES,
  envFromProcess,
  resolveRuntimeConfig,
  RUNTIME_ENV_VARIABLES,
  type RuntimeConfig,
  type RuntimeOptions,
} from "./config.ts";
export {
  createConsoleLogger,
  createNullLogger,
  type LogEntry,
  type Logger,
  LogLevel,
  type LogLevelName,
  logLevelName,
  type LogWrite,
  MemoryLogger,
  parseLogLevel,
} from "./log.ts";
export { type Clock, SystemClock, VirtualClock } from "./clock.ts";
export { type ExecOutcome } from "./kmgr/dlr_model.ts";
export { type AsyncExecCompletion, type AsyncExecListener, type AsyncPollResult } from "./kmgr/kmgr_async_exec.ts";
export {
  type Nrta,
  NRTA_SEQ_NUM_MAX,
  type NrtaError,
  NrtaErrorTracker,
  type NrtaRequest,
  type NrtaScheduleOptions,
  nrtaSeq,
  nrtaSeqNum,
  nrtaSeqXu,
  NrtaXu,
  type PreparedExecution,
} from "./nrta/nrta.ts";
export { type VncChoice } from "./vnc/vnc.ts";
export {
  ccReference,
  ccSizes,
  Collective,
  type CollectiveOptions,
  Collectives,
  type CollectivesComm,
  fromBfloat16,
  NrtaCcDtype,
  NrtaCcOp,
  NrtaCcRedOp,
  toBfloat16,
} from "./collectives/collectives.ts";
export { type NeffFile, type NeffGraph, readNeff, readNeffAsync, type ReadNeffOptions } from "./neff/neff_file.ts";
export type { JsonObject } from "./neff/_json.ts";
export { buildNeff, type BuildNeffOptions } from "./neff/neff_builder.ts";
export { type NeffTensor } from "./neff/neff_signature.ts";
export {
  buildCustomOpNeff,
  type CustomOpBufferSpec,
  type CustomOpCallSpec,
  type CustomOpLibrarySpec,
  type CustomOpModelSpec,
  type CustomOpTensorSpec,
  type CustomOpViewSpec,
  type CustomOpWeightSpec,
} from "./kelf/custom_op_neff.ts";
export { EXT_ISA_LIBRARY_NAME, type ExtIsaLibrary, extIsaLibrary, ExtIsaOpcode } from "./kelf/ext_isa.ts";
export { type MetaNeff, type MetaTensor, type MetaTensorType } from "./kelf/metaneff.ts";
export * from "./nrt_api.ts";
