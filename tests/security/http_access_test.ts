/**
 * Operator actions behind real protection (docs/security.md, findings 1 and 3): the admin token, JSON-only
 * state-changing routes, the Host check against DNS rebinding, the Origin check against cross-site POSTs, model
 * control off by default, and `--admin` refused on a non-loopback host without an explicit token file.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, UsageError } from "@nrt/cli";
import { createInferenceApp } from "@nrt/http-api";
import { ADMIN_TOKEN, type HttpFixture, httpFixture } from "../_http.ts";
import { rawRequest } from "./_raw_http.ts";

let fx: HttpFixture;
beforeAll(async () => {
  fx = await httpFixture();
});
afterAll(() => fx.close());

const HOSTS = ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"];
const appWith = (o: { modelControl?: "none" | "explicit"; admin?: boolean } = {}) =>
  createInferenceApp({
    runtime: fx.runtime,
    repository: fx.repository,
    dashboard: { faults: { inject: () => ({ id: 1, ncs: [0] }), clear: () => 0 } },
    adminToken: o.admin === false ? undefined : ADMIN_TOKEN,
    modelControl: o.modelControl,
    allowedHosts: HOSTS,
  });
const req = (path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
  new Request(`http://127.0.0.1:8000${path}`, {
    method: init.method ?? "GET",
    headers: { host: "127.0.0.1:8000", ...init.headers },
    body: init.body,
  });
const errorOf = async (res: Response) => {
  const body = await res.json();
  expect(Object.keys(body)).toEqual(["error"]);
  return body.error as string;
};

describe("operator actions", () => {
  test("a cross-site text/plain POST to the fault endpoint is refused and injects nothing", async () => {
    let injected = 0;
    const app = createInferenceApp({
      runtime: fx.runtime,
      repository: fx.repository,
      dashboard: { faults: { inject: () => (injected++, { id: 1, ncs: [0] }), clear: () => 0 } },
      adminToken: ADMIN_TOKEN,
      allowedHosts: HOSTS,
    });
    const body = '{"kind":"hbm-ue","nc":0}';
    // What a form on another site sends: text/plain, its own Origin, no token.
    let res = await app.fetch(
      req("/v2/dashboard/faults", {
        method: "POST",
        body,
        headers: { "content-type": "text/plain", origin: "https://attacker.example" },
      }),
    );
    expect(res.status).toBe(403);
    expect(await errorOf(res)).toBe(
      'Cannot accept a POST from origin "https://attacker.example": cross-origin requests are refused',
    );
    // Same origin but no token: 401 with a Bearer challenge.
    res = await app.fetch(
      req("/v2/dashboard/faults", {
        method: "POST",
        body,
        headers: { "content-type": "application/json", origin: "http://127.0.0.1:8000" },
      }),
    );
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="nrt"');
    expect(await errorOf(res)).toBe("Cannot inject a fault: it needs the admin token (Authorization: Bearer <token>)");
    // A wrong token, then text/plain with the right token.
    res = await app.fetch(
      req("/v2/dashboard/faults", {
        method: "POST",
        body,
        headers: { "content-type": "application/json", authorization: "Bearer nope-nope-nope-nope" },
      }),
    );
    expect(res.status).toBe(401);
    res = await app.fetch(
      req("/v2/dashboard/faults", {
        method: "POST",
        body,
        headers: { "content-type": "text/plain", authorization: `Bearer ${ADMIN_TOKEN}` },
      }),
    );
    expect(res.status).toBe(415);
    expect(await errorOf(res)).toBe("Cannot inject a fault: the request must be Content-Type application/json");
    expect(injected).toBe(0);
    // Token, JSON, own origin: accepted.
    res = await app.fetch(
      req("/v2/dashboard/faults", {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${ADMIN_TOKEN}`,
          origin: "http://localhost:8000",
        },
      }),
    );
    expect(res.status).toBe(200);
    expect(injected).toBe(1);
  });

  test("a request for another Host (DNS rebinding) gets 403 before any route: no state, no unload", async () => {
    const app = appWith({ modelControl: "explicit" });
    for (
      const [path, method] of [["/v2/dashboard/state", "GET"], ["/v2/repository/models/relu/unload", "POST"], [
        "/v2/health/live",
        "GET",
      ]]
    ) {
      const res = await app.fetch(
        req(path, {
          method,
          headers: {
            host: "attacker.example:8000",
            authorization: `Bearer ${ADMIN_TOKEN}`,
            "content-type": "application/json",
          },
        }),
      );
      expect({ path, status: res.status }).toEqual({ path, status: 403 });
      expect(await errorOf(res)).toBe(
        'Cannot serve a request for host "attacker.example:8000": this server answers only 127.0.0.1:8000, localhost:8000, [::1]:8000',
      );
    }
    expect(fx.repository.get("relu")?.state).toBe("READY");
    // The server's own names work, in any case.
    expect((await app.fetch(req("/v2/health/live", { headers: { host: "LOCALHOST:8000" } }))).status).toBe(200);
  });

  test("repository load/unload: off under model control none (the default), token and JSON under explicit", async () => {
    const none = appWith();
    let res = await none.fetch(
      req("/v2/repository/models/relu/unload", {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
      }),
    );
    expect(res.status).toBe(403);
    expect(await errorOf(res)).toBe(
      'Cannot unload model "relu": model control is off; start the server with --model-control explicit',
    );
    const explicit = appWith({ modelControl: "explicit" });
    res = await explicit.fetch(
      req("/v2/repository/models/relu/unload", {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json" },
      }),
    );
    expect(res.status).toBe(401);
    res = await explicit.fetch(
      req("/v2/repository/models/relu/unload", {
        method: "POST",
        body: "{}",
        headers: { "content-type": "text/plain", authorization: `Bearer ${ADMIN_TOKEN}` },
      }),
    );
    expect(res.status).toBe(415);
    expect(fx.repository.get("relu")?.state).toBe("READY");
    res = await explicit.fetch(
      req("/v2/repository/models/relu/unload", {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
      }),
    );
    expect(res.status).toBe(200);
    expect(fx.repository.get("relu")?.state).toBe("UNAVAILABLE");
    res = await explicit.fetch(
      req("/v2/repository/models/relu/load", {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json", authorization: `Bearer ${ADMIN_TOKEN}` },
      }),
    );
    expect(res.status).toBe(200);
    expect(fx.repository.get("relu")?.state).toBe("READY");
    // Explicit model control without a token is a configuration error.
    expect(() => createInferenceApp({ runtime: fx.runtime, repository: fx.repository, modelControl: "explicit" }))
      .toThrow('Model control "explicit" needs an admin token');
  });

  test("without an admin token the operator actions answer 403", async () => {
    const res = await appWith({ admin: false }).fetch(
      req("/v2/dashboard/faults/clear", {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json" },
      }),
    );
    expect(res.status).toBe(403);
    expect(await errorOf(res)).toBe(
      "Cannot clear faults: operator actions are disabled; start the server with --admin",
    );
  });
});

describe("nrt serve --admin", () => {
  test("--admin on a non-loopback host is refused without --admin-token-file; --model-control explicit needs --admin", async () => {
    await expect(startServer({ demo: true, admin: true, host: "0.0.0.0", port: 0, log: () => {} })).rejects.toThrow(
      "Cannot serve: --admin on 0.0.0.0 would hand fault injection and model control to the network; give --admin-token-file FILE to confirm, or bind to 127.0.0.1",
    );
    await expect(startServer({ demo: true, modelControl: "explicit", port: 0, log: () => {} })).rejects.toBeInstanceOf(
      UsageError,
    );
  });

  test("startServer({ admin, adminTokenFile }) writes a fresh token to a 0600 file, never prints it, and the server checks it", async () => {
    const home = await mkdtemp(join(tmpdir(), "nrt-admin-"));
    const file = join(home, "token");
    const lines: string[] = [];
    const server = await startServer({
      demo: true,
      admin: true,
      adminTokenFile: file,
      modelControl: "explicit",
      port: 0,
      log: (l) => lines.push(l),
    });
    try {
      const token = server.adminToken!;
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect((await readFile(file, "utf8")).trim()).toBe(token);
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      // The file is the operator's secret across starts: the log names the file, never the token.
      expect(lines.filter((l) => l.includes(token))).toEqual([]);
      expect(lines.some((l) => l.includes(`the admin token is in ${file}`))).toBe(true);
      const unload = (auth?: string) =>
        fetch(`${server.url}/v2/repository/models/relu/unload`, {
          method: "POST",
          body: "{}",
          headers: {
            "content-type": "application/json",
            ...(auth === undefined ? {} : { authorization: `Bearer ${auth}` }),
          },
        });
      expect((await unload()).status).toBe(401);
      expect((await unload(token)).status).toBe(200);
      // A foreign Host is refused on a loopback bind (a raw request: fetch may not set Host).
      const res = await rawRequest(
        server.port,
        "GET /v2/dashboard/state HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n",
      );
      expect(res?.status).toBe(403);
      expect(JSON.parse(res!.body).error).toContain('Cannot serve a request for host "attacker.example"');
    } finally {
      await server.close();
    }
    // A second start with the same file reads the same token (an operator-managed secret).
    const again = await startServer({ demo: true, admin: true, adminTokenFile: file, port: 0, log: () => {} });
    try {
      expect(again.adminToken).toBe((await readFile(file, "utf8")).trim());
    } finally {
      await again.close();
      await rm(home, { recursive: true, force: true });
    }
  });
});
