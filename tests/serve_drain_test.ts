/**
 * `nrt serve` on SIGTERM, as KServe rolls a pod: a real server process under REST and gRPC load is sent SIGTERM.
 * Every request is answered by the model (200 / OK) or refused as "shutting down" (503 / UNAVAILABLE) or by a
 * closed port — none fails otherwise, so none that was accepted is dropped; requests in flight at the signal finish
 * with their answers; every request sent after the server said it is draining is refused; the process unloads and
 * exits 0. No assertion depends on time: the clients run until they are refused.
 */
import { describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { type CallFailure, Code, oipClient } from "./_grpc_client.ts";
import { oneOpNeff } from "./_kernels.ts";
import { BIN_NRT, freePort, spawnServe } from "./_serve_process.ts";

const N = 1024;
/**
 * gRPC clients in the drain. Deno's HTTP/2 client aborts the whole process when a server's GOAWAY reaches a session
 * with calls on it (an nghttp2 assertion, denoland/deno#36788), so under Deno the drain is driven over REST only;
 * Bun runs both protocols.
 */
const GRPC_CLIENTS = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined" ? 0 : 8;
if (GRPC_CLIENTS === 0) console.log("serve drain test: gRPC clients left out under Deno (denoland/deno#36788)");
const x = Array.from({ length: N }, (_, i) => (i % 7) - 3);
const relu = x.map((v) => Math.max(0, v));

/** How one request ended. */
type Outcome = "ok" | "refused" | "reset" | `other: ${string}`;

describe("nrt serve drains on SIGTERM", () => {
  test("SIGTERM under load: accepted requests finish, later ones are refused, the process exits 0", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nrt-drain-"));
    // One instance and many clients: a queue stands in front of the model when the signal arrives.
    await writeFile(
      join(dir, "relu.neff"),
      oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [N] }], [{
        name: "y",
        dtype: "float32",
        shape: [N],
      }]),
    );
    const grpcPort = await freePort();
    const server = spawnServe([
      "--models",
      dir,
      "--port",
      "0",
      "--grpc-port",
      String(grpcPort),
      "--drain-timeout",
      "60",
    ]);
    const grpc = oipClient(`127.0.0.1:${grpcPort}`);
    try {
      const url = (/listening on (\S+)/.exec(await server.line(/listening on /)))![1];
      await server.line(/gRPC \(inference.GRPCInferenceService\) on /);
      let draining = false;
      let signalled = false;
      const outcomes: Array<
        {
          outcome: Outcome;
          sentAfterSignal: boolean;
          sentAfterDrain: boolean;
          endedAfterDrain: boolean;
          endedAfterSignal: boolean;
        }
      > = [];
      const body = JSON.stringify({ inputs: [{ name: "x", shape: [N], datatype: "FP32", data: x }] });
      const rest = async (): Promise<Outcome> => {
        try {
          const res = await fetch(`${url}/v2/models/relu/infer`, {
            method: "POST",
            body,
            headers: { "content-type": "application/json" },
          });
          const json = await res.json();
          if (res.status === 200) {
            return JSON.stringify(json.outputs[0].data) === JSON.stringify(relu) ? "ok" : "other: wrong answer";
          }
          if (res.status === 503 && json.error === "Cannot serve the request: the server is shutting down") {
            return "refused";
          }
          return `other: ${res.status} ${json.error}`;
        } catch (e) {
          // The port closed: a refused connection, not a dropped request (the request never reached the server).
          const text = String((e as { cause?: unknown })?.cause ?? e);
          if (/ECONNREFUSED|Unable to connect|Connection refused/i.test(text)) return "refused";
          // A kept-alive connection the server closed as the client wrote on it: the request never reached a
          // handler. Allowed only for requests sent after the signal (checked below).
          return /ECONNRESET|Connection reset by peer|connection closed before message completed/i.test(text)
            ? "reset"
            : `other: ${text}`;
        }
      };
      const rpc = async (): Promise<Outcome> => {
        try {
          const res = await grpc.modelInfer({
            model_name: "relu",
            inputs: [{ name: "x", datatype: "FP32", shape: [N], contents: { fp32_contents: x } }],
          });
          return JSON.stringify(res.outputs[0].contents.fp32_contents) === JSON.stringify(relu)
            ? "ok"
            : "other: wrong answer";
        } catch (e) {
          const f = e as CallFailure;
          if (f.code === Code.UNAVAILABLE) return "refused"; // "the server is shutting down", or the port closed
          return `other: ${f.code} ${f.details}`;
        }
      };
      const loop = async (call: () => Promise<Outcome>): Promise<void> => {
        for (;;) {
          const sentAfterDrain = draining, sentAfterSignal = signalled;
          const outcome = await call();
          outcomes.push({
            outcome,
            sentAfterSignal,
            sentAfterDrain,
            endedAfterDrain: draining,
            endedAfterSignal: signalled,
          });
          if (outcome !== "ok") return;
        }
      };
      const clients = [
        ...Array.from({ length: 24 }, () => loop(rest)),
        ...Array.from({ length: GRPC_CLIENTS }, () => loop(rpc)),
      ];
      // Load first: wait until answers flow on both protocols, then signal.
      while (outcomes.filter((o) => o.outcome === "ok").length < 64) {
        if (outcomes.some((o) => o.outcome !== "ok")) break;
        await new Promise((r) => setTimeout(r, 5));
      }
      signalled = true;
      server.kill("SIGTERM");
      await server.line(/SIGTERM: draining/);
      draining = true;
      await Promise.all(clients);
      expect(await server.exited()).toBe(0);
      expect(server.lines).toContain("nrt: stopped");

      expect(outcomes.filter((o) => o.outcome.startsWith("other"))).toEqual([]);
      // A reset connection is a refusal only for a request the drain could not have accepted: one sent after the
      // signal. (Not "after the draining line": this process reads that line later than the server prints it, and a
      // drain whose requests all finish at once closes the listener meanwhile. A request the gate accepted is never
      // reset: the listener closes only once none is inside the handler.)
      expect(outcomes.filter((o) => o.outcome === "reset" && !o.sentAfterSignal)).toEqual([]);
      // Requests in flight when the server began draining were answered by the model...
      // (32 clients queue on one instance, so requests are inside the server whenever the signal is sent.)
      expect(outcomes.filter((o) => !o.sentAfterDrain && o.endedAfterSignal && o.outcome === "ok").length)
        .toBeGreaterThan(0);
      // ...and none sent after it said so was accepted.
      const late = outcomes.filter((o) => o.sentAfterDrain);
      expect(late.every((o) => o.outcome === "refused" || o.outcome === "reset")).toBe(true);
      // Each client ends on one refusal.
      expect(outcomes.filter((o) => o.outcome === "refused" || o.outcome === "reset").length).toBe(24 + GRPC_CLIENTS);
    } finally {
      grpc.close();
      server.kill();
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("nrt serve drains on a Ctrl-C", () => {
  /** Starts `node nrt.mjs serve` in a process group of its own, sends the group SIGINT once it listens. */
  async function ctrlC(dir: string): Promise<{ code: number | null; out: string }> {
    // A process group of its own, as a terminal's foreground job: the signal goes to every process in it.
    const child = spawn("node", [BIN_NRT, "serve", "--models", dir, "--port", "0", "--grpc-port", "0"], {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let signalled = false;
    // The signal goes as soon as the server says it listens, from the data handler: a user's Ctrl-C can come then.
    const take = (d: Uint8Array): void => {
      out += new TextDecoder().decode(d);
      if (!signalled && /listening on http/.test(out)) {
        signalled = true;
        process.kill(-child.pid!, "SIGINT");
      }
    };
    child.stdout!.on("data", take);
    child.stderr!.on("data", take);
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
      const code = await exited;
      clearTimeout(timer);
      if (!signalled) throw new Error(`nrt serve did not start: ${out}`);
      return { code, out };
    } finally {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch { /* the group has ended */ }
    }
  }

  test(
    "SIGINT to the process group of `npx nrt serve` (the shim and Bun both get it, and the shim passes its copy on) drains to the end",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "nrt-ctrl-c-"));
      await writeFile(
        join(dir, "relu.neff"),
        oneOpNeff("relu", "relu", [{ name: "x", dtype: "float32", shape: [8] }], [
          { name: "y", dtype: "float32", shape: [8] },
        ]),
      );
      try {
        // Four times: the two copies arrive microseconds apart, and the code before lost about one start in four
        // (a gap with no listener, when the runtime's default action ended the process mid-drain).
        for (let k = 0; k < 4; k++) {
          const { code, out } = await ctrlC(dir);
          expect({ k, code, out }).toEqual({ k, code: 0, out: expect.stringContaining("nrt: stopped") });
          expect(out).toContain("nrt: SIGINT: draining");
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
