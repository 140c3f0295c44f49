/**
 * The gRPC server under Deno against clients that come and go (docs/rest-api.md, "gRPC on Deno"): Deno's
 * `node:http2` can abort the process on a client's GOAWAY (denoland/deno#36788), which a grpc-js client sends when it
 * closes its channel. Without the GOAWAY relay (packages/grpc-api/goaway_relay.ts), the server below died in two of
 * three runs of 300 such connections from a Deno client. Both processes run on the workspace's Deno whichever
 * runtime runs this file, so only the Bun run of the suite runs it (under `deno test` it would repeat the same 25 s).
 */
import { describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const DENO = `${ROOT}node_modules/.bin/deno`;

describe("gRPC on Deno", () => {
  test.if(!("Deno" in globalThis))(
    "300 grpc-js channels opened, used and closed leave the server running",
    async () => {
      const server = spawn(DENO, ["run", "-A", `${ROOT}tests/_grpc_goaway_server.ts`], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "", err = "";
      server.stdout!.on("data", (d: Uint8Array) => (out += new TextDecoder().decode(d)));
      server.stderr!.on("data", (d: Uint8Array) => (err += new TextDecoder().decode(d)));
      let exited: string | undefined;
      server.on("exit", (code, signal) => (exited = `${code ?? signal}`));
      try {
        let port: string | undefined;
        for (let i = 0; i < 3000 && port === undefined && exited === undefined; i++) {
          port = /PORT (\d+)/.exec(out)?.[1];
          await new Promise((r) => setTimeout(r, 20));
        }
        expect(port).toBeDefined();
        const client = spawn(DENO, ["run", "-A", `${ROOT}tests/_grpc_goaway_client.ts`, port!, "300"], {
          stdio: ["ignore", "pipe", "pipe"],
        });
        let clientOut = "";
        client.stdout!.on("data", (d: Uint8Array) => (clientOut += new TextDecoder().decode(d)));
        const code = await new Promise<number | null>((resolve) => client.on("exit", (c) => resolve(c)));
        await new Promise((r) => setTimeout(r, 200));
        expect({ exited, stderr: err.slice(-400) }).toEqual({ exited: undefined, stderr: "" });
        expect([code, clientOut.trim()]).toEqual([0, "done"]);
      } finally {
        if (exited === undefined && server.pid !== undefined) process.kill(server.pid, "SIGKILL");
      }
    },
    120_000,
  );
});
