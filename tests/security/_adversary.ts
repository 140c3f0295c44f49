/**
 * The hostile client of docs/security.md: starts `nrt serve` as a child process (the runtime running this file:
 * Bun or Deno), attacks it over loopback, and samples the server's resident memory (`/proc/<pid>/status`) and the
 * latency of `GET /v2/health/live` on its own connection while the attacks run. `tests/security/http_memory_test.ts`
 * asserts the bounds; run this file directly for the figures:
 *
 *   bun tests/security/_adversary.ts      deno run -A tests/security/_adversary.ts
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { buildDemoModels } from "@nrt/cli";
import { buildNeff } from "@nrt/core";

const MAIN = new URL("../../packages/cli/main.ts", import.meta.url).pathname;
const MiB = 1024 * 1024;

/** A running server child. */
export interface ServerChild {
  readonly pid: number;
  readonly port: number;
  readonly token: string;
  /** Resident memory of the server now, bytes. */
  rss(): number;
  stop(): Promise<void>;
}

/** Starts `nrt serve` on a free port with explicit model control over `dir`. */
export async function startServerChild(dir: string, extra: string[] = []): Promise<ServerChild> {
  const isBun = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined";
  const cmd = isBun ? [process.execPath, MAIN] : [process.execPath, "run", "-A", MAIN];
  const tokenFile = join(dir, ".token");
  const child = spawn(cmd[0], [
    ...cmd.slice(1),
    "serve",
    "--models",
    dir,
    "--port",
    "0",
    "--admin",
    "--admin-token-file",
    tokenFile,
    "--model-control",
    "explicit",
    ...extra,
  ], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NEURON_RT_LOG_LEVEL: "ERROR" },
  });
  let out = "";
  child.stderr!.on("data", (c: Uint8Array) => process.env.NRT_ADVERSARY_VERBOSE && process.stderr.write(c));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on("data", (c: Uint8Array) => {
      out += new TextDecoder().decode(c);
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", (code) => reject(new Error(`nrt serve exited with ${code}: ${out}`)));
  });
  const token = readFileSync(tokenFile, "utf8").trim();
  return {
    pid: child.pid!,
    port,
    token,
    rss: () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))![1]) * 1024,
    stop: () =>
      new Promise((resolve) => {
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** Sends raw bytes produced by `write` on one connection and resolves with the status line, or "closed". */
export function rawSend(port: number, write: (socket: net.Socket) => void, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    let text = "";
    let done = false;
    const finish = (r: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      s.destroy();
      resolve(r);
    };
    const timer = setTimeout(() => finish("timeout"), timeoutMs);
    s.on("connect", () => write(s));
    s.on("data", (c: Uint8Array) => {
      text += new TextDecoder().decode(c);
      const line = text.split("\r\n")[0];
      if (text.includes("\r\n\r\n")) finish(line);
    });
    s.on("error", () => finish(text.split("\r\n")[0] || "closed"));
    s.on("close", () => finish(text.split("\r\n")[0] || "closed"));
  });
}

/** Writes `total` bytes of `chunk` repeated, respecting backpressure, stopping when the socket goes away. */
function pump(s: net.Socket, chunk: Uint8Array, total: number): void {
  let sent = 0;
  const more = (): void => {
    while (sent < total && !s.destroyed) {
      const n = Math.min(chunk.length, total - sent);
      sent += n;
      if (!s.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
        s.once("drain", more);
        return;
      }
    }
  };
  more();
}

/**
 * Samples the server's RSS and the health endpoint's latency, from a process of its own (`_health_probe.ts`), until
 * `stop` is called.
 */
export async function watch(
  server: ServerChild,
): Promise<{ stop(): Promise<{ peakRss: number; worstHealthMs: number; healthChecks: number; slowChecks: number }> }> {
  const isBun = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined";
  const probe = new URL("./_health_probe.ts", import.meta.url).pathname;
  const args = isBun ? [probe] : ["run", "-A", probe];
  const child = spawn(process.execPath, [...args, String(server.pid), String(server.port)], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  let peakRss = server.rss(), worst = 0, checks = 0, slow = 0, waiting = 0, text = "";
  const started = new Promise<void>((resolve) => {
    child.stdout!.on("data", (c: Uint8Array) => {
      text += new TextDecoder().decode(c);
      const lines = text.split("\n");
      text = lines.pop()!;
      for (const l of lines) {
        const [k, v] = l.split(" ");
        const x = Number(v);
        if (k === "r") peakRss = Math.max(peakRss, x);
        else if (k === "w") waiting = x;
        else if (k === "h") {
          waiting = 0;
          worst = Math.max(worst, x);
          if (x > 50) slow++;
          checks++;
          resolve();
        }
      }
    });
  });
  await started; // the probe is answering before the attack starts
  return {
    stop: async () => {
      await new Promise((r) => setTimeout(r, 50));
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await exited;
      // A check still waiting when the attack ended counts with the time it had waited.
      if (waiting > 0) {
        worst = Math.max(worst, waiting);
        if (waiting > 50) slow++;
        checks++;
      }
      return { peakRss, worstHealthMs: worst, healthChecks: checks, slowChecks: slow };
    },
  };
}

/** One attack's outcome. */
export interface AttackFigure {
  readonly attack: string;
  readonly statuses: Record<string, number>;
  readonly peakRssMiB: number;
  readonly idleRssMiB: number;
  readonly worstHealthMs: number;
  /** Health checks over 50 ms, of all made during the attack. */
  readonly slowHealth: string;
  readonly seconds: number;
}

const count = (xs: string[]): Record<string, number> => {
  const m: Record<string, number> = {};
  for (const x of xs) m[x] = (m[x] ?? 0) + 1;
  return m;
};

/** The memory booked on the device, summed over NeuronCores, from `/metrics`. */
async function deviceBytes(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  for (const m of text.matchAll(/^nrt_device_memory_used_bytes\{[^}]*\} (\d+)$/gm)) sum += Number(m[1]);
  return sum;
}

