/**
 * The dashboard page's script (served at `dashboard/app.js`; ours, docs/dashboard.md describes the dashboard): the
 * source of {@linkcode dashboardClient} (dashboard_client.ts, a typed module that `deno check` and `deno lint`
 * cover) called once, in strict mode. `Function.prototype.toString` gives the JavaScript the runtime transpiled the
 * module to — Bun and Deno both strip the types before running it — so the text is a self-contained script with no
 * build step and no dependencies, computed once when this module loads.
 *
 * @module
 */
import { dashboardClient } from "./dashboard_client.ts";

/** The script's source (UTF-8). */
export const DASHBOARD_SCRIPT: string = `"use strict";\n(${dashboardClient.toString()})();\n`;
