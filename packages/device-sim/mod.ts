/**
 * `@nrt/device-sim`: a simulated AWS Neuron device behind the `Portal` contract of `@nrt/core` — device memory, the
 * BAR0 register file per NeuronCore, the notification queue, the SP/SEQ sequencer that executes the instruction
 * streams of `@nrt/core`'s ISA, the custom-op DMA queues and the 8 Q7 cores per NeuronCore running WebAssembly
 * kernels SPMD in Workers. The device runs as an agent of its own (a Worker per device by default): the host only
 * writes registers and memory it shares with it, rings doorbells and waits on the notification queue, as a driver
 * does. Importing it has no side effects; a composition root passes a `DeviceSimPortal` to `Runtime.init`.
 *
 * Seed: runtime-synthesis §1.2 layer 4 and §3 (the execute path the simulator runs device-side).
 *
 * @example Ring a doorbell with nothing registered
 * ```ts
 * import { DeviceSimPortal } from "@nrt/device-sim";
 * const portal = new DeviceSimPortal();
 * await portal.semaphoreIncrement(0, 0, 3, 1);
 * console.log(await portal.semaphoreRead(0, 0, 3)); // 1: no stream has semaphore 3 as its doorbell
 * await portal.close();
 * ```
 *
 * @module
 */
export { type DeviceAgentMode, type DeviceSimOptions, DeviceSimPortal } from "./device_sim_portal.ts";
export type { NcTimelineEvent, Q7CoreActivity } from "./device_trace.ts";
export {
  type Q7CoreOutcome,
  type RunOutcome,
  sharedClockMs,
  type TimelineBase,
  type TimelineEvent,
} from "./device_log.ts";
export { defaultQ7Factory } from "./q7_factory.ts";
export { FAULT_IP_MARKER, TpbFaultMask } from "./sequencer.ts";
export { NQ_CAUSE_OVERFLOW, NqRegister, STREAM_ENTRY_BYTES } from "./bar0.ts";
export {
  type NcRegisterBuffers,
  type NcRegisters,
  NcStatus,
  Q7State,
  ReapWord,
  type StreamEntry,
} from "./nc_registers.ts";
export type { QueueBytes } from "./dma_engine.ts";
export type {
  Q7AbortSignal,
  Q7BootEvent,
  Q7ClusterFactory,
  Q7ClusterPort,
  Q7CoreResult,
  Q7DispatchArgs,
  Q7DispatchOp,
} from "./q7_complex.ts";
export {
  type ArmedFault,
  FaultInjector,
  FaultKind,
  type FaultPhase,
  type FaultSpec,
  FIRED_FAULTS_KEPT,
  type FiredFault,
  type InjectedFault,
  NcFaults,
} from "./fault_injector.ts";
export { type DeviceStdioQueue, FileIoManager } from "./file_io_manager.ts";
