// triggerd console: the only script the pages load (the
// Content-Security-Policy allows no other). It refreshes live regions and
// shows the trigger form's parameters for the chosen kind.
"use strict";

(function () {
  // Live regions: elements with data-live and an id are refreshed from
  // the same URL every few seconds while the tab is visible. Only their
  // content changes, so the filters (in the URL) and the scroll position
  // stay as they are.
  var LIVE_MS = 3000;
  var timer = null;
  function signedOut() {
    window.clearInterval(timer);
    var main = document.querySelector("main");
    if (main && !document.getElementById("signed-out")) {
      var p = document.createElement("p");
      p.id = "signed-out";
      p.className = "note";
      p.textContent = "This session has ended: reload the page to sign in again.";
      main.insertBefore(p, main.firstChild);
    }
  }
  function refresh() {
    var regions = document.querySelectorAll("[data-live][id]");
    if (regions.length === 0 || document.visibilityState !== "visible") {
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Console-Fragment": "live" } })
      .then(function (res) {
        if (res.status === 204 && res.headers.get("X-Console-Signed-Out")) {
          signedOut();
          return null;
        }
        if (!res.ok) { throw new Error("HTTP " + res.status); }
        return res.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        regions.forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          if (fresh && fresh.innerHTML !== el.innerHTML) {
            el.innerHTML = fresh.innerHTML;
          }
        });
        document.documentElement.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* offline or signed out: the next tick tries again */ });
  }
  if (document.querySelector("[data-live][id]")) {
    timer = window.setInterval(refresh, LIVE_MS);
  }

  // The trigger form shows only the parameters of the chosen kind.
  function showParams() {
    var kind = document.getElementById("kind");
    if (!kind) { return; }
    document.querySelectorAll(".param[data-kinds]").forEach(function (p) {
      var kinds = p.getAttribute("data-kinds").split(" ");
      p.hidden = kinds.indexOf(kind.value) < 0;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var kind = document.getElementById("kind");
    if (kind) {
      kind.addEventListener("change", showParams);
      showParams();
    }
  });
})();
