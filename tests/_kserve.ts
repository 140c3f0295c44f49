/**
 * Checks for nrt's KServe deployment (deploy/kserve/, Containerfile, .dockerignore), used by
 * tests/kserve_manifests_test.ts:
 *
 * - {@linkcode CrdValidator}: a Kubernetes object against the `openAPIV3Schema` of a real CustomResourceDefinition
 *   (../shared/fixtures/kserve/), with ajv. The `x-kubernetes-*` extensions get their Kubernetes meaning where they
 *   constrain (`list-type` set/map uniqueness, `int-or-string`) and are accepted as annotations elsewhere; any other
 *   unknown keyword or format is an error, so a CRD that starts using one (CEL `x-kubernetes-validations`) is noticed.
 *   Ours: unknown fields are errors, as kubectl's strict field validation reports them, and `metadata` is checked
 *   for a name (which the CRD schema leaves to the API server).
 * - {@linkcode servingRuntimeProblems} and {@linkcode inferenceServiceProblems}: the invariants nrt's runtime and an
 *   InferenceService using it must keep, including the KServe admission rules read in its webhook
 *   (`inference_service_validation.go`: the name format, no `model.name`, cpu/memory scaling only with HPA).
 * - {@linkcode lintContainerfile} and {@linkcode dockerIgnored}: a small Containerfile linter and the
 *   `.dockerignore` matching rules, since no container registry is reachable to build the image in a test.
 *
 * @module
 */
import { Ajv, type ErrorObject } from "ajv";
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

/** The documented entry command of the image and of the ServingRuntime (docs/deploy-kserve.md). */
export const SERVE_COMMAND: readonly string[] =
  "nrt serve --models /mnt/models --host 0.0.0.0 --port 8080 --grpc-port 8081".split(" ");
/** The REST port (Open Inference Protocol v2 over HTTP), as KServe expects it for protocol v2. */
export const REST_PORT = 8080;
/** The gRPC port (`inference.GRPCInferenceService`), as KServe expects it for protocol v2. */
export const GRPC_PORT = 8081;

/** A parsed Kubernetes object (YAML document). */
export type K8sObject = Record<string, unknown>;

/** The fixtures folder of KServe's CRDs. */
export const KSERVE_FIXTURES: URL = new URL("../../shared/fixtures/kserve/", import.meta.url);

/** Reads every YAML document of a file. */
export function readYamlDocuments(url: URL): K8sObject[] {
  return parseYamlDocuments(readFileSync(url, "utf8"));
}

/** Parses every non-empty YAML document of a text. */
export function parseYamlDocuments(text: string): K8sObject[] {
  return parseAllDocuments(text).map((d) => d.toJS() as K8sObject | null).filter((d): d is K8sObject => d !== null);
}

type Schema = Record<string, unknown>;

// Kubernetes name rules: DNS-1123 subdomain (most objects) and KServe's InferenceService name (IsvcNameFmt).
const DNS1123_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const ISVC_NAME = "^[a-z]([-a-z0-9]*[a-z0-9])?$";

const canonical = (v: unknown): string =>
  v === null || typeof v !== "object"
    ? JSON.stringify(v)
    : Array.isArray(v)
    ? `[${v.map(canonical).join(",")}]`
    : `{${
      Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(",")
    }}`;

