// Message browser: the live tail. Switched on, the page asks /ws/tail/ to say when the topic
// has records past its position, then fetches them as the page's own rows (the same query,
// masking and display mode: console:messages_tail) and asks again from the new position. One
// question at a time: a paused or slow page is sent nothing and costs the server nothing; one
// that fell far behind is moved to the newest records and told how many it skipped. The page
// keeps at most data-max-rows rows, dropping the oldest.
(function () {
  "use strict";

  var root = document.getElementById("live-tail");
  var body = document.getElementById("record-rows");
  if (!root || !body || !window.WebSocket || !window.fetch) return;
  var button = root.querySelector("[data-tail-toggle]");
  var status = root.querySelector("[data-tail-status]");
  var maxRows = parseInt(root.dataset.maxRows, 10) || 500;
  var newestFirst = root.dataset.order === "desc";
  var state = { on: false, cursor: root.dataset.tailStart || null, socket: null, added: 0, skipped: 0 };

  function say(text) {
    status.textContent = text;
  }

  function summary() {
    var parts = ["live"];
    parts.push(state.added.toLocaleString() + " new record" + (state.added === 1 ? "" : "s"));
    if (state.skipped) {
      parts.push("skipped " + state.skipped.toLocaleString() + " (fell behind; showing the newest)");
    }
    return parts.join(" · ");
  }

  function subscribe() {
    var s = state.socket;
    if (!state.on || !s || s.readyState !== WebSocket.OPEN) return;
    if (!state.cursor) {
      fetchRows(); // the position now, from the server
      return;
    }
    s.send(JSON.stringify({ type: "subscribe", topic: root.dataset.topic, after: state.cursor,
                            cluster: root.dataset.cluster || null }));
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + root.dataset.tailSocket);
    socket.onopen = subscribe;
    socket.onmessage = function (event) {
      var message = JSON.parse(event.data);
      if (message.type === "ready") {
        if (message.after === state.cursor) fetchRows();
      } else if (["refused", "unavailable", "error"].indexOf(message.type) >= 0) {
        stop();
        say(message.message);
      }
    };
    socket.onclose = function () {
      if (state.socket !== socket) return;
      state.socket = null;
      if (state.on) {
        say("connection lost; trying again");
        setTimeout(function () {
          if (state.on && !state.socket) state.socket = connect();
        }, 1000);
      }
    };
    return socket;
  }

  function fetchRows() {
    var url = root.dataset.tailUrl + (state.cursor ? "&after=" + encodeURIComponent(state.cursor) : "");
    fetch(url, { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          return response.text().then(function (text) {
            throw new Error(text || response.statusText);
          });
        }
        var next = response.headers.get("X-Tail-Cursor");
        var count = parseInt(response.headers.get("X-Tail-Count") || "0", 10);
        var skipped = parseInt(response.headers.get("X-Tail-Skipped") || "0", 10);
        return response.text().then(function (html) {
          if (!state.on) return;
          if (state.cursor) insert(html, count);
          state.skipped += skipped;
          state.cursor = next;
          say(summary());
          subscribe();
        });
      })
      .catch(function (error) {
        stop();
        say("stopped: " + error.message);
      });
  }

  function insert(html, count) {
    if (!count) return;
    var template = document.createElement("template");
    template.innerHTML = html;
    var rows = Array.prototype.slice.call(template.content.querySelectorAll("tr"));
    var fragment = document.createDocumentFragment();
    rows.forEach(function (tr) {
      tr.classList.add("tail-new");
      fragment.appendChild(tr);
    });
    var empty = body.querySelector("tr.empty");
    if (newestFirst) body.insertBefore(fragment, body.firstChild);
    else body.insertBefore(fragment, empty);
    if (empty) empty.hidden = true;
    state.added += count;
    var all = body.querySelectorAll("tr:not(.empty)");
    for (var i = all.length - 1; i >= maxRows; i--) {
      // the oldest rows go: at the bottom of a newest-first page, at the top of the other
      (newestFirst ? all[i] : all[all.length - 1 - i]).remove();
    }
  }

  function start() {
    state.on = true;
    button.setAttribute("aria-pressed", "true");
    button.textContent = "Pause";
    say(state.added ? summary() : "live · waiting for new records");
    if (state.socket && state.socket.readyState === WebSocket.OPEN) subscribe();
    else if (!state.socket) state.socket = connect();
  }

  function stop() {
    state.on = false;
    button.setAttribute("aria-pressed", "false");
    button.textContent = state.added || state.cursor ? "Resume" : "Live tail";
    if (state.socket && state.socket.readyState === WebSocket.OPEN) {
      state.socket.send(JSON.stringify({ type: "pause" }));
    }
    say(state.added ? "paused · " + state.added.toLocaleString() + " new shown" : "paused");
  }

  button.addEventListener("click", function () {
    if (state.on) stop();
    else start();
  });
})();
