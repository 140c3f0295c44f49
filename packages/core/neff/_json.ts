/**
 * Private helpers for the JSON members of a NEFF: parsing with a NEFF-level error, and small shape checks.
 *
 * @module
 */
import { NrtError } from "../error.ts";
import { NrtStatus } from "../status.ts";

/** A `Cannot read NEFF: <why>` error with status `NRT_INVALID`. */
export function invalid(why: string, cause?: unknown): NrtError {
  return new NrtError(NrtStatus.NRT_INVALID, `Cannot read NEFF: ${why}`, cause === undefined ? undefined : { cause });
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/** Looks a member up, failing with a message naming it. */
export function requireMember(members: ReadonlyMap<string, Uint8Array>, name: string, why: string): Uint8Array {
  const m = members.get(name);
  if (m === undefined) throw invalid(`member ${name} is missing (${why})`);
  return m;
}

/** Parses a member as UTF-8 JSON; malformed text fails with `NRT_INVALID` naming the member. */
export function parseJsonMember(members: ReadonlyMap<string, Uint8Array>, name: string, why: string): unknown {
  const bytes = requireMember(members, name, why);
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch (e) {
    throw invalid(`member ${name} is not UTF-8 text`, e);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw invalid(`member ${name} is not valid JSON: ${e instanceof Error ? e.message : String(e)}`, e);
  }
}

/** A JSON object (not null, not an array). */
export type JsonObject = Record<string, unknown>;

/** Whether `v` is a JSON object. */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `v` as an object, or a failure naming `where`. */
export function asObject(v: unknown, where: string): JsonObject {
  if (!isObject(v)) throw invalid(`${where} is not a JSON object`);
  return v;
}

/** `v` as an array, or a failure naming `where`. */
export function asArray(v: unknown, where: string): unknown[] {
  if (!Array.isArray(v)) throw invalid(`${where} is not a JSON array`);
  return v;
}

/** `v` as a string, or a failure naming `where`. */
export function asString(v: unknown, where: string): string {
  if (typeof v !== "string") throw invalid(`${where} is not a string`);
  return v;
}

/** `v` as a non-negative safe integer, or a failure naming `where`. */
export function asCount(v: unknown, where: string): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw invalid(`${where} is not a non-negative integer`);
  }
  return v;
}