/**
 * Unloads and reloads `vector_add` `cycles` times through explicit model control while `clients` connections run
 * inferences of it (and of `relu`) and check every answer. Returns the statuses, the wrong answers and the device
 * memory booked before and after.
 */
export async function loadUnloadUnderTraffic(server: ServerChild, cycles: number, clients = 8): Promise<{
  statuses: string[];
  wrong: number;
  answered: number;
  bytesBefore: number;
  bytesAfter: number;
}> {
  const url = `http://127.0.0.1:${server.port}`;
  const auth = { "content-type": "application/json", authorization: `Bearer ${server.token}` };
  // One inference first: a model's I/O staging buffers are made at its first execution and kept until unload.
  const warm = {
    inputs: ["a", "b"].map((name) => ({ name, shape: [1024], datatype: "FP32", data: new Array(1024).fill(1) })),
  };
  await (await fetch(`${url}/v2/models/vector_add/infer`, { method: "POST", body: JSON.stringify(warm) }))
    .arrayBuffer();
  const bytesBefore = await deviceBytes(url);
  let running = true, wrong = 0, answered = 0;
  const statuses: string[] = [];
  const traffic = Array.from({ length: clients }, async (_, c) => {
    for (let i = 0; running; i++) {
      const a = Array.from({ length: 1024 }, (_, k) => (k * 7 + i + c) % 97),
        b = Array.from({ length: 1024 }, (_, k) => k % 13);
      const res = await fetch(`${url}/v2/models/vector_add/infer`, {
        method: "POST",
        body: JSON.stringify({
          inputs: [{ name: "a", shape: [1024], datatype: "FP32", data: a }, {
            name: "b",
            shape: [1024],
            datatype: "FP32",
            data: b,
          }],
        }),
      });
      statuses.push(`infer ${res.status}`);
      if (res.status === 200) {
        answered++;
        const out = (await res.json()).outputs[0].data as number[];
        if (out.some((x, k) => x !== a[k] + b[k])) wrong++;
      } else {
        await res.arrayBuffer();
      }
    }
  });
  for (let i = 0; i < cycles; i++) {
    for (const what of ["unload", "load"]) {
      const res = await fetch(`${url}/v2/repository/models/vector_add/${what}`, {
        method: "POST",
        body: "{}",
        headers: auth,
      });
      await res.arrayBuffer();
      statuses.push(`${what} ${res.status}`);
    }
  }
  running = false;
  await Promise.all(traffic);
  await (await fetch(`${url}/v2/models/vector_add/infer`, { method: "POST", body: JSON.stringify(warm) }))
    .arrayBuffer();
  return { statuses, wrong, answered, bytesBefore, bytesAfter: await deviceBytes(url) };
}

