/**
 * A small viewer of the Chrome Trace Event document `GET /v2/neuron/trace` answers (ours; Perfetto and
 * `chrome://tracing` open the same file): `GET /v2/neuron/trace/view` draws one lane per thread of the trace,
 * grouped by process, with every complete (`X`) slice as a box on a common µs axis, nested slices stacked below their
 * parent, and instant (`i`) events as ticks. Read-only, no credential, a script from the same origin only (the
 * dashboard's content-security policy).
 *
 * @module
 */

/** The page. */
export const TRACE_VIEWER_HTML: string = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>nrt trace</title>
<link rel="icon" href="data:,">
<style>
  body { font: 13px system-ui, sans-serif; margin: 16px; color: #1d2433; background: #fff; }
  h1 { font-size: 18px; margin: 0 0 4px; }
  #meta { color: #5b6475; margin-bottom: 12px; }
  .proc { font-weight: 600; margin: 12px 0 4px; }
  .lane { display: flex; align-items: flex-start; border-top: 1px solid #eef0f4; }
  .label { width: 200px; flex: none; padding: 3px 6px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  .track { position: relative; flex: 1; min-height: 20px; }
  .slice { position: absolute; height: 16px; box-sizing: border-box; border: 1px solid rgba(0,0,0,.25); border-radius: 2px;
    font-size: 10px; line-height: 14px; padding: 0 2px; overflow: hidden; white-space: nowrap; color: #111; min-width: 2px; }
  .instant { position: absolute; width: 2px; height: 16px; background: #c0392b; }
  #error { color: #b00020; }
</style>
</head>
<body>
<h1>nrt trace</h1>
<div id="meta">loading…</div>
<div id="error"></div>
<div id="tracks"></div>
<script src="/v2/neuron/trace/view.js"></script>
</body>
</html>
`;

/** The page's script: fetches the trace and draws it. */
export const TRACE_VIEWER_SCRIPT: string = `"use strict";
(async () => {
  const meta = document.getElementById("meta");
  const root = document.getElementById("tracks");
  const res = await fetch("/v2/neuron/trace");
  if (!res.ok) {
    meta.textContent = "";
    document.getElementById("error").textContent = (await res.json()).error || ("HTTP " + res.status);
    return;
  }
  const trace = await res.json();
  const events = trace.traceEvents;
  const name = (kind, pid, tid) => {
    const m = events.find((e) => e.ph === "M" && e.name === kind && e.pid === pid && (kind === "process_name" || e.tid === tid));
    return m ? m.args.name : (kind === "process_name" ? "process " + pid : "thread " + tid);
  };
  const order = (kind, pid, tid) => {
    const m = events.find((e) => e.ph === "M" && e.name === kind && e.pid === pid && (kind === "process_sort_index" || e.tid === tid));
    return m ? m.args.sort_index : 0;
  };
  const shown = events.filter((e) => e.ph === "X" || e.ph === "i");
  const end = Math.max(...shown.map((e) => e.ts + (e.dur || 0)), 1);
  meta.textContent = trace.otherData.model + " on " + trace.otherData.device + " — " + (end / 1000).toFixed(3) + " ms, " + shown.length + " events";
  const lanes = new Map();
  for (const e of shown) {
    const key = e.pid + ":" + e.tid;
    if (!lanes.has(key)) lanes.set(key, { pid: e.pid, tid: e.tid, events: [] });
    lanes.get(key).events.push(e);
  }
  const sorted = [...lanes.values()].sort((a, b) =>
    order("process_sort_index", a.pid) - order("process_sort_index", b.pid) || a.pid - b.pid ||
    order("thread_sort_index", a.pid, a.tid) - order("thread_sort_index", b.pid, b.tid) || a.tid - b.tid);
  const hue = (s) => { let h = 0; for (const c of s) h = (h * 31 + c.charCodeAt(0)) % 360; return h; };
  let pid = -1;
  for (const lane of sorted) {
    if (lane.pid !== pid) {
      pid = lane.pid;
      const p = document.createElement("div");
      p.className = "proc";
      p.textContent = name("process_name", pid);
      root.appendChild(p);
    }
    const row = document.createElement("div");
    row.className = "lane";
    const label = document.createElement("div");
    label.className = "label";
    label.textContent = name("thread_name", lane.pid, lane.tid);
    const track = document.createElement("div");
    track.className = "track";
    row.dataset.track = label.textContent;
    row.append(label, track);
    // Depth: how many open slices hold this one (a slice holds the next while it has not ended).
    const open = [];
    let depth = 0;
    for (const e of lane.events.slice().sort((a, b) => a.ts - b.ts || (b.dur || 0) - (a.dur || 0))) {
      while (open.length > 0 && open[open.length - 1] <= e.ts) open.pop();
      const el = document.createElement("div");
      el.style.left = (100 * e.ts / end) + "%";
      el.style.top = (2 + 18 * open.length) + "px";
      el.title = e.name + (e.dur !== undefined ? " — " + e.dur.toFixed(3) + " µs" : "") + "\\n" + JSON.stringify(e.args || {});
      if (e.ph === "X") {
        el.className = "slice";
        el.style.width = (100 * e.dur / end) + "%";
        el.style.background = "hsl(" + hue(e.name) + " 65% 78%)";
        el.textContent = e.name;
        el.dataset.name = e.name;
        open.push(e.ts + e.dur);
      } else {
        el.className = "instant";
        el.dataset.name = e.name;
      }
      depth = Math.max(depth, open.length);
      track.appendChild(el);
    }
    track.style.height = (4 + 18 * Math.max(1, depth)) + "px";
    root.appendChild(row);
  }
  document.body.dataset.ready = "true";
})().catch((e) => { document.getElementById("error").textContent = String(e); });
`;
