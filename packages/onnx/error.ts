/**
 * `OnnxCompileError`: the one error the ONNX compiler throws for a model it cannot compile, whether the bytes are
 * malformed, a shape does not resolve or an op is unsupported. Ours: the seeds say nothing about ONNX.
 *
 * @module
 */

/** Where in the model an {@linkcode OnnxCompileError} arose: a node (name and op type) or the model as a whole. */
export interface OnnxErrorSite {
  /** The node's name (or a synthesized `"<op>_<index>"` for an unnamed node). */
  readonly node?: string;
  /** The node's op type, with its domain prefix outside the default domain (`"nrt.FusedGemm"`). */
  readonly opType?: string;
}

/**
 * A model the compiler refuses. `message` reads `Cannot compile node "n" (Op): why` or `Cannot compile ONNX
 * model: why`; the parts are also fields so a caller (the CLI, a test) can branch on them.
 *
 * @example Refuse a model and say why
 * ```ts
 * import { compileOnnx, OnnxCompileError } from "@nrt/onnx";
 * try {
 *   compileOnnx(new Uint8Array([0xff, 0xff]));
 * } catch (e) {
 *   if (e instanceof OnnxCompileError) console.log(e.why);
 * }
 * ```
 */
export class OnnxCompileError extends Error {
  /** The node's name, when the error is about one node. */
  readonly node: string | undefined;
  /** The node's op type, when the error is about one node. */
  readonly opType: string | undefined;
  /** Why the model was refused (the part after the colon). */
  readonly why: string;

  /**
   * Creates the error.
   *
   * @param site The node it concerns, or `{}` for the whole model.
   * @param why Why, in sentence case without a final period.
   * @param cause The underlying error, if any (a protobuf decode failure, an {@linkcode UnsupportedOpError}).
   */
  constructor(site: OnnxErrorSite, why: string, cause?: unknown) {
    const where = site.node === undefined
      ? "ONNX model"
      : `node "${site.node}"${site.opType === undefined ? "" : ` (${site.opType})`}`;
    super(`Cannot compile ${where}: ${why}`, cause === undefined ? undefined : { cause });
    this.name = "OnnxCompileError";
    this.node = site.node;
    this.opType = site.opType;
    this.why = why;
  }
}
