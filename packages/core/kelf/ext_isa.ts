/**
 * The base ext-ISA library every GPSIMD NEFF bundles as its library 0.
 *
 * Seed: runtime-synthesis §3.1 (`ucode_model_has_custom_ops(model) == (num_libs > 1)`: a NEFF carries custom ops iff
 * it bundles more than one ucode library, the base plus at least one custom), §4.4 (a one-library set is the single
 * EXT-ISA library, staged once per NeuronCore and shared; 2..9 libraries are staged per model).
 *
 * Ours: what the base library holds. The seed does not describe its functions. The simulator's is built from
 * `kernels/src/ext_isa.ts` (`tests/ext_isa_library_test.ts` keeps these bytes equal to `kernels/wasm/ext_isa.wasm`)
 * and offers two extended instructions over the reserved opcodes 0xFF00..0xFFFF: `ext_copy` (output 0 = input 0)
 * and `ext_fill` (every byte of output 0 = scalar 0). A custom library may not bind an opcode of that range.
 *
 * @module
 */

/** Name of the base library in a NEFF (`sg00/ucode/ext_isa.wasm`). */
export const EXT_ISA_LIBRARY_NAME = "ext_isa";

/** First opcode reserved to the base ext-ISA library (ours). */
export const EXT_ISA_OPCODE_FIRST = 0xff00;

/** The base library's extended instructions (ours). */
export const ExtIsaOpcode = {
  /** `ext_copy`: copies input 0 into output 0 (the smaller of the two sizes), split over the cores. */
  COPY: 0xff00,
  /** `ext_fill`: sets every byte of output 0 to the low byte of scalar 0, split over the cores. */
  FILL: 0xff01,
} as const;

/** The base library as a NEFF carries it: image, fan-out and functions. */
export interface ExtIsaLibrary {
  /** {@linkcode EXT_ISA_LIBRARY_NAME}. */
  readonly name: string;
  /** The WebAssembly image (a fresh copy per call of {@linkcode extIsaLibrary}). */
  readonly wasm: Uint8Array;
  /** 8: the functions run SPMD on the cluster. */
  readonly totalCpus: 8;
  /** The functions and their opcodes. */
  readonly functions: ReadonlyArray<{ readonly opcode: number; readonly name: string }>;
}

/** The base ext-ISA library. */
export function extIsaLibrary(): ExtIsaLibrary {
  const s = atob(EXT_ISA_BASE64);
  const wasm = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) wasm[i] = s.charCodeAt(i);
  return {
    name: EXT_ISA_LIBRARY_NAME,
    wasm,
    totalCpus: 8,
    functions: [{ opcode: ExtIsaOpcode.COPY, name: "ext_copy" }, { opcode: ExtIsaOpcode.FILL, name: "ext_fill" }],
  };
}

const EXT_ISA_BASE64 =
  "AGFzbQEAAAABDANgAAF/YAAAYAABfgKkAQcDZW52CmdldF9jcHVfaWQAAANlbnYTY3VzdG9tb3BfdG90YWxfY3B1cwAAA2VudhZjdXN0b21vcF9yZXR1cm5fdGVuc29yAAADZW52EGN1c3RvbW9wX2NsZWFudXAAAQNlbnYUY3VzdG9tb3BfbmV4dF90ZW5zb3IAAANlbnYRY3VzdG9tb3BfbmV4dF9pbnQAAgNlbnYGbWVtb3J5AgMAgIAEAwMCAQEHIAMIZXh0X2NvcHkABwhleHRfZmlsbAAGBm1lbW9yeQIACuoBAmgBBn8QAiEDEAVC/wGDpyEBIANBAEcQACICEAEiBEhxBEAgAiAEIAMoAgQiAGpBAWsgBG0iBGwhBSAAIAUgACAFSBsiBSADKAIAaiABIAAgAkEBaiAEbCIBIAAgAUgbIAVr/AsACxADC38BBn8QBCECEAIhACACQQBHEAAiARABIgNIcSAAQQBHcQRAIAEgAyACKAIEIgQgACgCBCIFIAQgBUgbIgRqQQFrIANtIgNsIQUgBCAFIAQgBUgbIgUgACgCAGogAigCACAFaiAEIAFBAWogA2wiACAAIARKGyAFa/wKAAALEAML";
