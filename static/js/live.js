// Live charts and panels: one WebSocket per page (the element with data-live-socket), automatic
// reconnect with backoff (the server fills the gap from the last window we have), pause while the
// tab is hidden (Page Visibility API: the server stops sending, and fills the gap on resume), and
// Plotly charts drawn in the theme's colours. The server's messages: backfill / points (metric
// windows), snapshot / update (a user panel), paused / resumed, unavailable, error; on a job view
// page (scope "view") every message goes to views.js (snapshot / changes / progress).
(function () {
  "use strict";

  // the pure arithmetic, for tests (page.evaluate) and other scripts; set before any early return
  window.TidelogLive = { withGaps: withGaps, movingAverage: movingAverage, xRange: xRange };

  var root = document.querySelector("[data-live-socket]");
  // a job's view (views.js draws its table) needs no charts
  var isView = !!root && root.dataset.liveScope === "view";
  if (!root || root.dataset.liveUnavailable || (!window.Plotly && !isView)) return;

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
    socket.onmessage = function (event) {
      var message = JSON.parse(event.data);
      receive(message);
      // flow control: the server sends a page that does not keep up nothing more until it
      // acknowledges, then the newest state (brokerui/console/live/consumers.py); every
      // ACK_EVERY-th message is acknowledged, with all before it
      if (message.seq && message.seq % message.ack_every === 0 && socket.readyState === WebSocket.OPEN) {
        socket.send(JSON.stringify({ type: "ack", seq: message.seq }));
      }
    };
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
    if (isView) {
      if (message.type === "paused" || message.type === "resumed") return;
      window.TidelogViews.receive(message, root);
      return;
    }
    if (message.type === "backfill" || message.type === "points") addPoints(message);
    else if (message.type === "snapshot") setPanel(message.update, true);
    else if (message.type === "update") setPanel(message.update, false);
    else if (message.type === "unavailable" || message.type === "refused") showEmpty(message.message);
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
      // a correction, or the open window grown: replaced; row[5] 1: not final, its value so far
      windows.set(t, { v: row[3], w: row[2], open: !!row[5] });
      if (state.lastT === null || t > state.lastT) state.lastT = t;
      var meta = state.meta[name];
      if (meta && meta[0] === "end_offset") showEndOffset(meta[1][1], row[3]);
    });
    prune();
  }

  // the topic page's partitions table: each partition's end offset as the socket says it
  function showEndOffset(partition, offset) {
    var row = document.querySelector('tr[data-partition="' + partition + '"][data-end-offset]');
    if (!row || Number(row.dataset.endOffset) >= offset) return;
    row.dataset.endOffset = offset;
    var cell = row.querySelector(".end-offset");
    if (cell) { cell.textContent = Math.round(offset).toLocaleString("en-US"); cell.title = String(offset); }
    // the row's other figures are not pushed: said to be as of the page's load, not left to
    // read as current (a stable offset behind the live end offset would look like an open
    // transaction)
    row.querySelectorAll(".stable-offset, .record-count").forEach(function (other) {
      if (other.classList.contains("as-loaded")) return;
      other.classList.add("as-loaded", "muted");
      other.title = (other.title ? other.title + " · " : "") + "as of the page's load; the end offset is live (refresh for the rest)";
    });
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
    var out = {}, sparse = {}, open = {};
    Object.keys(state.series).forEach(function (name) {
      var meta = state.meta[name];
      if (!meta) return;
      var label = pick(meta[0], meta[1]);
      if (label === null || label === undefined) return;
      if (SPARSE_KINDS[meta[0]]) sparse[label] = true;
      var entry = out[label] || (out[label] = new Map());
      var openOnes = open[label] || (open[label] = {});
      state.series[name].forEach(function (point, t) {
        entry.set(t, (entry.get(t) || 0) + perSecond(meta[0], point)); // same label: summed
        if (point.open) openOnes[t] = true;
      });
    });
    return Object.keys(out).sort(byLabel).map(function (label) {
      var ts = Array.from(out[label].keys()).sort(function (a, b) { return a - b; });
      return { label: label, ts: ts, values: ts.map(function (t) { return out[label].get(t); }),
               open: ts.map(function (t) { return !!open[label][t]; }),
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
  // two), optionally smoothed; a window not final yet (still open: its value so far) an open
  // circle, "not final yet" on hover
  function metricTrace(s, extra) {
    var xy = withGaps(s.ts, s.values, s.step, s.sparse);
    var y = state.smooth ? movingAverage(xy.y, SMOOTH_WINDOWS) : xy.y;
    var openAt = {};
    s.ts.forEach(function (t, i) { if (s.open && s.open[i]) openAt[t] = true; });
    var open = xy.x.map(function (t) { return !!openAt[t]; });
    var sizes = y.map(function (v, i) {
      var alone = v !== null && (i === 0 || y[i - 1] === null) && (i === y.length - 1 || y[i + 1] === null);
      return open[i] ? 7 : alone ? 5 : 0;
    });
    var base = {
      type: "scatter", mode: "lines+markers", name: plain(s.label), connectgaps: false,
      line: { width: 1.5, shape: state.smooth ? "spline" : "linear", smoothing: 0.6 },
      marker: { size: sizes, symbol: open.map(function (o) { return o ? "circle-open" : "circle"; }) },
      x: xy.x.map(function (t) { return new Date(t); }), y: y,
      customdata: open.map(function (o) { return o ? " · not final yet" : ""; }),
      meta: { open: open.filter(Boolean).length },
      hovertemplate: "%{y:,.4~r}%{customdata}" + (state.smooth ? " (smoothed)" : "")
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
    // the jobs page (scope "jobs"): each job's records read (its group's commits: inputs and
    // repartition topics) and the records written to each job's output topics
    job_in: { title: "Read, per job", unit: "records/s", traces: function () {
      return collect(function (kind, parts) {
        return kind === "group_records" && parts.length === 1 ? parts[0] : null;
      }).map(emphasise);
    } },
    job_out: { title: "Written, per output topic", unit: "records/s", traces: function () {
      return collect(function (kind, parts) {
        return kind === "records_in" && parts.length === 1 ? parts[0] : null;
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
      annotations: empty ? [{ text: typeof empty === "string" ? empty : "no data yet", showarrow: false, xref: "paper", yref: "paper",
                              x: 0.5, y: 0.5, font: { color: c.muted } }] : []
    };
  }

  function scheduleDraw() {
    if (state.drawPending) return;
    state.drawPending = true;
    window.requestAnimationFrame(function () { state.drawPending = false; draw(); });
  }

  function emptyText() {
    return state.resolution < MINUTE ? "no data yet"
      : "no data yet: drawn from 1-minute rollups, the first one closes at the end of a minute";
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
      window.Plotly.react(figure, traces, layout(chart.title, chart.unit, range, points === 0 && emptyText()),
                          { displayModeBar: false, responsive: true });
    });
    if (any) showEmpty(null);
  }

  function showEmpty(text) {
    var empty = root.querySelector("[data-live-empty]");
    if (!empty) return;
    empty.hidden = !text;
    if (text) empty.textContent = text;
  }

  // ------------------------------------------------------------------ user panels

  // the job's logs: an update's are new, a snapshot's all it keeps (the page shows as many)
  var KEPT = 200;

  function setPanel(update, replace) {
    if (!update) { showEmpty("The broker runs without panel jobs."); return; }
    var panel = state.panel;
    if (replace || !panel) panel = state.panel = { windows: new Map(), corrections: new Map(), late: new Map() };
    update.results.forEach(function (r) {
      var key = r.key === null || r.key === undefined ? "all" : String(r.key);
      (r.replaces || []).forEach(function (bounds) { panel.windows.delete(key + "\u0000" + bounds[0]); });
      panel.windows.set(key + "\u0000" + r.start, r);
    });
    // by number: an update that overlaps the snapshot adds nothing twice
    (update.correction_log || []).forEach(function (c) { panel.corrections.set(c.seq, c); });
    (update.late_log || []).forEach(function (e) {
      panel.late.set([e.event_time, e.partition, e.key, e.watermark].join("\u0000"), e);
    });
    trimOldest(panel.corrections, KEPT);
    trimOldest(panel.late, KEPT);
    panel.stats = update;
    if (update.error) showEmpty("This panel stopped: " + update.error);
    var byStart = Array.from(panel.windows.values()).sort(function (a, b) { return a.start - b.start; });
    while (byStart.length > 2000) panel.windows.delete(keyOf(byStart.shift()));
  }

  function trimOldest(map, keep) {
    var excess = map.size - keep;
    map.forEach(function (_, k) { if (excess-- > 0) map.delete(k); }); // in insertion order
  }

  function keyOf(r) {
    return (r.key === null || r.key === undefined ? "all" : String(r.key)) + "\u0000" + r.start;
  }

  function drawPanel() {
    var panel = state.panel, figure = root.querySelector("[data-chart]");
    if (!panel || !figure || !window.TidelogPanels) return;
    var drawn = window.TidelogPanels.figure({ windows: panel.windows, late: Array.from(panel.late.values()),
                                              stats: panel.stats },
                                            { aggregation: root.dataset.aggregation, colours: colours(),
                                              sizeMs: Number(root.dataset.sizeMs || 1000), now: Date.now() });
    figure.dataset.points = drawn.windows;
    figure.dataset.watermark = panel.stats && panel.stats.watermark !== null ? panel.stats.watermark : "";
    if (drawn.windows && !(panel.stats && panel.stats.error)) showEmpty(null);
    var look = layout(root.dataset.title || "", root.dataset.unit || "", drawn.xRange, drawn.windows === 0);
    look.shapes = drawn.shapes;
    look.annotations = look.annotations.concat(drawn.annotations);
    look.margin.t = 48; // room for the watermark's label above the plot
    window.Plotly.react(figure, drawn.traces, look, { displayModeBar: false, responsive: true });
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
    var grouped = Boolean(root.dataset.groupBy), aggregation = root.dataset.aggregation;
    fillList("corrections", s.corrections, Array.from(panel.corrections.values()).reverse(), function (c) {
      return window.TidelogPanels.correctionText(c, aggregation, grouped);
    });
    fillList("late", s.late_count, Array.from(panel.late.values()).reverse(), function (e) {
      return window.TidelogPanels.lateText(e, grouped);
    });
  }

  // a list of the job's latest corrections or late events, newest first, with "(the latest n
  // of m)" when the counter counts more than the job keeps
  function fillList(name, total, items, text) {
    var list = root.querySelector(name === "late" ? "[data-late-events]" : "[data-corrections]");
    var note = root.querySelector("[data-" + name + "-note]");
    if (!list) return;
    total = total || 0;
    if (note) note.textContent = items.length < total ? "(the latest " + items.length + " of " + total.toLocaleString() + ")" : "";
    list.dataset.count = items.length;
    if (!items.length) return;
    list.replaceChildren.apply(list, items.map(function (item) {
      var li = document.createElement("li");
      li.textContent = text(item);
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
