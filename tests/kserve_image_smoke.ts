/**
 * CI's container check (`bun tests/kserve_image_smoke.ts`, run by .ci/run): builds the image of the Containerfile
 * with buildah from local base images, offline (npm reads the host's cache, see {@linkcode offlineContext}), runs the image's entry command in it
 * on a folder laid out as KServe's storage initializer writes `/mnt/models` for `storageUri: s3://bucket/repo/`
 * (`relu/1/model.neff`, `relu/config.json`), and checks that REST and gRPC answer and that SIGTERM stops it with
 * exit code 0. The container shares the host's network (buildah's chroot isolation); the server binds 127.0.0.1.
 *
 * It exits 0 without building when buildah or a base image is missing, saying why: the Containerfile is still linted
 * by tests/kserve_manifests_test.ts. Bases: `NRT_NODE_IMAGE` (default `localhost/node:bookworm`) and
 * `NRT_RUNTIME_IMAGE` (default `localhost/debian:bookworm-slim`), e.g. imported from `mmdebstrap` root filesystems
 * (docs/deploy-kserve.md).
 */
import { buildDemoModels } from "@nrt/cli";
import { execFile, spawn } from "node:child_process";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { oipClient } from "./_grpc_client.ts";
import { freePort } from "./_serve_process.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const IMAGE = "localhost/nrt:ci";
const NODE_IMAGE = process.env.NRT_NODE_IMAGE ?? "localhost/node:bookworm";
const RUNTIME_IMAGE = process.env.NRT_RUNTIME_IMAGE ?? "localhost/debian:bookworm-slim";

function run(file: string, args: string[], timeoutMs = 900_000): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: ROOT, timeout: timeoutMs, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      const code = err === null
        ? 0
        : typeof (err as { code?: unknown }).code === "number"
        ? (err as { code: number }).code
        : 1;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

/**
 * A copy of the build context (what .dockerignore lets in) whose lockfile gives every package its registry tarball
 * URL (npm's `resolved`, which this repository's lockfile leaves out). With it the base image's npm finds each
 * tarball in the host's cache by URL and integrity; without it npm asks the registry for package documents, which
 * an offline build cannot, and which npm 11's cache holds in a form Debian's npm 9 does not match. The packages
 * installed are the same: the lockfile's versions and integrity hashes are unchanged.
 */
async function offlineContext(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "nrt-image-context-"));
  for (
    const path of [
      "package.json",
      "mod.ts",
      "Containerfile",
      ".dockerignore",
      "kernels",
      "packages",
      "deploy/container",
    ]
  ) {
    await cp(join(ROOT, path), join(dir, path), { recursive: true, filter: (src) => !src.includes("/node_modules") });
  }
  const lock = JSON.parse(await readFile(join(ROOT, "package-lock.json"), "utf8"));
  for (const [path, entry] of Object.entries(lock.packages as Record<string, Record<string, unknown>>)) {
    if (
      !path.startsWith("node_modules/") || entry.link === true || entry.resolved !== undefined ||
      entry.version === undefined
    ) continue;
    const name = path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length);
    entry.resolved = `https://registry.npmjs.org/${name}/-/${name.split("/").pop()}-${entry.version}.tgz`;
  }
  await writeFile(join(dir, "package-lock.json"), JSON.stringify(lock, null, 2));
  return dir;
}

/** Every process below `pid`, with its command line (Linux `/proc`). */
async function descendants(pid: number): Promise<Array<{ pid: number; cmdline: string }>> {
  const out: Array<{ pid: number; cmdline: string }> = [];
  const walk = async (p: number): Promise<void> => {
    const tasks = await readdir(`/proc/${p}/task`).catch(() => [] as string[]);
    for (const t of tasks) {
      const children = (await readFile(`/proc/${p}/task/${t}/children`, "utf8").catch(() => "")).split(" ").filter((
        x,
      ) => x !== "").map(Number);
      for (const c of children) {
        out.push({
          pid: c,
          cmdline: (await readFile(`/proc/${c}/cmdline`, "utf8").catch(() => "")).replaceAll("\0", " "),
        });
        await walk(c);
      }
    }
  };
  await walk(pid);
  return out;
}

function fail(why: string): never {
  console.error(`kserve image smoke: FAILED: ${why}`);
  process.exit(1);
}

