/**
 * The dashboard page: one HTML document with its stylesheet inline, no build step. Its script is
 * {@linkcode DASHBOARD_SCRIPT}, served at `dashboard/app.js` beside it; every URL the page uses is relative, so the
 * page works at `/` and at `/dashboard`, and behind a proxy that adds a path prefix.
 *
 * Accessibility: landmarks (banner, main, one labelled region per panel), a skip link, labelled controls, buttons
 * named by what they act on, states spelled out in text as well as colour (every pair is at least 7:1), visible
 * focus, a single `role="status"` region for connection and action results. The layout is a CSS grid that stacks
 * to one column below 760 px.
 *
 * @module
 */

/** The page's HTML (UTF-8). */
export const DASHBOARD_HTML: string = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nrt dashboard</title>
<link rel="icon" href="data:,">
<style>
:root {
  --bg: #f4f6f8; --card: #ffffff; --text: #15191e; --muted: #434c57; --line: #c9d0d8; --accent: #0b4fb3;
  --ok-bg: #dcf1e2; --ok: #0d4a2a; --busy-bg: #dbe7fb; --busy: #0a3578; --bad-bg: #fbe0df; --bad: #7d1717;
  --warn-bg: #fdf0c8; --warn: #5c4300; --off-bg: #e9edf1; --off: #36404b;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 15px; line-height: 1.4;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--text); }
a { color: var(--accent); }
.skip { position: absolute; left: -999px; top: 0; background: var(--card); padding: 8px; z-index: 10; }
.skip:focus { left: 8px; }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
header { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 16px; padding: 12px 20px; background: #1d2733; color: #ffffff; }
header h1 { font-size: 1.25rem; margin: 0; }
header p { margin: 0; color: #e3e8ee; }
#conn { margin-left: auto; font-weight: 600; }
main { display: grid; grid-template-columns: repeat(12, minmax(0, 1fr)); gap: 16px; padding: 16px 20px 32px; max-width: 1600px; margin: 0 auto; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; min-width: 0; }
section h2 { font-size: 1.05rem; margin: 0 0 8px; }
.span-12 { grid-column: span 12; } .span-7 { grid-column: span 7; } .span-5 { grid-column: span 5; } .span-6 { grid-column: span 6; }
.note { color: var(--muted); margin: 4px 0 8px; }
.cores { display: grid; grid-template-columns: repeat(auto-fill, minmax(270px, 1fr)); gap: 10px; list-style: none; margin: 0; padding: 0; }
.core { border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; }
.core h3 { font-size: 0.95rem; margin: 0 0 4px; display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
.core dl { display: grid; grid-template-columns: auto 1fr; gap: 0 8px; margin: 0 0 6px; font-size: 0.87rem; }
.core dt { color: var(--muted); } .core dd { margin: 0; overflow-wrap: anywhere; }
svg.util { display: block; width: 100%; height: 24px; background: var(--bg); border-radius: 3px; }
svg.util .util-line { fill: none; stroke: currentColor; stroke-width: 1.2; vector-effect: non-scaling-stroke; }
svg.timeline { display: block; width: 100%; height: 32px; margin: 2px 0 6px; background: var(--bg); border-radius: 3px; }
svg.timeline .step-0 { fill: #4e79a7; } svg.timeline .step-1 { fill: #f28e2b; } svg.timeline .step-2 { fill: #59a14f; }
svg.timeline .step-3 { fill: #e15759; } svg.timeline .step-4 { fill: #76b7b2; } svg.timeline .step-5 { fill: #b07aa1; }
svg.hist { display: block; width: 88px; height: 20px; } svg.hist .bar { fill: currentColor; }
.core .last-text { margin: 4px 0 0; font-size: 0.8rem; }
.q7 { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 4px; list-style: none; margin: 0; padding: 0; font-size: 0.78rem; }
.q7 li { border-radius: 4px; padding: 1px 5px; min-width: 0; }
.q7 span { display: block; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
.q7 .st { font-weight: 600; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 0.8rem; font-weight: 600; }
.s-ok { background: var(--ok-bg); color: var(--ok); } .s-busy { background: var(--busy-bg); color: var(--busy); }
.s-bad { background: var(--bad-bg); color: var(--bad); } .s-warn { background: var(--warn-bg); color: var(--warn); }
.s-off { background: var(--off-bg); color: var(--off); }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 0.9rem; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.where, td.actions { white-space: nowrap; }
td .reason { max-width: 24ch; margin: 2px 0 0; font-size: 0.82rem; }
button { font: inherit; padding: 3px 10px; border-radius: 5px; border: 1px solid var(--accent); background: var(--card); color: var(--accent); cursor: pointer; }
button.primary { background: var(--accent); color: #ffffff; }
button:disabled { border-color: var(--line); color: var(--muted); cursor: not-allowed; }
td button + button { margin-left: 6px; }
#memory-chart { width: 100%; height: auto; display: block; max-width: 900px; }
#memory-chart text { font-size: 12px; fill: var(--text); }
.status-list { display: grid; grid-template-columns: repeat(auto-fill, minmax(140px, 1fr)); gap: 6px; margin: 0; }
.status-list div { border: 1px solid var(--line); border-radius: 6px; padding: 4px 8px; }
.status-list dt { color: var(--muted); font-size: 0.82rem; } .status-list dd { margin: 0; font-size: 1.2rem; font-weight: 600; font-variant-numeric: tabular-nums; }
#log { height: 260px; overflow-y: auto; margin: 0; padding: 6px 8px; background: #10161d; color: #e8edf2; border-radius: 6px;
  font: 0.8rem/1.45 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; list-style: none; }
#log li { white-space: pre-wrap; overflow-wrap: anywhere; }
#log .tag { display: inline-block; min-width: 7.5em; color: #a9d1ff; }
#log .stderr .tag, #log .WARNING .tag { color: #ffd38a; } #log .ERROR .tag { color: #ffb3b0; }
form.fault { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 8px 12px; align-items: end; }
form.fault .field { display: flex; flex-direction: column; gap: 2px; min-width: 0; }
form.fault label { font-size: 0.87rem; color: var(--muted); }
select, input { font: inherit; padding: 4px 6px; border: 1px solid #6b7682; border-radius: 5px; background: var(--card); color: var(--text); min-width: 0; }
.actions-row { grid-column: 1 / -1; display: flex; gap: 8px; flex-wrap: wrap; }
.faults-list { font-size: 0.87rem; margin: 8px 0 0; padding-left: 18px; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
@media (max-width: 1100px) { .span-7, .span-5, .span-6 { grid-column: span 12; } }
@media (max-width: 760px) {
  main { padding: 10px; gap: 10px; }
  header { padding: 10px; }
  #conn { margin-left: 0; width: 100%; }
  form.fault { grid-template-columns: minmax(0, 1fr); }
  .cores { grid-template-columns: minmax(0, 1fr); }
}
</style>
</head>
<body>
<a class="skip" href="#main">Skip to the dashboard</a>
<header>
  <h1>nrt device dashboard</h1>
  <p id="summary">Connecting…</p>
  <p id="conn" role="status" aria-live="polite">Connecting…</p>
</header>
<main id="main" tabindex="-1">
  <section class="span-12" aria-labelledby="cores-h">
    <h2 id="cores-h">Device and NeuronCores</h2>
    <p class="note" id="device-line"></p>
    <ul class="cores" id="cores" aria-label="NeuronCores"></ul>
  </section>
  <section class="span-12" aria-labelledby="models-h">
    <h2 id="models-h">Models</h2>
    <p class="note" id="models-note"></p>
    <div class="scroll" role="region" aria-labelledby="models-h" tabindex="0">
      <table id="models">
        <thead><tr>
          <th scope="col">Model</th><th scope="col">State</th><th scope="col">Cores</th>
          <th scope="col" class="num">Inferences</th><th scope="col" class="num">Failed</th><th scope="col" class="num">Executions</th>
          <th scope="col" class="num">Mean latency</th><th scope="col" class="num">Mean execute</th><th scope="col" class="num">Last request</th>
          <th scope="col" class="num">In flight</th><th scope="col">Latency histogram</th><th scope="col">Actions</th>
        </tr></thead>
        <tbody></tbody>
      </table>
    </div>
  </section>
  <section class="span-7" aria-labelledby="memory-h">
    <h2 id="memory-h">Device memory by usage</h2>
    <p class="note" id="memory-line"></p>
    <svg id="memory-chart" role="img" aria-labelledby="memory-title memory-desc" viewBox="0 0 640 40" preserveAspectRatio="xMinYMin meet">
      <title id="memory-title">Device memory booked per usage category</title>
      <desc id="memory-desc"></desc>
    </svg>
  </section>
  <section class="span-5" aria-labelledby="status-h">
    <h2 id="status-h">Executions by outcome</h2>
    <p class="note">nrt_execution_status_total</p>
    <dl class="status-list" id="status"></dl>
  </section>
  <section class="span-7" aria-labelledby="log-h">
    <h2 id="log-h">Kernel output and runtime log</h2>
    <p class="note">Kernel stdout and stderr (pool_stdio) with the NeuronCore that printed it, and the runtime's messages.</p>
    <ul id="log" role="log" aria-labelledby="log-h" tabindex="0"></ul>
  </section>
  <section class="span-5" aria-labelledby="actions-h">
    <h2 id="actions-h">Operator actions</h2>
    <p class="note" id="actions-note">Loading…</p>
    <form class="fault" id="fault-form" hidden>
      <div class="field"><label for="fault-kind">Fault kind</label>
        <select id="fault-kind" name="kind">
          <option value="hbm-ue">HBM uncorrectable error (hbm-ue)</option>
          <option value="nc-ue">NeuronCore memory error (nc-ue)</option>
          <option value="dma-abort">DMA engine abort (dma-abort)</option>
          <option value="oob">Out-of-bounds access (oob)</option>
          <option value="tpb-error">Fatal TPB error (tpb-error)</option>
          <option value="nq-overflow">Notification queue overflow (nq-overflow)</option>
          <option value="network-proxy">Network proxy failure (network-proxy)</option>
          <option value="hang">Hang (hang)</option>
          <option value="collectives-hang">Collectives hang (collectives-hang)</option>
          <option value="fp-nan">NaN, completes (fp-nan)</option>
          <option value="recoverable">Recoverable, completes (recoverable)</option>
        </select></div>
      <div class="field"><label for="fault-nc">NeuronCore</label>
        <select id="fault-nc" name="nc"><option value="">Every NeuronCore</option></select></div>
      <div class="field"><label for="fault-q7">Q7 core</label>
        <select id="fault-q7" name="q7">
          <option value="">None (NeuronCore-level)</option>
          <option>0</option><option>1</option><option>2</option><option>3</option>
          <option>4</option><option>5</option><option>6</option><option>7</option>
        </select></div>
      <div class="field"><label for="fault-at">At execution (blank: now)</label>
        <input id="fault-at" name="atExecution" type="number" min="1" step="1" inputmode="numeric"></div>
      <div class="actions-row">
        <button type="submit" class="primary" id="fault-inject">Inject fault</button>
        <button type="button" id="fault-clear">Clear armed faults</button>
      </div>
    </form>
    <h3 class="visually-hidden" id="faults-h">Armed and fired faults</h3>
    <ul class="faults-list" id="faults" aria-labelledby="faults-h"></ul>
  </section>
</main>
<script src="dashboard/app.js" defer></script>
</body>
</html>
`;
