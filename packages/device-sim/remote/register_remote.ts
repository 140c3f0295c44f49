/**
 * The one place the remote backend meets the DI container: {@linkcode registerRemotePortal} puts a connected
 * {@linkcode RemotePortal} under the core `Portal` token (ARCHITECTURE §3), the way `registerDeviceSim` does for the
 * embedded simulator.
 *
 * @module
 */
import { Portal } from "@nrt/core";
import type { DependencyContainer } from "tsyringe";
import type { RemotePortal } from "./remote_portal.ts";

/**
 * Registers `portal` as the container's `Portal` and returns it (the caller owns its `close()`).
 *
 * @example
 * ```ts ignore
 * const portal = await RemotePortal.connect(dial, { pid: 4242, name: "server-a" });
 * registerRemotePortal(child, portal);
 * const rt = await Runtime.init({ container: child });
 * ```
 */
export function registerRemotePortal(container: DependencyContainer, portal: RemotePortal): RemotePortal {
  container.register<Portal>(Portal, { useValue: portal });
  return portal;
}
