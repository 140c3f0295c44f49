/**
 * `DASHBOARD_SCRIPT` is the typed `dashboardClient` turned into a plain script by the runtime that loaded it: under
 * Bun and under Deno the text parses as strict JavaScript with no type syntax left, and it runs on its own — given
 * only the page's globals (stubbed here) it takes the admin token from the URL fragment, wires the form and opens
 * the event stream. tests/dashboard_browser_test.ts runs it in Chromium against a live server.
 */
import { describe, expect, test } from "bun:test";
import { dashboardClient } from "./dashboard_client.ts";
import { DASHBOARD_SCRIPT } from "./dashboard_script.ts";

/** Type syntax that would survive as text had the runtime not transpiled the module (comments aside). */
const TYPE_SYNTAX: readonly RegExp[] = [
  /\binterface [A-Z]\w* \{/,
  /\btype [A-Z]\w* =/,
  /\bas (?:HTML|SVG|T\b|typeof\b)/,
  /<T extends /,
  /\): (?:void|string|T|Promise<)/,
  /\((?:id|s|el|label|path): /,
  /\bimport\b/,
  /\bexport\b/,
];

/** What the script did with the token of a fragment, run on stubbed page globals. */
function takeTokenFrom(hash: string): { stored: string | undefined; global: unknown; replaced: string[] } {
  const stored = new Map<string, string>();
  const replaced: string[] = [];
  const page: Record<string, unknown> & ReturnType<typeof target> = target();
  const document = { getElementById: () => ({ ...target(), textContent: "" }) };
  class EventSource {
    addEventListener(): void {}
  }
  new Function("document", "globalThis", "location", "sessionStorage", "history", "EventSource", DASHBOARD_SCRIPT)(
    document,
    page,
    { hash, pathname: "/", search: "" },
    { setItem: (k: string, v: string) => stored.set(k, v), getItem: (k: string) => stored.get(k) ?? null },
    { replaceState: (_s: unknown, _t: string, url: string) => replaced.push(url) },
    EventSource,
  );
  return { stored: stored.get("nrt-admin-token"), global: page.nrtAdminToken, replaced };
}

/** Listeners by event type. */
type Listeners = Map<string, Array<(ev: unknown) => void>>;
function target(): { listeners: Listeners; addEventListener(type: string, fn: (ev: unknown) => void): void } {
  const listeners: Listeners = new Map();
  return { listeners, addEventListener: (type, fn) => listeners.set(type, [...(listeners.get(type) ?? []), fn]) };
}

describe("DASHBOARD_SCRIPT", () => {
  test("is the client function's JavaScript, called once in strict mode", () => {
    expect(DASHBOARD_SCRIPT.startsWith('"use strict";\n(function dashboardClient(')).toBe(true);
    expect(DASHBOARD_SCRIPT.endsWith("})();\n")).toBe(true);
    expect(DASHBOARD_SCRIPT).toContain(dashboardClient.toString());
    // Parsing is the check that matters: annotations, `as`, generics and interfaces are syntax errors in JavaScript.
    expect(() => new Function(DASHBOARD_SCRIPT)).not.toThrow();
    for (const re of TYPE_SYNTAX) {
      expect({ re: String(re), match: re.exec(DASHBOARD_SCRIPT)?.[0] ?? null }).toEqual({
        re: String(re),
        match: null,
      });
    }
    expect(DASHBOARD_SCRIPT).toContain('new EventSource("v2/dashboard/events")');
    expect(DASHBOARD_SCRIPT).not.toContain("innerHTML");
  });

  test("runs on the page's globals alone: takes the token, wires the form, opens the event stream", () => {
    const elements = new Map<string, ReturnType<typeof target> & { textContent: string }>();
    const document = {
      getElementById(id: string) {
        let el = elements.get(id);
        if (el === undefined) elements.set(id, el = { ...target(), textContent: "" });
        return el;
      },
    };
    const stored = new Map<string, string>();
    const sessionStorage = {
      setItem: (k: string, v: string) => stored.set(k, v),
      getItem: (k: string) => stored.get(k) ?? null,
    };
    const replaced: string[] = [];
    const history = { replaceState: (_s: unknown, _t: string, url: string) => replaced.push(url) };
    const location = { hash: "#token=abc_123", pathname: "/dashboard", search: "?x=1" };
    const sources: Array<{ url: string } & ReturnType<typeof target>> = [];
    class EventSource {
      readonly listeners: Listeners;
      readonly addEventListener: ReturnType<typeof target>["addEventListener"];
      constructor(readonly url: string) {
        const t = target();
        this.listeners = t.listeners;
        this.addEventListener = t.addEventListener;
        sources.push(this);
      }
    }
    const page: Record<string, unknown> & ReturnType<typeof target> = target();
    const names = [
      "document",
      "globalThis",
      "location",
      "sessionStorage",
      "history",
      "EventSource",
      "fetch",
      "setInterval",
    ];
    const fail = () => {
      throw new Error("the script must not poll when EventSource exists");
    };
    new Function(...names, DASHBOARD_SCRIPT)(
      document,
      page,
      location,
      sessionStorage,
      history,
      EventSource,
      fail,
      fail,
    );

    expect(stored.get("nrt-admin-token")).toBe("abc_123");
    expect(page.nrtAdminToken).toBe("abc_123");
    expect(replaced).toEqual(["/dashboard?x=1"]);
    expect([...page.listeners.keys()]).toEqual(["resize"]);
    expect([...elements.get("fault-form")!.listeners.keys()]).toEqual(["submit"]);
    expect([...elements.get("fault-clear")!.listeners.keys()]).toEqual(["click"]);
    expect(sources.map((s) => s.url)).toEqual(["v2/dashboard/events"]);
    expect([...sources[0].listeners.keys()].sort()).toEqual(["error", "open", "state"]);
    sources[0].listeners.get("open")![0]({});
    expect(elements.get("conn")!.textContent).toBe("Live");
    sources[0].listeners.get("error")![0]({});
    expect(elements.get("conn")!.textContent).toBe("Reconnecting…");
  });

  test("takes any token the server accepts from the fragment, percent-encoded or not", () => {
    // Printable ASCII beyond base64url, as an --admin-token-file may hold: the server takes 16 to 512 of [!-~].
    const token = "operator+chosen/secret=token==&#%41~!$'()*,;:@?[]{}|^`\\\"<>";
    for (const hash of [`#token=${encodeURIComponent(token)}`, `#x=1&token=${encodeURIComponent(token)}&y=2`]) {
      expect({ hash, ...takeTokenFrom(hash) }).toEqual({ hash, stored: token, global: token, replaced: ["/"] });
    }
    // Pasted as it is (nothing to decode in it), a token with + / = works too: + stays a plus.
    expect(takeTokenFrom("#token=a+b/c=d_e-f~0123456789").stored).toBe("a+b/c=d_e-f~0123456789");
    // A lone "%" is not an encoding: the text is taken as written.
    expect(takeTokenFrom("#token=100%-sure-token-0123").stored).toBe("100%-sure-token-0123");
  });

  test("refuses a fragment token no header could carry, and still clears the address bar", () => {
    for (
      const hash of ["#token=", "#token=caf%C3%A9-0123456789abcdef", "#token=with%20space-0123456789", "#token=a%0Ab"]
    ) {
      expect({ hash, ...takeTokenFrom(hash) }).toEqual({ hash, stored: undefined, global: undefined, replaced: ["/"] });
    }
    expect(takeTokenFrom("#other=1")).toEqual({ stored: undefined, global: undefined, replaced: [] });
  });
});