/** Adds the Kubernetes keywords and formats to an ajv instance. */
function kubernetesAjv(): Ajv {
  // Unknown keywords and formats are errors (strictSchema); CRD schemas leave types to anyOf branches (strictTypes).
  const ajv = new Ajv({
    strictSchema: true,
    strictTypes: false,
    strictTuples: false,
    strictRequired: false,
    allErrors: true,
  });
  for (
    const keyword of ["x-kubernetes-list-map-keys", "x-kubernetes-map-type", "x-kubernetes-preserve-unknown-fields"]
  ) {
    ajv.addKeyword({ keyword });
  }
  ajv.addKeyword({
    keyword: "x-kubernetes-int-or-string",
    validate: (on: boolean, data: unknown) => !on || typeof data === "string" || Number.isInteger(data),
    errors: false,
  });
  const listType = (type: string, data: unknown, parent?: Schema): boolean => {
    if (!Array.isArray(data) || type === "atomic") return true;
    const keys = type === "map" ? (parent?.["x-kubernetes-list-map-keys"] as string[]) : undefined;
    const props = ((parent?.items as Schema | undefined)?.properties ?? {}) as Record<string, Schema>;
    const seen = new Set<string>();
    for (const item of data) {
      // A map list's key is the tuple of its key fields, with the schema's default for an absent one (ports: TCP).
      const id = keys === undefined
        ? canonical(item)
        : canonical(keys.map((k) => (item as Schema)[k] ?? props[k]?.default));
      if (seen.has(id)) {
        validateListType.errors = [{
          keyword: "x-kubernetes-list-type",
          message: `has a duplicate ${type} entry ${id}`,
          params: {},
        }];
        return false;
      }
      seen.add(id);
    }
    return true;
  };
  const validateListType = Object.assign(listType, { errors: undefined as Partial<ErrorObject>[] | undefined });
  ajv.addKeyword({ keyword: "x-kubernetes-list-type", schemaType: "string", validate: validateListType });
  const int = (bits: number) => (n: number) => Number.isInteger(n) && n >= -(2 ** (bits - 1)) && n < 2 ** (bits - 1);
  ajv.addFormat("int32", { type: "number", validate: int(32) });
  ajv.addFormat("int64", { type: "number", validate: int(64) });
  ajv.addFormat("date-time", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/);
  return ajv;
}

/** The schema with Kubernetes' field semantics: unknown fields are errors unless the schema preserves them. */
function strictFields(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(strictFields);
  if (s === null || typeof s !== "object") return s;
  const out: Schema = {};
  for (const [k, v] of Object.entries(s)) {
    // Under "properties" the keys are field names, not keywords; recurse into each field's schema.
    out[k] = k === "properties"
      ? Object.fromEntries(Object.entries(v as Schema).map(([f, fs]) => [f, strictFields(fs)]))
      : strictFields(v);
  }
  if (
    out.properties !== undefined && out.additionalProperties === undefined &&
    out["x-kubernetes-preserve-unknown-fields"] !== true
  ) {
    out.additionalProperties = false;
  }
  return out;
}

/**
 * The part of a structural schema that `samples` reach: only the fields they contain, the array items and map
 * values they hold, every branch of a combinator. Validating a sample against it gives the same answer as against
 * the whole schema, since `properties` and `additionalProperties` look only at the keys present and `required`
 * keeps its names; it lets ajv compile a few kilobytes instead of the 2 MB InferenceService schema (12 s).
 */
function prune(schema: unknown, samples: readonly unknown[]): unknown {
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) return schema;
  const s = schema as Schema, out: Schema = { ...s };
  const objects = samples.filter((x): x is Record<string, unknown> =>
    x !== null && typeof x === "object" && !Array.isArray(x)
  );
  const props = s.properties as Record<string, unknown> | undefined;
  if (props !== undefined) {
    const keys = [...new Set(objects.flatMap((o) => Object.keys(o)))].filter((k) => Object.hasOwn(props, k));
    out.properties = Object.fromEntries(keys.map((k) => [k, prune(props[k], objects.map((o) => o[k]))]));
  }
  if (typeof s.additionalProperties === "object") {
    const extra = objects.flatMap((o) =>
      Object.entries(o).filter(([k]) => props === undefined || !Object.hasOwn(props, k)).map(([, v]) => v)
    );
    out.additionalProperties = prune(s.additionalProperties, extra);
  }
  if (s.items !== undefined) out.items = prune(s.items, samples.filter(Array.isArray).flat());
  for (const k of ["anyOf", "oneOf", "allOf"]) {
    if (Array.isArray(s[k])) out[k] = (s[k] as unknown[]).map((b) => prune(b, samples));
  }
  return out;
}

// Every keyword a CRD may use here: the structural-schema subset of OpenAPI v3 and the extensions kubernetesAjv knows.
const KEYWORDS = new Set(
  ("type properties required items additionalProperties enum const default pattern format minimum maximum " +
    "minLength maxLength minItems maxItems anyOf oneOf allOf not description nullable x-kubernetes-list-type " +
    "x-kubernetes-list-map-keys x-kubernetes-map-type x-kubernetes-int-or-string x-kubernetes-preserve-unknown-fields")
    .split(" "),
);
const FORMATS = new Set(["int32", "int64", "date-time"]);

