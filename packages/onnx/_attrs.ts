/**
 * Private helpers for the passes: typed attribute reads with ONNX defaults, the rule error, axis normalization.
 * Ours.
 *
 * @module
 */
import type { IrAttribute, IrNode } from "./graph.ts";
import { ConstTensor } from "./tensor.ts";

/** Thrown by a shape or evaluation rule; the pass wraps it into an `OnnxCompileError` naming the node. */
export class RuleError extends Error {
  /** Creates the error with the reason (sentence case, no final period). */
  constructor(why: string) {
    super(why);
    this.name = "RuleError";
  }
}

/** Throws a {@linkcode RuleError}. */
export function fail(why: string): never {
  throw new RuleError(why);
}

function get(node: IrNode, name: string): IrAttribute | undefined {
  return node.attributes[name];
}

/** An int attribute, or `dflt` when absent. */
export function attrInt(node: IrNode, name: string, dflt: number): number {
  const v = get(node, name);
  if (v === undefined) return dflt;
  if (typeof v !== "number") fail(`attribute "${name}" must be an int`);
  return v;
}

/** A float attribute, or `dflt` when absent. */
export function attrFloat(node: IrNode, name: string, dflt: number): number {
  return attrInt(node, name, dflt);
}

/** A string attribute, or `dflt` when absent. */
export function attrString(node: IrNode, name: string, dflt: string): string {
  const v = get(node, name);
  if (v === undefined) return dflt;
  if (typeof v !== "string") fail(`attribute "${name}" must be a string`);
  return v;
}

/** An ints attribute, or `dflt` when absent. */
export function attrInts(node: IrNode, name: string): number[] | undefined;
export function attrInts(node: IrNode, name: string, dflt: number[]): number[];
export function attrInts(node: IrNode, name: string, dflt?: number[]): number[] | undefined {
  const v = get(node, name);
  if (v === undefined) return dflt;
  if (!Array.isArray(v) || v.some((x) => typeof x !== "number")) fail(`attribute "${name}" must be a list of ints`);
  return v as number[];
}

/** A tensor attribute, or `undefined` when absent. */
export function attrTensor(node: IrNode, name: string): ConstTensor | undefined {
  const v = get(node, name);
  if (v === undefined) return undefined;
  if (!(v instanceof ConstTensor)) fail(`attribute "${name}" must be a tensor`);
  return v;
}

/** Normalizes a possibly negative axis for a rank, or fails naming it. */
export function normAxis(axis: number, rank: number, what = "axis"): number {
  if (!Number.isInteger(axis) || axis < -rank || axis >= rank) fail(`${what} ${axis} is out of range for rank ${rank}`);
  return axis < 0 ? axis + rank : axis;
}
