/**
 * The container image's `HEALTHCHECK` (Containerfile): asks the local server `GET /v2/health/ready` and exits 0 on
 * 200, 1 on anything else, a refused connection or no answer within 2 s. The image has no curl; Bun runs this.
 * `NRT_HEALTH_URL` overrides the address (default `http://127.0.0.1:8080/v2/health/ready`, the port of the
 * documented serve command). Kubernetes ignores an image's HEALTHCHECK: the ServingRuntime declares the same
 * endpoint as its readiness probe (deploy/kserve/servingruntime.yaml). Ours.
 *
 * @module
 */
import process from "node:process";

const url = process.env.NRT_HEALTH_URL ?? "http://127.0.0.1:8080/v2/health/ready";
let healthy = false;
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  healthy = res.status === 200;
  await res.body?.cancel();
  if (!healthy) console.error(`nrt healthcheck: ${url} answered ${res.status}`);
} catch (e) {
  console.error(`nrt healthcheck: cannot reach ${url}: ${e instanceof Error ? e.message : String(e)}`);
}
process.exit(healthy ? 0 : 1);
