/**
 * The simulated device across a process boundary: {@linkcode DeviceDaemon} serves a `DeviceSimPortal` to many
 * runtime processes, {@linkcode RemotePortal} is the `remote` Portal backend that talks to it, over the compact
 * binary protocol of `protocol.ts` and an injected byte link (`Link`/`Dialer`), so this folder uses Web APIs only.
 * The daemon grants NeuronCores exclusively per process ({@linkcode CoreOwnership}) and reclaims a client's cores,
 * memory and waits when its connection ends. Socket transports live in the composition root (`@nrt/cli`).
 *
 * @example An in-process daemon, a client, a doorbell
 * ```ts
 * import { DeviceSimPortal } from "../mod.ts";
 * import { DeviceDaemon, linkPair, RemotePortal } from "./mod.ts";
 * const sim = new DeviceSimPortal();
 * const daemon = new DeviceDaemon({ portal: sim, spec: sim.spec, resetCore: (d, nc) => sim.resetQ7(d, nc) });
 * const portal = await RemotePortal.connect(linkPair((link) => daemon.accept(link)), { pid: 1, name: "example" });
 * await portal.acquireCores(0, [0]);
 * await portal.semaphoreIncrement(0, 0, 3, 1);
 * console.log(await portal.semaphoreRead(0, 0, 3)); // 1
 * await portal.close();
 * await daemon.close();
 * await sim.close();
 * ```
 *
 * @module
 */
export { type CoreGrant, type CoreOwner, CoreOwnership, describeOwner } from "./core_ownership.ts";
export {
  type DaemonSessionInfo,
  DeviceDaemon,
  type DeviceDaemonOptions,
  MAX_HELD_BYTES,
  MAX_SESSIONS,
  MAX_UNREAD_BYTES,
  MAX_WAITS_PER_SESSION,
} from "./device_daemon.ts";
export { type Dialer, type Link, type LinkEvents, linkPair } from "./link.ts";
export {
  BodyReader,
  decodeWakeSnapshot,
  encodeWakeSnapshot,
  ErrorKind,
  type Frame,
  FrameBuilder,
  FrameDecoder,
  HEADER_BYTES,
  MAX_FRAME_BYTES,
  MAX_NAME_BYTES,
  MAX_REQUEST_BYTES,
  MAX_TRANSFER_BYTES,
  Op,
  type Opcode,
  POSTED,
  PROTOCOL_VERSION,
  RESPONSE,
  type WakeSnapshot,
} from "./protocol.ts";
export { type DaemonStats, type RemoteIdentity, RemotePortal, type RemotePortalOptions } from "./remote_portal.ts";
