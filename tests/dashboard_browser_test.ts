/**
 * The dashboard end to end in real headless Chromium (Debian's `chromium` + `playwright-core`): `nrt serve --admin`
 * of the demo models, one instance each, on a loopback port, the page follows an inference (counters, memory chart,
 * Q7 cores, kernel stdout, a core's utilization over the last minute, its last execution's timeline, the model's
 * latency histogram), a
 * fault injected from the page's form poisons the model, the page's Reload button recovers it. Screenshots go to
 * `.artifacts/dashboard-*.png`. Without /usr/bin/chromium the test is skipped with the reason printed.
 */
import { describe, expect, test } from "bun:test";
import { buildDemoModels, startServer } from "@nrt/cli";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { oneOpNeff } from "./_kernels.ts";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const hasChromium = existsSync(CHROMIUM);
const hasServe = typeof (globalThis as { Bun?: unknown }).Bun !== "undefined" ||
  typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
if (!hasChromium) {
  console.log(`dashboard browser test skipped: ${CHROMIUM} is missing (install it with: apt-get install -y chromium)`);
} else if (!hasServe) console.log("dashboard browser test skipped: neither Bun.serve nor Deno.serve is available");

const ARTIFACTS = fileURLToPath(new URL("../.artifacts/", import.meta.url));
/** The longest the page may take to show a change (it is pushed within ~100 ms). */
const DEADLINE_MS = 15_000;

const relu = JSON.stringify({
  inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [-3, -2, -1, 0, 1, 2, 3, -3] }],
});
const hello = JSON.stringify({
  inputs: [{ name: "x", shape: [64], datatype: "FP32", data: Array.from({ length: 64 }, () => 0) }],
});

