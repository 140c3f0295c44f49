/**
 * The one place `@nrt/device-sim` meets the DI container: {@linkcode registerDeviceSim} puts a
 * {@linkcode DeviceSimPortal} under the core `Portal` token (ARCHITECTURE §3: one explicit registration function
 * per plug-in package, no decorators, no side effects on import).
 *
 * @module
 */
import { Portal } from "@nrt/core";
import type { DependencyContainer } from "tsyringe";
import { DeviceSimPortal, type DeviceSimOptions } from "./device_sim_portal.ts";

/**
 * Registers a simulated device as the container's `Portal` and returns it (the caller owns its `close()`).
 *
 * @example Register into a child container
 * ```ts ignore
 * import "reflect-metadata";
 * import { container } from "tsyringe";
 * import { Portal } from "@nrt/core";
 * import { registerDeviceSim } from "@nrt/device-sim";
 * const child = container.createChildContainer();
 * registerDeviceSim(child, { devices: 2 });
 * const portal = child.resolve<Portal>(Portal);
 * ```
 */
export function registerDeviceSim(container: DependencyContainer, options?: DeviceSimOptions): DeviceSimPortal {
  const portal = new DeviceSimPortal(options);
  container.register<Portal>(Portal, { useValue: portal });
  return portal;
}
