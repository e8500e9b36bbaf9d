// A user panel's figure and corrections, as pure functions of the panel's state (live.js keeps
// the state from the socket's snapshot and updates, and draws what these return):
// - each window a flat segment over [start, end) with a marker in its middle: final windows solid
//   with filled markers, windows not final yet (open, or still correctable within the allowed
//   lateness) dotted with hollow markers, one colour per key;
// - the watermark a dashed vertical line, labelled, with the time right of it shaded;
// - late events (dropped) as crosses on the time axis at their event time;
// - corrections as "old → new" lines, newest first, numbered as the job counts them.
(function () {
  "use strict";

  var COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf"];
  var LATE_COLOUR = "#d62728";

  function keyOf(r) {
    return r.key === null || r.key === undefined ? "all" : String(r.key);
  }

  // the number a result's values hold for `aggregation` (or the first number there is)
  function valueOf(values, aggregation) {
    if (!values) return null;
    if (aggregation in values) return values[aggregation];
    for (var k in values) if (typeof values[k] === "number") return values[k];
    return null;
  }

  // Plotly reads pseudo-HTML in names; keys come from records
  function plain(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function hhmmss(ms) {
    return new Date(ms).toISOString().slice(11, 19);
  }

  function number(v) {
    if (v === null || v === undefined) return "–";
    return typeof v === "number" ? v.toLocaleString(undefined, { maximumFractionDigits: 4 }) : String(v);
  }

  // one trace of windows: x/y segments [start, middle, end, gap], a marker in the middle only
  function windowTrace(key, windows, final, colour, aggregation) {
    var x = [], y = [], size = [], custom = [];
    windows.forEach(function (r) {
      var v = valueOf(r.values, aggregation);
      [r.start, (r.start + r.end) / 2, r.end].forEach(function (t, i) {
        x.push(new Date(t)); y.push(v); size.push(i === 1 ? (final ? 6 : 8) : 0);
        custom.push([r.start, r.end, r.revision, final ? "final" : "open"]);
      });
      x.push(null); y.push(null); size.push(0); custom.push(null);
    });
    return {
      type: "scatter", mode: "lines+markers", x: x, y: y, customdata: custom,
      name: plain(key) + (final ? "" : " (not final)"), legendgroup: plain(key),
      meta: { key: key, state: final ? "final" : "open", windows: windows.length },
      line: { color: colour, width: final ? 2.5 : 2, dash: final ? "solid" : "dot" },
      marker: { color: colour, size: size, symbol: final ? "circle" : "circle-open",
                line: { color: colour, width: 2 } },
      connectgaps: false,
      hovertemplate: "%{y:,.4~r} · " + (final ? "final" : "not final yet") +
        " (revision %{customdata[2]})<extra>" + plain(key) + "</extra>"
    };
  }

  // [from, to] (ms): over the data there is (windows, late events, the watermark) with a window
  // to spare each side, at least 10 windows wide; without data the last `fallback` ms to now
  function xRange(results, late, wm, size, now, fallback) {
    var lo = Infinity, hi = -Infinity;
    results.forEach(function (r) { lo = Math.min(lo, r.start); hi = Math.max(hi, r.end); });
    late.forEach(function (e) { lo = Math.min(lo, e.event_time); hi = Math.max(hi, e.event_time); });
    if (wm !== null && wm !== undefined && wm >= 0) { lo = Math.min(lo, wm); hi = Math.max(hi, wm); }
    if (!isFinite(lo)) return [now - fallback, now + size];
    lo -= size; hi += size;
    return [Math.min(lo, hi - 10 * size), hi];
  }

  // {traces, shapes, annotations, windows, xRange}: `panel` = {windows: Map|[] of latest
  // results, late: [late events], stats: {watermark}}; opts = {aggregation, sizeMs, now (ms),
  // colours {muted}}
  function figure(panel, opts) {
    var aggregation = opts.aggregation, muted = (opts.colours || {}).muted || "#777";
    var results = Array.from(panel.windows.values ? panel.windows.values() : panel.windows);
    results.sort(function (a, b) { return a.start - b.start || a.end - b.end; });
    var byKey = {};
    results.forEach(function (r) {
      var k = keyOf(r), entry = byKey[k] || (byKey[k] = { final: [], open: [] });
      (r.final ? entry.final : entry.open).push(r);
    });
    var traces = [];
    Object.keys(byKey).sort(function (a, b) {
      return a.localeCompare(b, undefined, { numeric: true });
    }).forEach(function (k, i) {
      var colour = COLOURS[i % COLOURS.length];
      if (byKey[k].final.length) traces.push(windowTrace(k, byKey[k].final, true, colour, aggregation));
      if (byKey[k].open.length) traces.push(windowTrace(k, byKey[k].open, false, colour, aggregation));
    });
    var late = panel.late || [];
    if (late.length) {
      traces.push({
        type: "scatter", mode: "markers", name: "late events (dropped)", cliponaxis: false,
        meta: { state: "late", events: late.length },
        x: late.map(function (e) { return new Date(e.event_time); }),
        y: late.map(function () { return 0; }),
        customdata: late.map(function (e) {
          return [keyOf(e), number(e.value), e.watermark === null ? "–" : duration(e.watermark - e.event_time)];
        }),
        marker: { symbol: "x-thin", size: 11, color: LATE_COLOUR, line: { color: LATE_COLOUR, width: 2 } },
        hovertemplate: "late event at %{x|%H:%M:%S.%L} (%{customdata[0]}, value %{customdata[1]}), " +
          "%{customdata[2]} behind the watermark: dropped<extra></extra>"
      });
    }
    var shapes = [], annotations = [], wm = (panel.stats || {}).watermark;
    var size = opts.sizeMs || 1000, now = opts.now || Date.now();
    var range = xRange(results, late, wm, size, now, Math.max(30 * size, 60000));
    if (wm !== null && wm !== undefined && wm >= 0) {
      var end = Math.max(range[1], wm);
      shapes.push({ type: "rect", name: "not final yet", xref: "x", yref: "paper", layer: "below",
                    x0: new Date(wm), x1: new Date(end), y0: 0, y1: 1, line: { width: 0 },
                    fillcolor: "rgba(127,127,127,0.10)" });
      shapes.push({ type: "line", name: "watermark", xref: "x", yref: "paper", x0: new Date(wm),
                    x1: new Date(wm), y0: 0, y1: 1, line: { color: muted, width: 2, dash: "dash" } });
      annotations.push({ text: "watermark " + hhmmss(wm), xref: "x", yref: "paper", x: new Date(wm),
                         y: 1, yanchor: "bottom", xanchor: "right", showarrow: false,
                         font: { color: muted, size: 11 } });
    }
    return { traces: traces, shapes: shapes, annotations: annotations, windows: results.length,
             xRange: [new Date(range[0]), new Date(range[1])] };
  }

  function duration(ms) {
    var s = ms / 1000;
    return s < 60 ? s.toFixed(s < 10 ? 1 : 0) + " s" : Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  }

  // "#3 12:00:00–12:00:10 · DE: 1 → 5 (revision 1)" (the key only for a grouped panel)
  function correctionText(c, aggregation, grouped) {
    var old = c.old ? number(valueOf(c.old, aggregation)) : "(not held any more)";
    return "#" + c.seq + " " + hhmmss(c.start) + "–" + hhmmss(c.end) +
      (grouped ? " · " + keyOf(c) : "") + ": " + old + " → " +
      number(valueOf(c.new, aggregation)) + " (revision " + c.revision + ")";
  }

  // "12:00:03.250 · value 16 · 17.0 s behind the watermark" (the key only for a grouped panel)
  function lateText(e, grouped) {
    return new Date(e.event_time).toISOString().slice(11, 23) + (grouped ? " · " + keyOf(e) : "") +
      (e.value === null || e.value === undefined ? "" : " · value " + number(e.value)) +
      (e.watermark === null || e.watermark === undefined ? "" :
        " · " + duration(e.watermark - e.event_time) + " behind the watermark");
  }

  window.TidelogPanels = { figure: figure, correctionText: correctionText, lateText: lateText,
                           valueOf: valueOf };
})();