describe("dashboard in headless Chromium", () => {
  test.if(hasChromium && hasServe)(
    "follows an inference, shows a fault's fail-stop and the recovery by reload",
    async () => {
      const { chromium } = await import("playwright-core");
      const dir = await mkdtemp(join(tmpdir(), "nrt-dashboard-test-"));
      // A kernel that prints: 2 lines of stdout from Q7 core 0.
      const f32 = (name: string) => ({ name, dtype: "float32", shape: [64] });
      await writeFile(join(dir, "hello.neff"), oneOpNeff("faults", "printf", [f32("x")], [f32("y")], 1, [2]));
      // The demo models without the demo's configs, so each has one instance: a fault on relu's NeuronCore poisons relu
      // (with `--demo`'s one instance per core, the model keeps serving from its other instances).
      for (const [name, bytes] of Object.entries(await buildDemoModels("cayman"))) {
        await writeFile(join(dir, name), bytes);
      }
      await mkdir(ARTIFACTS, { recursive: true });
      const server = await startServer({
        models: dir,
        admin: true,
        arch: "cayman",
        port: 0,
        log: () => {},
      });
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
      const infer = async (model: string, body: string): Promise<number> =>
        (await fetch(`${server.url}/v2/models/${model}/infer`, {
          method: "POST",
          body,
          headers: { "content-type": "application/json" },
        })).status;
      try {
        const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
        const errors: string[] = [];
        page.on("pageerror", (e) => errors.push(e.message));
        page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
        const shot = (name: string, fullPage = false) =>
          page.screenshot({ path: join(ARTIFACTS, `dashboard-${name}.png`), fullPage });
        const reluRow = (state: string) => page.locator(`#models tr[data-key="m-relu"][data-state="${state}"]`);
        const text = (selector: string) => page.locator(selector).first().textContent({ timeout: DEADLINE_MS });
        /** Waits until the text of `selector` is `expected`, polled by the browser on animation frames. */
        const textIs = (selector: string, expected: string) =>
          page.waitForFunction(
            ([s, e]) => document.querySelector(s)?.textContent === e,
            [selector, expected] as const,
            { timeout: DEADLINE_MS },
          );

        await page.goto(`${server.url}/#token=${server.adminToken}`);
        await reluRow("RUNNING").waitFor({ timeout: DEADLINE_MS });
        await page.locator("#status-completed").waitFor({ timeout: DEADLINE_MS });
        expect(await page.title()).toBe("nrt dashboard");
        expect(await text("#conn")).toBe("Live");
        const state = await (await fetch(`${server.url}/v2/dashboard/state`)).json();
        const nc: number = state.models.find((m: { name: string }) => m.name === "relu").ncs[0];
        const completed = Number(await text("#status-completed"));
        const booked = await page.locator("#memory-chart").getAttribute("data-booked-bytes");
        await shot("initial");

        // An inference: the counters, the model's row, the memory chart (its staging tensors, booked at warm-up) and the Q7 cores follow.
        expect(await infer("relu", relu)).toBe(200);
        expect(await infer("hello", hello)).toBe(200);
        await textIs("#status-completed", String(completed + 2));
        await textIs('#models tr[data-key="m-relu"] .ok', "1");
        // The pooled staging tensors were booked by the warm-up execute before the model was ready, so the chart
        // already shows them and an inference books nothing more.
        expect(Number(booked)).toBeGreaterThan(0);
        expect(await page.locator('#memory-chart rect[data-category="tensors"]').count()).toBe(1);
        expect(await page.locator("#memory-chart").getAttribute("data-booked-bytes")).toBe(booked);
        await page.locator(`#cores li[data-key="nc-${nc}"] .q7 li[data-state="idle"]`, { hasText: "relu" }).first()
          .waitFor({ timeout: DEADLINE_MS });
        expect(await page.locator(`#cores li[data-key="nc-${nc}"] .q7 li`).count()).toBe(8);
        await page.locator("#log li.stdout", { hasText: "line 1 from core 0" }).last().waitFor({
          timeout: DEADLINE_MS,
        });
        expect(await text('#models tr[data-key="m-relu"] .mean')).toMatch(/^[0-9.]+ (µs|ms)$/);
        // Time: relu's NeuronCore shows its busy minute as a line of 60 points above zero somewhere, its last
        // execution as a timeline with the one doorbell, and relu's row a latency histogram of its executions.
        const card = `#cores li[data-key="nc-${nc}"]`;
        await page.waitForFunction(
          (sel) => Number(document.querySelector(sel + " svg.util")?.getAttribute("data-window")) > 0,
          card,
          { timeout: DEADLINE_MS },
        );
        const points = (await page.locator(`${card} svg.util polyline`).getAttribute("points"))!.split(" ");
        expect(points).toHaveLength(60);
        expect(points.some((p) => Number(p.split(",")[1]) < 24)).toBe(true); // above the baseline (y = 24) somewhere
        await page.locator(`${card} svg.timeline rect[data-name="doorbell"]`).waitFor({
          state: "attached",
          timeout: DEADLINE_MS,
        });
        expect(await page.locator(`${card} svg.timeline rect[data-name="doorbell"]`).count()).toBe(1);
        expect(await page.locator(`${card} svg.timeline rect[data-name="completion_wait"]`).count())
          .toBeGreaterThanOrEqual(1); // the wait may re-arm
        expect(await text(`${card} .last-text`)).toMatch(/^Last: (relu|hello), [0-9.]+ (µs|ms)/);
        const bars = page.locator('#models tr[data-key="m-relu"] svg.hist rect.bar');
        expect(await bars.count()).toBe(11);
        const counted = await bars.evaluateAll((rs) =>
          rs.reduce((a, r) => a + Number(r.getAttribute("data-count")), 0)
        );
        expect(counted).toBeGreaterThanOrEqual(2); // the warm-up and the inference
        await shot("after-inference", true);

        // Operator action: an uncorrectable HBM error on relu's NeuronCore, armed from the form.
        await page.getByLabel("Fault kind").selectOption("hbm-ue");
        await page.getByLabel("NeuronCore", { exact: true }).selectOption(String(nc));
        await page.getByRole("button", { name: "Inject fault", exact: true }).click();
        await page.locator("#faults li", { hasText: `Armed #1 hbm-ue on NC ${nc}` }).waitFor({ timeout: DEADLINE_MS });
        expect(await infer("relu", relu)).toBe(500);
        await reluRow("POISONED").waitFor({ timeout: DEADLINE_MS });
        await textIs("#status-hardware_error", "1");
        await page.locator(`#cores li[data-key="nc-${nc}"][data-state="faulted"]`).waitFor({ timeout: DEADLINE_MS });
        expect(await text('#models tr[data-key="m-relu"] .reason')).toBe(
          "by NRT_EXEC_HW_ERR_HBM_UE; reload to recover",
        );
        expect(await infer("relu", relu)).toBe(503);
        await page.locator("#log li", { hasText: "Uncorrectable HBM memory error" }).first().waitFor({
          timeout: DEADLINE_MS,
        });
        await shot("poisoned", true);

        // Recovery: the row's Reload button reloads the model; it serves again.
        await page.getByRole("button", { name: "Reload relu", exact: true }).click();
        await reluRow("RUNNING").waitFor({ timeout: DEADLINE_MS });
        expect(await infer("relu", relu)).toBe(200);
        await textIs('#models tr[data-key="m-relu"] .ok', "2");
        await page.locator(`#cores li[data-key="nc-${nc}"][data-state="idle"]`).waitFor({ timeout: DEADLINE_MS });
        expect(await page.getByRole("button", { name: "Load relu", exact: true }).isDisabled()).toBe(true);
        await page.evaluate(() => globalThis.scrollTo(0, 0));
        await shot("recovered");

        // Accessibility basics: landmarks, a name for every button, a label for every control; no horizontal scroll.
        const audit = () =>
          page.evaluate(() => ({
            banner: document.querySelectorAll("header").length,
            main: document.querySelectorAll("main").length,
            unnamedButtons: [...document.querySelectorAll("button")].filter((b) =>
              (b.getAttribute("aria-label") ?? b.textContent ?? "").trim() === ""
            ).length,
            unlabelled: [...document.querySelectorAll("select, input")].filter((c) =>
              (c as HTMLInputElement).labels?.length === 0
            ).length,
            overflow: document.documentElement.scrollWidth - globalThis.innerWidth,
          }));
        expect(await audit()).toEqual({ banner: 1, main: 1, unnamedButtons: 0, unlabelled: 0, overflow: 0 });
        await page.setViewportSize({ width: 390, height: 844 });
        await page.waitForFunction(() => document.documentElement.scrollWidth <= globalThis.innerWidth, undefined, {
          timeout: DEADLINE_MS,
        });
        expect((await audit()).overflow).toBe(0);
        await shot("narrow", true);
        expect(errors).toEqual([]);
      } finally {
        await browser.close();
        await server.close();
        await rm(dir, { recursive: true, force: true });
      }
    },
    90_000,
  );
});
