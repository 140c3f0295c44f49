#!/usr/bin/env node
// `npx nrt …`: the nrt command runs on Bun (installed from npm as a devDependency); this shim finds it and
// forwards the arguments, the exit code and the signals.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { bunEnv } from "./bun_env.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const main = join(here, "..", "main.ts");
let dir = here;
// NRT_BUN names the Bun to run, as for the container's `nrt` script (deploy/container/nrt).
let bun = process.env.NRT_BUN || "bun";
for (let i = 0; i < 8 && !process.env.NRT_BUN; i++) {
  const candidate = join(dir, "node_modules", ".bin", "bun");
  if (existsSync(candidate)) {
    bun = candidate;
    break;
  }
  dir = dirname(dir);
}
// argv0 "nrt": the server announces its command line as the user typed it, `nrt serve …` (neuron_discovery.ts).
// The environment: bun_env.mjs (the allocator keeps the pages it frees).
const child = spawn(bun, [main, ...process.argv.slice(2)], {
  stdio: "inherit",
  argv0: "nrt",
  env: bunEnv(process.env),
});
// Forward termination signals so `npx nrt serve` shuts down gracefully on SIGTERM/SIGINT as `bun … serve` does.
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code, signal) => process.exit(signal ? 1 : code ?? 1));
child.on("error", (e) => {
  console.error(`nrt: cannot start Bun (${e.message}); run "npm install" first`);
  process.exit(1);
});
