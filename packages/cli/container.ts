/**
 * The composition root's container: the embedded simulator as the portal and every arch pack side by side.
 *
 * @module
 */
import "reflect-metadata";
import { registerCayman } from "@nrt/arch-cayman";
import type { SiliconSpec } from "@nrt/core";
import { registerDeviceSim } from "@nrt/device-sim";
import { container as root, type DependencyContainer } from "tsyringe";

/** Options of {@linkcode createNrtContainer}. */
export interface NrtContainerOptions {
  /** The silicon the simulator models (default Cayman). */
  readonly spec?: SiliconSpec;
  /** Override of the simulated HBM size (out-of-memory tests). */
  readonly hbmBytes?: number;
}

/** A child container with the device simulator and the arch packs registered. */
export function createNrtContainer(options: NrtContainerOptions = {}): DependencyContainer {
  const c = root.createChildContainer();
  registerCayman(c);
  registerDeviceSim(c, { spec: options.spec, hbmBytes: options.hbmBytes });
  return c;
}
