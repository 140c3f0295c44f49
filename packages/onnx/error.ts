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
    why = boundedWhy(why);
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

/** Values of a quoted list kept in a message; the rest are counted. */
const MAX_LIST_VALUES = 8;
/** Longest reason kept in a message, in UTF-16 units. */
const MAX_WHY_LENGTH = 4096;

/**
 * A reason of bounded length: a model's attribute or dims may hold millions of values, and a message quoting them
 * all (`perm [0,0,…]`) reached megabytes in a REST 400 body. Each `[…]` list keeps its first
 * {@linkcode MAX_LIST_VALUES} values and counts the rest; anything still longer is cut.
 */
function boundedWhy(why: string): string {
  const lists = why.replace(/\[([^[\]]*)\]/g, (all, inner: string) => {
    const values = inner.split(",");
    return values.length <= MAX_LIST_VALUES
      ? all
      : `[${values.slice(0, MAX_LIST_VALUES).join(",")},… (${values.length} values)]`;
  });
  return lists.length <= MAX_WHY_LENGTH ? lists : `${lists.slice(0, MAX_WHY_LENGTH)}… (${lists.length} characters)`;
}
