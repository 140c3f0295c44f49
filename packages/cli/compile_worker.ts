/**
 * The Worker script ONNX models are compiled in for `nrt serve` (onnx_compiler.ts starts one per compile and
 * terminates it after). Ours.
 *
 * One message in, {@linkcode CompileRequest}: the ONNX bytes (their buffer transferred) and the op library
 * binaries. One message out, {@linkcode CompileReply}: the NEFF (its buffer transferred, not copied), the compiler's
 * refusal, or any other error by name and message. The Worker then waits to be terminated: it never ends on its own,
 * so its `exit` cannot overtake its answer.
 *
 * @module
 */
import { NrtError } from "@nrt/core";
import process from "node:process";
import { parentPort } from "node:worker_threads";
import type { CompileTarget } from "./compile_args.ts";

/** What the Worker is asked to compile. */
export interface CompileRequest {
  /** The `.onnx` file. */
  readonly onnx: Uint8Array;
  /** The generation the NEFF targets. */
  readonly target: CompileTarget;
  /** Shapes of inputs with dynamic dims. */
  readonly inputShapes: Record<string, number[]>;
  /** The NEFF header name. */
  readonly name: string;
  /** The op library binaries, by name. */
  readonly libraries: ReadonlyMap<string, Uint8Array>;
  /**
   * Tests only: two words of shared memory. With the compiler loaded, the Worker sets word 1 to 1, then waits
   * (`Atomics.wait`, blocking its thread as the compiler does) until word 0 is not 0, then compiles.
   */
  readonly hold?: Int32Array;
  /**
   * Tests only: instead of compiling, throw an error (`"throw"`), throw one outside the compile, which ends the
   * Worker with an `error` event (`"uncaught"`), exit with code 3 (`"exit"`), or keep allocating memory, 16 MiB
   * of JavaScript objects at a time, until it is stopped (`"grow"`).
   */
  readonly fail?: "throw" | "uncaught" | "exit" | "grow";
}

/** What the Worker answers. */
export type CompileReply =
  /** The NEFF and its number of kernel calls. */
  | { readonly ok: true; readonly neff: Uint8Array; readonly calls: number }
  /** The compiler refused the model (`OnnxCompileError`): its message. */
  | { readonly ok: false; readonly refused: string }
  /** Anything else thrown: its name and message, and its `NRT_STATUS` when it was an `NrtError`. */
  | {
    readonly ok: false;
    readonly error: { readonly name: string; readonly message: string; readonly status?: number };
  };

const port = parentPort;
if (port === null) throw new Error("compile_worker.ts is a Worker script (node:worker_threads)");
let asked = false;
// `on`, not `once`: the listener keeps the Worker alive until it is terminated.
port.on("message", async (r: CompileRequest) => {
  if (asked) return;
  asked = true;
  let reply: CompileReply, transfer: ArrayBuffer[] = [];
  try {
    const { compileOnnxToNeff } = await import("./compile_command.ts");
    if (r.hold !== undefined) {
      Atomics.store(r.hold, 1, 1);
      Atomics.notify(r.hold, 1);
      while (Atomics.load(r.hold, 0) === 0) Atomics.wait(r.hold, 0, 0);
    }
    if (r.fail === "throw") throw new TypeError("a failure for the test");
    if (r.fail === "uncaught") {
      setTimeout(() => {
        throw new Error("an uncaught failure for the test");
      });
      return;
    }
    if (r.fail === "exit") process.exit(3);
    if (r.fail === "grow") {
      const kept: unknown[] = [];
      for (;;) {
        // Objects on the heap (as the compiler's graph is), in steps that let the event loop turn.
        for (let i = 0; i < 262_144; i++) kept.push({ i, at: [i, i] });
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    }
    const { neff, compiled } = await compileOnnxToNeff(r.onnx, {
      target: r.target,
      inputShapes: r.inputShapes,
      name: r.name,
      libraries: r.libraries,
    });
    reply = { ok: true, neff, calls: compiled.calls.length };
    if (neff.buffer instanceof ArrayBuffer) transfer = [neff.buffer];
  } catch (e) {
    const refused = await import("@nrt/onnx").then((m) => e instanceof m.OnnxCompileError, () => false);
    reply = refused ? { ok: false, refused: (e as Error).message } : {
      ok: false,
      error: e instanceof Error
        ? { name: e.name, message: e.message, ...(e instanceof NrtError ? { status: e.status } : {}) }
        : { name: "Error", message: String(e) },
    };
  }
  port.postMessage(reply, transfer);
});
