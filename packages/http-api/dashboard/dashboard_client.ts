/**
 * The dashboard page's script, as a typed module (ours; docs/dashboard.md describes the dashboard):
 * {@linkcode dashboardClient} renders each `state` event of `v2/dashboard/events` (server-sent events; it polls
 * `v2/dashboard/state` where `EventSource` is missing) into the page of `DASHBOARD_HTML`, updating elements in place
 * by key so that keyboard focus survives updates, and posts the operator actions. Text reaches the DOM only through
 * `textContent`.
 *
 * The function runs in the browser, not here: `DASHBOARD_SCRIPT` is its source text (`Function.prototype.toString`,
 * which gives the JavaScript that Bun and Deno transpiled) called once, served at `dashboard/app.js` with no build
 * step. So the function is self-contained — it uses nothing from this module's scope but globals of the page, and
 * the module imports types only (erased) — and sticks to syntax that needs no runtime helper from the transpiler
 * (no enums, decorators, parameter properties or `using`). `deno check` type-checks it (the root `deno.json` has
 * `lib: ["dom"]`) and `deno lint` lints it; dashboard_script_test.ts checks the served text in both runtimes.
 *
 * @module
 */
import type { DashboardLogEntry } from "./dashboard_monitor.ts";
import type { CoreState, DashboardState, ModelView } from "./dashboard_state.ts";

/**
 * The page's script: wires the page of `DASHBOARD_HTML` to the server and renders every state document. Runs in the
 * browser once, after the document is parsed; see the module doc for why it closes over nothing.
 */
