// The Schemas pages (templates/console/schemas): <button data-copy="id"> copies the text of the
// element with that id (the registry client snippet), and says so on the button for a moment.
(function () {
  "use strict";

  function copied(button, text) {
    var label = button.textContent;
    button.textContent = text;
    window.setTimeout(function () { button.textContent = label; }, 1500);
  }

  function fallbackCopy(source) {
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    return ok;
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.dataset.copy);
    if (!source) return;
    var text = source.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { copied(button, "Copied"); },
        function () { copied(button, fallbackCopy(source) ? "Copied" : "Select and copy"); }
      );
    } else {
      copied(button, fallbackCopy(source) ? "Copied" : "Select and copy");
    }
  });
})();
