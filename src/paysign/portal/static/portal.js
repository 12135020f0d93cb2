// The portal's only script: copy buttons and "select all" boxes. Served from the portal itself
// ('self' is the only script source the CSP allows, never inline). The pages work without it:
// the controls start hidden, the text they copy is shown and selectable, and each checkbox can
// be ticked by hand.
"use strict";

document.querySelectorAll("button[data-copy]").forEach(function (button) {
  var source = document.getElementById(button.getAttribute("data-copy"));
  var status = document.getElementById(button.getAttribute("data-status"));
  // The clipboard API exists only in a secure context (https, or http on localhost).
  if (!source || !navigator.clipboard) {
    return;
  }
  button.hidden = false;
  button.addEventListener("click", function () {
    // A grouped secret is shown with spaces for the eye; it is copied without them.
    var text = source.textContent.trim();
    if (button.hasAttribute("data-copy-compact")) { text = text.replace(/\s+/g, ""); }
    navigator.clipboard.writeText(text).then(
      function () {
        if (status) { status.textContent = "Copied."; }
      },
      function () {
        // Denied (a browser setting): select the text so one keystroke copies it instead.
        var range = document.createRange();
        range.selectNodeContents(source);
        var selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        if (status) { status.textContent = "Could not copy: the text is selected, copy it with Ctrl+C."; }
      }
    );
  });
});

// A "select all" box ticks (or clears) every checkbox of the form it names.
document.querySelectorAll("input[data-select-all]").forEach(function (all) {
  var selector = 'input[type="checkbox"][form="' + all.getAttribute("data-select-all") + '"]';
  all.hidden = false;
  all.addEventListener("change", function () {
    document.querySelectorAll(selector).forEach(function (box) { box.checked = all.checked; });
  });
});