/** Keywords and formats of a schema that the validator would not understand (`keyword` or `format: name`). */
function unknownKeywords(schema: unknown, found: Set<string> = new Set()): string[] {
  if (schema === null || typeof schema !== "object") return [...found].sort();
  for (const [k, v] of Object.entries(schema)) {
    if (!KEYWORDS.has(k)) found.add(k);
    if (k === "format" && !FORMATS.has(String(v))) found.add(`format: ${String(v)}`);
    // Only schema-valued keywords hold more keywords (not enum, default, required…).
    if (k === "properties") Object.values(v as Schema).forEach((x) => unknownKeywords(x, found));
    else if (k === "items" || k === "not" || (k === "additionalProperties" && typeof v === "object")) {
      unknownKeywords(v, found);
    } else if (k === "anyOf" || k === "oneOf" || k === "allOf") {
      (v as unknown[]).forEach((x) => unknownKeywords(x, found));
    }
  }
  return [...found].sort();
}

/** Validates objects of one custom resource kind against its CRD's schema (the served, stored version). */
export class CrdValidator {
  /** `group/version`, e.g. `serving.kserve.io/v1beta1`. */
  readonly apiVersion: string;
  /** The kind, e.g. `InferenceService`. */
  readonly kind: string;
  readonly #schema: Schema;
  readonly #ajv: Ajv = kubernetesAjv();

  /**
   * @param crdFile The CRD (YAML).
   * @param namePattern The rule for `metadata.name` (default: a DNS-1123 subdomain).
   */
  constructor(crdFile: URL, namePattern: string = DNS1123_SUBDOMAIN) {
    type Version = { name: string; served: boolean; storage: boolean; schema: { openAPIV3Schema: Schema } };
    const crd = readYamlDocuments(crdFile).find((d) => d.kind === "CustomResourceDefinition") as
      | { spec: { group: string; names: { kind: string }; versions: Version[] } }
      | undefined;
    if (crd === undefined) throw new TypeError(`Cannot read a CRD from ${crdFile.pathname}: it holds none`);
    const version = crd.spec.versions.find((v) => v.served && v.storage);
    if (version === undefined) {
      throw new TypeError(`Cannot read a CRD from ${crdFile.pathname}: no served storage version`);
    }
    this.apiVersion = `${crd.spec.group}/${version.name}`;
    this.kind = crd.spec.names.kind;
    const unknown = unknownKeywords(version.schema.openAPIV3Schema);
    if (unknown.length > 0) {
      throw new TypeError(`Cannot validate ${this.kind} objects: the CRD uses ${unknown.join(", ")}`);
    }
    const schema = strictFields(version.schema.openAPIV3Schema) as Schema & { properties: Record<string, Schema> };
    schema.properties ??= {};
    schema.required = [
      ...new Set([...(schema.required as string[] | undefined ?? []), "apiVersion", "kind", "metadata"]),
    ];
    schema.properties.apiVersion = { type: "string", const: this.apiVersion };
    schema.properties.kind = { type: "string", const: this.kind };
    schema.properties.metadata = {
      type: "object",
      required: ["name"],
      additionalProperties: false,
      properties: {
        name: { type: "string", maxLength: 63, pattern: namePattern },
        namespace: { type: "string", pattern: DNS1123_SUBDOMAIN },
        labels: { type: "object", additionalProperties: { type: "string" } },
        annotations: { type: "object", additionalProperties: { type: "string" } },
      },
    };
    this.#schema = schema;
  }

  /** The object's schema violations as `path: message` lines; empty when it is valid. */
  problems(obj: unknown): string[] {
    const validate = this.#ajv.compile(prune(this.#schema, [obj]) as Schema);
    if (validate(obj)) return [];
    return (validate.errors ?? []).map((e) => {
      const extra = e.keyword === "additionalProperties"
        ? ` (${(e.params as { additionalProperty: string }).additionalProperty})`
        : "";
      return `${e.instancePath || "/"}: ${e.message ?? e.keyword}${extra}`;
    });
  }
}

/** The validators of KServe's ServingRuntime and InferenceService CRDs from the fixtures. */
export function kserveValidators(): { servingRuntime: CrdValidator; inferenceService: CrdValidator } {
  return {
    servingRuntime: new CrdValidator(new URL("serving.kserve.io_servingruntimes.yaml", KSERVE_FIXTURES)),
    inferenceService: new CrdValidator(new URL("serving.kserve.io_inferenceservices.yaml", KSERVE_FIXTURES), ISVC_NAME),
  };
}

