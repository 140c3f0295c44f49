/**
 * The NEFF target check: a NEFF built for one NeuronCore generation is refused on another, unless the user opted in
 * to running an OLDER generation's NEFF (`NEURON_RT_ALLOW_LEGACY_NEFF`); a newer generation's NEFF never runs.
 *
 * Seed: lifecycle-error-model §2.6 (`kbl_model_add` asks `al_hal_tpb_get_arch_type` first — the generations are
 * ordered by `al_hal_tpb_arch_type`: SUNDA = 2 < CAYMAN = 3 < MARIANA = 4), §2.7 (a NEFF the load path cannot take is
 * `NRT_INVALID`). Which names a `kelf-0.json` target may use (the registered packs' names and instance families, for
 * example `trn1` for Sunda) and the opt-in rule are ours, after the documented meaning of
 * `NEURON_RT_ALLOW_LEGACY_NEFF`.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import type { SiliconSpec } from "../silicon_spec.ts";
import { NrtStatus } from "../status.ts";

/**
 * The `al_hal_tpb_arch_type` a NEFF target names, or `undefined` for a name the runtime does not know. The names are
 * the given generations' spec names and instance families (for example `trn1` for Sunda): core lists no generation
 * of its own, the registered arch packs do.
 *
 * @param target `kelf-0.json` target, case-insensitive.
 * @param specs The generations the runtime was given (its arch packs' specs).
 * @returns The arch id, or `undefined`.
 */
export function neffTargetArch(target: string, specs: readonly SiliconSpec[]): number | undefined {
  const t = target.trim().toLowerCase();
  return specs.find((s) => s.name.toLowerCase() === t || s.instances.some((i) => i.toLowerCase() === t))?.arch;
}

/**
 * Refuses a NEFF whose target is another generation than the device's.
 *
 * @param target The NEFF's `kelf-0.json` target (`NeffFile.target`).
 * @param spec The silicon spec of the arch pack the runtime chose.
 * @param allowLegacy `NEURON_RT_ALLOW_LEGACY_NEFF`: accept a NEFF of an older generation (lower arch id).
 * @param known Every generation the runtime was given (default: the running one only).
 * @throws {NrtError} `NRT_INVALID` naming the NEFF's target and the device's generation when the target is unknown,
 *   newer, or older without `allowLegacy`.
 *
 * @example A Trn1 NEFF on a Cayman device needs the opt-in
 * ```ts ignore
 * import { CAYMAN_SPEC } from "@nrt/arch-cayman";
 * import { SUNDA_SPEC } from "@nrt/arch-sunda";
 * checkNeffTarget("sunda", CAYMAN_SPEC, true, [SUNDA_SPEC, CAYMAN_SPEC]); // accepted: an older generation, opted in
 * checkNeffTarget("sunda", CAYMAN_SPEC, false, [SUNDA_SPEC, CAYMAN_SPEC]); // throws NrtError(NRT_INVALID)
 * ```
 */
export function checkNeffTarget(
  target: string,
  spec: SiliconSpec,
  allowLegacy: boolean,
  known: readonly SiliconSpec[] = [spec],
): void {
  const arch = neffTargetArch(target, known.includes(spec) ? known : [spec, ...known]);
  if (arch === spec.arch) return;
  const device = `a ${spec.name} device (${spec.generation}, al_hal_tpb_arch_type ${spec.arch})`;
  if (arch === undefined) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot load a NEFF built for "${target}" on ${device}: "${target}" is not a NeuronCore generation this runtime knows`,
    );
  }
  const built = `a NEFF built for "${target}" (al_hal_tpb_arch_type ${arch})`;
  if (arch > spec.arch) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot load ${built} on ${device}: a newer generation's NEFF never runs on an older one`,
    );
  }
  if (!allowLegacy) {
    throw new NrtError(
      NrtStatus.NRT_INVALID,
      `Cannot load ${built} on ${device}: it targets an older generation; set NEURON_RT_ALLOW_LEGACY_NEFF=1 to accept it`,
    );
  }
}
