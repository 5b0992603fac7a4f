// Progressive enhancement only: every page works without this script.
"use strict";
document.addEventListener("click", function (e) {
  var b = e.target.closest("[data-copy]");
  if (!b) return;
  var el = document.getElementById(b.getAttribute("data-copy"));
  if (!el || !navigator.clipboard) return;
  navigator.clipboard.writeText(el.textContent.trim()).then(function () {
    b.textContent = "Copied";
  });
});
document.addEventListener("submit", function (e) {
  var f = e.target;
  var msg = f.getAttribute("data-confirm");
  if (msg && !window.confirm(msg)) e.preventDefault();
});
