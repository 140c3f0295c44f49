/**
 * A runtime process for the daemon tests: connects to the daemon named by `--address`, takes the cores of
 * `NEURON_RT_VISIBLE_CORES` (the two lines `nrt_init` runs when wired: acquire, then bring-up), loads vector_add,
 * executes it, prints `{"event":"ready",…}` and keeps its cores until stdin says `exit` (or closes); then unloads,
 * closes and prints `{"event":"done"}`. A failure prints `{"event":"error","status":…,"message":…}` and exits 1.
 */
import "reflect-metadata";
import { envFromProcess, MemoryLogger, NrtError, resolveRuntimeConfig, Runtime, TensorSet } from "@nrt/core";
import { oneOpNeff } from "./_kernels.ts";
import { remoteContainer } from "./_remote.ts";
import { nrtPlugins } from "@nrt/cli";

const arg = (flag: string) => {
  const i = process.argv.indexOf(flag);
  return i < 0 ? undefined : process.argv[i + 1];
};
const say = (o: Record<string, unknown>) => console.log(JSON.stringify({ pid: process.pid, ...o }));

const address = arg("--address")!;
const name = arg("--name") ?? "client";
const n = 4096;
let stage = "connect";
try {
  const { c, portal } = await remoteContainer(address, name);
  const env = envFromProcess();
  const visible = resolveRuntimeConfig({}, env).visibleCores ?? [0, 1];
  stage = "init";
  // Runtime.init acquires the visible cores (Portal.acquireCores, the driver's core range mark).
  const rt = await Runtime.init({ ...nrtPlugins(c), env, logger: new MemoryLogger() });
  stage = "load";
  const f32 = (nm: string) => ({ name: nm, dtype: "float32", shape: [n] });
  const model = await rt.load(oneOpNeff("vector_add", "vector_add", [f32("a"), f32("b")], [f32("out")]));
  const ins = new TensorSet(), outs = new TensorSet();
  const seed = Number(arg("--seed") ?? 1);
  for (const t of model.inputs) {
    const x = await rt.allocateTensor({ location: "host", size: t.size, name: t.name });
    await x.write(new Uint8Array(Float32Array.from({ length: n }, (_, i) => i * seed).buffer));
    ins.add(t.name, x);
  }
  outs.add("out", await rt.allocateTensor({ location: "host", size: n * 4, name: "out" }));
  stage = "execute";
  await model.execute(ins, outs);
  const out = new Float32Array((await outs.get("out").read()).slice().buffer);
  say({ event: "ready", cores: visible, session: portal.session, out10: out[10], outLast: out[n - 1] });
  await new Promise<void>((resolve) => {
    process.stdin.on("data", (d) => String(d).includes("exit") && resolve());
    process.stdin.on("end", () => resolve());
  });
  stage = "teardown";
  await model.execute(ins, outs); // the cores still work after the others came and went
  await model.unload();
  await rt.close(); // releases the cores and closes the portal it owns
  say({ event: "done" });
  process.exit(0);
} catch (e) {
  say({
    event: "error",
    stage,
    status: e instanceof NrtError ? e.status : -1,
    message: e instanceof Error ? e.message : String(e),
  });
  process.exit(1);
}