/** The attacks of docs/security.md against one server; returns a figure per attack. */
export async function runAdversary(server: ServerChild, dir: string): Promise<AttackFigure[]> {
  const figures: AttackFigure[] = [];
  const url = `http://127.0.0.1:${server.port}`;
  const relu = JSON.stringify({
    inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -1, 2, -2, 3, -3, 4, -4] }],
  });
  for (let i = 0; i < 50; i++) {
    await (await fetch(`${url}/v2/models/relu/infer`, { method: "POST", body: relu })).arrayBuffer();
  }
  const attack = async (name: string, run: () => Promise<string[]>) => {
    const idle = server.rss();
    const w = await watch(server);
    const t = performance.now();
    const statuses = await run();
    const seconds = (performance.now() - t) / 1000;
    const r = await w.stop();
    figures.push({
      attack: name,
      statuses: count(statuses),
      peakRssMiB: r.peakRss / MiB,
      idleRssMiB: idle / MiB,
      worstHealthMs: r.worstHealthMs,
      slowHealth: `${r.slowChecks}/${r.healthChecks}`,
      seconds,
    });
  };
  const big = new TextEncoder().encode(`[${"1,".repeat(512 * 1024)}1]`); // ~1 MiB of JSON numbers per chunk
  // 1. Six 64 MiB JSON bodies at once, declared with Content-Length, for an 8-element input.
  await attack(
    "6 × 64 MiB JSON bodies (Content-Length) to relu FP32[8]",
    () =>
      Promise.all(Array.from({ length: 6 }, () =>
        rawSend(server.port, (s) => {
          s.write(
            `POST /v2/models/relu/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${
              64 * MiB
            }\r\n\r\n`,
          );
          pump(s, big, 64 * MiB);
        }))),
  );
  // 2. The same, chunked (no Content-Length): the server must cut it off while reading.
  await attack(
    "6 × 64 MiB chunked bodies to relu FP32[8]",
    () =>
      Promise.all(Array.from({ length: 6 }, () =>
        rawSend(server.port, (s) => {
          s.write(
            "POST /v2/models/relu/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
          );
          const head = new TextEncoder().encode(`${big.length.toString(16)}\r\n`);
          const chunk = new Uint8Array([...head, ...big, 13, 10]);
          pump(s, chunk, chunk.length * 64);
        }))),
  );
  // 3. A thousand idle event-stream clients.
  await attack("1000 idle dashboard event streams", async () => {
    const sockets: net.Socket[] = [];
    const statuses = await Promise.all(Array.from({ length: 1000 }, () =>
      new Promise<string>((resolve) => {
        const s = net.connect(server.port, "127.0.0.1");
        sockets.push(s);
        let text = "";
        s.on("connect", () => s.write("GET /v2/dashboard/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
        s.on("data", (c: Uint8Array) => {
          text += new TextDecoder().decode(c);
          if (text.includes("\r\n")) {
            s.pause(); // an idle client: never reads again
            resolve(text.split("\r\n")[0]);
          }
        });
        s.on("error", () => resolve("closed"));
        setTimeout(() => resolve(text.split("\r\n")[0] || "no answer"), 10_000);
      })));
    await new Promise((r) => setTimeout(r, 3000)); // events keep coming for the accepted ones
    for (const s of sockets) s.destroy();
    return statuses;
  });
  // 4. A 1 MB gzip bomb NEFF (decompresses to 1 GiB), loaded through explicit model control.
  const bomb = buildNeff({ name: "bomb.neff", members: { "zeros.bin": new Uint8Array(1024 * MiB) } });
  await writeFile(join(dir, "bomb.neff"), bomb);
  const auth = { "content-type": "application/json", authorization: `Bearer ${server.token}` };
  await (await fetch(`${url}/v2/repository/index`, { method: "POST", body: "{}", headers: auth })).arrayBuffer();
  await attack(`gzip-bomb NEFF (${(bomb.length / MiB).toFixed(1)} MB → 1 GiB) loaded 4 times`, async () => {
    const out: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${url}/v2/repository/models/bomb/load`, {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json", authorization: `Bearer ${server.token}` },
      });
      await res.arrayBuffer();
      out.push(`HTTP ${res.status}`);
    }
    return out;
  });
  return figures;
}

/** A model repository with the demo models, in a fresh folder. */
export async function demoRepository(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nrt-adversary-"));
  for (const [name, bytes] of Object.entries(await buildDemoModels("cayman"))) await writeFile(join(dir, name), bytes);
  return dir;
}

if (import.meta.main) {
  const dir = await demoRepository();
  const server = await startServerChild(dir);
  try {
    for (const f of await runAdversary(server, dir)) {
      console.log(
        `${f.attack}: ${JSON.stringify(f.statuses)}; RSS idle ${f.idleRssMiB.toFixed(0)} MiB, peak ${
          f.peakRssMiB.toFixed(0)
        } MiB; ` +
          `worst /v2/health/live ${f.worstHealthMs.toFixed(1)} ms (${f.slowHealth} over 50 ms); ${
            f.seconds.toFixed(2)
          } s`,
      );
    }
    const cycles = Number(process.env.CYCLES ?? 600);
    const t = performance.now();
    const r = await loadUnloadUnderTraffic(server, cycles);
    const counts = count(r.statuses);
    console.log(
      `${cycles} unload/load cycles of vector_add under 8 clients: ${
        JSON.stringify(counts)
      }; ${r.answered} answers checked, ` +
        `${r.wrong} wrong; device memory ${r.bytesBefore} B before, ${r.bytesAfter} B after; ${
          ((performance.now() - t) / 1000).toFixed(1)
        } s`,
    );
  } finally {
    await server.stop();
  }
  process.exit(0);
}
