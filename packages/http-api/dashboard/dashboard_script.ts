/**
 * The dashboard page's script (served at `dashboard/app.js`): plain ES2020, no build step, no dependencies. It renders
 * each `state` event of `v2/dashboard/events` (server-sent events; it polls `v2/dashboard/state` where `EventSource`
 * is missing) into the page of `DASHBOARD_HTML`, updating elements in place by key so that keyboard focus
 * survives updates, and posts the operator actions. Text reaches the DOM only through `textContent`.
 *
 * @module
 */

/** The script's source (UTF-8). */
export const DASHBOARD_SCRIPT: string = String.raw`"use strict";
(function () {
  var MAX_LOG = 500;
  var $ = function (id) { return document.getElementById(id); };
  var lastLog = 0;
  var ncOptions = "";

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") el.textContent = attrs[k];
      else if (k === "class") el.className = attrs[k];
      else el.setAttribute(k, attrs[k]);
    }
    for (var i = 2; i < arguments.length; i++) if (arguments[i] != null) el.append(arguments[i]);
    return el;
  }
  function svg(tag, attrs) {
    var el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (var k in attrs) {
      if (k === "text") el.textContent = attrs[k];
      else el.setAttribute(k, attrs[k]);
    }
    return el;
  }
  function setText(el, text) { if (el.textContent !== text) el.textContent = text; }
  /** A child of parent keyed by key, created by make() the first time; kept in place so focus survives updates. */
  function keyed(parent, key, make) {
    var el = parent.querySelector(":scope > [data-key=\"" + key + "\"]");
    if (el === null) { el = make(); el.setAttribute("data-key", key); parent.append(el); }
    return el;
  }
  function prune(parent, keys) {
    Array.from(parent.children).forEach(function (c) { if (!keys.has(c.getAttribute("data-key"))) c.remove(); });
  }
  function bytes(n) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(n) : n.toFixed(n < 10 ? 2 : 1)) + " " + u[i];
  }
  function percent(part, whole) {
    var p = whole > 0 ? 100 * part / whole : 0;
    return p > 0 && p < 0.01 ? "< 0.01%" : p.toFixed(p < 10 ? 2 : 1) + "%";
  }
  function micros(us) {
    if (!us) return "–";
    return us < 1000 ? us + " µs" : (us / 1000).toFixed(us < 10000 ? 2 : 1) + " ms";
  }
  var TONE = { RUNNING: "s-ok", idle: "s-ok", busy: "s-busy", running: "s-busy", LOADING: "s-warn", STOPPING: "s-warn",
    POISONED: "s-bad", faulted: "s-bad", FAILED: "s-bad", UNLOADED: "s-off", unused: "s-off", off: "s-off" };
  function badge(el, text) { el.className = "badge " + (TONE[text] || "s-off"); setText(el, text); }

  function renderHeader(s) {
    var d = s.devices[0];
    setText($("summary"), s.server.name + " " + s.server.version + " · " + d.generation + " device " + d.index + " · " +
      d.ncCount + " NeuronCores · " + (s.server.admin ? "operator actions on" : "read-only"));
    setText($("device-line"), "Device " + d.index + ": " + d.generation + ", " + d.ncCount + " NeuronCores, " +
      d.virtualCoreSize + " per logical core, " + bytes(d.hbmBytes) + " HBM" + (s.server.running ? "" : " — runtime stopped"));
  }

  function renderCores(s) {
    var list = $("cores"), keys = new Set();
    s.devices[0].cores.forEach(function (c) {
      var key = "nc-" + c.nc;
      keys.add(key);
      var li = keyed(list, key, function () {
        var q7 = h("ul", { class: "q7", "aria-label": "Q7 cores of NeuronCore " + c.nc });
        return h("li", { class: "core", "aria-labelledby": key + "-h" },
          h("h3", { id: key + "-h" }, h("span", { class: "name" }), h("span", { class: "badge" })),
          h("dl", null,
            h("dt", { text: "Running" }), h("dd", { class: "running" }),
            h("dt", { text: "Executions" }), h("dd", { class: "execs" }),
            h("dt", { text: "Resident" }), h("dd", { class: "models" }),
            h("dt", { text: "Memory" }), h("dd", { class: "mem" }),
            h("dt", { text: "Device fault" }), h("dd", { class: "fault" })),
          q7);
      });
      li.setAttribute("data-state", c.state);
      setText(li.querySelector(".name"), "NC " + c.nc + (c.vnc === null ? "" : " · logical core " + c.vnc));
      badge(li.querySelector(".badge"), c.state);
      setText(li.querySelector(".running"), c.running || "nothing");
      setText(li.querySelector(".execs"), String(c.executions));
      setText(li.querySelector(".models"), c.models.length ? c.models.join(", ") : "none");
      setText(li.querySelector(".mem"), bytes(c.memoryBytes));
      setText(li.querySelector(".fault"), c.fault || "none");
      var q7 = li.querySelector(".q7");
      if (c.q7 === null) { if (q7.childElementCount === 0) q7.append(h("li", { class: "s-off", text: "not reported" })); return; }
      var qkeys = new Set();
      c.q7.forEach(function (q) {
        var qk = "q" + q.core;
        qkeys.add(qk);
        var item = keyed(q7, qk, function () { return h("li", null, h("span", { class: "st" }), h("span", { class: "fn" })); });
        var full = "Q7 " + q.core + ": " + q.state + (q.fn ? ", last function " + q.fn : "") + ", " + q.runs + " run" + (q.runs === 1 ? "" : "s") +
          (q.detail ? ", " + q.detail : "");
        item.className = TONE[q.state] || "s-off";
        item.setAttribute("data-state", q.state);
        item.title = full;
        item.setAttribute("aria-label", full);
        setText(item.querySelector(".st"), q.core + " " + q.state);
        setText(item.querySelector(".fn"), q.fn || "–");
      });
      prune(q7, qkeys);
    });
    prune(list, keys);
  }

  // The admin token arrives once in the URL fragment (#token=...), which never reaches the server or its logs; it is
  // kept for this tab only and removed from the address bar (docs/security.md).
  var TOKEN_KEY = "nrt-admin-token";
  (function takeToken() {
    var m = /(?:^#|&)token=([A-Za-z0-9_-]+)/.exec(location.hash);
    if (m) {
      try { sessionStorage.setItem(TOKEN_KEY, m[1]); } catch (e) { /* storage off: the token lives in this page */ }
      window.nrtAdminToken = m[1];
      history.replaceState(null, "", location.pathname + location.search);
    }
  })();
  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY) || window.nrtAdminToken || ""; } catch (e) { return window.nrtAdminToken || ""; }
  }
  function post(path, body) {
    var headers = { "content-type": "application/json" };
    if (token()) headers.authorization = "Bearer " + token();
    return fetch(path, { method: "POST", headers: headers, body: body });
  }
  function act(path, label) {
    return post(path, "{}").then(report(label), fail(label));
  }
  function report(label) {
    return function (res) {
      return res.json().then(function (body) {
        setText($("conn"), res.ok ? label + ": done" : label + " failed: " + (body.error || res.status));
        return body;
      });
    };
  }
  function fail(label) { return function (e) { setText($("conn"), label + " failed: " + e.message); }; }

  function renderModels(s) {
    var body = $("models").tBodies[0], keys = new Set();
    setText($("models-note"), s.server.admin ? "Load, unload or reload (after a fault) a model of the repository."
      : "Read-only: start the server with --admin to load and unload models here.");
    s.models.forEach(function (m) {
      var key = "m-" + m.name;
      keys.add(key);
      var tr = keyed(body, key, function () {
        var load = h("button", { type: "button", class: "load", "aria-label": "Load " + m.name, text: "Load" });
        var unload = h("button", { type: "button", class: "unload", "aria-label": "Unload " + m.name, text: "Unload" });
        load.addEventListener("click", function () { act("v2/dashboard/models/" + encodeURIComponent(m.name) + "/load", load.getAttribute("aria-label")); });
        unload.addEventListener("click", function () { act("v2/dashboard/models/" + encodeURIComponent(m.name) + "/unload", "Unload " + m.name); });
        return h("tr", null, h("th", { scope: "row", text: m.name }), h("td", null, h("span", { class: "badge" }), h("div", { class: "reason note" })),
          h("td", { class: "where" }), h("td", { class: "num ok" }), h("td", { class: "num failed" }), h("td", { class: "num execs" }),
          h("td", { class: "num mean" }), h("td", { class: "num infer" }), h("td", { class: "num last" }), h("td", { class: "num inflight" }),
          h("td", { class: "actions" }, load, unload));
      });
      tr.setAttribute("data-state", m.state);
      badge(tr.querySelector(".badge"), m.state);
      setText(tr.querySelector(".reason"), m.state === "POISONED" ? "by " + m.poisonedBy + "; reload to recover"
        : m.poisonedInstances > 0 ? m.poisonedInstances + " of " + m.instances + " instances poisoned by " + m.poisonedBy
        : m.state === "FAILED" ? m.reason : "");
      setText(tr.querySelector(".where"), m.vncs.length
        ? m.instances + (m.instances === 1 ? " instance" : " instances") + " · vNC " + m.vncs.join(", ") + " · NC " + m.ncs.join(", ") : "–");
      setText(tr.querySelector(".ok"), String(m.stats.success));
      setText(tr.querySelector(".failed"), String(m.stats.failure));
      setText(tr.querySelector(".execs"), String(m.stats.executions));
      setText(tr.querySelector(".mean"), micros(m.stats.meanRequestUs));
      setText(tr.querySelector(".infer"), micros(m.stats.meanInferUs));
      setText(tr.querySelector(".last"), micros(m.stats.lastRequestUs));
      setText(tr.querySelector(".inflight"), String(m.inflight));
      var actions = tr.querySelector(".actions"), load = tr.querySelector(".load"), unload = tr.querySelector(".unload");
      actions.hidden = !s.server.admin || !token();
      var healthy = m.state === "RUNNING" && m.poisonedInstances === 0;
      var loadLabel = m.state === "POISONED" || m.poisonedInstances > 0 ? "Reload" : "Load";
      setText(load, loadLabel);
      load.setAttribute("aria-label", loadLabel + " " + m.name);
      load.disabled = healthy || m.state === "LOADING" || m.state === "STOPPING";
      unload.disabled = m.state === "UNLOADED" || m.state === "FAILED" || m.state === "LOADING" || m.state === "STOPPING";
    });
    prune(body, keys);
  }

  var LABEL_W = 140, VALUE_W = 80, ROW = 24;
  function renderMemory(s) {
    var mem = s.devices[0].memory;
    var used = mem.categories.filter(function (c) { return c.bytes > 0; });
    var chart = $("memory-chart");
    var max = used.reduce(function (a, c) { return Math.max(a, c.bytes); }, 1);
    // Drawn at the element's own width, so its 12 px text stays 12 px on a phone.
    var CHART_W = Math.max(300, Math.round(chart.getBoundingClientRect().width) || 640);
    var sig = CHART_W + ":" + used.map(function (c) { return c.name + "=" + c.bytes; }).join(",");
    setText($("memory-line"), bytes(mem.hbmUsedBytes) + " of " + bytes(mem.hbmBytes) + " HBM booked (" +
      percent(mem.hbmUsedBytes, mem.hbmBytes) + "); " + bytes(mem.bookedBytes) + " in all, host DRAM included.");
    chart.setAttribute("data-booked-bytes", String(mem.bookedBytes));
    if (chart.getAttribute("data-sig") === sig) return;
    chart.setAttribute("data-sig", sig);
    Array.from(chart.querySelectorAll("g")).forEach(function (g) { g.remove(); });
    var height = Math.max(1, used.length) * ROW + 8;
    chart.setAttribute("viewBox", "0 0 " + CHART_W + " " + height);
    setText($("memory-desc"), used.length === 0 ? "Nothing booked." : used.map(function (c) { return c.name + ": " + bytes(c.bytes); }).join("; "));
    var g = svg("g", { "aria-hidden": "true" });
    used.forEach(function (c, i) {
      var y = 4 + i * ROW, w = Math.max(2, (CHART_W - LABEL_W - VALUE_W) * c.bytes / max);
      g.append(svg("text", { x: LABEL_W - 8, y: y + 15, "text-anchor": "end", text: c.name }));
      g.append(svg("rect", { x: LABEL_W, y: y + 3, width: w.toFixed(1), height: ROW - 8, rx: 3, fill: "#0b4fb3", "data-category": c.name, "data-bytes": String(c.bytes) }));
      g.append(svg("text", { x: LABEL_W + w + 6, y: y + 15, text: bytes(c.bytes) }));
    });
    chart.append(g);
  }

  function renderStatus(s) {
    var dl = $("status"), keys = new Set();
    Object.keys(s.executionStatus).forEach(function (k) {
      keys.add(k);
      var div = keyed(dl, k, function () { return h("div", null, h("dt", { text: k.replace(/_/g, " ") }), h("dd", { id: "status-" + k })); });
      setText(div.querySelector("dd"), String(s.executionStatus[k]));
    });
    prune(dl, keys);
  }

  function renderLog(s) {
    var ul = $("log");
    if (s.log.length === 0) return;
    var atBottom = ul.scrollHeight - ul.scrollTop - ul.clientHeight < 24;
    s.log.forEach(function (e) {
      if (e.seq <= lastLog) return;
      lastLog = e.seq;
      var tag = e.stream ? e.stream + (e.nc === undefined ? "" : " NC " + e.nc) : e.level.toLowerCase();
      ul.append(h("li", { class: (e.stream || "") + " " + e.level, "data-seq": String(e.seq) },
        h("span", { class: "tag", text: tag }), " " + e.message));
    });
    while (ul.childElementCount > MAX_LOG) ul.firstElementChild.remove();
    if (atBottom) ul.scrollTop = ul.scrollHeight;
  }

  function renderActions(s) {
    var form = $("fault-form"), note = $("actions-note");
    if (!s.server.admin) {
      setText(note, "Operator actions are off. Start the server with --admin to load and unload models and to inject faults.");
      form.hidden = true;
    } else if (!token()) {
      setText(note, "Operator actions need the admin token: open the dashboard URL that nrt serve --admin printed (it ends in #token=...).");
      form.hidden = true;
    } else if (!s.server.faultApi) {
      setText(note, "This device has no fault API; models can be loaded and unloaded in the table above.");
      form.hidden = true;
    } else {
      setText(note, "Arm a fault, run an inference and watch the model fail-stop; reload it to recover.");
      form.hidden = false;
    }
    var opts = s.devices[0].cores.map(function (c) { return c.nc + ":" + c.models.join(","); }).join(";");
    if (opts !== ncOptions) {
      ncOptions = opts;
      var sel = $("fault-nc"), keep = sel.value;
      Array.from(sel.options).slice(1).forEach(function (o) { o.remove(); });
      s.devices[0].cores.forEach(function (c) {
        sel.append(h("option", { value: String(c.nc), text: "NC " + c.nc + (c.models.length ? " (" + c.models.join(", ") + ")" : "") }));
      });
      sel.value = keep;
    }
    var list = $("faults");
    list.replaceChildren();
    if (s.faults === null) return;
    s.faults.pending.forEach(function (f) { list.append(h("li", { text: "Armed #" + f.id + " " + f.kind + " on NC " + f.ncs.join(", ") })); });
    s.faults.fired.slice(-5).forEach(function (f) { list.append(h("li", { text: "Fired #" + f.id + " " + f.kind + " on NC " + f.ncs.join(", ") })); });
  }

  var last = null;
  function render(s) {
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

  window.addEventListener("resize", function () { if (last !== null) renderMemory(last); });
  $("fault-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var spec = { kind: $("fault-kind").value };
    if ($("fault-nc").value !== "") spec.nc = Number($("fault-nc").value);
    if ($("fault-q7").value !== "") spec.q7 = Number($("fault-q7").value);
    if ($("fault-at").value !== "") spec.atExecution = Number($("fault-at").value);
    post("v2/dashboard/faults", JSON.stringify(spec)).then(report("Inject " + spec.kind), fail("Inject " + spec.kind));
  });
  $("fault-clear").addEventListener("click", function () { act("v2/dashboard/faults/clear", "Clear faults"); });

  function poll() {
    fetch("v2/dashboard/state?after=" + lastLog).then(function (r) { return r.json(); }).then(function (s) {
      setText($("conn"), "Live (polling)");
      render(s);
    }, function () { setText($("conn"), "Disconnected; retrying…"); });
  }
  if (typeof EventSource === "function") {
    var es = new EventSource("v2/dashboard/events");
    es.addEventListener("state", function (ev) { render(JSON.parse(ev.data)); });
    es.addEventListener("open", function () { setText($("conn"), "Live"); });
    es.addEventListener("error", function () { setText($("conn"), "Reconnecting…"); });
  } else {
    poll();
    setInterval(poll, 1000);
  }
})();
`;
