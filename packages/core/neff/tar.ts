/**
 * A ustar archive reader with archive hygiene, and a deterministic ustar writer (POSIX.1-2001 `ustar` format,
 * 512-byte blocks, end marked by two zero blocks).
 *
 * Hygiene (ARCHITECTURE §5): header checksums verified, octal fields parsed strictly, regular files and
 * directories only (links, devices, FIFOs and pax/GNU extension headers are refused), no absolute paths, no `..`,
 * no NUL in names, no duplicate names, member sizes within the archive, and caps on member count and total size.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";

const BLOCK = 512;

/** Default cap on the number of members. */
export const DEFAULT_MAX_MEMBERS = 10_000;
/** Default cap on the summed size of all members: 1 GiB. */
export const DEFAULT_MAX_TOTAL_BYTES: number = 1 << 30;

/** One archive member. */
export interface TarEntry {
  /** The path, `/`-separated, without a trailing slash. */
  name: string;
  /** Regular file or directory. */
  type: "file" | "directory";
  /** The file contents (a view into the archive); empty for a directory. */
  data: Uint8Array;
  /** Permission bits. */
  mode: number;
  /** Modification time, seconds since the epoch. */
  mtime: number;
}

/** Options for {@linkcode readTar}. */
export interface TarReadOptions {
  /** Largest accepted number of members (default 10,000). */
  maxMembers?: number;
  /** Largest accepted summed member size in bytes (default 1 GiB). */
  maxTotalBytes?: number;
}

/** Options for {@linkcode writeTar}. */
export interface TarWriteOptions {
  /** Modification time written for every member (default 0). */
  mtime?: number;
}

function invalid(why: string): NrtError {
  return new NrtError(NrtStatus.NRT_INVALID, `Cannot read NEFF: ${why}`);
}

const TYPE_NAMES: Record<string, string> = {
  "1": "a hard link",
  "2": "a symbolic link",
  "3": "a character device",
  "4": "a block device",
  "6": "a FIFO",
  "7": "a contiguous file",
  "x": "a pax extended header",
  "g": "a pax global header",
  "L": "a GNU long-name header",
  "K": "a GNU long-link header",
};

/**
 * Parses an octal field strictly: optional leading spaces, octal digits, then only spaces or NULs. An empty
 * field is 0 only when `allowEmpty`.
 */
function octal(h: Uint8Array, off: number, len: number, field: string, member: string, allowEmpty: boolean): number {
  let i = off;
  const end = off + len;
  while (i < end && h[i] === 0x20) i++;
  let v = 0;
  let digits = 0;
  for (; i < end && h[i] >= 0x30 && h[i] <= 0x37; i++, digits++) v = v * 8 + (h[i] - 0x30);
  for (; i < end; i++) {
    if (h[i] !== 0x20 && h[i] !== 0) throw invalid(`tar member "${member}" has a malformed ${field} field`);
  }
  if (digits === 0 && !allowEmpty) throw invalid(`tar member "${member}" has an empty ${field} field`);
  if (!Number.isSafeInteger(v)) throw invalid(`tar member "${member}" has an out-of-range ${field} field`);
  return v;
}

