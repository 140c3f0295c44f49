/**
 * Reading the body of `POST /v2/repository/models/{m}/load`: Triton's form `{"parameters": {"config": "<JSON text>",
 * "file:<version>/<name>": "<base64>"}}`, of which nrt takes one file, `model.neff` or `model.onnx`. The file is
 * bounded twice before it is decoded: the body by {@linkcode uploadBodyLimit} as it arrives, the base64 text by the
 * file cap; nothing in the message can name a path (the version is digits, the file one of two names).
 *
 * Spec: Triton's model repository extension, "Load" (`config` and `file:` parameters). The single-file rule and the
 * limits are ours (docs/rest-api.md, "Load by upload").
 *
 * @module
 */
import { HttpError } from "./http_error.ts";
import { isValidModelVersion, type ModelFileName, type ModelUpload } from "./model_repository.ts";

/** The largest `config` parameter, in bytes of JSON text. */
export const MAX_UPLOAD_CONFIG_BYTES = 64 * 1024;

/** JSON text allowed beyond the file's base64: the parameter names, the config, the punctuation. */
const UPLOAD_OVERHEAD_BYTES = MAX_UPLOAD_CONFIG_BYTES + 4 * 1024;

const FILE_KEY = /^file:([^/]{1,32})\/(.{1,64})$/;
const FILES: readonly ModelFileName[] = ["model.neff", "model.onnx"];
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * The largest load body that can carry a file of `maxFileBytes` bytes: its base64 text and the overhead.
 *
 * @param maxFileBytes The largest model file accepted.
 * @returns The body limit in bytes.
 */
export function uploadBodyLimit(maxFileBytes: number): number {
  return base64Length(maxFileBytes) + UPLOAD_OVERHEAD_BYTES;
}

function base64Length(bytes: number): number {
  return Math.ceil(bytes / 3) * 4;
}

/**
 * Reads the upload of a load request, if it carries one.
 *
 * @param model The model, for messages.
 * @param body The parsed JSON body (an object).
 * @param maxFileBytes The largest model file accepted.
 * @returns The upload, or `undefined` for a load without a file (from the repository's own files).
 * @throws {HttpError} 400 for parameters that are not Triton's form or not a file nrt serves, for bad base64 or a
 *   bad config type; 413 for a file or config over its cap (checked on the text, before decoding).
 *
 * @example A NEFF upload
 * ```ts
 * import { readUpload } from "@nrt/http-api";
 * const up = readUpload("relu", { parameters: { "file:1/model.neff": btoa("NEFF") } }, 1024);
 * console.log(up?.version, up?.file, up?.bytes.length); // "1" "model.neff" 4
 * ```
 */
export function readUpload(
  model: string,
  body: Readonly<Record<string, unknown>>,
  maxFileBytes: number,
): ModelUpload | undefined {
  const cannot = (why: string, status = 400): HttpError =>
    new HttpError(status, `Cannot load model "${model}": ${why}`);
  const params = body.parameters;
  if (params === undefined) return undefined;
  if (typeof params !== "object" || params === null || Array.isArray(params)) {
    throw cannot(`"parameters" must be an object`);
  }
  const p = params as Record<string, unknown>;
  const fileKeys = Object.keys(p).filter((k) => k.startsWith("file:"));
  for (const k of Object.keys(p)) {
    if (k !== "config" && !k.startsWith("file:")) {
      throw cannot(
        `unknown parameter ${JSON.stringify(k.slice(0, 64))}; expected "config" and "file:<version>/model.neff"`,
      );
    }
  }
  let config: Uint8Array | undefined;
  if (p.config !== undefined) {
    if (typeof p.config !== "string") throw cannot(`parameter "config" must be a string of JSON`);
    config = new TextEncoder().encode(p.config);
    if (config.byteLength > MAX_UPLOAD_CONFIG_BYTES) {
      throw cannot(`parameter "config" is over ${MAX_UPLOAD_CONFIG_BYTES} bytes`, 413);
    }
  }
  if (fileKeys.length === 0) {
    if (config !== undefined) {
      throw cannot(`a "config" parameter needs a "file:<version>/model.neff" (or model.onnx) parameter beside it`);
    }
    return undefined;
  }
  if (fileKeys.length > 1) {
    throw cannot(
      `${fileKeys.length} file parameters; send one, "file:<version>/model.neff" or "file:<version>/model.onnx"`,
    );
  }
  const key = fileKeys[0];
  const m = FILE_KEY.exec(key);
  const shown = JSON.stringify(key.slice(0, 100));
  if (m === null || !isValidModelVersion(m[1])) {
    throw cannot(`parameter ${shown} is not "file:<version>/<file>" with a positive integer version`);
  }
  const file = FILES.find((f) => f === m[2]);
  if (file === undefined) {
    throw cannot(`parameter ${shown} names a file nrt does not serve; send model.neff or model.onnx`);
  }
  const text = p[key];
  if (typeof text !== "string") throw cannot(`parameter ${shown} must be a base64 string`);
  if (text.length > base64Length(maxFileBytes)) {
    throw cannot(`the file of ${shown} is over the ${maxFileBytes}-byte limit`, 413);
  }
  if (text.length % 4 !== 0 || !BASE64.test(text)) throw cannot(`parameter ${shown} is not base64 (RFC 4648, padded)`);
  const bytes = decodeBase64(text);
  if (bytes.byteLength > maxFileBytes) throw cannot(`the file of ${shown} is over the ${maxFileBytes}-byte limit`, 413);
  return { version: m[1], file, bytes, config };
}

/** Decodes checked base64 text (`atob` is in every runtime this package runs on). */
function decodeBase64(text: string): Uint8Array {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
