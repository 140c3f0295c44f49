/**
 * `ucode_init_module`: the first step of `nrt_init`, before any NeuronCore is brought up. It checks the ucode
 * module's API level and probes that its DEFAULT Q7 image is alive.
 *
 * Seed: runtime-synthesis §2.1 (`ucode_init_module @0x225940`: dlopen `libnrtucode_extisa.so`, dlsym its 30 entries,
 * "assert api_level==3; liveness-probe the DEFAULT Q7 image", then the per-NeuronCore loop). The seed names the two
 * checks and their order, and nothing more.
 *
 * Ours (the seed is silent):
 * - There is no shared object to open. The ucode module of a generation is its arch pack's ucode: the DEFAULT image
 *   ({@linkcode Khal.stockPoolUcode}). Its API level is what that image reports through its `ucode_api_level` export,
 *   the same export the simulated Q7 reads when it boots the image.
 * - The liveness probe instantiates the DEFAULT image on the host with inert imports, its DRAM image at Q7 address 0
 *   as a boot places it, and calls `ucode_arch`: the image must answer with the generation's `al_hal_tpb_arch_type`.
 *   The probe runs on the host because `ucode_init_module` runs in libnrt against the loaded library, before the
 *   runtime writes anything to a device; a device fault cannot reach it, and a broken DEFAULT image can.
 * - Either failure is `NRT_FAILURE` (1) with a message that says which check failed.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import type { Khal } from "../khal.ts";
import { NrtStatus } from "../status.ts";

/** The API level `ucode_init_module` requires (seed: runtime-synthesis §2.1, "assert api_level==3"). */
export const UCODE_API_LEVEL = 3;

/** What the probe read from the DEFAULT image. */
export interface UcodeModuleInfo {
  /** What `ucode_api_level()` returned. */
  readonly apiLevel: number;
  /** What `ucode_arch()` returned (u32). */
  readonly arch: number;
}

/**
 * `ucode_init_module`: checks that the generation's DEFAULT Q7 image reports API level 3 and answers the liveness
 * probe with the generation's arch.
 *
 * @throws {NrtError} `NRT_FAILURE` naming the check that failed.
 */
export async function ucodeInitModule(khal: Khal): Promise<UcodeModuleInfo> {
  const fail = (why: string): never => {
    throw new NrtError(
      NrtStatus.NRT_FAILURE,
      `Cannot initialize the ucode module of ${khal.spec.name}: ${why}`,
    );
  };
  const image = khal.stockPoolUcode();
  let exports: WebAssembly.Exports;
  try {
    exports = await instantiateInert(image.iram, image.dram);
  } catch (e) {
    return fail(`the DEFAULT Q7 image does not start (${e instanceof Error ? e.message : String(e)})`);
  }
  const call = (name: string): number => {
    const f = exports[name];
    if (typeof f !== "function") return fail(`the DEFAULT Q7 image exports no ${name}()`);
    try {
      return Number((f as () => number)());
    } catch (e) {
      return fail(`the DEFAULT Q7 image's ${name}() failed (${e instanceof Error ? e.message : String(e)})`);
    }
  };
  const apiLevel = call("ucode_api_level");
  if (apiLevel !== UCODE_API_LEVEL) fail(`api_level is ${apiLevel}, ${UCODE_API_LEVEL} is required`);
  const arch = call("ucode_arch") >>> 0;
  if (arch !== khal.spec.arch) {
    fail(`the DEFAULT Q7 image failed its liveness probe: ucode_arch() answered ${arch}, expected ${khal.spec.arch}`);
  }
  return { apiLevel, arch };
}

/**
 * Instantiates `iram` with inert imports: every function import returns 0, and an imported memory (shared as the
 * simulated Q7's is, else plain) holds `dram` at address 0. A module with its own memory gets `dram` written there.
 */
async function instantiateInert(iram: Uint8Array, dram: Uint8Array): Promise<WebAssembly.Exports> {
  const module = await WebAssembly.compile(iram as Uint8Array<ArrayBuffer>);
  const pages = Math.max(1, Math.ceil(dram.byteLength / 65536));
  const build = (shared: boolean): WebAssembly.Imports => {
    const imports: Record<string, Record<string, WebAssembly.ImportValue>> = {};
    for (const imp of WebAssembly.Module.imports(module)) {
      const ns = imports[imp.module] ??= {};
      if (imp.kind === "function") ns[imp.name] = () => 0;
      else if (imp.kind === "memory") {
        const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared });
        new Uint8Array(memory.buffer).set(dram, 0);
        ns[imp.name] = memory;
      } else throw new Error(`it imports a ${imp.kind} (${imp.module}.${imp.name})`);
    }
    return imports;
  };
  let instance: WebAssembly.Instance;
  try {
    instance = await WebAssembly.instantiate(module, build(true));
  } catch (e) {
    if (!(e instanceof WebAssembly.LinkError)) throw e;
    instance = await WebAssembly.instantiate(module, build(false));
  }
  const own = instance.exports.memory;
  if (own instanceof WebAssembly.Memory && !WebAssembly.Module.imports(module).some((i) => i.kind === "memory")) {
    new Uint8Array(own.buffer).set(dram.subarray(0, own.buffer.byteLength), 0);
  }
  return instance.exports;
}
