/**
 * CRC-32 (ISO 3309 / ITU-T V.42, reflected polynomial 0xEDB88320), the checksum in a gzip member's trailer
 * (RFC 1952 §8).
 *
 * @module
 */

const TABLE: Uint32Array = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/**
 * The CRC-32 of `bytes`, continuing from `crc` (the value returned for the preceding bytes; 0 to start).
 *
 * @example Checksum a string
 * ```ts
 * import { crc32 } from "./crc32.ts";
 * console.log(crc32(new TextEncoder().encode("123456789")).toString(16)); // "cbf43926"
 * ```
 */
export function crc32(bytes: Uint8Array, crc = 0): number {
  let c = ~crc >>> 0;
  for (let i = 0; i < bytes.length; i++) c = TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}