function cString(h: Uint8Array, off: number, len: number, field: string, member: string): Uint8Array {
  const f = h.subarray(off, off + len);
  const nul = f.indexOf(0);
  if (nul < 0) return f;
  for (let i = nul; i < f.length; i++) {
    if (f[i] !== 0) throw invalid(`tar member "${member}" has a NUL inside its ${field}`);
  }
  return f.subarray(0, nul);
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Checks a member path and returns it normalised (no `.` segments, no trailing slash). Returns a reason string
 * instead when the path is unsafe.
 */
export function checkTarPath(raw: string): { path: string } | { error: string } {
  if (raw.length === 0) return { error: "is empty" };
  if (raw.includes("\0")) return { error: "contains a NUL" };
  if (raw.startsWith("/") || raw.startsWith("\\") || /^[A-Za-z]:/.test(raw)) return { error: "is an absolute path" };
  const segs = raw.replace(/\/$/, "").split("/");
  const kept: string[] = [];
  for (const s of segs) {
    if (s === "..") return { error: "escapes the archive with a .. segment" };
    if (s.includes("\\")) return { error: "contains a backslash" };
    if (s === "") return { error: "has an empty path segment" };
    if (s !== ".") kept.push(s);
  }
  if (kept.length === 0) return { error: "names no file" };
  return { path: kept.join("/") };
}

function isZeroBlock(b: Uint8Array, off: number): boolean {
  for (let i = off; i < off + BLOCK; i++) if (b[i] !== 0) return false;
  return true;
}

/**
 * Reads a ustar archive up to its end marker (two zero blocks); bytes after the marker are ignored.
 *
 * @param bytes The archive.
 * @param options Member-count and total-size caps.
 * @returns The members in archive order; file data are views into `bytes`.
 * @throws {NrtError} `NRT_INVALID` for a malformed or unsafe archive.
 *
 * @example Read back a written archive
 * ```ts
 * import { readTar, writeTar } from "./tar.ts";
 * const tar = writeTar(new Map([["a.txt", new TextEncoder().encode("hi")]]));
 * console.log(readTar(tar)[0].name); // "a.txt"
 * ```
 */
export function readTar(bytes: Uint8Array, options: TarReadOptions = {}): TarEntry[] {
  const maxMembers = options.maxMembers ?? DEFAULT_MAX_MEMBERS;
  const maxTotal = options.maxTotalBytes ?? DEFAULT_MAX_TOTAL_BYTES;
  const entries: TarEntry[] = [];
  const seen = new Set<string>();
  let total = 0;
  let off = 0;
  for (;;) {
    if (off + BLOCK > bytes.length) throw invalid("tar archive ends without its end-of-archive marker");
    if (isZeroBlock(bytes, off)) {
      if (off + 2 * BLOCK > bytes.length || !isZeroBlock(bytes, off + BLOCK)) {
        throw invalid("tar archive has a zero block that is not followed by a second one");
      }
      return entries;
    }
    const h = bytes.subarray(off, off + BLOCK);
    let rawName: string;
    try {
      rawName = UTF8.decode(cString(h, 0, 100, "name", "?"));
    } catch (e) {
      if (e instanceof NrtError) throw e;
      throw invalid(`tar member at offset ${off} has a name that is not UTF-8`);
    }
    const label = rawName.slice(0, 120);
    if (h[257] !== 0x75 || h[258] !== 0x73 || h[259] !== 0x74 || h[260] !== 0x61 || h[261] !== 0x72) {
      throw invalid(`tar member "${label}" at offset ${off} has no ustar magic`);
    }
    const posix = h[262] === 0; // "ustar\0" + "00"; GNU writes "ustar  \0", whose prefix area holds other fields
    const stored = octal(h, 148, 8, "checksum", label, false);
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i];
    if (sum !== stored) throw invalid(`tar member "${label}" has a bad header checksum (${stored}, computed ${sum})`);
    if (posix) {
      const prefixBytes = cString(h, 345, 155, "prefix", label);
      if (prefixBytes.length > 0) {
        try {
          rawName = `${UTF8.decode(prefixBytes)}/${rawName}`;
        } catch {
          throw invalid(`tar member "${label}" has a prefix that is not UTF-8`);
        }
      }
    }
    const flag = String.fromCharCode(h[156]);
    if (flag !== "0" && flag !== "\0" && flag !== "5") {
      const what = TYPE_NAMES[flag] ?? `an entry of unknown type ${JSON.stringify(flag)}`;
      throw invalid(`tar member "${rawName}" is ${what}; only regular files and directories are allowed`);
    }
    const checked = checkTarPath(rawName);
    if ("error" in checked) throw invalid(`tar member "${rawName}" ${checked.error}`);
    const name = checked.path;
    const mode = octal(h, 100, 8, "mode", name, true);
    const size = octal(h, 124, 12, "size", name, false);
    const mtime = octal(h, 136, 12, "mtime", name, true);
    const isDir = flag === "5";
    if (isDir && size !== 0) throw invalid(`tar directory "${name}" has a size of ${size}`);
    off += BLOCK;
    if (size > bytes.length - off) {
      throw invalid(`tar member "${name}" is ${size} bytes but only ${bytes.length - off} remain in the archive`);
    }
    if (entries.length + 1 > maxMembers) throw invalid(`tar archive has more than ${maxMembers} members`);
    total += size;
    if (total > maxTotal) throw invalid(`tar archive members exceed the ${maxTotal}-byte cap`);
    if (seen.has(name)) throw invalid(`tar member "${name}" appears more than once`);
    seen.add(name);
    entries.push({ name, type: isDir ? "directory" : "file", data: bytes.subarray(off, off + size), mode, mtime });
    off += Math.ceil(size / BLOCK) * BLOCK;
  }
}