const get = (o: unknown, ...path: Array<string | number>): unknown =>
  path.reduce<unknown>(
    (v, k) => (v !== null && typeof v === "object" ? (v as Record<string | number, unknown>)[k] : undefined),
    o,
  );

/** `--flag=value` as two words, so both spellings of an argument compare equal. */
const words = (args: readonly unknown[]): string[] =>
  args.flatMap((a) => String(a).startsWith("--") ? String(a).split(/=(.*)/s, 2) : [String(a)]);

/**
 * A Kubernetes quantity in base units (`500m` → 0.5, `1Gi` → 2^30).
 *
 * @throws {TypeError} When the text is no quantity.
 */
export function parseQuantity(q: unknown): number {
  const m = /^([+-]?\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(String(q));
  if (m === null) {
    throw new TypeError(`Cannot parse the quantity "${String(q)}": expected a number with an optional suffix`);
  }
  const unit: Record<string, number> = {
    m: 1e-3,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
  };
  return Number(m[1]) * (m[2] === undefined ? 1 : unit[m[2]]);
}

/** What a probe checks: `GET path` on a port, or a description of what else it is. */
function httpProbe(probe: unknown): string {
  const path = get(probe, "httpGet", "path"), port = get(probe, "httpGet", "port");
  return probe === undefined
    ? "none"
    : path === undefined
    ? "not an httpGet probe"
    : `GET ${String(path)} on port ${String(port)}`;
}

/** Where nrt's ServingRuntime (or ClusterServingRuntime) breaks what the server and KServe need; empty when none. */
export function servingRuntimeProblems(sr: K8sObject): string[] {
  const p: string[] = [];
  const formats = (get(sr, "spec", "supportedModelFormats") ?? []) as Array<Record<string, unknown>>;
  if (!formats.some((f) => f.name === "neff" && f.version === "1" && f.autoSelect === true)) {
    p.push('supportedModelFormats has no {name: neff, version: "1", autoSelect: true}');
  }
  const protocols = (get(sr, "spec", "protocolVersions") ?? []) as string[];
  for (const v of ["v2", "grpc-v2"]) if (!protocols.includes(v)) p.push(`protocolVersions lacks ${v}`);
  const containers = (get(sr, "spec", "containers") ?? []) as Array<Record<string, unknown>>;
  const c = containers.find((x) => x.name === "kserve-container");
  if (c === undefined) return [...p, "no container is named kserve-container (where KServe mounts /mnt/models)"];
  const command = words([...(c.command as unknown[] ?? []), ...(c.args as unknown[] ?? [])]);
  if (command.join(" ") !== SERVE_COMMAND.join(" ")) {
    p.push(`command and args are "${command.join(" ")}", expected "${SERVE_COMMAND.join(" ")}"`);
  }
  const ports = ((c.ports ?? []) as Array<Record<string, unknown>>).map((x) => x.containerPort);
  if (ports[0] !== REST_PORT) {
    p.push(
      `the first port is ${String(ports[0])}: KServe's Service sends port 80 to it, so it must be REST ${REST_PORT}`,
    );
  }
  if (!ports.includes(GRPC_PORT)) p.push(`no container port ${GRPC_PORT} (gRPC)`);
  const probes: Array<[string, string]> = [["startupProbe", "/v2/health/live"], ["livenessProbe", "/v2/health/live"], [
    "readinessProbe",
    "/v2/health/ready",
  ]];
  for (const [name, path] of probes) {
    const seen = httpProbe(c[name]), want = `GET ${path} on port ${REST_PORT}`;
    if (seen !== want) p.push(`${name} is ${seen}, expected ${want}`);
  }
  const sc = (c.securityContext ?? {}) as Record<string, unknown>;
  if (sc.runAsNonRoot !== true) p.push("securityContext.runAsNonRoot is not true");
  if (sc.runAsUser === 0) p.push("securityContext.runAsUser is 0 (root)");
  if (sc.allowPrivilegeEscalation !== false) p.push("securityContext.allowPrivilegeEscalation is not false");
  if (sc.privileged === true) p.push("securityContext.privileged is true");
  if (!((get(sc, "capabilities", "drop") ?? []) as string[]).includes("ALL")) {
    p.push("securityContext.capabilities.drop lacks ALL");
  }
  for (const r of ["cpu", "memory"]) {
    const req = get(c, "resources", "requests", r), lim = get(c, "resources", "limits", r);
    if (req === undefined || lim === undefined) {
      p.push(`resources.requests.${r} and resources.limits.${r} must both be set`);
    } else if (parseQuantity(req) > parseQuantity(lim)) {
      p.push(`resources.requests.${r} ${String(req)} exceeds the limit ${String(lim)}`);
    }
  }
  return p;
}

/** Where an InferenceService meant for nrt breaks KServe's admission rules or nrt's runtime; empty when none. */
export function inferenceServiceProblems(isvc: K8sObject, runtimes: readonly K8sObject[]): string[] {
  const p: string[] = [];
  const annotations = (get(isvc, "metadata", "annotations") ?? {}) as Record<string, string>;
  const model = get(isvc, "spec", "predictor", "model") as Record<string, unknown> | undefined;
  if (model === undefined) return ["spec.predictor.model is missing"];
  if (model.name !== undefined) {
    p.push("spec.predictor.model.name is set: KServe's webhook refuses a name in a standard predictor");
  }
  const format = model.modelFormat as { name?: string; version?: string } | undefined;
  if (format?.name !== "neff") p.push(`modelFormat.name is ${String(format?.name)}, expected neff`);
  const runtime = runtimes.find((r) => get(r, "metadata", "name") === model.runtime);
  if (runtime === undefined) p.push(`runtime ${String(model.runtime)} is none of the given ServingRuntimes`);
  else {
    const formats = (get(runtime, "spec", "supportedModelFormats") ?? []) as Array<{ name: string; version?: string }>;
    if (
      !formats.some((f) => f.name === format?.name && (format?.version === undefined || f.version === format.version))
    ) {
      p.push(`runtime ${String(model.runtime)} does not support ${format?.name} version ${String(format?.version)}`);
    }
    const protocols = (get(runtime, "spec", "protocolVersions") ?? []) as string[];
    if (model.protocolVersion !== undefined && !protocols.includes(String(model.protocolVersion))) {
      p.push(`protocolVersion ${String(model.protocolVersion)} is not one of the runtime's (${protocols.join(", ")})`);
    }
  }
  if (typeof model.storageUri !== "string" || !/^(s3|gs|pvc|oci|hdfs|webhdfs|hf|https?):\/\//.test(model.storageUri)) {
    p.push(`storageUri ${String(model.storageUri)} is not a URI the storage initializer or a PVC mount understands`);
  }
  const mode = annotations["serving.kserve.io/deploymentMode"];
  if (mode !== undefined && mode !== "Standard" && mode !== "RawDeployment") {
    p.push(
      `deploymentMode ${mode}: Knative admits one container port per pod and nrt's runtime has two (REST and gRPC)`,
    );
  }
  const predictor = get(isvc, "spec", "predictor") as Record<string, unknown>;
  if (typeof predictor.minReplicas === "number" && predictor.minReplicas < 1) {
    p.push("minReplicas is below 1: Standard mode cannot scale from zero");
  }
  const metric = predictor.scaleMetric;
  if (
    (metric === "cpu" || metric === "memory") &&
    (mode !== "Standard" || annotations["serving.kserve.io/autoscalerClass"] !== "hpa")
  ) {
    p.push(
      `scaleMetric ${metric} needs the annotations deploymentMode Standard and autoscalerClass hpa ` +
        "(KServe's webhook refuses cpu and memory under the legacy RawDeployment)",
    );
  }
  const target = predictor.scaleTarget;
  if ((metric === "cpu" || metric === "memory") && typeof target === "number" && (target < 1 || target > 100)) {
    p.push(`scaleTarget ${target} is not a utilization percentage from 1 to 100`);
  }
  return p;
}

/** One instruction of a Containerfile: keyword, raw arguments, the exec form's words, and the stage it is in. */
export interface Instruction {
  readonly keyword: string;
  readonly args: string;
  readonly exec: string[] | undefined;
  readonly stage: number;
}

/** Splits a Containerfile into instructions (continuation lines joined, comments and blank lines dropped). */
export function parseContainerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let stage = -1, pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("#") || (line === "" && pending === "")) continue;
    pending += line.endsWith("\\") ? line.slice(0, -1) + " " : line;
    if (line.endsWith("\\")) continue;
    const m = /^(\S+)\s*(.*)$/s.exec(pending.trim());
    pending = "";
    if (m === null) continue;
    const keyword = m[1].toUpperCase(), args = m[2].replace(/\s+/g, " ").trim();
    if (keyword === "FROM") stage++;
    let exec: string[] | undefined;
    const json = args.replace(/^(--\S+\s+)*(CMD\s+)?/, "");
    try {
      if (json.startsWith("[")) exec = JSON.parse(json) as string[];
    } catch {
      exec = undefined; // not JSON: the shell form, as Docker reads it
    }
    out.push({ keyword, args, exec, stage });
  }
  return out;
}

