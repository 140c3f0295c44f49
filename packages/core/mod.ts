/**
 * `@nrt/core`: the nrt runtime kernel.
 *
 * @module
 */
export * from "./status.ts";
export * from "./error.ts";
export * from "./state.ts";
export * from "./silicon_spec.ts";
export * from "./portal.ts";
export * from "./khal.ts";
export * from "./isa.ts";
export * from "./config.ts";
export * from "./log.ts";
export * from "./clock.ts";
export * from "./dmem/dmem.ts";
export * from "./tensor.ts";
export * from "./runtime.ts";
export { kelfLoad, type KelfCall, type KelfLibrary, type KelfModel } from "./kelf/kelf_load.ts";
export * from "./kelf/custom_op_neff.ts";
export * from "./neff/header.ts";
export * from "./neff/hash.ts";
export * from "./neff/neff_file.ts";
export * from "./neff/neff_builder.ts";
export * from "./neff/neff_signature.ts";
export * from "./neff/subgraph_def.ts";
export * from "./neff/instruction_stream.ts";
export { DEFAULT_MAX_DECOMPRESSED_BYTES, gunzipMember, gunzipMemberAsync, type GunzipOptions, type GunzipResult, gzipMember, type GzipMode } from "./neff/gzip.ts";
export { DEFAULT_MAX_MEMBERS, DEFAULT_MAX_TOTAL_BYTES, readTar, type TarEntry, type TarReadOptions, type TarWriteOptions, writeTar } from "./neff/tar.ts";
export * from "./trace_portal.ts";
export * from "./nrt_api.ts";
export * from "./kelf/metaneff.ts";
export * from "./notification/error_record.ts";
export * from "./notification/notification_consume.ts";
export * from "./kmgr/exec_request.ts";
export * from "./stdio/pool_stdio.ts";
export * from "./notification/error_subtype.ts";
