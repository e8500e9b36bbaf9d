// Live charts and panels: one WebSocket per page (the element with data-live-socket), automatic
// reconnect with backoff (the server fills the gap from the last window we have), pause while the
// tab is hidden (Page Visibility API: the server stops sending, and fills the gap on resume), and
// Plotly charts drawn in the theme's colours. The server's messages: backfill / points (metric
// windows), snapshot / update (a user panel), paused / resumed, unavailable, error.
(function () {
  "use strict";

  // the pure arithmetic, for tests (page.evaluate) and other scripts; set before any early return
  window.TidelogLive = { etaSeconds: etaSeconds, etaText: etaText, duration: duration,
                         withGaps: withGaps, movingAverage: movingAverage, xRange: xRange };

  var root = document.querySelector("[data-live-socket]");
  if (!root || root.dataset.liveUnavailable || !window.Plotly) return;

  var MINUTE = 60000;
  // the server picks the resolution from the range (streams/broker/metrics/downsample.py):
  // 5 min: 1 s, 15 min: 10 s, 60 min: 1 min, 6 h: 5 min, 24 h: 15 min; this is only the guess
  // shown until its first answer
  var RANGE_RESOLUTION = { 300000: 1000, 900000: 10000, 3600000: MINUTE, 21600000: 5 * MINUTE,
                           86400000: 15 * MINUTE };
  var SMOOTH_WINDOWS = 5; // the smoothed line: a trailing moving average of 5 windows
  // rates whose windows exist only where records are (SPARSE_KINDS in streams/broker/metrics/
  // series.py): a missing window is a zero there, not a gap
  var SPARSE_KINDS = { group_records_et: true };
  var isPanel = root.dataset.liveScope === "panel";
  var indicator = root.querySelector(".live-indicator");
  var state = {
    range: 900000, resolution: 10000, socket: null, backoff: 1000, retry: null,
    series: {}, meta: {}, lastT: null, panel: null, drawPending: false, smooth: false
  };

  // ------------------------------------------------------------------ the socket

  function setIndicator(name, text) {
    if (!indicator) return;
    indicator.dataset.liveState = name;
    indicator.textContent = text || name;
  }

  function send(message) {
    if (state.socket && state.socket.readyState === WebSocket.OPEN) {
      state.socket.send(JSON.stringify(message));
    }
  }

  function subscribe(since) {
    var message = { type: "subscribe", scope: root.dataset.liveScope, name: root.dataset.liveName,
                    range_ms: state.range };
    if (since !== null) message.since = since;
    send(message);
  }

  function connect() {
    state.retry = null;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + root.dataset.liveSocket);
    state.socket = socket;
    socket.onopen = function () {
      state.backoff = 1000;
      subscribe(state.lastT); // after a reconnect: only what we miss
      if (document.hidden) pause(); else setIndicator("live");
    };
    socket.onmessage = function (event) { receive(JSON.parse(event.data)); };
    socket.onclose = function () {
      if (state.socket !== socket) return;
      state.socket = null;
      setIndicator("stale", "stale — reconnecting…");
      state.retry = setTimeout(connect, state.backoff);
      state.backoff = Math.min(state.backoff * 2, 30000);
    };
  }

  function pause() {
    send({ type: "pause" });
    setIndicator("paused");
  }

  function resume() {
    send({ type: "resume", since: state.lastT }); // inclusive: the last window may be open
    if (state.socket) setIndicator("live");
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) pause(); else resume();
  });

  function receive(message) {
    if (message.type === "backfill" || message.type === "points") addPoints(message);
    else if (message.type === "snapshot") setPanel(message.update, true);
    else if (message.type === "update") setPanel(message.update, false);
    else if (message.type === "unavailable") showEmpty(message.message);
    scheduleDraw();
  }

  // ------------------------------------------------------------------ metric data

  function addPoints(message) {
    if (message.range_ms !== undefined && message.range_ms !== state.range) return; // older answer
    if (message.resolution && message.resolution !== state.resolution) {
      state.resolution = message.resolution;
      showResolution();
    }
    Object.assign(state.meta, message.series);
    message.points.forEach(function (row) {
      var name = row[0], t = row[1];
      var windows = state.series[name] || (state.series[name] = new Map());
      windows.set(t, { v: row[3], w: row[2] }); // a correction or the open window, grown: replaced
      if (state.lastT === null || t > state.lastT) state.lastT = t;
    });
    prune();
  }

  function prune() {
    var oldest = Date.now() - state.range - 2 * state.resolution;
    Object.keys(state.series).forEach(function (name) {
      state.series[name].forEach(function (_, t, map) { if (t < oldest) map.delete(t); });
    });
  }

  function perSecond(kind, point) {
    return kind.indexOf("lag") >= 0 ? point.v : point.v / (point.w / 1000);
  }

  // [{label, kind, parts, points: [[t, value]]}] for the series `pick(kind, parts)` names
  function collect(pick) {
    var out = {}, sparse = {};
    Object.keys(state.series).forEach(function (name) {
      var meta = state.meta[name];
      if (!meta) return;
      var label = pick(meta[0], meta[1]);
      if (label === null || label === undefined) return;
      if (SPARSE_KINDS[meta[0]]) sparse[label] = true;
      var entry = out[label] || (out[label] = new Map());
      state.series[name].forEach(function (point, t) {
        entry.set(t, (entry.get(t) || 0) + perSecond(meta[0], point)); // same label: summed
      });
    });
    return Object.keys(out).sort(byLabel).map(function (label) {
      var ts = Array.from(out[label].keys()).sort(function (a, b) { return a - b; });
      return { label: label, ts: ts, values: ts.map(function (t) { return out[label].get(t); }),
               step: state.resolution, sparse: !!sparse[label] };
    });
  }

  // A series' windows as Plotly x/y: a null after each window whose next one is missing, so a
  // gap (a stopped server, a topic not there yet) is drawn as a gap, not bridged by a line; for
  // a sparse series (`zeros`), the missing windows are zeros instead
  function withGaps(ts, values, step, zeros) {
    var x = [], y = [];
    for (var i = 0; i < ts.length; i++) {
      if (i > 0 && ts[i] - ts[i - 1] > step) {
        if (!zeros) { x.push(ts[i - 1] + step); y.push(null); }
        else for (var t = ts[i - 1] + step; t < ts[i]; t += step) { x.push(t); y.push(0); }
      }
      x.push(ts[i]); y.push(values[i]);
    }
    return { x: x, y: y };
  }

  // The smoothed line: the mean of each window and the (up to) n - 1 before it, restarting after
  // a gap (a null), so a gap stays a gap
  function movingAverage(y, n) {
    var out = [], run = [];
    y.forEach(function (v) {
      if (v === null) { run = []; out.push(null); return; }
      run.push(v);
      if (run.length > n) run.shift();
      out.push(run.reduce(function (a, b) { return a + b; }, 0) / run.length);
    });
    return out;
  }

  // The x axis over the data there is: from the first window (at most the range back) to now,
  // at least two windows (and 10 s) wide
  function xRange(firstT, now, range, step) {
    var start = now - range;
    if (firstT !== null && firstT > start) start = Math.max(now - range, Math.min(firstT, now - Math.max(2 * step, 10000)));
    return [start, now];
  }

  function byLabel(a, b) {
    var total = /^(all topics|total)/;
    if (total.test(a) !== total.test(b)) return total.test(a) ? -1 : 1;
    return a.localeCompare(b, undefined, { numeric: true });
  }

  // Plotly reads pseudo-HTML in names; group ids and panel keys come from users and records
  function plain(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function trace(s, extra) {
    if (s.step) return metricTrace(s, extra);
    return Object.assign({
      type: "scatter", mode: "lines", name: plain(s.label), line: { width: 1.5, shape: "hv" },
      x: s.ts.map(function (t) { return new Date(t); }), y: s.values,
      hovertemplate: "%{y:,.4~r}" // the trace's name shows in the secondary box
    }, extra || {});
  }

  // a live metric: gaps as nulls, a marker only on a window with no neighbour (a line needs
  // two), optionally smoothed
  function metricTrace(s, extra) {
    var xy = withGaps(s.ts, s.values, s.step, s.sparse);
    var y = state.smooth ? movingAverage(xy.y, SMOOTH_WINDOWS) : xy.y;
    var sizes = y.map(function (v, i) {
      var alone = v !== null && (i === 0 || y[i - 1] === null) && (i === y.length - 1 || y[i + 1] === null);
      return alone ? 5 : 0;
    });
    var base = {
      type: "scatter", mode: "lines+markers", name: plain(s.label), connectgaps: false,
      line: { width: 1.5, shape: state.smooth ? "spline" : "linear", smoothing: 0.6 },
      marker: { size: sizes }, x: xy.x.map(function (t) { return new Date(t); }), y: y,
      hovertemplate: "%{y:,.4~r}" + (state.smooth ? " (smoothed)" : "")
    };
    extra = extra || {};
    if (extra.line) extra = Object.assign({}, extra, { line: Object.assign({}, base.line, extra.line) });
    return Object.assign(base, extra);
  }

  function emphasise(s) {
    return /^(all topics|total)/.test(s.label) ? trace(s, { line: { width: 3 } }) : trace(s);
  }

  var CHARTS = {
    records_in: { title: "Records in", unit: "records/s", traces: function () {
      return collect(function (kind, parts) {
        if (kind !== "records_in" || parts.length > 1) return null;
        return parts.length ? parts[0] : "all topics";
      }).map(emphasise);
    } },
    bytes_in: { title: "Bytes in", unit: "bytes/s", traces: function () {
      return collect(function (kind, parts) {
        if (kind !== "bytes_in" || parts.length > 1) return null;
        return parts.length ? parts[0] : "all topics";
      }).map(emphasise);
    } },
    partition_in: { title: "In, per partition", unit: "records/s", traces: function () {
      return collect(function (kind, parts) {
        return kind === "records_in" && parts.length === 2 ? "partition " + parts[1] : null;
      }).map(emphasise);
    } },
    partition_out: { title: "Consumed, per partition", unit: "records/s", traces: function () {
      return collect(function (kind, parts) {
        return kind === "records_out" && parts.length === 2 ? "partition " + parts[1] : null;
      }).map(emphasise);
    } },
    group_lag: { title: "Lag per partition", unit: "records", traces: function () {
      return collect(function (kind, parts) {
        if (kind !== "group_lag") return null;
        return parts.length === 3 ? parts[1] + "-" + parts[2] : "total";
      }).map(emphasise);
    } },
    group_rate: { title: "Consume rate", unit: "records/s", traces: function () {
      return collect(function (kind, parts) {
        if (kind === "group_records") return "consumed (processing time)";
        if (kind === "group_records_et") return "consumed (event time)";
        if (kind === "records_in" && parts.length === 1) return "produced to its topics";
        return null;
      }).map(function (s) {
        var dash = s.label.indexOf("event") >= 0 ? "dot" : s.label.indexOf("produced") >= 0 ? "dash" : "solid";
        return trace(s, { line: { width: 2, dash: dash } });
      });
    } }
  };

  // ------------------------------------------------------------------ time to clear the lag

  function lastMinuteRate(pickKind) {
    var series = collect(function (kind, parts) { return pickKind(kind, parts) ? "x" : null; })[0];
    if (!series || !series.ts.length) return null;
    var end = series.ts[series.ts.length - 1] + state.resolution, sum = 0, span = 0;
    series.ts.forEach(function (t, i) {
      if (t >= end - MINUTE) { sum += series.values[i] * state.resolution / 1000; span += state.resolution; }
    });
    return span ? sum / (span / 1000) : null;
  }

  function duration(seconds) {
    if (seconds < 60) return Math.ceil(seconds) + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min " + Math.round(seconds % 60) + " s";
    if (seconds < 86400) return Math.floor(seconds / 3600) + " h " + Math.round(seconds % 3600 / 60) + " min";
    return Math.round(seconds / 86400) + " d";
  }

  function drawEta() {
    var out = root.querySelector("[data-eta-value]");
    if (!out) return;
    var lag = collect(function (kind, parts) { return kind === "group_lag" && parts.length === 1 ? "t" : null; })[0];
    var consume = lastMinuteRate(function (kind) { return kind === "group_records"; });
    var produce = lastMinuteRate(function (kind, parts) { return kind === "records_in" && parts.length === 1; });
    if (!lag || !lag.values.length || consume === null) { out.textContent = "–"; return; }
    var current = lag.values[lag.values.length - 1];
    out.dataset.lag = current;
    out.textContent = etaText(current, consume, produce || 0);
  }

  // seconds until `lag` records are consumed at the last minute's rates (records/s): 0 when
  // caught up, Infinity when consuming no faster than producing
  function etaSeconds(lag, consumeRate, produceRate) {
    if (lag <= 0) return 0;
    var gain = consumeRate - produceRate;
    return gain <= 0 ? Infinity : lag / gain;
  }

  function etaText(lag, consumeRate, produceRate) {
    var seconds = etaSeconds(lag, consumeRate, produceRate);
    if (seconds === 0) return "caught up";
    if (seconds === Infinity) return "not catching up";
    return "about " + duration(seconds);
  }

  // ------------------------------------------------------------------ drawing

  function colours() {
    var css = getComputedStyle(document.documentElement);
    function v(name, fallback) { return css.getPropertyValue(name).trim() || fallback; }
    return { text: v("--pico-color", "#333"), muted: v("--pico-muted-color", "#777"),
             grid: v("--pico-muted-border-color", "#ddd") };
  }

  function layout(title, unit, xRange, empty) {
    var c = colours();
    var axis = { gridcolor: c.grid, linecolor: c.grid, zerolinecolor: c.grid,
                 tickfont: { color: c.muted }, title: { font: { color: c.muted } } };
    return {
      title: { text: plain(title), font: { size: 14, color: c.text }, x: 0, xanchor: "left" },
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
      font: { color: c.text, family: "system-ui, sans-serif", size: 12 },
      margin: { l: 64, r: 16, t: 36, b: 96 }, height: 330, showlegend: true,
      legend: { orientation: "h", x: 0, y: -0.42, yanchor: "top", font: { color: c.muted } },
      xaxis: Object.assign({}, axis, { type: "date", range: xRange, title: { text: "time (UTC)", font: { color: c.muted } } }),
      yaxis: Object.assign({}, axis, { rangemode: "tozero", title: { text: plain(unit), font: { color: c.muted } } }),
      annotations: empty ? [{ text: "no data yet", showarrow: false, xref: "paper", yref: "paper",
                              x: 0.5, y: 0.5, font: { color: c.muted } }] : []
    };
  }

  function scheduleDraw() {
    if (state.drawPending) return;
    state.drawPending = true;
    window.requestAnimationFrame(function () { state.drawPending = false; draw(); });
  }

  function firstT() {
    var first = null;
    Object.keys(state.series).forEach(function (name) {
      state.series[name].forEach(function (_, t) { if (first === null || t < first) first = t; });
    });
    return first;
  }

  function draw() {
    if (isPanel) { drawPanel(); return; }
    var now = Date.now(), any = false;
    var range = xRange(firstT(), now, state.range, state.resolution).map(function (t) { return new Date(t); });
    root.querySelectorAll("[data-chart]").forEach(function (figure) {
      var chart = CHARTS[figure.dataset.chart];
      var traces = chart.traces();
      var points = traces.reduce(function (n, t) {
        return n + t.y.filter(function (v) { return v !== null; }).length; // gaps are no points
      }, 0);
      figure.dataset.points = points;
      any = any || points > 0;
      window.Plotly.react(figure, traces, layout(chart.title, chart.unit, range, points === 0),
                          { displayModeBar: false, responsive: true });
    });
    if (any) showEmpty(null);
    drawEta();
  }

  function showEmpty(text) {
    var empty = root.querySelector("[data-live-empty]");
    if (!empty) return;
    empty.hidden = !text;
    if (text) empty.textContent = text;
  }

  // ------------------------------------------------------------------ user panels

  function setPanel(update, replace) {
    if (!update) { showEmpty("The broker runs without panel jobs."); return; }
    var panel = state.panel;
    if (replace || !panel) panel = state.panel = { windows: new Map(), corrections: [] };
    update.results.forEach(function (r) {
      var key = r.key === null || r.key === undefined ? "all" : String(r.key);
      (r.replaces || []).forEach(function (bounds) { panel.windows.delete(key + "\u0000" + bounds[0]); });
      panel.windows.set(key + "\u0000" + r.start, r);
      if (r.correction && !replace) panel.corrections.unshift(r);
    });
    panel.corrections = panel.corrections.slice(0, 8);
    panel.stats = update;
    if (update.error) showEmpty("This panel stopped: " + update.error);
    var byStart = Array.from(panel.windows.values()).sort(function (a, b) { return a.start - b.start; });
    while (byStart.length > 2000) panel.windows.delete(keyOf(byStart.shift()));
  }

  function keyOf(r) {
    return (r.key === null || r.key === undefined ? "all" : String(r.key)) + "\u0000" + r.start;
  }

  function resultValue(r) {
    var wanted = root.dataset.aggregation;
    if (r.values && wanted in r.values) return r.values[wanted];
    for (var k in r.values) if (typeof r.values[k] === "number") return r.values[k];
    return null;
  }

  function drawPanel() {
    var panel = state.panel, figure = root.querySelector("[data-chart]");
    if (!panel || !figure) return;
    var keys = {};
    Array.from(panel.windows.values()).sort(function (a, b) { return a.start - b.start; }).forEach(function (r) {
      var key = r.key === null || r.key === undefined ? "all" : String(r.key);
      var s = keys[key] || (keys[key] = { label: key, ts: [], values: [] });
      s.ts.push(r.start); s.values.push(resultValue(r));
    });
    var traces = Object.keys(keys).sort(byLabel).map(function (k) {
      return trace(keys[k], { mode: "lines+markers", marker: { size: 4 } });
    });
    var points = traces.reduce(function (n, t) { return n + t.x.length; }, 0);
    figure.dataset.points = points;
    if (points && !(panel.stats && panel.stats.error)) showEmpty(null);
    // at least 30 windows (and a minute) wide, so a new panel's first points are not alone
    var span = Math.max(30 * Number(root.dataset.sizeMs || 1000), MINUTE), now = Date.now();
    var xRange = [new Date(now - span), new Date(now + Number(root.dataset.sizeMs || 0))];
    window.Plotly.react(figure, traces, layout(root.dataset.title || "", root.dataset.unit || "", xRange, points === 0),
                        { displayModeBar: false, responsive: true });
    drawPanelStats(panel);
  }

  function drawPanelStats(panel) {
    var s = panel.stats || {};
    function put(name, value) {
      var el = root.querySelector('[data-stat="' + name + '"]');
      if (el) el.textContent = value;
    }
    put("watermark", s.watermark === null || s.watermark === undefined || s.watermark < 0 ? "–" : new Date(s.watermark).toISOString().replace("T", " ").slice(0, 23) + " UTC");
    put("late_count", (s.late_count || 0).toLocaleString());
    put("corrections", (s.corrections || 0).toLocaleString());
    put("records_read", (s.records_read || 0).toLocaleString());
    put("parse_errors", (s.parse_errors || 0).toLocaleString());
    var list = root.querySelector("[data-corrections]");
    if (!list || !panel.corrections.length) return;
    list.replaceChildren.apply(list, panel.corrections.map(function (r) {
      var li = document.createElement("li");
      li.textContent = new Date(r.start).toISOString().slice(11, 19) + "–" + new Date(r.end).toISOString().slice(11, 19) +
        (r.key === null || r.key === undefined ? "" : " · " + r.key) + " → " + resultValue(r) + " (revision " + r.revision + ")";
      return li;
    }));
  }

  // ------------------------------------------------------------------ controls

  root.addEventListener("click", function (event) {
    var button = event.target.closest("[data-range]");
    if (!button) return;
    root.querySelectorAll("[data-range]").forEach(function (b) {
      b.setAttribute("aria-pressed", b === button ? "true" : "false");
    });
    state.range = Number(button.dataset.range);
    state.resolution = RANGE_RESOLUTION[state.range] || 1000;
    state.series = {}; state.lastT = null; // a new range: backfilled afresh
    root.dataset.liveRange = state.range;
    showResolution();
    subscribe(null);
    scheduleDraw();
  });

  var smoothToggle = root.querySelector("[data-smooth]");
  if (smoothToggle) smoothToggle.addEventListener("click", function () {
    state.smooth = !state.smooth;
    smoothToggle.setAttribute("aria-pressed", state.smooth ? "true" : "false");
    root.dataset.liveSmooth = state.smooth ? "1" : "";
    scheduleDraw();
  });

  function stepText(ms) {
    return ms < MINUTE ? ms / 1000 + "-second" : ms / MINUTE + "-minute";
  }

  function showResolution() {
    root.dataset.liveResolution = state.resolution;
    var out = root.querySelector("[data-live-step]");
    if (out) out.textContent = stepText(state.resolution) + " windows";
  }

  // the theme toggle flips data-theme on <html>: redraw in the new colours
  new MutationObserver(scheduleDraw).observe(document.documentElement,
                                             { attributes: true, attributeFilter: ["data-theme"] });
  setInterval(function () { if (!document.hidden) scheduleDraw(); }, 5000); // x axis moves on
  root.dataset.liveRange = state.range;
  showResolution();
  connect();
})();
