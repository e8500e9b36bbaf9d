// Message browser: remove a filter row, stop an automatic "continue scanning".
(function () {
  "use strict";

  document.addEventListener("click", function (event) {
    var remove = event.target.closest("[data-remove-filter]");
    if (remove) {
      remove.closest(".filter-row").remove();
      return;
    }
    var stop = event.target.closest("[data-stop-scan]");
    if (stop) {
      var more = stop.closest("#browse-more");
      more.classList.add("stopped");
      var progress = document.getElementById("browse-progress");
      if (progress) progress.classList.add("stopped");
      if (window.htmx) window.htmx.trigger(more, "htmx:abort");
    }
  });

  // a stopped continuation must not start a request that was already scheduled
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (elt.id === "browse-more" && elt.classList.contains("stopped")) event.preventDefault();
  });
})();
