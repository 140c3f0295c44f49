/**
 * nrt's KServe deployment, checked without a cluster or a container registry: the manifests of deploy/kserve/ and
 * the KServe YAML of docs/deploy-kserve.md against KServe's real CRDs (../shared/fixtures/kserve/), the invariants
 * the server and KServe need, the Containerfile and .dockerignore, the image's two helper files (the `nrt` wrapper
 * and the HEALTHCHECK script) against a live server whose repository is laid out as KServe's storage initializer
 * lays out a single-object `storageUri`, and the image's entry command through that wrapper on the layouts of a
 * repository prefix and of one model's folder, answering REST and gRPC and stopping on SIGTERM. (The image itself is
 * built and run by tests/kserve_image_smoke.ts in CI.)
 */
import { describe, expect, test } from "bun:test";
import { buildDemoModels, startServer } from "@nrt/cli";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CrdValidator,
  dockerIgnored,
  inferenceServiceProblems,
  type K8sObject,
  KSERVE_FIXTURES,
  kserveValidators,
  lintContainerfile,
  parseContainerfile,
  parseDockerIgnore,
  parseYamlDocuments,
  readYamlDocuments,
  SERVE_COMMAND,
  servingRuntimeProblems,
} from "./_kserve.ts";
import { oipClient } from "./_grpc_client.ts";
import { freePort, spawnServe } from "./_serve_process.ts";
import { runProgram } from "./_run.ts";

const ROOT = new URL("../", import.meta.url);
const read = (path: string): string => readFileSync(new URL(path, ROOT), "utf8");
const BUN = new URL("node_modules/.bin/bun", ROOT).pathname;
// Parsing the 2 MB InferenceService CRD takes seconds on the 2 shared cores; the first test that needs it pays.
const CRD_TIMEOUT = 120_000;

let validators: ReturnType<typeof kserveValidators> | undefined;
const crds = (): ReturnType<typeof kserveValidators> => validators ??= kserveValidators();

/** Every YAML document of deploy/kserve/, with the file it came from. */
function deployManifests(): Array<{ file: string; doc: K8sObject }> {
  const dir = new URL("deploy/kserve/", ROOT);
  return readdirSync(dir).filter((f) => f.endsWith(".yaml")).sort()
    .flatMap((file) => readYamlDocuments(new URL(file, dir)).map((doc) => ({ file, doc })));
}
const only = (kind: string): K8sObject => {
  const found = deployManifests().filter((m) => m.doc.kind === kind);
  expect(found.length).toBe(1);
  return found[0].doc;
};
// The negative cases edit manifests as free-form JSON.
// deno-lint-ignore no-explicit-any
type Doc = any;
type Edit = (d: Doc) => unknown;

/** A deep copy of `doc` changed by `edit`. */
const edited = (doc: K8sObject, edit: Edit): K8sObject => {
  const copy = structuredClone(doc);
  edit(copy);
  return copy;
};

/** Runs a program; resolves to its exit code and output. */
const run = (file: string, args: string[], env: Record<string, string>) => runProgram(file, args, env);

