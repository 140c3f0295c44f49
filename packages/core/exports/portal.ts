/**
 * `@nrt/core/portal`: what a portal-backend author needs — the `Portal` driver ABI and its types, and the tracing
 * decorator that wraps any backend.
 *
 * Seed: runtime-synthesis §1.2 layer 4 (the `ndl_*` driver ABI), §3.5 (the completion wait).
 *
 * @example Trace what a backend is asked to do
 * ```ts ignore
 * import { TracingPortal } from "@nrt/core/portal";
 * const traced = new TracingPortal(backend);
 * ```
 *
 * @module
 */
export type { DeviceMemory, MemAllocRequest, MemoryLocation, Portal, PortalDeviceInfo } from "../portal.ts";
export { type TraceEntry, TracingPortal } from "../trace_portal.ts";
