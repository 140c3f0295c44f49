/**
 * The one file of the pack that knows the registry: `registerSunda(container)` adds the Sunda HAL under the core
 * `Khal` token, beside any other packs (seed: runtime-synthesis §1.2, "per-arch fn-pointers filled at init").
 *
 * @module
 */
import { Khal } from "@nrt/core";
import type { DependencyContainer } from "tsyringe";
import { SundaKhal } from "./khal.ts";

/**
 * Registers the Sunda arch pack. Importing the package registers nothing by itself.
 *
 * @param container The container to add a `Khal` registration to.
 *
 * @example Register beside the other packs
 * ```ts ignore
 * import "reflect-metadata";
 * import { container } from "tsyringe";
 * import { registerSunda } from "@nrt/arch-sunda";
 * registerSunda(container.createChildContainer());
 * ```
 */
export function registerSunda(container: DependencyContainer): void {
  container.register(Khal, { useValue: new SundaKhal() });
}
