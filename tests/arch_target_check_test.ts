/**
 * `checkNeffTarget()`: a NEFF built for another generation is refused with NRT_INVALID naming both; with
 * `NEURON_RT_ALLOW_LEGACY_NEFF` an older generation's NEFF is accepted, a newer one never (seed:
 * lifecycle-error-model §2.6, §2.7).
 */
import { describe, expect, test } from "bun:test";
import { CAYMAN_SPEC } from "@nrt/arch-cayman";
import { MARIANA_SPEC } from "@nrt/arch-mariana";
import { SUNDA_SPEC } from "@nrt/arch-sunda";
import { NrtError, NrtStatus, readNeff } from "@nrt/core";
import type { SiliconSpec } from "@nrt/core/hal";
import { checkNeffTarget, neffTargetArch } from "../packages/core/kelf/target_check.ts";
import { MAVERICK_SPEC } from "../examples/third_party_pack/mod.ts";
import { oneOpNeff } from "./_kernels.ts";

/** The generations a runtime with the three shipped packs and the example's fourth one knows. */
const KNOWN = [SUNDA_SPEC, CAYMAN_SPEC, MARIANA_SPEC, MAVERICK_SPEC];

function verdict(target: string, spec: SiliconSpec, allowLegacy: boolean): string {
  try {
    checkNeffTarget(target, spec, allowLegacy, KNOWN);
    return "ok";
  } catch (e) {
    expect(e).toBeInstanceOf(NrtError);
    expect((e as NrtError).status).toBe(NrtStatus.NRT_INVALID);
    return "refused";
  }
}

describe("checkNeffTarget()", () => {
  test("checkNeffTarget() accepts exactly the same generation without the opt-in, and older ones with it", () => {
    const specs = [SUNDA_SPEC, CAYMAN_SPEC, MARIANA_SPEC];
    const targets = ["sunda", "cayman", "mariana"];
    const table = (legacy: boolean) => specs.map((s) => targets.map((t) => verdict(t, s, legacy)));
    expect(table(false)).toEqual([
      ["ok", "refused", "refused"],
      ["refused", "ok", "refused"],
      ["refused", "refused", "ok"],
    ]);
    expect(table(true)).toEqual([
      ["ok", "refused", "refused"],
      ["ok", "ok", "refused"],
      ["ok", "ok", "ok"],
    ]);
  });

  test("checkNeffTarget() names the NEFF's target and the device's generation, and the opt-in", () => {
    const e = (() => {
      try {
        checkNeffTarget("sunda", CAYMAN_SPEC, false, KNOWN);
      } catch (x) {
        return x as NrtError;
      }
    })();
    expect(e?.message).toBe(
      'Cannot load a NEFF built for "sunda" (al_hal_tpb_arch_type 2) on a cayman device (NC-v3, al_hal_tpb_arch_type 3): ' +
        "it targets an older generation; set NEURON_RT_ALLOW_LEGACY_NEFF=1 to accept it",
    );
    expect(() => checkNeffTarget("mariana", SUNDA_SPEC, true, KNOWN)).toThrow(
      'Cannot load a NEFF built for "mariana" (al_hal_tpb_arch_type 4) on a sunda device (NC-v2, al_hal_tpb_arch_type 2): a newer generation\'s NEFF never runs on an older one',
    );
    expect(() => checkNeffTarget("inferentia9", CAYMAN_SPEC, true, KNOWN)).toThrow(
      '"inferentia9" is not a NeuronCore generation this runtime knows',
    );
  });

  test("checkNeffTarget() knows the instance families and ignores case", () => {
    expect(["trn1", "inf2", "TRN1", " Sunda "].map((t) => neffTargetArch(t, [SUNDA_SPEC, CAYMAN_SPEC, MARIANA_SPEC])))
      .toEqual([2, 2, 2, 2]);
    expect(neffTargetArch("trn2", [SUNDA_SPEC, CAYMAN_SPEC, MARIANA_SPEC])).toBe(3);
    expect(verdict("trn2", CAYMAN_SPEC, false)).toBe("ok");
    expect(verdict("inf2", SUNDA_SPEC, false)).toBe("ok");
    expect(verdict("trn1", CAYMAN_SPEC, true)).toBe("ok");
  });

  test("checkNeffTarget() knows only the generations it is given: a name no pack answers to is unknown", () => {
    expect(() => checkNeffTarget("sunda", CAYMAN_SPEC, true, [CAYMAN_SPEC])).toThrow(
      '"sunda" is not a NeuronCore generation this runtime knows',
    );
    expect(neffTargetArch("cayman", [])).toBeUndefined();
  });

  test("checkNeffTarget() resolves a third-party pack's own name, and older generations under the opt-in", () => {
    expect(verdict("maverick-sim", MAVERICK_SPEC, false)).toBe("ok");
    expect(verdict("cayman", MAVERICK_SPEC, false)).toBe("refused");
    expect(verdict("cayman", MAVERICK_SPEC, true)).toBe("ok");
    expect(verdict("maverick-sim", MARIANA_SPEC, true)).toBe("refused");
  });

  test("checkNeffTarget() reads the target the NEFF builder writes", () => {
    const f = (name: string) => ({ name, dtype: "float32", shape: [4] });
    for (const spec of [SUNDA_SPEC, CAYMAN_SPEC, MARIANA_SPEC]) {
      const target = readNeff(oneOpNeff("relu", "relu", [f("a")], [f("o")], 8, [], spec.name)).target;
      expect(target).toBe(spec.name);
      expect(verdict(target, spec, false)).toBe("ok");
    }
  });
});
