// Behaviour shared by the console's pages, attached by data attributes (no inline handlers:
// the Content-Security-Policy allows scripts from /static/ only).
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
})();