describe("deploy/kserve/ against KServe's CRDs", () => {
  test("CrdValidator() accepts every ServingRuntime and InferenceService of deploy/kserve/", () => {
    const { servingRuntime, inferenceService } = crds();
    const checked: string[] = [];
    for (const { file, doc } of deployManifests()) {
      const validator = [servingRuntime, inferenceService].find((v) =>
        v.apiVersion === doc.apiVersion && v.kind === doc.kind
      );
      if (validator === undefined) {
        // Not a KServe object: the model store's PersistentVolumeClaim and loader Pod are core v1 objects.
        expect(`${file}: ${String(doc.apiVersion)} ${String(doc.kind)}`).toMatch(/: v1 (PersistentVolumeClaim|Pod)$/);
        continue;
      }
      expect({ file, problems: validator.problems(doc) }).toEqual({ file, problems: [] });
      checked.push(String(doc.kind));
    }
    expect(checked.sort()).toEqual(["InferenceService", "ServingRuntime"]);
  }, CRD_TIMEOUT);

  test("CrdValidator() accepts KServe's own Triton runtime (a ClusterServingRuntime has the same spec)", () => {
    const triton = readYamlDocuments(new URL("kserve-tritonserver.yaml", KSERVE_FIXTURES))[0];
    expect(crds().servingRuntime.problems({ ...triton, kind: "ServingRuntime" })).toEqual([]);
  }, CRD_TIMEOUT);

  test("CrdValidator() rejects broken copies of the ServingRuntime", () => {
    const sr = only("ServingRuntime");
    const cases: Array<[string, Edit, string]> = [
      [
        "misspelt field",
        (d) => d.spec.supportedModelFormat = [],
        "/spec: must NOT have additional properties (supportedModelFormat)",
      ],
      [
        "numeric version",
        (d) => d.spec.supportedModelFormats[0].version = 1,
        "/spec/supportedModelFormats/0/version: must be string",
      ],
      [
        "duplicate port",
        (d) => d.spec.containers[0].ports.push({ containerPort: 8080 }),
        'has a duplicate map entry [8080,"TCP"]',
      ],
      [
        "string port",
        (d) => d.spec.containers[0].ports[1].containerPort = "8081",
        "/spec/containers/0/ports/1/containerPort: must be integer",
      ],
      [
        "port out of int32",
        (d) => d.spec.containers[0].ports[1].containerPort = 2 ** 31,
        'containerPort: must match format "int32"',
      ],
      ["no containers", (d) => delete d.spec.containers, "/spec: must have required property 'containers'"],
      [
        "nameless container",
        (d) => delete d.spec.containers[0].name,
        "/spec/containers/0: must have required property 'name'",
      ],
      [
        "fractional probe port",
        (d) => d.spec.containers[0].startupProbe.httpGet.port = 1.5,
        'must pass "x-kubernetes-int-or-string"',
      ],
      [
        "bad quantity",
        (d) => d.spec.containers[0].resources.limits.cpu = "two",
        "/spec/containers/0/resources/limits/cpu: must match pattern",
      ],
      ["wrong apiVersion", (d) => d.apiVersion = "serving.kserve.io/v1beta1", "/apiVersion: must be equal to constant"],
      ["bad name", (d) => d.metadata.name = "NRT", "/metadata/name: must match pattern"],
      ["unknown metadata", (d) => d.metadata.labelz = {}, "/metadata: must NOT have additional properties (labelz)"],
    ];
    for (const [what, edit, message] of cases) {
      expect({ what, problems: crds().servingRuntime.problems(edited(sr, edit)).join("\n") })
        .toEqual({ what, problems: expect.stringContaining(message) });
    }
  }, CRD_TIMEOUT);

  test("CrdValidator() rejects broken copies of the InferenceService", () => {
    const isvc = only("InferenceService");
    const cases: Array<[string, Edit, string]> = [
      [
        "unknown scale metric",
        (d) => d.spec.predictor.scaleMetric = "gpu",
        "/spec/predictor/scaleMetric: must be equal to one of the allowed values",
      ],
      ["string replicas", (d) => d.spec.predictor.minReplicas = "1", "/spec/predictor/minReplicas: must be integer"],
      [
        "format without name",
        (d) => d.spec.predictor.model.modelFormat = { version: "1" },
        "modelFormat: must have required property 'name'",
      ],
      [
        "numeric storageUri",
        (d) => d.spec.predictor.model.storageUri = 42,
        "/spec/predictor/model/storageUri: must be string",
      ],
      [
        "misspelt field",
        (d) => d.spec.predictor.modle = {},
        "/spec/predictor: must NOT have additional properties (modle)",
      ],
      ["name with a leading digit", (d) => d.metadata.name = "9relu", "/metadata/name: must match pattern"],
      ["no predictor", (d) => delete d.spec.predictor, "/spec: must have required property 'predictor'"],
    ];
    for (const [what, edit, message] of cases) {
      expect({ what, problems: crds().inferenceService.problems(edited(isvc, edit)).join("\n") })
        .toEqual({ what, problems: expect.stringContaining(message) });
    }
  }, CRD_TIMEOUT);

  test("CrdValidator() refuses a CRD whose schema uses a keyword it cannot check", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nrt-kserve-crd-"));
    try {
      const crd = {
        apiVersion: "apiextensions.k8s.io/v1",
        kind: "CustomResourceDefinition",
        spec: {
          group: "example.com",
          names: { kind: "Thing" },
          versions: [{
            name: "v1",
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: "object", "x-kubernetes-validations": [{ rule: "self.a > 0" }] } },
          }],
        },
      };
      await writeFile(join(dir, "crd.yaml"), JSON.stringify(crd));
      expect(() => new CrdValidator(new URL(`file://${join(dir, "crd.yaml")}`)))
        .toThrow("Cannot validate Thing objects: the CRD uses x-kubernetes-validations");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("nrt's KServe invariants", () => {
  test("servingRuntimeProblems() finds none in the ServingRuntime, whose command is the documented one", () => {
    const sr = only("ServingRuntime");
    expect(servingRuntimeProblems(sr)).toEqual([]);
    const c = (sr.spec as { containers: Array<{ command: string[]; args: string[] }> }).containers[0];
    expect([...c.command, ...c.args]).toEqual([...SERVE_COMMAND]);
    // The --flag=value spelling is the same command.
    const equals = edited(sr, (d) => d.spec.containers[0].args.splice(5, 2, "--port=8080"));
    expect((equals.spec as Doc).containers[0].args).toContain("--port=8080");
    expect(servingRuntimeProblems(equals)).toEqual([]);
  });

  test("servingRuntimeProblems() reports each broken invariant", () => {
    const sr = only("ServingRuntime");
    const c = (d: Doc): Doc => d.spec.containers[0];
    const cases: Array<[Edit, string]> = [
      [(d) => c(d).args[6] = "8000", 'command and args are "nrt serve --models /mnt/models --host 0.0.0.0 --port 8000'],
      [
        (d) => c(d).args.splice(-2),
        'expected "nrt serve --models /mnt/models --host 0.0.0.0 --port 8080 --grpc-port 8081"',
      ],
      [(d) => c(d).ports.pop(), "no container port 8081 (gRPC)"],
      [(d) => c(d).ports.reverse(), "the first port is 8081"],
      [
        (d) => c(d).readinessProbe.httpGet.path = "/healthz",
        "readinessProbe is GET /healthz on port 8080, expected GET /v2/health/ready",
      ],
      [(d) => c(d).livenessProbe = { tcpSocket: { port: 8080 } }, "livenessProbe is not an httpGet probe"],
      [(d) => delete c(d).startupProbe, "startupProbe is none"],
      [(d) => c(d).securityContext.runAsUser = 0, "securityContext.runAsUser is 0 (root)"],
      [(d) => c(d).securityContext.runAsNonRoot = false, "securityContext.runAsNonRoot is not true"],
      [(d) => c(d).securityContext.capabilities.drop = [], "capabilities.drop lacks ALL"],
      [(d) => c(d).securityContext.allowPrivilegeEscalation = true, "allowPrivilegeEscalation is not false"],
      [(d) => c(d).resources.requests.memory = "2Gi", "resources.requests.memory 2Gi exceeds the limit 1Gi"],
      [(d) => delete c(d).resources.limits, "resources.requests.cpu and resources.limits.cpu must both be set"],
      [
        (d) => d.spec.supportedModelFormats[0].name = "onnx",
        'supportedModelFormats has no {name: neff, version: "1", autoSelect: true}',
      ],
      [(d) => d.spec.protocolVersions = ["v2"], "protocolVersions lacks grpc-v2"],
      [(d) => c(d).name = "server", "no container is named kserve-container"],
    ];
    for (const [edit, message] of cases) {
      expect(servingRuntimeProblems(edited(sr, edit)).join("\n")).toContain(message);
    }
    // KServe's Triton runtime is a valid runtime, but not nrt's.
    const triton = readYamlDocuments(new URL("kserve-tritonserver.yaml", KSERVE_FIXTURES))[0];
    expect(servingRuntimeProblems(triton).join("\n")).toContain("supportedModelFormats has no {name: neff");
  });

  test("inferenceServiceProblems() finds none in the example and reports each broken rule", () => {
    const sr = only("ServingRuntime"), isvc = only("InferenceService");
    expect(inferenceServiceProblems(isvc, [sr])).toEqual([]);
    const m = (d: Doc): Doc => d.spec.predictor.model;
    const annotations = (d: Doc): Doc => d.metadata.annotations;
    const cases: Array<[Edit, string]> = [
      [(d) => m(d).modelFormat.name = "onnx", "modelFormat.name is onnx, expected neff"],
      [(d) => m(d).modelFormat.version = "2", "runtime nrt does not support neff version 2"],
      [(d) => m(d).runtime = "kserve-tritonserver", "runtime kserve-tritonserver is none of the given ServingRuntimes"],
      [(d) => m(d).protocolVersion = "v1", "protocolVersion v1 is not one of the runtime's (v2, grpc-v2)"],
      [(d) => m(d).name = "relu", "spec.predictor.model.name is set"],
      [(d) => m(d).storageUri = "/models/relu.neff", "storageUri /models/relu.neff is not a URI"],
      [
        (d) => annotations(d)["serving.kserve.io/deploymentMode"] = "Serverless",
        "deploymentMode Serverless: Knative admits one container port",
      ],
      [
        (d) => delete annotations(d)["serving.kserve.io/autoscalerClass"],
        "scaleMetric cpu needs the annotations deploymentMode Standard and autoscalerClass hpa",
      ],
      [
        (d) => annotations(d)["serving.kserve.io/deploymentMode"] = "RawDeployment",
        "scaleMetric cpu needs the annotations deploymentMode Standard",
      ],
      [(d) => d.spec.predictor.minReplicas = 0, "minReplicas is below 1"],
      [(d) => d.spec.predictor.scaleTarget = 150, "scaleTarget 150 is not a utilization percentage"],
    ];
    for (const [edit, message] of cases) {
      expect(inferenceServiceProblems(edited(isvc, edit), [sr]).join("\n")).toContain(message);
    }
  });
});

describe("Containerfile", () => {
  const text = read("Containerfile");
  const rules = { command: SERVE_COMMAND, ports: [8080, 8081] };

  test("lintContainerfile() passes the Containerfile, whose ENTRYPOINT + CMD is the documented command", () => {
    expect(lintContainerfile(text, rules)).toEqual([]);
    const final = parseContainerfile(text).filter((i) => i.stage === 1);
    expect([...final.find((i) => i.keyword === "ENTRYPOINT")!.exec!, ...final.find((i) => i.keyword === "CMD")!.exec!])
      .toEqual([...SERVE_COMMAND]);
    expect(final.find((i) => i.keyword === "USER")!.args).toBe("10001:10001");
    expect(read("docs/deploy-kserve.md")).toContain(SERVE_COMMAND.join(" "));
  });

  test("lintContainerfile() reports a root or named user, a missing port, a shell-form CMD, another command", () => {
    const cases: Array<[string, string, string]> = [
      ["USER 10001:10001", "USER 0", "USER 0 is root"],
      ["USER 10001:10001", "USER nrt", "USER nrt is not numeric"],
      ["USER 10001:10001\n", "", "the final stage sets no USER"],
      ["EXPOSE 8080 8081", "EXPOSE 8080", "the final stage does not EXPOSE 8081"],
      [
        '"--grpc-port", "8081"]',
        '"--grpc-port", "9000"]',
        'ENTRYPOINT + CMD is "nrt serve --models /mnt/models --host 0.0.0.0 --port 8080 --grpc-port 9000"',
      ],
      [
        'CMD ["serve", "--models", "/mnt/models", "--host", "0.0.0.0", "--port", "8080", "--grpc-port", "8081"]',
        "CMD serve --models /mnt/models --host 0.0.0.0 --port 8080 --grpc-port 8081",
        "ENTRYPOINT and CMD must use the exec form",
      ],
      ["HEALTHCHECK --interval", "# HEALTHCHECK --interval", "the final stage has no HEALTHCHECK"],
      ["npm ci --omit=dev", "npm ci", "installs devDependencies (no --omit=dev)"],
    ];
    for (const [from, to, message] of cases) {
      expect(text).toContain(from);
      expect(lintContainerfile(text.replace(from, to), rules).join("\n")).toContain(message);
    }
    expect(lintContainerfile("RUN true\nFROM scratch\n", rules)).toEqual([
      "no FROM before the first instruction other than ARG",
    ]);
  });

  test("parseContainerfile() joins continuation lines, drops comments and numbers the stages", () => {
    const parsed = parseContainerfile(
      'ARG A=1\nFROM a AS b\n# note\nRUN x \\\n  # inside\n  y\nFROM c\nCMD ["p", "q"]\nCMD p q\n',
    );
    expect(parsed.map((i) => [i.keyword, i.args, i.stage, i.exec])).toEqual([
      ["ARG", "A=1", -1, undefined],
      ["FROM", "a AS b", 0, undefined],
      ["RUN", "x y", 0, undefined],
      ["FROM", "c", 1, undefined],
      ["CMD", '["p", "q"]', 1, ["p", "q"]],
      ["CMD", "p q", 1, undefined],
    ]);
  });

  test(".dockerignore lets in what the Containerfile copies and keeps node_modules, tests and docs out", () => {
    const patterns = parseDockerIgnore(read(".dockerignore"));
    const copied = parseContainerfile(text).filter((i) => i.keyword === "COPY" && !i.args.startsWith("--from"))
      .flatMap((i) => i.args.split(" ").slice(0, -1));
    expect(copied.sort()).toEqual([
      "deploy/container/",
      "deploy/container/nrt",
      "kernels/",
      "mod.ts",
      "package-lock.json",
      "package.json",
      "packages/",
    ]);
    const kept = [
      "package.json",
      "package-lock.json",
      "mod.ts",
      "packages/cli/main.ts",
      "packages/core/mod.ts",
      "packages/http-api/package.json",
      "kernels/wasm/relu.wasm",
      "deploy/container/nrt",
      "deploy/container/healthcheck.ts",
    ];
    for (const path of kept) expect({ path, ignored: dockerIgnored(patterns, path) }).toEqual({ path, ignored: false });
    const left = [
      "node_modules/hono/package.json",
      "packages/cli/node_modules/x/index.js",
      "tests/_kserve.ts",
      "packages/cli/inspect_test.ts",
      "docs/rest-api.md",
      ".git/HEAD",
      "bench/http.ts",
      "deploy/kserve/servingruntime.yaml",
      "Containerfile",
      "kernels/src/relu.ts",
    ];
    for (const path of left) expect({ path, ignored: dockerIgnored(patterns, path) }).toEqual({ path, ignored: true });
  });

  test("dockerIgnored() lets the last matching pattern win and covers a directory's files", () => {
    expect(dockerIgnored(["*", "!src/"], "src/a/b.ts")).toBe(false);
    expect(dockerIgnored(["*", "!src/", "**/*_test.ts"], "src/a/b_test.ts")).toBe(true);
    expect(dockerIgnored(["*", "**/*_test.ts", "!src/"], "src/a/b_test.ts")).toBe(false);
    expect(dockerIgnored(["docs"], "docs/x/y.md")).toBe(true);
    expect(dockerIgnored(["docs"], "documents/y.md")).toBe(false);
    expect(dockerIgnored(["a?c"], "abc")).toBe(true);
    expect(dockerIgnored([], "anything")).toBe(false);
  });
});

describe("the image's helper files", () => {
  test("deploy/container/nrt runs the CLI's main module with the Bun and the application it is given", async () => {
    const script = new URL("deploy/container/nrt", ROOT).pathname;
    const ok = await run("sh", [script, "serve", "--help"], { NRT_BUN: BUN, NRT_HOME: ROOT.pathname });
    expect(ok).toEqual({ code: 0, out: expect.stringContaining("Usage: nrt serve --models DIR") });
    const empty = await mkdtemp(join(tmpdir(), "nrt-kserve-home-"));
    try {
      expect((await run("sh", [script, "serve", "--help"], { NRT_BUN: BUN, NRT_HOME: empty })).code).not.toBe(0);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  test(
    "startServer() on the layout of storageUri s3://b/relu.neff answers the runtime's probes; the HEALTHCHECK passes",
    async () => {
      // The storage initializer puts the object of a whole-key URI at /mnt/models/<basename>.
      const dir = await mkdtemp(join(tmpdir(), "nrt-kserve-models-"));
      await writeFile(join(dir, "relu.neff"), (await buildDemoModels("cayman"))["relu.neff"]);
      const server = await startServer({ models: dir, host: "127.0.0.1", port: 0, log: () => {} });
      const healthcheck = new URL("deploy/container/healthcheck.ts", ROOT).pathname;
      try {
        const container =
          (only("ServingRuntime").spec as { containers: Array<Record<string, { httpGet?: { path: string } }>> })
            .containers[0];
        for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
          const path = container[probe].httpGet!.path;
          const res = await fetch(`${server.url}${path}`);
          expect({ probe, path, status: res.status }).toEqual({ probe, path, status: 200 });
          await res.body?.cancel();
        }
        expect((await fetch(`${server.url}/v2/models/relu/ready`)).status).toBe(200);
        expect((await run(BUN, [healthcheck], { NRT_HEALTH_URL: `${server.url}/v2/health/ready` })).code).toBe(0);
        const missing = await run(BUN, [healthcheck], { NRT_HEALTH_URL: `${server.url}/v2/models/nosuch/ready` });
        expect(missing).toEqual({ code: 1, out: expect.stringContaining("answered 404") });
      } finally {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      }
      const refused = await run(BUN, [healthcheck], { NRT_HEALTH_URL: `${server.url}/v2/health/ready` });
      expect(refused).toEqual({ code: 1, out: expect.stringContaining("cannot reach") });
    },
    60_000,
  );
});

describe("the image's entry command on /mnt/models as the storage initializer writes it", () => {
  const relu = async (): Promise<Uint8Array> => (await buildDemoModels("cayman"))["relu.neff"];
  const X = [-3, -2, -1, 0, 1, 2, 3, -3], Y = X.map((v) => Math.max(0, v));

  /** Runs deploy/container/nrt serve on `dir` with `extra` flags, calls REST and gRPC for `model`, sends SIGTERM. */
  async function entryCommand(dir: string, model: string, version: string, extra: string[] = []): Promise<void> {
    const [port, grpcPort] = [await freePort(), await freePort()];
    // SERVE_COMMAND with loopback and free ports in place of 0.0.0.0, 8080 and 8081.
    const args = [
      ...SERVE_COMMAND.slice(2, 4),
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--grpc-port",
      String(grpcPort),
      ...extra,
    ]
      .map((a) => (a === "/mnt/models" ? dir : a));
    const server = spawnServe(args, "container");
    const client = oipClient(`127.0.0.1:${grpcPort}`);
    try {
      await server.line(/gRPC \(inference.GRPCInferenceService\) on /);
      const ready = await fetch(`http://127.0.0.1:${port}/v2/health/ready`);
      expect(ready.status).toBe(200);
      const res = await fetch(`http://127.0.0.1:${port}/v2/models/${model}/versions/${version}/infer`, {
        method: "POST",
        body: JSON.stringify({ inputs: [{ name: "x", shape: [8], datatype: "FP32", data: X }] }),
      });
      expect(await res.json()).toEqual({
        model_name: model,
        model_version: version,
        outputs: [{ name: "y", datatype: "FP32", shape: [8], data: Y }],
      });
      const rpc = await client.modelInfer({
        model_name: model,
        model_version: version,
        inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: X } }],
      });
      expect([rpc.model_version, rpc.outputs[0].contents.fp32_contents]).toEqual([version, Y]);
      // Closed before the signal: Deno's HTTP/2 client aborts the process when a server's GOAWAY reaches an open
      // session (an nghttp2 assertion, denoland/deno#36788).
      client.close();
      server.kill("SIGTERM");
      expect(await server.exited()).toBe(0);
      expect(server.lines).toContain("nrt: stopped");
    } finally {
      client.close();
      server.kill();
    }
  }

  test(
    "storageUri s3://bucket/repo/ (relu/2/model.neff): REST and gRPC answer version 2; SIGTERM exits 0",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "nrt-kserve-repo-"));
      try {
        await mkdir(join(dir, "relu", "2"), { recursive: true });
        await writeFile(join(dir, "relu", "2", "model.neff"), await relu());
        await writeFile(join(dir, "relu", "config.json"), JSON.stringify({ instances: 2 }));
        await entryCommand(dir, "relu", "2");
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );

  test("storageUri s3://bucket/repo/relu/ (1/model.neff) with --model-name relu: REST and gRPC answer", async () => {
    const dir = await mkdtemp(join(tmpdir(), "nrt-kserve-one-"));
    try {
      await mkdir(join(dir, "1"));
      await writeFile(join(dir, "1", "model.neff"), await relu());
      await entryCommand(dir, "relu", "1", ["--model-name", "relu"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("docs/deploy-kserve.md", () => {
  test("its KServe YAML blocks validate against the CRDs", () => {
    const blocks = [...read("docs/deploy-kserve.md").matchAll(/```yaml\n([\s\S]*?)```/g)].flatMap((m) =>
      parseYamlDocuments(m[1])
    );
    const kserve = blocks.filter((d) => String(d.apiVersion).startsWith("serving.kserve.io/"));
    expect(kserve.length).toBeGreaterThan(0);
    const { servingRuntime, inferenceService } = crds();
    for (const doc of kserve) {
      const validator = doc.kind === "ServingRuntime" ? servingRuntime : inferenceService;
      expect({ name: label(doc), problems: validator.problems(doc) }).toEqual({ name: label(doc), problems: [] });
    }
  }, CRD_TIMEOUT);
});

/** `Kind name` of a manifest, for messages. */
function label(doc: K8sObject): string {
  return `${String(doc.kind)} ${String((doc.metadata as { name?: string } | undefined)?.name)}`;
}
