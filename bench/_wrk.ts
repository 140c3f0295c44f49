/**
 * The load of bench/http.ts from `wrk` (Debian's package), a C client in a process of its own, instead of the
 * client Worker: a JavaScript client in the server's process takes a share of the same two CPUs for every request,
 * which costs a fast target more than a slow one. One `wrk` thread keeps `connections` connections busy with one
 * body for `seconds`; its Lua script compares every answer with the expected text and reports the mismatches. Ours.
 *
 * @module
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LoadResult } from "./_http_client.ts";

/** What one `wrk` run is asked to do. */
export interface WrkJob {
  /** Target URL (loopback only). */
  readonly url: string;
  /** The POST body. */
  readonly body: string;
  /** The text every answer must be. */
  readonly answer: string;
  /** Open connections. */
  readonly connections: number;
  /** Seconds to run (whole seconds, at least 1). */
  readonly seconds: number;
}

/** Whether `wrk` is on the PATH. */
export function hasWrk(): boolean {
  return spawnSync("wrk", ["--version"], { encoding: "utf8" }).error === undefined;
}

/** A Lua long string holding `s` (a level of `=` that `s` does not contain closes it). */
function luaString(s: string): string {
  let eq = "";
  while (s.includes(`]${eq}]`)) eq += "=";
  return `[${eq}[${s}]${eq}]`;
}

const UNIT_MS: Record<string, number> = { us: 1e-3, ms: 1, s: 1e3, m: 6e4 };

/** `1.63ms`, `303.00us`, `1.2s` in ms. */
function ms(text: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text);
  if (m === null) throw new Error(`wrk printed a latency it cannot read: ${text}`);
  return Number(m[1]) * UNIT_MS[m[2]];
}

/** Runs `wrk` (asynchronously: the server may be in this process) and reads its report. */
export async function wrkLoad(job: WrkJob): Promise<LoadResult> {
  const host = new URL(job.url).hostname;
  if (host !== "127.0.0.1" && host !== "localhost") throw new Error(`Refusing to load ${host}: loopback only`);
  const dir = mkdtempSync(join(tmpdir(), "nrt-wrk-"));
  try {
    const script = join(dir, "post.lua");
    writeFileSync(
      script,
      [
        `wrk.method = "POST"`,
        `wrk.body = ${luaString(job.body)}`,
        `wrk.headers["Content-Type"] = "application/json"`,
        `local expected = ${luaString(job.answer)}`,
        `wrong = 0`,
        `response = function(status, headers, body) if status == 200 and body ~= expected then wrong = wrong + 1 end end`,
        `local threads = {}`,
        `setup = function(thread) table.insert(threads, thread) end`,
        `done = function(summary, latency, requests)`,
        `  local n = 0`,
        `  for _, t in ipairs(threads) do n = n + t:get("wrong") end`,
        `  io.write("WRONG " .. n .. "\\n")`,
        `end`,
      ].join("\n"),
    );
    const args = [
      "-t1",
      `-c${job.connections}`,
      `-d${Math.max(1, Math.round(job.seconds))}s`,
      "--latency",
      "-s",
      script,
      job.url,
    ];
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn("wrk", args, { stdio: ["ignore", "pipe", "pipe"] });
      let text = "";
      child.stdout!.on("data", (d: Uint8Array) => (text += new TextDecoder().decode(d)));
      child.stderr!.on("data", (d: Uint8Array) => (text += new TextDecoder().decode(d)));
      child.on("error", reject);
      child.on("close", (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
    });
    const done = /(\d+) requests in ([\d.]+)(us|ms|s|m),/.exec(out);
    const p50 = /^\s+50%\s+(\S+)$/m.exec(out), p99 = /^\s+99%\s+(\S+)$/m.exec(out);
    const wrong = /^WRONG (\d+)$/m.exec(out);
    if (done === null || p50 === null || p99 === null || wrong === null) {
      throw new Error(`wrk printed a report it cannot read:\n${out}`);
    }
    const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
    const sockets = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
    const errors = Number(non2xx?.[1] ?? 0) +
      (sockets === null ? 0 : sockets.slice(1).reduce((a, x) => a + Number(x), 0));
    return {
      completed: Number(done[1]),
      errors,
      wrong: Number(wrong[1]),
      elapsedMs: Number(done[2]) * UNIT_MS[done[3]],
      p50Ms: ms(p50[1]),
      p99Ms: ms(p99[1]),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
