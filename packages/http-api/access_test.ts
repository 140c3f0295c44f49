import { describe, expect, test } from "bun:test";
import type { Context } from "hono";
import { accessControl } from "./access.ts";
import { HttpError } from "./http_error.ts";

/** A request as `checkRequest` reads it: its method and headers. */
function request(method: string, headers: Record<string, string>): Context {
  return { req: { method, header: (name: string) => headers[name] } } as unknown as Context;
}

/** The status `checkRequest` answers: 200 when it lets the request through. */
function status(check: (c: Context) => void, c: Context): number {
  try {
    check(c);
    return 200;
  } catch (e) {
    return e instanceof HttpError ? e.status : -1;
  }
}

describe("access", () => {
  test("checkRequest() refuses a Host the server does not answer (DNS rebinding), any case", () => {
    const { checkRequest } = accessControl({ allowedHosts: ["127.0.0.1:8000", "localhost:8000"] });
    expect(status(checkRequest, request("GET", { host: "localhost:8000" }))).toBe(200);
    expect(status(checkRequest, request("GET", { host: "LOCALHOST:8000" }))).toBe(200);
    expect(status(checkRequest, request("GET", { host: "evil.example:8000" }))).toBe(403);
    expect(status(checkRequest, request("GET", { host: "localhost:8001" }))).toBe(403);
    // Without a list every Host is answered.
    expect(status(accessControl().checkRequest, request("GET", { host: "evil.example" }))).toBe(200);
  });

  test("checkRequest() refuses a POST from another origin and lets a same-origin one or a GET through", () => {
    const { checkRequest } = accessControl({ allowedHosts: ["127.0.0.1:8000"] });
    const host = { host: "127.0.0.1:8000" };
    expect(status(checkRequest, request("POST", { ...host, origin: "http://127.0.0.1:8000" }))).toBe(200);
    expect(status(checkRequest, request("POST", { ...host, origin: "https://evil.example" }))).toBe(403);
    expect(status(checkRequest, request("POST", { ...host, origin: "null" }))).toBe(403);
    expect(status(checkRequest, request("GET", { ...host, origin: "https://evil.example" }))).toBe(200);
    expect(status(checkRequest, request("POST", host))).toBe(200);
  });

  test("requireAdmin() takes the Bearer scheme in any case (RFC 9110 §11.1), and the token only exactly", () => {
    const token = "test-admin-token-0123456789";
    const { requireAdmin } = accessControl({ adminToken: token });
    const check = (c: Context) => requireAdmin(c, "clear faults");
    const auth = (authorization: string) => request("POST", { authorization });
    for (const scheme of ["Bearer", "bearer", "BEARER", "bEaReR"]) {
      expect({ scheme, status: status(check, auth(`${scheme} ${token}`)) }).toEqual({ scheme, status: 200 });
    }
    expect(status(check, auth(`Bearer  ${token}`))).toBe(200); // 1*SP before the credentials (RFC 9110 §11.4)
    expect(status(check, auth(`bearer ${token.toUpperCase()}`))).toBe(401);
    expect(status(check, auth(`Basic ${token}`))).toBe(401);
    expect(status(check, auth(`Bearer${token}`))).toBe(401);
    expect(status(check, auth(token))).toBe(401);
    expect(status(check, request("POST", {}))).toBe(401);
  });

  test("checkRequest() follows a host list given as a function each time it returns another list", () => {
    let list: readonly string[] | undefined = ["127.0.0.1:0"];
    const { checkRequest } = accessControl({ allowedHosts: () => list });
    const at = (port: number) => request("GET", { host: `127.0.0.1:${port}` });
    expect(status(checkRequest, at(0))).toBe(200);
    expect(status(checkRequest, at(8000))).toBe(403);
    // The listener is up: the list changes (as nrt serve's does once its port is known).
    list = ["127.0.0.1:8000"];
    expect(status(checkRequest, at(8000))).toBe(200);
    expect(status(checkRequest, at(0))).toBe(403);
    // The same list again (nrt serve returns it while the port holds): same answers.
    expect(status(checkRequest, at(8000))).toBe(200);
    list = undefined;
    expect(status(checkRequest, at(1))).toBe(200);
  });
});