async function main(): Promise<void> {
  if ((await run("buildah", ["--version"])).code !== 0) {
    console.log("kserve image smoke: skipped: buildah is not installed (the Containerfile is linted by the tests)");
    return;
  }
  for (const base of [NODE_IMAGE, RUNTIME_IMAGE]) {
    if ((await run("buildah", ["inspect", "--type", "image", base])).code !== 0) {
      console.log(
        `kserve image smoke: skipped: base image ${base} is not in local storage (docs/deploy-kserve.md says how to import one)`,
      );
      return;
    }
  }
  const t0 = performance.now();
  const context = await offlineContext();
  const build = await run("buildah", [
    "bud",
    "--isolation",
    "chroot",
    "--layers",
    "--format",
    "docker",
    "--build-arg",
    `NODE_IMAGE=${NODE_IMAGE}`,
    "--build-arg",
    `RUNTIME_IMAGE=${RUNTIME_IMAGE}`,
    "--build-arg",
    "NPM_FLAGS=--offline",
    "--volume",
    `${join(homedir(), ".npm")}:/root/.npm:O`,
    "-t",
    IMAGE,
    "-f",
    join(context, "Containerfile"),
    context,
  ]);
  await rm(context, { recursive: true, force: true });
  if (build.code !== 0) fail(`buildah bud exited ${build.code}:\n${build.out.slice(-4000)}`);
  console.log(`kserve image smoke: built ${IMAGE} in ${Math.round((performance.now() - t0) / 1000)} s`);

  // /mnt/models as the storage initializer writes it for storageUri s3://bucket/repo/ holding relu/1/model.neff.
  const work = await mkdtemp(join(tmpdir(), "nrt-image-smoke-"));
  const models = join(work, "models");
  await mkdir(join(models, "relu", "1"), { recursive: true, mode: 0o755 });
  await writeFile(join(models, "relu", "1", "model.neff"), (await buildDemoModels("cayman"))["relu.neff"], {
    mode: 0o644,
  });
  await writeFile(join(models, "relu", "config.json"), JSON.stringify({ instances: 2 }), { mode: 0o644 });
  const ctr = (await run("buildah", ["from", "--pull-never", IMAGE])).out.trim().split("\n").pop()!;
  const [port, grpcPort] = [await freePort(), await freePort()];
  // The image's entry command, bound to loopback on free ports (the host's network is shared).
  const command = [
    "nrt",
    "serve",
    "--models",
    "/mnt/models",
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--grpc-port",
    String(grpcPort),
  ];
  const server = spawn("buildah", [
    "run",
    "--isolation",
    "chroot",
    "-v",
    `${models}:/mnt/models:ro`,
    ctr,
    "--",
    ...command,
  ], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  server.stdout!.on("data", (d) => (output += String(d)));
  server.stderr!.on("data", (d) => (output += String(d)));
  const exited = new Promise<number | null>((r) => server.on("exit", (code) => r(code)));
  const client = oipClient(`127.0.0.1:${grpcPort}`);
  try {
    const deadline = Date.now() + 120_000;
    for (;;) {
      const ready = await fetch(`http://127.0.0.1:${port}/v2/health/ready`).then((r) => r.status, () => 0);
      if (ready === 200) break;
      if (Date.now() > deadline) fail(`the server did not become ready:\n${output}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const x = [-3, -2, -1, 0, 1, 2, 3, -3], y = x.map((v) => Math.max(0, v));
    const res = await fetch(`http://127.0.0.1:${port}/v2/models/relu/infer`, {
      method: "POST",
      body: JSON.stringify({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: x }] }),
    });
    const rest = await res.json();
    if (JSON.stringify(rest.outputs?.[0]?.data) !== JSON.stringify(y)) {
      fail(`REST answered ${res.status} ${JSON.stringify(rest)}`);
    }
    const meta = await (await fetch(`http://127.0.0.1:${port}/v2/models/relu`)).json();
    if (meta.instances?.length !== 2) {
      fail(`the model metadata lists ${JSON.stringify(meta.instances)}, expected 2 instances`);
    }
    const rpc = await client.modelInfer({
      model_name: "relu",
      inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: x } }],
    });
    if (JSON.stringify(rpc.outputs[0].contents.fp32_contents) !== JSON.stringify(y)) {
      fail(`gRPC answered ${JSON.stringify(rpc)}`);
    }
    console.log(`kserve image smoke: REST and gRPC answered relu from /mnt/models (relu/1/model.neff, 2 instances)`);
  } finally {
    client.close();
    // `buildah run` does not forward SIGTERM to the container's process (it kills it): signal Bun itself, as the
    // kubelet signals a container's main process.
    const bun = await descendants(server.pid!).then((pids) =>
      pids.find((p) => p.cmdline.includes("packages/cli/main.ts"))
    );
    if (bun === undefined) server.kill("SIGKILL");
    else process.kill(bun.pid, "SIGTERM");
  }
  const code = await Promise.race([exited, new Promise<"hung">((r) => setTimeout(() => r("hung"), 60_000))]);
  await run("buildah", ["rm", ctr]);
  await rm(work, { recursive: true, force: true });
  if (code !== 0 || !output.includes("nrt: stopped")) {
    fail(`SIGTERM: the container's command exited with ${code}:\n${output}`);
  }
  console.log("kserve image smoke: SIGTERM drained and stopped the server, exit code 0");
}

await main();
process.exit(0);