/** Expectations of {@linkcode lintContainerfile}. */
export interface ContainerfileRules {
  /** ENTRYPOINT followed by CMD, in exec form. */
  readonly command: readonly string[];
  /** Ports the final stage must EXPOSE. */
  readonly ports: readonly number[];
}

/** A Containerfile's problems against nrt's rules; empty when it passes. */
export function lintContainerfile(text: string, rules: ContainerfileRules): string[] {
  const p: string[] = [];
  const all = parseContainerfile(text);
  const first = all.find((i) => i.keyword !== "ARG");
  if (first?.keyword !== "FROM") return ["no FROM before the first instruction other than ARG"];
  const last = Math.max(...all.map((i) => i.stage));
  const final = all.filter((i) => i.stage === last);
  const user = final.filter((i) => i.keyword === "USER").at(-1)?.args;
  if (user === undefined) p.push("the final stage sets no USER, so it runs as root");
  else if (!/^\d+(:\d+)?$/.test(user)) {
    p.push(`USER ${user} is not numeric: Kubernetes' runAsNonRoot cannot verify a user name`);
  } else if (Number(user.split(":")[0]) === 0) p.push(`USER ${user} is root`);
  const exposed = final.filter((i) => i.keyword === "EXPOSE").flatMap((i) =>
    i.args.split(" ").map((x) => Number(x.split("/")[0]))
  );
  for (const port of rules.ports) if (!exposed.includes(port)) p.push(`the final stage does not EXPOSE ${port}`);
  const entry = final.filter((i) => i.keyword === "ENTRYPOINT").at(-1),
    cmd = final.filter((i) => i.keyword === "CMD").at(-1);
  if ([entry, cmd].some((i) => i !== undefined && i.exec === undefined)) {
    p.push("ENTRYPOINT and CMD must use the exec form, so SIGTERM reaches the server");
  }
  const command = [...(entry?.exec ?? []), ...(cmd?.exec ?? [])];
  if (command.join(" ") !== rules.command.join(" ")) {
    p.push(`ENTRYPOINT + CMD is "${command.join(" ")}", expected "${rules.command.join(" ")}"`);
  }
  const health = final.find((i) => i.keyword === "HEALTHCHECK");
  if (health === undefined || health.args === "NONE") p.push("the final stage has no HEALTHCHECK");
  for (const i of all.filter((i) => i.keyword === "RUN" && /\bnpm ci\b/.test(i.args))) {
    if (!/--omit[= ]dev\b/.test(i.args)) p.push(`"RUN ${i.args}" installs devDependencies (no --omit=dev)`);
  }
  return p;
}

/** The patterns of a `.dockerignore` (comments and blank lines dropped). */
export function parseDockerIgnore(text: string): string[] {
  return text.split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
}

const globToRegExp = (glob: string): RegExp =>
  new RegExp(
    "^" + glob.replace(/\/+$/, "").split("/").map((seg) =>
      seg === "**" ? "(?:.*)" : seg.replace(/[.+^${}()|\\]/g, "\\$&").replace(/\*/g, "[^/]*").replace(/\?/g, "[^/]")
    ).join("/").replace(/\(\?:\.\*\)\//g, "(?:.*/)?") + "$",
  );

/**
 * Whether the build context leaves `path` out: the last matching pattern wins and `!` re-includes, as Docker's and
 * buildah's matchers do; a pattern that matches a directory also matches everything under it.
 */
export function dockerIgnored(patterns: readonly string[], path: string): boolean {
  let ignored = false;
  const parts = path.split("/");
  for (const raw of patterns) {
    const negate = raw.startsWith("!"), re = globToRegExp(negate ? raw.slice(1) : raw);
    if (parts.some((_, i) => re.test(parts.slice(0, i + 1).join("/")))) ignored = !negate;
  }
  return ignored;
}