export function dashboardClient(): void {
  /** Attributes of {@linkcode h} and {@linkcode svg}: `text` sets `textContent`, `class` the class name. */
  type Attrs = Readonly<Record<string, string | number>>;
  /** What an operator action answers (JSON). */
  interface ActionAnswer {
    readonly error?: string;
  }
  /** The body of `POST v2/dashboard/faults`. */
  interface FaultSpec {
    kind: string;
    nc?: number;
    q7?: number;
    atExecution?: number;
  }
  /** The page's global, where the admin token lives when `sessionStorage` is off. */
  const page = globalThis as typeof globalThis & { nrtAdminToken?: string };

  const MAX_LOG = 500;
  const TOKEN_KEY = "nrt-admin-token";
  const LABEL_W = 140, VALUE_W = 80, ROW = 24;
  const UTIL_W = 120, UTIL_H = 24, TL_W = 240, TL_H = 32, HIST_W = 88, HIST_H = 20;
  const TONE: Readonly<Record<string, string>> = {
    RUNNING: "s-ok",
    idle: "s-ok",
    busy: "s-busy",
    running: "s-busy",
    LOADING: "s-warn",
    STOPPING: "s-warn",
    POISONED: "s-bad",
    faulted: "s-bad",
    FAILED: "s-bad",
    UNLOADED: "s-off",
    unused: "s-off",
    off: "s-off",
  };
  let lastLog = 0;
  let ncOptions = "";
  let last: DashboardState | null = null;

  /** The page's element `id`; the page of `DASHBOARD_HTML` has every id this script asks for. */
  function $<T extends Element = HTMLElement>(id: string): T {
    const el: Element | null = document.getElementById(id);
    if (el === null) throw new Error(`dashboard: the page has no #${id}`);
    return el as T;
  }
  /** The first element of parent matching selector; the script built it, so it is there. */
  function find<T extends Element = HTMLElement>(parent: ParentNode, selector: string): T {
    const el = parent.querySelector(selector);
    if (el === null) throw new Error(`dashboard: no ${selector}`);
    return el as T;
  }
  function h<K extends keyof HTMLElementTagNameMap>(
    tag: K,
    attrs: Attrs | null,
    ...children: Array<Node | string | null>
  ): HTMLElementTagNameMap[K] {
    const el = document.createElement(tag);
    if (attrs) {
      for (const k in attrs) {
        if (k === "text") el.textContent = String(attrs[k]);
        else if (k === "class") el.className = String(attrs[k]);
        else el.setAttribute(k, String(attrs[k]));
      }
    }
    for (const c of children) if (c != null) el.append(c);
    return el;
  }
  function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Attrs): SVGElementTagNameMap[K] {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const k in attrs) {
      if (k === "text") el.textContent = String(attrs[k]);
      else el.setAttribute(k, String(attrs[k]));
    }
    return el;
  }
  function setText(el: Node, text: string): void {
    if (el.textContent !== text) el.textContent = text;
  }
  /** A child of parent keyed by key, created by make() the first time; kept in place so focus survives updates. */
  function keyed<T extends Element>(parent: Element, key: string, make: () => T): T {
    let el = parent.querySelector<T>(`:scope > [data-key="${key}"]`);
    if (el === null) {
      el = make();
      el.setAttribute("data-key", key);
      parent.append(el);
    }
    return el;
  }
  function prune(parent: Element, keys: ReadonlySet<string>): void {
    for (const c of Array.from(parent.children)) if (!keys.has(c.getAttribute("data-key") ?? "")) c.remove();
  }
  function bytes(n: number): string {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) {
      n /= 1024;
      i++;
    }
    return (i === 0 ? String(n) : n.toFixed(n < 10 ? 2 : 1)) + " " + u[i];
  }
  function percent(part: number, whole: number): string {
    const p = whole > 0 ? 100 * part / whole : 0;
    return p > 0 && p < 0.01 ? "< 0.01%" : p.toFixed(p < 10 ? 2 : 1) + "%";
  }
  function micros(us: number): string {
    if (!us) return "–";
    return us < 1000 ? us + " µs" : (us / 1000).toFixed(us < 10000 ? 2 : 1) + " ms";
  }
  function badge(el: HTMLElement, text: string): void {
    el.className = "badge " + (TONE[text] || "s-off");
    setText(el, text);
  }

  function renderHeader(s: DashboardState): void {
    const d = s.devices[0];
    setText(
      $("summary"),
      s.server.name + " " + s.server.version + " · " + d.generation + " device " + d.index + " · " + d.ncCount +
        " NeuronCores · " +
        (s.server.admin ? "operator actions on" : "read-only"),
    );
    setText(
      $("device-line"),
      "Device " + d.index + ": " + d.generation + ", " + d.ncCount + " NeuronCores, " + d.virtualCoreSize +
        " per logical core, " +
        bytes(d.hbmBytes) + " HBM" + (s.server.running ? "" : " — runtime stopped"),
    );
  }

  /** The utilization chart of a core card: one point per second of the last minute. */
  function sparkline(nc: number): SVGSVGElement {
    const el = svg("svg", {
      class: "util",
      viewBox: "0 0 " + UTIL_W + " " + UTIL_H,
      preserveAspectRatio: "none",
      role: "img",
    });
    el.append(svg("title", { text: "Busy share of NeuronCore " + nc + " per second, last minute" }));
    el.append(svg("polyline", { class: "util-line", points: "" }));
    return el;
  }
  function renderUtilization(li: Element, c: CoreState): void {
    const u = c.utilization, n = u.perSecond.length;
    // A second with any busy time rises at least half a unit above the baseline: a NeuronCore busy for 0.3 ms in a
    // second would otherwise draw as idle.
    const points = u.perSecond.map((v, k) =>
      (n === 1 ? 0 : (k * UTIL_W) / (n - 1)).toFixed(1) + "," +
      (v > 0 ? Math.min(UTIL_H - 0.5, UTIL_H - v * UTIL_H) : UTIL_H).toFixed(1)
    );
    const line = find<SVGPolylineElement>(li, ".util-line");
    line.setAttribute("points", points.join(" "));
    const chart = find<SVGSVGElement>(li, "svg.util");
    chart.setAttribute("data-window", String(u.window)); // full precision: tools read it, people read the text
    chart.setAttribute("aria-label", "Busy " + percent(u.window, 1) + " of the last minute");
    setText(find(li, ".util-text"), percent(u.window, 1) + " (now " + percent(u.perSecond[n - 1] ?? 0, 1) + ")");
  }
  /** The last execution's host steps as bars on one time axis. */
  function timeline(nc: number): SVGSVGElement {
    const el = svg("svg", {
      class: "timeline",
      viewBox: "0 0 " + TL_W + " " + TL_H,
      preserveAspectRatio: "none",
      role: "img",
    });
    el.append(svg("title", { text: "Where the last execution on NeuronCore " + nc + " spent its time" }));
    return el;
  }
  function renderTimeline(li: Element, c: CoreState): void {
    const chart = find<SVGSVGElement>(li, "svg.timeline");
    const x = c.lastExecution;
    const key = x === null ? "" : String(x.seq);
    if (chart.getAttribute("data-seq") === key) return;
    chart.setAttribute("data-seq", key);
    for (const r of Array.from(chart.querySelectorAll("rect"))) r.remove();
    if (x === null) {
      setText(find(li, ".last-text"), "No execution yet.");
      return;
    }
    setText(
      find(li, ".last-text"),
      "Last: " + x.model + ", " + micros(Math.round(x.durationUs)) +
        (x.status && x.status !== "NRT_SUCCESS" ? ", " + x.status : ""),
    );
    const total = Math.max(x.durationUs, 1);
    // Nested steps (a wait inside a step) go on lower rows: a step's row is one more than the steps it lies within.
    const rows: number[] = [];
    x.steps.forEach((st, k) => {
      let row = 0;
      for (let j = 0; j < k; j++) {
        if (x.steps[j].startUs <= st.startUs && x.steps[j].endUs >= st.endUs && x.steps[j] !== st) {
          row = Math.max(row, rows[j] + 1);
        }
      }
      rows.push(row);
    });
    x.steps.forEach((st, k) => {
      const r = svg("rect", {
        x: ((st.startUs / total) * TL_W).toFixed(2),
        y: String(Math.min(rows[k], 3) * (TL_H / 4)),
        width: Math.max(0.5, ((st.endUs - st.startUs) / total) * TL_W).toFixed(2),
        height: String(TL_H / 4 - 1),
        class: "step step-" + (k % 6),
        "data-name": st.name,
      });
      r.append(
        svg("title", {
          text: st.name + ": " + micros(Math.round(st.endUs - st.startUs)) + (st.detail ? " (" + st.detail + ")" : ""),
        }),
      );
      chart.append(r);
    });
  }
  /** A model's latency histogram: one bar per bucket. */
  function renderHistogram(cell: Element, m: ModelView): void {
    let chart = cell.querySelector<SVGSVGElement>("svg.hist");
    if (chart === null) {
      chart = svg("svg", {
        class: "hist",
        viewBox: "0 0 " + HIST_W + " " + HIST_H,
        preserveAspectRatio: "none",
        role: "img",
      });
      cell.append(chart);
    }
    const counts = m.latency.counts, max = Math.max(1, ...counts), w = HIST_W / counts.length;
    const key = counts.join(",");
    if (chart.getAttribute("data-counts") === key) return;
    chart.setAttribute("data-counts", key);
    chart.replaceChildren();
    const bound = (
      k: number,
    ): string => (k < m.latency.boundsUs.length
      ? "≤ " + micros(m.latency.boundsUs[k])
      : "> " + micros(m.latency.boundsUs[m.latency.boundsUs.length - 1]));
    const total = counts.reduce((a, b) => a + b, 0);
    chart.append(svg("title", { text: "Execution latency of " + m.name + ": " + total + " executions" }));
    counts.forEach((n, k) => {
      const hgt = (n / max) * HIST_H;
      const bar = svg("rect", {
        x: (k * w + 0.5).toFixed(2),
        y: (HIST_H - hgt).toFixed(2),
        width: (w - 1).toFixed(2),
        height: hgt.toFixed(2),
        class: "bar",
        "data-count": n,
      });
      bar.append(svg("title", { text: bound(k) + ": " + n }));
      chart!.append(bar);
    });
  }

  function renderCore(list: HTMLElement, c: CoreState, key: string): void {
    const li = keyed(list, key, () => {
      const q7 = h("ul", { class: "q7", "aria-label": "Q7 cores of NeuronCore " + c.nc });
      return h(
        "li",
        { class: "core", "aria-labelledby": key + "-h" },
        h("h3", { id: key + "-h" }, h("span", { class: "name" }), h("span", { class: "badge" })),
        h(
          "dl",
          null,
          h("dt", { text: "Running" }),
          h("dd", { class: "running" }),
          h("dt", { text: "Executions" }),
          h("dd", { class: "execs" }),
          h("dt", { text: "Resident" }),
          h("dd", { class: "models" }),
          h("dt", { text: "Memory" }),
          h("dd", { class: "mem" }),
          h("dt", { text: "Device fault" }),
          h("dd", { class: "fault" }),
          h("dt", { text: "Busy, last minute" }),
          h("dd", { class: "util-text" }),
        ),
        sparkline(c.nc),
        h("p", { class: "note last-text" }),
        timeline(c.nc),
        q7,
      );
    });
    li.setAttribute("data-state", c.state);
    setText(find(li, ".name"), "NC " + c.nc + (c.vnc === null ? "" : " · logical core " + c.vnc));
    badge(find(li, ".badge"), c.state);
    setText(find(li, ".running"), c.running || "nothing");
    setText(find(li, ".execs"), String(c.executions));
    setText(find(li, ".models"), c.models.length ? c.models.join(", ") : "none");
    setText(find(li, ".mem"), bytes(c.memoryBytes));
    setText(find(li, ".fault"), c.fault || "none");
    renderUtilization(li, c);
    renderTimeline(li, c);
    const q7 = find(li, ".q7");
    if (c.q7 === null) {
      if (q7.childElementCount === 0) q7.append(h("li", { class: "s-off", text: "not reported" }));
      return;
    }
    const qkeys = new Set<string>();
    for (const q of c.q7) {
      const qk = "q" + q.core;
      qkeys.add(qk);
      const item = keyed(q7, qk, () => h("li", null, h("span", { class: "st" }), h("span", { class: "fn" })));
      const full = "Q7 " + q.core + ": " + q.state + (q.fn ? ", last function " + q.fn : "") + ", " + q.runs + " run" +
        (q.runs === 1 ? "" : "s") + (q.detail ? ", " + q.detail : "");
      item.className = TONE[q.state] || "s-off";
      item.setAttribute("data-state", q.state);
      item.title = full;
      item.setAttribute("aria-label", full);
      setText(find(item, ".st"), q.core + " " + q.state);
      setText(find(item, ".fn"), q.fn || "–");
    }
    prune(q7, qkeys);
  }

  function renderCores(s: DashboardState): void {
    const list = $("cores"), keys = new Set<string>();
    for (const c of s.devices[0].cores) {
      const key = "nc-" + c.nc;
      keys.add(key);
      renderCore(list, c, key);
    }
    prune(list, keys);
  }

  // The admin token arrives once in the URL fragment (#token=...), which never reaches the server or its logs; it is
  // kept for this tab only and removed from the address bar (docs/security.md). It is percent-encoded there (as nrt
  // serve prints it; a browser also encodes some characters itself), and may be any token the server takes, up to
  // 512 printable ASCII characters, so an operator's token from --admin-token-file works too. Ours.
  function takeToken(): void {
    const m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
    if (!m) return;
    let value = m[1];
    try {
      value = decodeURIComponent(value);
    } catch {
      // not percent-encoded after all (a lone "%"): taken as written
    }
    history.replaceState(null, "", location.pathname + location.search);
    // Anything else could not be sent in a header (fetch would throw); the page then stays read-only and says so.
    if (!/^[!-~]{1,512}$/.test(value)) return;
    try {
      sessionStorage.setItem(TOKEN_KEY, value);
    } catch {
      // storage off: the token lives in this page
    }
    page.nrtAdminToken = value;
  }
  function token(): string {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || page.nrtAdminToken || "";
    } catch {
      return page.nrtAdminToken || "";
    }
  }
  function post(path: string, body: string): Promise<Response> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (token()) headers.authorization = "Bearer " + token();
    return fetch(path, { method: "POST", headers, body });
  }
  function report(label: string): (res: Response) => Promise<ActionAnswer> {
    return (res) =>
      res.json().then((body: ActionAnswer) => {
        setText($("conn"), res.ok ? label + ": done" : label + " failed: " + (body.error || res.status));
        return body;
      });
  }
  function fail(label: string): (e: Error) => void {
    return (e) => setText($("conn"), label + " failed: " + e.message);
  }
  function act(path: string, label: string): Promise<unknown> {
    return post(path, "{}").then(report(label), fail(label));
  }

  function renderModel(body: HTMLTableSectionElement, s: DashboardState, m: ModelView, key: string): void {
    const tr = keyed(body, key, () => {
      const load = h("button", { type: "button", class: "load", "aria-label": "Load " + m.name, text: "Load" });
      const unload = h("button", { type: "button", class: "unload", "aria-label": "Unload " + m.name, text: "Unload" });
      load.addEventListener("click", () => {
        act(
          "v2/dashboard/models/" + encodeURIComponent(m.name) + "/load",
          load.getAttribute("aria-label") ?? "Load " + m.name,
        );
      });
      unload.addEventListener("click", () => {
        act("v2/dashboard/models/" + encodeURIComponent(m.name) + "/unload", "Unload " + m.name);
      });
      return h(
        "tr",
        null,
        h("th", { scope: "row", text: m.name }),
        h("td", null, h("span", { class: "badge" }), h("div", { class: "reason note" })),
        h("td", { class: "where" }),
        h("td", { class: "num ok" }),
        h("td", { class: "num failed" }),
        h("td", { class: "num execs" }),
        h("td", { class: "num mean" }),
        h("td", { class: "num infer" }),
        h("td", { class: "num last" }),
        h("td", { class: "num inflight" }),
        h("td", { class: "latency" }),
        h("td", { class: "actions" }, load, unload),
      );
    });
    tr.setAttribute("data-state", m.state);
    badge(find(tr, ".badge"), m.state);
    setText(
      find(tr, ".reason"),
      m.state === "POISONED"
        ? "by " + m.poisonedBy + "; reload to recover"
        : m.poisonedInstances > 0
        ? m.poisonedInstances + " of " + m.instances + " instances poisoned by " + m.poisonedBy
        : m.state === "FAILED"
        ? m.reason
        : "",
    );
    setText(
      find(tr, ".where"),
      m.vncs.length
        ? m.instances + (m.instances === 1 ? " instance" : " instances") + " · vNC " + m.vncs.join(", ") + " · NC " +
          m.ncs.join(", ")
        : "–",
    );
    setText(find(tr, ".ok"), String(m.stats.success));
    setText(find(tr, ".failed"), String(m.stats.failure));
    setText(find(tr, ".execs"), String(m.stats.executions));
    setText(find(tr, ".mean"), micros(m.stats.meanRequestUs));
    setText(find(tr, ".infer"), micros(m.stats.meanInferUs));
    setText(find(tr, ".last"), micros(m.stats.lastRequestUs));
    setText(find(tr, ".inflight"), String(m.inflight));
    renderHistogram(find(tr, ".latency"), m);
    const actions = find(tr, ".actions"),
      load = find<HTMLButtonElement>(tr, ".load"),
      unload = find<HTMLButtonElement>(tr, ".unload");
    actions.hidden = !s.server.admin || !token();
    const healthy = m.state === "RUNNING" && m.poisonedInstances === 0;
    const loadLabel = m.state === "POISONED" || m.poisonedInstances > 0 ? "Reload" : "Load";
    setText(load, loadLabel);
    load.setAttribute("aria-label", loadLabel + " " + m.name);
    load.disabled = healthy || m.state === "LOADING" || m.state === "STOPPING";
    unload.disabled = m.state === "UNLOADED" || m.state === "FAILED" || m.state === "LOADING" || m.state === "STOPPING";
  }

  function renderModels(s: DashboardState): void {
    const body = $<HTMLTableElement>("models").tBodies[0], keys = new Set<string>();
    setText(
      $("models-note"),
      s.server.admin
        ? "Load, unload or reload (after a fault) a model of the repository."
        : "Read-only: start the server with --admin to load and unload models here.",
    );
    for (const m of s.models) {
      const key = "m-" + m.name;
      keys.add(key);
      renderModel(body, s, m, key);
    }
    prune(body, keys);
  }

  function renderMemory(s: DashboardState): void {
    const mem = s.devices[0].memory;
    const used = mem.categories.filter((c) => c.bytes > 0);
    const chart = $<SVGSVGElement>("memory-chart");
    const max = used.reduce((a, c) => Math.max(a, c.bytes), 1);
    // Drawn at the element's own width, so its 12 px text stays 12 px on a phone.
    const CHART_W = Math.max(300, Math.round(chart.getBoundingClientRect().width) || 640);
    const sig = CHART_W + ":" + used.map((c) => c.name + "=" + c.bytes).join(",");
    setText(
      $("memory-line"),
      bytes(mem.hbmUsedBytes) + " of " + bytes(mem.hbmBytes) + " HBM booked (" +
        percent(mem.hbmUsedBytes, mem.hbmBytes) + "); " +
        bytes(mem.bookedBytes) + " in all, host DRAM included.",
    );
    chart.setAttribute("data-booked-bytes", String(mem.bookedBytes));
    if (chart.getAttribute("data-sig") === sig) return;
    chart.setAttribute("data-sig", sig);
    for (const g of Array.from(chart.querySelectorAll("g"))) g.remove();
    const height = Math.max(1, used.length) * ROW + 8;
    chart.setAttribute("viewBox", "0 0 " + CHART_W + " " + height);
    setText(
      $("memory-desc"),
      used.length === 0 ? "Nothing booked." : used.map((c) => c.name + ": " + bytes(c.bytes)).join("; "),
    );
    const g = svg("g", { "aria-hidden": "true" });
    used.forEach((c, i) => {
      const y = 4 + i * ROW, w = Math.max(2, (CHART_W - LABEL_W - VALUE_W) * c.bytes / max);
      g.append(svg("text", { x: LABEL_W - 8, y: y + 15, "text-anchor": "end", text: c.name }));
      g.append(
        svg("rect", {
          x: LABEL_W,
          y: y + 3,
          width: w.toFixed(1),
          height: ROW - 8,
          rx: 3,
          fill: "#0b4fb3",
          "data-category": c.name,
          "data-bytes": String(c.bytes),
        }),
      );
      g.append(svg("text", { x: LABEL_W + w + 6, y: y + 15, text: bytes(c.bytes) }));
    });
    chart.append(g);
  }

  function renderStatus(s: DashboardState): void {
    const dl = $("status"), keys = new Set<string>();
    for (const k of Object.keys(s.executionStatus)) {
      keys.add(k);
      const div = keyed(
        dl,
        k,
        () => h("div", null, h("dt", { text: k.replace(/_/g, " ") }), h("dd", { id: "status-" + k })),
      );
      setText(find(div, "dd"), String(s.executionStatus[k]));
    }
    prune(dl, keys);
  }

  function renderLogEntry(ul: HTMLElement, e: DashboardLogEntry): void {
    if (e.seq <= lastLog) return;
    lastLog = e.seq;
    const tag = e.stream ? e.stream + (e.nc === undefined ? "" : " NC " + e.nc) : e.level.toLowerCase();
    ul.append(
      h(
        "li",
        { class: (e.stream || "") + " " + e.level, "data-seq": String(e.seq) },
        h("span", { class: "tag", text: tag }),
        " " + e.message,
      ),
    );
  }

  function renderLog(s: DashboardState): void {
    const ul = $("log");
    if (s.log.length === 0) return;
    const atBottom = ul.scrollHeight - ul.scrollTop - ul.clientHeight < 24;
    for (const e of s.log) renderLogEntry(ul, e);
    while (ul.childElementCount > MAX_LOG) ul.firstElementChild?.remove();
    if (atBottom) ul.scrollTop = ul.scrollHeight;
  }

  function renderActions(s: DashboardState): void {
    const form = $<HTMLFormElement>("fault-form"), note = $("actions-note");
    if (!s.server.admin) {
      setText(
        note,
        "Operator actions are off. Start the server with --admin to load and unload models and to inject faults.",
      );
      form.hidden = true;
    } else if (!token()) {
      setText(
        note,
        "Operator actions need the admin token: open the dashboard URL that nrt serve --admin printed (it ends in " +
          "#token=...), or this page's address with #token= and the token of --admin-token-file, percent-encoded.",
      );
      form.hidden = true;
    } else if (!s.server.faultApi) {
      setText(note, "This device has no fault API; models can be loaded and unloaded in the table above.");
      form.hidden = true;
    } else {
      setText(note, "Arm a fault, run an inference and watch the model fail-stop; reload it to recover.");
      form.hidden = false;
    }
    const opts = s.devices[0].cores.map((c) => c.nc + ":" + c.models.join(",")).join(";");
    if (opts !== ncOptions) {
      ncOptions = opts;
      const sel = $<HTMLSelectElement>("fault-nc"), keep = sel.value;
      for (const o of Array.from(sel.options).slice(1)) o.remove();
      for (const c of s.devices[0].cores) {
        sel.append(
          h("option", {
            value: String(c.nc),
            text: "NC " + c.nc + (c.models.length ? " (" + c.models.join(", ") + ")" : ""),
          }),
        );
      }
      sel.value = keep;
    }
    const list = $("faults");
    list.replaceChildren();
    if (s.faults === null) return;
    for (const f of s.faults.pending) {
      list.append(h("li", { text: "Armed #" + f.id + " " + f.kind + " on NC " + f.ncs.join(", ") }));
    }
    for (const f of s.faults.fired.slice(-5)) {
      list.append(h("li", { text: "Fired #" + f.id + " " + f.kind + " on NC " + f.ncs.join(", ") }));
    }
  }

  function render(s: DashboardState): void {
    last = s;
    renderHeader(s);
    renderCores(s);
    renderModels(s);
    renderMemory(s);
    renderStatus(s);
    renderLog(s);
    renderActions(s);
    document.body.setAttribute("data-updated", String(s.time));
  }

  function poll(): void {
    fetch("v2/dashboard/state?after=" + lastLog).then((r) => r.json()).then((s: DashboardState) => {
      setText($("conn"), "Live (polling)");
      render(s);
    }, () => setText($("conn"), "Disconnected; retrying…"));
  }

  takeToken();
  globalThis.addEventListener("resize", () => {
    if (last !== null) renderMemory(last);
  });
  $("fault-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const spec: FaultSpec = { kind: $<HTMLSelectElement>("fault-kind").value };
    const nc = $<HTMLSelectElement>("fault-nc").value,
      q7 = $<HTMLSelectElement>("fault-q7").value,
      at = $<HTMLInputElement>("fault-at").value;
    if (nc !== "") spec.nc = Number(nc);
    if (q7 !== "") spec.q7 = Number(q7);
    if (at !== "") spec.atExecution = Number(at);
    post("v2/dashboard/faults", JSON.stringify(spec)).then(report("Inject " + spec.kind), fail("Inject " + spec.kind));
  });
  $("fault-clear").addEventListener("click", () => {
    act("v2/dashboard/faults/clear", "Clear faults");
  });
  if (typeof EventSource === "function") {
    const es = new EventSource("v2/dashboard/events");
    es.addEventListener("state", (ev: MessageEvent<string>) => render(JSON.parse(ev.data)));
    es.addEventListener("open", () => setText($("conn"), "Live"));
    es.addEventListener("error", () => setText($("conn"), "Reconnecting…"));
  } else {
    poll();
    setInterval(poll, 1000);
  }
}
