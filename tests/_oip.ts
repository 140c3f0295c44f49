/**
 * Validates server responses against the Open Inference Protocol's OpenAPI document
 * (../shared/fixtures/oip/open_inference_rest.yaml) with ajv. A response whose path and status the document
 * describes is checked against that schema; the payloads the document leaves without a schema are checked
 * against the JSON objects of inference_rest.md (health and ready) or the Triton extension shapes (repository,
 * statistics), and every error body against the document's `{"error": string}` error object.
 *
 * The binary tensor extension returns an output's bytes after the JSON and replaces its `data` by
 * `parameters.binary_data_size`; such outputs are checked against `response_output` with that one substitution.
 */
import { Ajv, type ValidateFunction } from "ajv";
import { readFileSync } from "node:fs";
import { parse } from "yaml";

const SPEC = new URL("../../shared/fixtures/oip/open_inference_rest.yaml", import.meta.url);

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>;
}

/** A response's problems; empty when it conforms. */
export type Problems = string[];

const LOCAL: Record<string, object> = {
  live: { type: "object", required: ["live"], properties: { live: { type: "boolean" } } },
  server_ready: { type: "object", required: ["ready"], properties: { ready: { type: "boolean" } } },
  model_ready: {
    type: "object",
    required: ["name", "ready"],
    properties: { name: { type: "string" }, ready: { type: "boolean" } },
  },
  repository_index: {
    type: "array",
    items: {
      type: "object",
      required: ["name", "version", "state", "reason"],
      properties: {
        name: { type: "string" },
        version: { type: "string" },
        state: { enum: ["UNAVAILABLE", "LOADING", "READY", "UNLOADING"] },
        reason: { type: "string" },
      },
    },
  },
  repository_change: {
    type: "object",
    required: ["name", "state"],
    properties: { name: { type: "string" }, state: { type: "string" } },
  },
  statistics: {
    type: "object",
    required: ["model_stats"],
    properties: {
      model_stats: {
        type: "array",
        items: {
          type: "object",
          required: [
            "name",
            "version",
            "last_inference",
            "inference_count",
            "execution_count",
            "inference_stats",
            "batch_stats",
          ],
          properties: {
            inference_stats: {
              type: "object",
              required: ["success", "fail", "queue", "compute_input", "compute_infer", "compute_output"],
              additionalProperties: {
                type: "object",
                required: ["count", "ns"],
                properties: { count: { type: "integer", minimum: 0 }, ns: { type: "integer", minimum: 0 } },
              },
            },
          },
        },
      },
    },
  },
};

/** The validator. */
export class OipValidator {
  readonly #ajv = new Ajv({ strict: false, allErrors: true });
  readonly #paths: Array<{ re: RegExp; ops: Record<string, Operation> }> = [];
  readonly #error: ValidateFunction;
  readonly #binaryResponse: ValidateFunction;

