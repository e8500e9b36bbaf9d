// A job's view, live: the table built from the /ws/views/ stream (live.js owns the socket and
// hands every message of a "view" scope here). The stream is Materialize's SUBSCRIBE shape:
// "snapshot" (every row at a time), "changes" ([time, diff, key, row]: an update is -1 old row,
// +1 new row) and "progress" (complete below that time; the offsets and watermark it reflects).
(function () {
  "use strict";

  var MAX_SHOWN = 500; // rows drawn; the rest are counted
  var state = { rows: new Map(), changed: new Map(), progress: null, consistency: null, asOf: null };

  // the server's key order (streams/jobs/views.py `order`): null < numbers < strings < lists
  function rank(k) {
    if (k === null) return 0;
    if (typeof k === "boolean" || typeof k === "number") return 1;
    if (typeof k === "string") return 2;
    return 3;
  }
  function compare(a, b) {
    var ra = rank(a), rb = rank(b);
    if (ra !== rb) return ra - rb;
    if (ra === 3) {
      for (var i = 0; i < Math.min(a.length, b.length); i++) {
        var c = compare(a[i], b[i]);
        if (c) return c;
      }
      return a.length - b.length;
    }
    if (ra === 0) return 0;
    var x = ra === 1 ? Number(a) : a, y = ra === 1 ? Number(b) : b;
    return x < y ? -1 : x > y ? 1 : 0;
  }

  // pure: apply SUBSCRIBE changes to a Map of JSON key -> {key, row}; throws on a diff that
  // does not fit (a retraction of a row that is not there)
  function apply(rows, changes) {
    changes.forEach(function (c) {
      var id = JSON.stringify(c[2]);
      if (c[1] < 0) {
        if (!rows.has(id)) throw new Error("retraction of a missing row " + id);
        rows.delete(id);
      } else {
        rows.set(id, { key: c[2], row: c[3] });
      }
    });
    return rows;
  }

  function receive(message, root) {
    if (message.type === "snapshot") {
      state.rows = new Map();
      message.rows.forEach(function (kr) { state.rows.set(JSON.stringify(kr[0]), { key: kr[0], row: kr[1] }); });
      state.changed = new Map();
      setProgress(message);
    } else if (message.type === "changes") {
      apply(state.rows, message.changes);
      var now = Date.now();
      message.changes.forEach(function (c) { if (c[1] > 0) state.changed.set(JSON.stringify(c[2]), now); });
    } else if (message.type === "progress") {
      setProgress(message);
    } else if (message.type === "unavailable" || message.type === "error") {
      var empty = root.querySelector("[data-live-empty]");
      empty.hidden = false;
      empty.textContent = message.message;
      var indicator = root.querySelector(".live-indicator");
      if (indicator && message.type === "unavailable") {
        indicator.dataset.liveState = "stale";
        indicator.textContent = "stopped";
      }
      return;
    } else {
      return;
    }
    draw(root);
  }

  function setProgress(message) {
    state.progress = message.progress;
    state.consistency = message.consistency;
  }

  function text(value) {
    if (value === undefined) return "";
    // sums of decimals: 824.9, not 824.9000000000001 (as the query table, 12 digits)
    if (typeof value === "number" && !Number.isInteger(value)) return String(parseFloat(value.toPrecision(12)));
    return JSON.stringify(value);
  }

  // a windowed view's bounds (ms since the epoch) are shown as UTC times
  var BOUNDS = { start: true, end: true };

  function draw(root) {
    var table = root.querySelector("[data-view-table]");
    var windowed = root.dataset.windowed === "1";
    var entries = Array.from(state.rows.values()).sort(function (a, b) { return compare(a.key, b.key); });
    var columns = [];
    entries.forEach(function (e) {
      var fields = e.row !== null && typeof e.row === "object" && !Array.isArray(e.row) ? Object.keys(e.row) : ["value"];
      fields.forEach(function (f) { if (columns.indexOf(f) < 0) columns.push(f); });
    });
    var head = document.createElement("tr");
    ["key"].concat(columns).forEach(function (c, i) {
      var th = document.createElement("th");
      th.scope = "col";
      th.textContent = i === 0 ? "Key" : windowed && BOUNDS[c] ? c + " (UTC)" : c;
      if (i) th.className = "mono";
      head.appendChild(th);
    });
    table.tHead.replaceChildren(head);
    var now = Date.now();
    var body = document.createElement("tbody");
    entries.slice(0, MAX_SHOWN).forEach(function (e) {
      var id = JSON.stringify(e.key);
      var tr = document.createElement("tr");
      tr.dataset.key = id;
      var changedAt = state.changed.get(id);
      if (changedAt && now - changedAt < 3000) tr.className = "view-changed";
      var row = e.row !== null && typeof e.row === "object" && !Array.isArray(e.row) ? e.row : { value: e.row };
      var cells = columns.map(function (c) {
        return windowed && BOUNDS[c] && typeof row[c] === "number" ? utc(row[c]) : text(row[c]);
      });
      [id].concat(cells).forEach(function (v, i) {
        var td = document.createElement("td");
        td.className = i ? "mono num" : "mono";
        td.textContent = v;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.tBodies[0].replaceWith(body);
    var empty = root.querySelector("[data-live-empty]");
    empty.hidden = entries.length > 0;
    var line = root.querySelector("[data-view-progress]");
    var c = state.consistency || { offsets: {}, watermark_ms: null, as_of_ms: null };
    var offsets = Object.keys(c.offsets).sort().map(function (t) {
      var parts = c.offsets[t];
      return t + " " + Object.keys(parts).map(function (p) { return p + ":" + parts[p]; }).join(", ");
    }).join("; ");
    var shown = entries.length > MAX_SHOWN ? " (first " + MAX_SHOWN + " shown)" : "";
    line.textContent = entries.length + " rows" + shown + " · complete up to " + utc(state.progress) +
      " UTC · reflects input offsets " + (offsets || "none yet") +
      " · watermark " + (c.watermark_ms === null ? "none yet" : utc(c.watermark_ms) + " UTC") +
      " · as of " + utc(c.as_of_ms) + " UTC";
    line.dataset.progress = state.progress;
  }

  function utc(ms) {
    if (ms === null || ms === undefined) return "–";
    return new Date(ms).toISOString().replace("T", " ").slice(0, 23);
  }

  window.TidelogViews = { receive: receive, apply: apply, compare: compare, state: state };
})();
