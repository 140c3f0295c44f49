/**
 * The one file of the pack that knows the registry: `registerMariana(container)` adds the Mariana HAL under the core
 * `Khal` token, beside any other packs (seed: runtime-synthesis §1.2, "per-arch fn-pointers filled at init").
 *
 * @module
 */
import { Khal } from "@nrt/core";
import type { DependencyContainer } from "tsyringe";
import { MarianaKhal } from "./khal.ts";

/**
 * Registers the Mariana arch pack. Importing the package registers nothing by itself.
 *
 * @param container The container to add a `Khal` registration to.
 *
 * @example Register beside the other packs
 * ```ts ignore
 * import "reflect-metadata";
 * import { container } from "tsyringe";
 * import { registerMariana } from "@nrt/arch-mariana";
 * registerMariana(container.createChildContainer());
 * ```
 */
export function registerMariana(container: DependencyContainer): void {
  container.register(Khal, { useValue: new MarianaKhal() });
}