function putOctal(h: Uint8Array, off: number, len: number, v: number): void {
  // len-1 octal digits then a NUL, as POSIX writers do.
  const s = v.toString(8).padStart(len - 1, "0");
  if (s.length > len - 1) throw new RangeError(`Cannot write tar: ${v} does not fit a ${len}-byte octal field`);
  for (let i = 0; i < s.length; i++) h[off + i] = s.charCodeAt(i);
  h[off + len - 1] = 0;
}

/** Splits a UTF-8 path into ustar `prefix` and `name` (≤ 155 and ≤ 100 bytes, split at a slash). */
function splitName(path: Uint8Array, original: string): [Uint8Array, Uint8Array] {
  if (path.length <= 100) return [new Uint8Array(0), path];
  for (let i = path.length - 1; i > 0; i--) {
    if (path[i] === 0x2f && i <= 155 && path.length - i - 1 <= 100 && path.length - i - 1 > 0) {
      return [path.subarray(0, i), path.subarray(i + 1)];
    }
  }
  throw new RangeError(`Cannot write tar: path "${original}" does not fit the ustar name and prefix fields`);
}

/**
 * Writes regular files as a ustar archive: members sorted by name, mode 0644, uid/gid 0, a fixed mtime, and
 * two zero blocks at the end — the same input always gives the same bytes.
 *
 * @param files Member path → contents.
 * @param options The mtime to record.
 * @returns The archive.
 * @throws {RangeError} For a path that is unsafe or too long.
 *
 * @example Write two files
 * ```ts
 * import { writeTar } from "./tar.ts";
 * const tar = writeTar({ "b.txt": new Uint8Array(1), "a.txt": new Uint8Array(600) });
 * console.log(tar.length); // 512 + 512 + 512 + 1024 + 1024 = 3584
 * ```
 */
export function writeTar(
  files: ReadonlyMap<string, Uint8Array> | Record<string, Uint8Array>,
  options: TarWriteOptions = {},
): Uint8Array {
  const mtime = options.mtime ?? 0;
  const list = (files instanceof Map ? [...files] : Object.entries(files)) as [string, Uint8Array][];
  list.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const enc = new TextEncoder();
  let total = 2 * BLOCK;
  for (const [, data] of list) total += BLOCK + Math.ceil(data.length / BLOCK) * BLOCK;
  const out = new Uint8Array(total);
  let off = 0;
  let last = "";
  for (const [name, data] of list) {
    const checked = checkTarPath(name);
    if ("error" in checked || checked.path !== name) {
      throw new RangeError(
        `Cannot write tar: path "${name}" ${"error" in checked ? checked.error : "is not normalised"}`,
      );
    }
    if (name === last) throw new RangeError(`Cannot write tar: path "${name}" appears twice`);
    last = name;
    const h = out.subarray(off, off + BLOCK);
    const [prefix, base] = splitName(enc.encode(name), name);
    h.set(base, 0);
    putOctal(h, 100, 8, 0o644);
    putOctal(h, 108, 8, 0);
    putOctal(h, 116, 8, 0);
    putOctal(h, 124, 12, data.length);
    putOctal(h, 136, 12, mtime);
    h[156] = 0x30; // '0': regular file
    h.set(enc.encode("ustar\x0000"), 257);
    h.set(prefix, 345);
    h.fill(0x20, 148, 156);
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += h[i];
    putOctal(h, 148, 7, sum);
    h[155] = 0x20; // checksum: six digits, NUL, space
    out.set(data, off + BLOCK);
    off += BLOCK + Math.ceil(data.length / BLOCK) * BLOCK;
  }
  return out;
}
