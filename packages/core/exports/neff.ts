/**
 * `@nrt/core/neff`: the NEFF container in full — header, hash, the gzip member and the ustar archive, the signature
 * and subgraph members, the instruction-stream members, the custom-op NEFF builder and the metaneff binding. The root
 * export carries the reader and builders an application uses; tools that take a NEFF apart use this.
 *
 * Seed: ARCHITECTURE §5 (the real NEFF format), runtime-synthesis §2 (the load path's view of it).
 *
 * @example Read a NEFF's header
 * ```ts ignore
 * import { readNeffHeader } from "@nrt/core/neff";
 * console.log(readNeffHeader(bytes).name);
 * ```
 *
 * @module
 */
export * from "../neff/header.ts";
export * from "../neff/hash.ts";
export * from "../neff/neff_file.ts";
export * from "../neff/neff_builder.ts";
export * from "../neff/neff_signature.ts";
export * from "../neff/subgraph_def.ts";
export * from "../neff/instruction_stream.ts";
export {
  DEFAULT_MAX_DECOMPRESSED_BYTES,
  gunzipMember,
  gunzipMemberAsync,
  type GunzipOptions,
  type GunzipResult,
  gzipMember,
  type GzipMode,
} from "../neff/gzip.ts";
export {
  DEFAULT_MAX_MEMBERS,
  DEFAULT_MAX_TOTAL_BYTES,
  readTar,
  type TarEntry,
  type TarReadOptions,
  type TarWriteOptions,
  writeTar,
} from "../neff/tar.ts";
export * from "../kelf/custom_op_neff.ts";
export * from "../kelf/metaneff.ts";
export {
  type KelfBuffer,
  type KelfCall,
  type KelfLibrary,
  kelfLoad,
  type KelfModel,
  type KelfView,
} from "../kelf/kelf_load.ts";
export type { JsonObject } from "../neff/_json.ts";
