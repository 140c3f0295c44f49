/**
 * The stock Pool ucode Mariana ships (`ucode_set_q7_ucode_bins(AL_HAL_POOLING_Q7)`, seed: runtime-synthesis §2.1):
 * IRAM = the simulator-ISA firmware built from `kernels/src/stock_pool.ts` (`tests/arch_packs_test.ts` keeps it
 * byte-identical to `kernels/wasm/stock_pool.wasm`), DRAM = 16 bytes whose first u32 is the architecture id the
 * firmware reports through `ucode_arch` (4, `AL_HAL_TPB_ARCH_TYPE_MARIANA`, seed: lifecycle-error-model §2.6).
 *
 * @module
 */
import type { UcodeImage } from "@nrt/core";

const IRAM_BASE64 =
  "AGFzbQEAAAABCAJgAAF/YAAAAikCA2VudhBjdXN0b21vcF9jbGVhbnVwAAEDZW52Bm1lbW9yeQIDAICABAMEAwAAAQcwBA91Y29kZV9hcGlfbGV2ZWwAAgp1Y29kZV9hcmNoAAEEbm9vcAADBm1lbW9yeQIAChMDBwBBACgCAAsEAEEDCwQAEAAL";

/** The architecture id word 0 of the DRAM image carries. */
const ARCH_ID = 4;

function decode(b64: string): Uint8Array {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/**
 * The stock image: a fresh copy on every call, so callers cannot alter the shipped bytes.
 *
 * @returns `{iram, dram}`: the firmware module and a 16-byte data image starting with the arch id 4.
 */
export function marianaStockPoolUcode(): UcodeImage {
  const dram = new Uint8Array(16);
  new DataView(dram.buffer).setUint32(0, ARCH_ID, true);
  return { iram: decode(IRAM_BASE64), dram };
}
