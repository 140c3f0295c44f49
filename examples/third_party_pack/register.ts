/**
 * The example pack's registration function: the same shape as `registerCayman` — one `Khal` registration, added
 * beside whatever packs the container already holds (ARCHITECTURE §3, "A third-party pack registers the same way").
 *
 * @module
 */
import { Khal } from "@nrt/core";
import type { DependencyContainer } from "tsyringe";
import { MaverickKhal } from "./khal.ts";

/** Registers the "maverick-sim" pack under the core `Khal` token. */
export function registerMaverick(container: DependencyContainer): void {
  container.register(Khal, { useValue: new MaverickKhal() });
}
