// A saved search's page: its matches arrive over the live WebSocket (/ws/searches/<id>/, the
// consumers of brokerui/console/live): a snapshot of the newest, then each new batch, newest
// first. Reconnects with backoff (the snapshot replaces the table), pauses while the tab is
// hidden (the server stops sending and sends a fresh snapshot on resume).
(function () {
  "use strict";
  var root = document.querySelector("[data-search-socket]");
  if (!root) return;
  var MAX_ROWS = 200;
  var tbody = root.querySelector("#matches tbody");
  var empty = root.querySelector("#no-matches");
  var count = document.getElementById("match-count");
  var indicator = root.querySelector(".live-indicator");
  var state = { socket: null, backoff: 1000 };

  function setIndicator(name, text) {
    indicator.dataset.liveState = name;
    indicator.textContent = text || name;
  }

  function send(message) {
    if (state.socket && state.socket.readyState === WebSocket.OPEN) {
      state.socket.send(JSON.stringify(message));
    }
  }

  function utc(ms) {
    return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
  }

  function cell(text, small) {
    var td = document.createElement("td");
    td.className = "mono";
    if (small) {
      var s = document.createElement("small");
      s.textContent = text;
      td.appendChild(s);
    } else {
      td.textContent = text;
    }
    return td;
  }

  function row(m) {
    var tr = document.createElement("tr");
    tr.dataset.offset = m.partition + "-" + m.offset;
    tr.appendChild(cell(utc(m.ts), true));
    tr.appendChild(cell(m.key === null || m.key === undefined ? "" : String(m.key), false));
    tr.appendChild(cell(m.event_json, true));
    return tr;
  }

  function add(matches, replace) {
    if (replace) tbody.textContent = "";
    matches.forEach(function (m) {
      if (tbody.querySelector('tr[data-offset="' + m.partition + "-" + m.offset + '"]')) return;
      tbody.insertBefore(row(m), tbody.firstChild);
    });
    while (tbody.rows.length > MAX_ROWS) tbody.deleteRow(tbody.rows.length - 1);
    empty.hidden = tbody.rows.length > 0;
    count.textContent = String(tbody.rows.length);
  }

  function receive(message) {
    if (message.type === "snapshot") add(message.matches, true);
    else if (message.type === "matches") add(message.matches, false);
    else if (message.type === "unavailable" || message.type === "refused") setIndicator("stale", message.message);
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + root.dataset.searchSocket);
    state.socket = socket;
    socket.onopen = function () {
      state.backoff = 1000;
      send({ type: "subscribe" });
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
      setTimeout(connect, state.backoff);
      state.backoff = Math.min(state.backoff * 2, 30000);
    };
  }

  function pause() {
    send({ type: "pause" });
    setIndicator("paused");
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) pause();
    else {
      send({ type: "resume" });
      if (state.socket) setIndicator("live");
    }
  });

  connect();
})();
