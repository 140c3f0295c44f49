/**
 * The "maverick-sim" HAL: `KhalBase` from `@nrt/core` does the spec-driven work; the pack adds its run-stall
 * release, its error tables and its stock image. `thirdParty = true` lets `KhalBase`'s arch assertion (seed:
 * runtime-synthesis §1.2, "every aws_hal_q7_* asserts arch in {Sunda,Cayman,Mariana}") accept arch 5.
 *
 * @module
 */
import { type HalTarget, KhalBase, ncBlock, type SiliconSpec, type UcodeImage } from "@nrt/core";
import { MAVERICK_SPEC } from "./spec.ts";

/** The example's stock Pool image: the repository's `kernels/wasm/stock_pool.wasm` firmware, as base64. */
const IRAM_BASE64 =
  "AGFzbQEAAAABCAJgAAF/YAAAAikCA2VudhBjdXN0b21vcF9jbGVhbnVwAAEDZW52Bm1lbW9yeQIDAICABAMEAwAAAQcwBA91Y29kZV9hcGlfbGV2ZWwAAgp1Y29kZV9hcmNoAAEEbm9vcAADBm1lbW9yeQIAChMDBwBBACgCAAsEAEEDCwQAEAAL";

/** ISA error texts of the example, per error_id 0..11. */
const ISA_ERRORS: readonly string[] = Array.from({ length: 12 }, (_, id) => `maverick-sim ISA error ${id}`);

/** The "maverick-sim" HAL. */
export class MaverickKhal extends KhalBase {
  /** The example's spec. */
  readonly spec: SiliconSpec = MAVERICK_SPEC;
  /** Arch 5 is not one of the seed's three generations. */
  protected override readonly thirdParty: boolean = true;

  /** Clears the run-stall CSR, as Cayman and Mariana do. */
  async q7ReleaseRunStall(t: HalTarget, nc: number): Promise<void> {
    this.assertArch();
    await t.portal.barWrite32(t.device, 0, ncBlock(this.spec, nc) + 0x3000, 0x00);
  }

  /** The seed's decoder shape with no DVE-spurious bits. */
  errorSubtype(record: bigint): number {
    const id = Number(record & 0xffn);
    const mask = Number((record >> 8n) & 0xffffn);
    if (id > 0x0b) return 0;
    if (id === 4) return (mask & 0xfd6b) !== 0 ? 3 : 2;
    if (id === 1) return (mask & ~0x7e00 & 0xffff) !== 0 ? 1 : 0;
    return id;
  }

  /** 12 texts and a default. */
  isaErrorText(errorId: number): string {
    return Number.isInteger(errorId) && errorId >= 0 && errorId <= 0x0b ? ISA_ERRORS[errorId] : "maverick-sim: unknown ISA error";
  }

  /** The firmware with the arch id 5 in DRAM word 0. */
  stockPoolUcode(): UcodeImage {
    const s = atob(IRAM_BASE64);
    const iram = Uint8Array.from(s, (c) => c.charCodeAt(0));
    const dram = new Uint8Array(16);
    new DataView(dram.buffer).setUint32(0, this.spec.arch, true);
    return { iram, dram };
  }
}
