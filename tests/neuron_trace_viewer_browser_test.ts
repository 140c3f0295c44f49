/**
 * The trace viewer in real headless Chromium (Debian's `chromium` + `playwright-core`, as the dashboard's test):
 * `nrt serve` with inspect on runs an inference, `GET /v2/neuron/trace/view` draws its trace, and the page shows a
 * lane per track with real slices — the host's calls, the sequencer, the 8 Q7 cores, the DMA queues, the records and
 * the stdio drain. The screenshot goes to `.artifacts/trace-viewer.png` and is checked: it is a PNG of the page's
 * size, and the slices it shows have on-screen width. Without /usr/bin/chromium the test is skipped with the reason.
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer } from "../packages/cli/serve.ts";
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
if (!hasChromium) {
  console.log(
    `trace viewer browser test skipped: ${CHROMIUM} is missing (install it with: apt-get install -y chromium)`,
  );
}
const ARTIFACTS = fileURLToPath(new URL("../.artifacts/", import.meta.url));
const DEADLINE_MS = 15_000;

describe("trace viewer in headless Chromium", () => {
  test.if(hasChromium)("draws the last execution's tracks with real slices; the screenshot shows them", async () => {
    const { chromium } = await import("playwright-core");
    const dir = await mkdtemp(join(tmpdir(), "nrt-trace-view-"));
    const f32 = (name: string) => ({ name, dtype: "float32", shape: [8] });
    await writeFile(join(dir, "relu.neff"), oneOpNeff("relu", "relu", [f32("x")], [f32("y")]));
    await mkdir(ARTIFACTS, { recursive: true });
    const server = await startServer({
      models: dir,
      port: 0,
      grpcPort: "off",
      arch: "cayman",
      inspect: true,
      log: () => {},
    });
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      const res = await fetch(`${server.url}/v2/models/relu/infer`, {
        method: "POST",
        body: JSON.stringify({
          inputs: [{ name: "x", shape: [8], datatype: "FP32", data: [1, -2, 3, -4, 5, -6, 7, -8] }],
        }),
      });
      expect(res.status).toBe(200);
      await res.body?.cancel();
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const errors: string[] = [];
      page.on("pageerror", (e) => errors.push(e.message));
      page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
      await page.goto(`${server.url}/v2/neuron/trace/view`);
      await page.waitForFunction(() => document.body.dataset.ready === "true", undefined, { timeout: DEADLINE_MS });
      expect(await page.title()).toBe("nrt trace");
      const lanes = await page.locator(".lane").evaluateAll((rows) =>
        rows.map((r) => (r as HTMLElement).dataset.track)
      );
      expect(lanes).toEqual(expect.arrayContaining([
        "nrt_execute",
        "sequencer",
        "notifications",
        "stdio drain",
        "DMA queue 0 (M2S)",
        "DMA queue 0 (S2M)",
        ...Array.from({ length: 8 }, (_, c) => `Q7 core ${c}`),
      ]));
      // Every Q7 lane holds one relu slice with on-screen width; the sequencer lane holds the DRAIN, nested under the run.
      const widths = await page.locator('.lane[data-track^="Q7 core"] .slice').evaluateAll((els) =>
        els.map((e) => [(e as HTMLElement).dataset.name, e.getBoundingClientRect().width])
      );
      expect(widths.length).toBe(8);
      for (const [name, w] of widths) {
        expect(name).toBe("relu");
        expect(w as number).toBeGreaterThan(0);
      }
      const drain = await page.locator('.lane[data-track="sequencer"] .slice[data-name="DRAIN"]').evaluate((e) => ({
        top: (e as HTMLElement).offsetTop,
        width: e.getBoundingClientRect().width,
      }));
      expect(drain.top).toBeGreaterThan(2); // stacked under its run
      expect(drain.width).toBeGreaterThan(0);
      expect(await page.locator('.lane[data-track="nrt_execute"] .slice[data-name="doorbell"]').count()).toBe(1);
      const png = await page.screenshot({ path: join(ARTIFACTS, "trace-viewer.png"), fullPage: true });
      expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
      const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
      expect(view.getUint32(16)).toBe(1280); // IHDR width
      expect(view.getUint32(20)).toBeGreaterThanOrEqual(await page.evaluate(() => document.body.scrollHeight)); // the whole page
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
      await server.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
