/**
 * Who may reach what on the inference server (docs/security.md). Ours: the seeds describe no server.
 *
 * - **Host check** (DNS rebinding): when the server is bound to a loopback address the composition root passes
 *   the `Host` values that name it; any other `Host` is refused before routing, so a page whose domain resolves to
 *   127.0.0.1 cannot read the dashboard's state or act on the server.
 * - **Origin check** (cross-site requests): a POST whose `Origin` is not the server's own origin is refused. A
 *   browser attaches `Origin` to every cross-site POST, including the `text/plain` ones a form can send.
 * - **JSON only**: a state-changing route takes `Content-Type: application/json`, which a page cannot send
 *   cross-site without a CORS preflight (that the server never approves).
 * - **Admin token**: operator actions (dashboard load/unload, fault injection) and explicit model control need
 *   `Authorization: Bearer <token>` (the scheme in any case); the token is made per start by the composition root.
 *   Compared in constant time.
 *
 * @module
 */
import type { Context } from "hono";
import { HttpError } from "./http_error.ts";

/** Triton's model-control modes that nrt serves: no repository load/unload, or load/unload with the admin token. */
export type ModelControlMode = "none" | "explicit";

/** The access policy of an inference app. */
export interface AccessOptions {
  /**
   * The bearer token of operator actions and explicit model control (at least 16 characters). Without it the
   * dashboard's actions answer 403.
   */
  readonly adminToken?: string;
  /**
   * `"none"` (default): `POST /v2/repository/models/{m}/load|unload` answer 403; `"explicit"`: they need the admin
   * token (which must then be set).
   */
  readonly modelControl?: ModelControlMode;
  /**
   * The `Host` header values accepted, `host:port` (compared case-insensitively); `undefined` accepts any (a server
   * bound to a non-loopback address is reached under names it cannot know). A request without `Host` (HTTP/1.0)
   * is accepted. A function is asked at every request; a list it returns again (the same array) is not read again,
   * so a changed list must be a new array.
   */
  readonly allowedHosts?: readonly string[] | (() => readonly string[] | undefined);
}

/** The checks, configured once per app. */
export interface AccessControl {
  /** The model-control mode. */
  readonly modelControl: ModelControlMode;
  /** Whether operator actions are on (an admin token is set). */
  readonly admin: boolean;
  /** Refuses a request whose `Host` is not the server's, or a POST from another origin. Runs before routing. */
  checkRequest(c: Context): void;
  /** Refuses a body that is not JSON (415). */
  requireJson(c: Context, what: string): void;
  /** Refuses a request without the admin token (403 when actions are off, 401 for a missing or wrong token). */
  requireAdmin(c: Context, what: string): void;
  /** Refuses repository load/unload unless model control is explicit and the admin token is given. */
  requireModelControl(c: Context, what: string): void;
}

const encoder = new TextEncoder();

/** Compares two strings in time that depends only on their lengths. */
function sameSecret(a: string, b: string): boolean {
  const x = encoder.encode(a), y = encoder.encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < x.length; i++) diff |= x[i] ^ (y[i % Math.max(1, y.length)] ?? 0);
  return diff === 0;
}

/** The host part of an `Origin`, or `undefined` when it is not a `http(s)://host[:port]` origin. */
function originHost(origin: string): string | undefined {
  const m = /^https?:\/\/([^/?#\s]+)$/i.exec(origin);
  return m === null ? undefined : m[1].toLowerCase();
}

/**
 * Builds the access checks of an app.
 *
 * @param o The policy.
 * @returns The checks.
 * @throws {TypeError} For an admin token shorter than 16 characters, or explicit model control without one.
 *
 * @example Refuse a foreign Host
 * ```ts
 * import { accessControl } from "./access.ts";
 * const access = accessControl({ allowedHosts: ["127.0.0.1:8000", "localhost:8000"] });
 * console.log(access.admin, access.modelControl); // false none
 * ```
 */
export function accessControl(o: AccessOptions = {}): AccessControl {
  const token = o.adminToken;
  if (token !== undefined && token.length < 16) {
    throw new TypeError("Cannot use the admin token: it must have at least 16 characters");
  }
  const modelControl = o.modelControl ?? "none";
  if (modelControl !== "none" && modelControl !== "explicit") {
    throw new TypeError(`Unknown model-control mode ${JSON.stringify(modelControl)}: use "none" or "explicit"`);
  }
  if (modelControl === "explicit" && token === undefined) {
    throw new TypeError('Model control "explicit" needs an admin token');
  }
  // A function is asked per request: a server bound to port 0 learns its port after the app exists.
  const hostSet = (list: readonly string[] | undefined): Set<string> | undefined =>
    list === undefined ? undefined : new Set(list.map((h) => h.toLowerCase()));
  const fixed = typeof o.allowedHosts === "function" ? undefined : hostSet(o.allowedHosts);
  const allowedHosts = typeof o.allowedHosts === "function" ? o.allowedHosts : undefined;
  // The set of the list the function last returned: a function that returns the same list while it holds makes no
  // set per request (ours; `nrt serve`'s list changes only when its port is known).
  let lastList: readonly string[] | undefined, lastSet: Set<string> | undefined;
  const currentHosts = (): Set<string> | undefined => {
    const list = allowedHosts!();
    if (list !== lastList) (lastList = list), (lastSet = hostSet(list));
    return lastSet;
  };

  const requireAdmin = (c: Context, what: string): void => {
    if (token === undefined) {
      throw new HttpError(403, `Cannot ${what}: operator actions are disabled; start the server with --admin`);
    }
    const header = c.req.header("authorization") ?? "";
    // The scheme in any case (RFC 9110 §11.1, as RFC 7235 before it: "bearer" is Bearer), then one or more spaces.
    const m = /^bearer +([!-~]{1,512})$/i.exec(header);
    if (m === null || !sameSecret(m[1], token)) {
      throw new HttpError(401, `Cannot ${what}: it needs the admin token (Authorization: Bearer <token>)`, {
        headers: { "www-authenticate": 'Bearer realm="nrt"' },
      });
    }
  };
  const requireJson = (c: Context, what: string): void => {
    const type = (c.req.header("content-type") ?? "").split(";")[0].trim().toLowerCase();
    if (type !== "application/json") {
      throw new HttpError(415, `Cannot ${what}: the request must be Content-Type application/json`);
    }
  };
  return {
    modelControl,
    admin: token !== undefined,
    checkRequest(c) {
      const hosts = allowedHosts === undefined ? fixed : currentHosts();
      const host = c.req.header("host");
      if (hosts !== undefined && host !== undefined && !hosts.has(host.toLowerCase())) {
        throw new HttpError(
          403,
          `Cannot serve a request for host ${JSON.stringify(host.slice(0, 128))}: this server answers only ${
            [...hosts].join(", ")
          }`,
        );
      }
      if (c.req.method === "POST") {
        const origin = c.req.header("origin");
        if (origin !== undefined) {
          const from = originHost(origin);
          const own = host?.toLowerCase();
          if (from === undefined || own === undefined || (from !== own && !(hosts?.has(from) ?? false))) {
            throw new HttpError(
              403,
              `Cannot accept a POST from origin ${
                JSON.stringify(origin.slice(0, 128))
              }: cross-origin requests are refused`,
            );
          }
        }
      }
    },
    requireJson,
    requireAdmin,
    requireModelControl(c, what) {
      if (modelControl === "none") {
        throw new HttpError(
          403,
          `Cannot ${what}: model control is off; start the server with --model-control explicit`,
        );
      }
      requireAdmin(c, what);
      requireJson(c, what);
    },
  };
}
