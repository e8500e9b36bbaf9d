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

  // <button data-nav-toggle> in <header data-nav>: opens and closes the menu of narrow windows
  // (the header's data-nav-open shows it, see tidelog.css); Escape closes it
  function setNavOpen(header, open) {
    var button = header.querySelector("[data-nav-toggle]");
    if (open) header.setAttribute("data-nav-open", "");
    else header.removeAttribute("data-nav-open");
    if (button) button.setAttribute("aria-expanded", open ? "true" : "false");
  }
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest("[data-nav-toggle]");
    if (!toggle) return;
    var header = toggle.closest("[data-nav]");
    if (header) setNavOpen(header, !header.hasAttribute("data-nav-open"));
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    // an open dropdown of the top bar (<details data-nav-dropdown>) closes first
    var dropdown = document.querySelector("details[data-nav-dropdown][open]");
    if (dropdown) {
      dropdown.open = false;
      dropdown.querySelector("summary").focus();
      return;
    }
    var header = document.querySelector("[data-nav][data-nav-open]");
    if (!header) return;
    setNavOpen(header, false);
    var button = header.querySelector("[data-nav-toggle]");
    if (button) button.focus();
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

  // a polled region's <details data-keep-open="id"> stay as the user left them across swaps
  var openDetails = {};
  document.addEventListener("htmx:beforeSwap", function (event) {
    event.detail.target.querySelectorAll("details[data-keep-open]").forEach(function (d) {
      openDetails[d.dataset.keepOpen] = d.open;
    });
  });
  document.addEventListener("htmx:afterSwap", function () {
    document.querySelectorAll("details[data-keep-open]").forEach(function (d) {
      if (openDetails[d.dataset.keepOpen] !== undefined) d.open = openDetails[d.dataset.keepOpen];
    });
  });
})();
