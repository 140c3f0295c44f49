/**
 * The one file of the pack that knows the registry: `registerCayman(container)` adds the Cayman HAL under the
 * core `Khal` token, beside any other packs (seed: runtime-synthesis §1.2, "per-arch fn-pointers filled at init").
 *
 * @module
 */
import { Khal } from "@nrt/core";
import type { DependencyContainer } from "tsyringe";
import { CaymanKhal } from "./khal.ts";

/** Registers the Cayman arch pack. Importing the package registers nothing by itself. */
export function registerCayman(container: DependencyContainer): void {
  container.register(Khal, { useValue: new CaymanKhal() });
}
