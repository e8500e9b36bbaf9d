// Behaviour shared by the console's pages, attached by data attributes: the
// Content-Security-Policy runs scripts from /static/ only (no inline handlers, no eval, so no
// htmx trigger filters either).
(function () {
  "use strict";

  // <form data-confirm="Question?">: ask before sending (destructive actions)
  document.addEventListener("submit", function (event) {
    var form = event.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
  });

  // <input data-select-on-focus>: a value to copy (a new API token)
  document.addEventListener("focusin", function (event) {
    if (event.target.matches && event.target.matches("[data-select-on-focus]")) event.target.select();
  });

  // <button data-duration="PT1H"> in a form: fills its `duration` field (offset reset presets)
  document.addEventListener("click", function (event) {
    var preset = event.target.closest("button[data-duration]");
    if (preset && preset.form) preset.form.elements.duration.value = preset.dataset.duration;
  });

  // <input data-expected="name" data-enables="button-id">: the button stays disabled until the
  // input holds exactly the expected text (typed-name confirmations)
  function syncExpected(input) {
    var button = document.getElementById(input.dataset.enables);
    if (button) button.disabled = input.value.trim() !== input.dataset.expected;
  }
  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches("[data-expected][data-enables]")) {
      syncExpected(event.target);
    }
  });
  function init() {
    document.querySelectorAll("[data-expected][data-enables]").forEach(syncExpected);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();

  // hx-trigger="every 10s" data-poll-visible-only: no refresh while the tab is hidden
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (document.visibilityState !== "visible" && elt.hasAttribute("data-poll-visible-only")) {
      event.preventDefault();
    }
  });
})();