  constructor() {
    const doc = parse(readFileSync(SPEC, "utf8")) as {
      paths: Record<string, Record<string, Operation>>;
      components: unknown;
    };
    this.#ajv.addSchema({ $id: "oip", components: doc.components });
    for (const [tpl, ops] of Object.entries(doc.paths)) {
      // inference_rest.md: the "/versions/<v>" part is optional; "/v2/" is also "/v2".
      const body = tpl.replace(/\/$/, "").replace("/versions/${MODEL_VERSION}", "(?:/versions/[^/]+)?").replace(
        "${MODEL_NAME}",
        "[^/]+",
      );
      this.#paths.push({ re: new RegExp(`^${body}/?$`), ops });
    }
    this.#error = this.#ref("#/components/schemas/metadata_model_error_response");
    const outputs = (doc.components as { schemas: Record<string, { required: string[] }> }).schemas;
    // A copy of response_output without "data" in required; its internal $refs point into the document.
    const binaryOutput = JSON.parse(
      JSON.stringify({ ...outputs.response_output, required: ["name", "shape", "datatype"] }).replaceAll(
        '"#/components',
        '"oip#/components',
      ),
    );
    // inference_response itself requires data on every output; check the binary form without that clause.
    this.#binaryResponse = this.#ajv.compile({
      type: "object",
      required: ["model_name", "outputs"],
      properties: {
        model_name: { type: "string" },
        model_version: { type: "string" },
        id: { type: "string" },
        parameters: { $ref: "oip#/components/schemas/parameters" },
        outputs: {
          type: "array",
          items: {
            anyOf: [
              { $ref: "oip#/components/schemas/response_output" },
              {
                allOf: [binaryOutput, {
                  required: ["parameters"],
                  properties: {
                    parameters: {
                      type: "object",
                      required: ["binary_data_size"],
                      properties: { binary_data_size: { type: "integer", minimum: 0 } },
                    },
                  },
                }],
              },
            ],
          },
        },
      },
    });
  }

  #ref(ref: string): ValidateFunction {
    const v = this.#ajv.getSchema(`oip${ref}`);
    if (v === undefined) throw new Error(`No schema ${ref} in the OpenAPI document`);
    return v;
  }

  /** The schema a response must match: the document's for its path and status, else the local one. */
  schemaFor(method: string, path: string, status: number): { name: string; validate: ValidateFunction } {
    if (status >= 400) return { name: "error object", validate: this.#error };
    const local = (name: string) => ({
      name: `inference_rest.md/extension ${name}`,
      validate: this.#ajv.compile(LOCAL[name]),
    });
    // GET /v2/models/stats is the statistics extension, not the metadata of a model called "stats".
    if (/\/stats$/.test(path)) return local("statistics");
    for (const p of this.#paths) {
      if (!p.re.test(path)) continue;
      const op = p.ops[method.toLowerCase()];
      const ref = op?.responses[String(status)]?.content?.["application/json"]?.schema?.$ref;
      if (ref !== undefined) return { name: ref, validate: this.#ref(ref) };
    }
    if (path === "/v2/health/live") return local("live");
    if (path === "/v2/health/ready") return local("server_ready");
    if (/\/ready$/.test(path)) return local("model_ready");
    if (path === "/v2/repository/index") return local("repository_index");
    if (/^\/v2\/repository\/models\/[^/]+\/(load|unload)$/.test(path)) return local("repository_change");
    throw new Error(`No schema for ${method} ${path} ${status}`);
  }

  /**
   * Checks one response (its body is read from a clone).
   *
   * @returns The problems found; empty when the response conforms.
   */
  async check(method: string, url: string, res: Response): Promise<Problems> {
    const path = new URL(url, "http://x").pathname;
    const type = res.headers.get("content-type") ?? "";
    const bytes = new Uint8Array(await res.clone().arrayBuffer());
    if (path === "/metrics" && res.status === 200) {
      const text = new TextDecoder().decode(bytes);
      const bad = text.split("\n").filter((l) =>
        l !== "" && !/^# (HELP|TYPE) \w+ .+$/.test(l) && !/^\w+(\{(\w+="[^"]*",?)*\})? -?[0-9.e+]+$/.test(l)
      );
      return type.startsWith("text/plain")
        ? bad.map((l) => `bad metrics line: ${l}`)
        : [`metrics content-type is ${type}`];
    }
    let body: unknown;
    let binary = false;
    const headerLength = res.headers.get("inference-header-content-length");
    try {
      if (headerLength !== null) {
        binary = true;
        body = JSON.parse(new TextDecoder().decode(bytes.subarray(0, Number(headerLength))));
      } else {
        if (!type.startsWith("application/json")) return [`content-type is "${type}", expected application/json`];
        body = JSON.parse(new TextDecoder().decode(bytes));
      }
    } catch (e) {
      return [`body is not JSON: ${(e as Error).message}`];
    }
    const { name, validate } = binary
      ? { name: "binary inference_response", validate: this.#binaryResponse }
      : this.schemaFor(method, path, res.status);
    if (validate(body)) return [];
    return (validate.errors ?? []).map((e) => `${name}: ${e.instancePath || "/"} ${e.message}`);
  }
}
