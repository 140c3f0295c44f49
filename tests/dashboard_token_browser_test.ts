/**
 * The dashboard in headless Chromium with an operator's token (`--admin-token-file`) beyond base64url: opened at the
 * address with the token percent-encoded in its fragment (what the dashboard line of `nrt serve` tells the operator
 * to open), the page keeps the token itself, clears the address bar, shows the operator actions, and an action with
 * the kept token is accepted. Without /usr/bin/chromium the test is skipped with the reason printed.
 */
import { describe, expect, test } from "bun:test";
import { buildDemoModels, startServer } from "@nrt/cli";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const CHROMIUM = "/usr/bin/chromium";
const hasChromium = existsSync(CHROMIUM);
const hasServe = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ||
  typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
if (!hasChromium) console.log(`dashboard token browser test skipped: ${CHROMIUM} is missing`);

describe("dashboard in headless Chromium: an operator's token", () => {
  test.if(hasChromium && hasServe)(
    "a token with + / = & # % and quotes, percent-encoded in the fragment, is kept whole and authorizes actions",
    async () => {
      const { chromium } = await import("playwright-core");
      const dir = await mkdtemp(join(tmpdir(), "nrt-dashboard-token-"));
      const secret = `operator+chosen/secret=token==&#%41"'<>~`;
      await writeFile(join(dir, "token"), `${secret}\n`, { mode: 0o600 });
      await writeFile(join(dir, "relu.neff"), (await buildDemoModels("cayman"))["relu.neff"]);
      const server = await startServer({
        models: dir,
        admin: true,
        adminTokenFile: join(dir, "token"),
        port: 0,
        log: () => {},
      });
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox"] });
      try {
        const page = await browser.newPage();
        const errors: string[] = [];
        page.on("pageerror", (e) => errors.push(e.message));
        await page.goto(`${server.url}/#token=${encodeURIComponent(secret)}`);
        await page.locator("#fault-form:not([hidden])").waitFor({ state: "attached", timeout: 15_000 });
        expect(await page.evaluate(() => sessionStorage.getItem("nrt-admin-token"))).toBe(secret);
        expect(page.url()).toBe(`${server.url}/`);
        const answer = page.waitForResponse((r) => r.url().endsWith("/v2/dashboard/faults/clear"), { timeout: 15_000 });
        await page.locator("#fault-clear").click();
        const res = await answer;
        expect([res.status(), await res.json()]).toEqual([200, { cleared: 0 }]);
        expect(errors).toEqual([]);
      } finally {
        await browser.close();
        await server.close();
        await rm(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
