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
  // JSON editors (a step's body, its other objects and arrays) say at
  // once when what is typed is not JSON of their type, and their form
  // is not sent until it is. An array may also be a comma-separated list.
  function jsonProblem(el) {
    var v = el.value.trim();
    if (v === "") { return ""; }
    var want = el.getAttribute("data-json");
    if (want === "array" && v.charAt(0) !== "[") { return ""; }
    var x;
    try { x = JSON.parse(v); } catch (e) { return "Not valid JSON: " + e.message; }
    if (want === "object" && (x === null || typeof x !== "object" || Array.isArray(x))) {
      return "Must be a JSON object: { \"name\": value, ... }";
    }
    if (want === "array" && !Array.isArray(x)) { return "Must be a JSON array: [ ... ]"; }
    return "";
  }
  function checkJSON(el) {
    var msg = jsonProblem(el);
    var out = document.getElementById(el.id + "-error");
    el.setCustomValidity(msg);
    el.classList.toggle("invalid", msg !== "");
    if (out) {
      out.textContent = msg;
      out.hidden = msg === "";
    }
    return msg === "";
  }
  // A map field (a step's headers) gets another name and value row.
  function addRow(button) {
    var table = document.getElementById(button.getAttribute("data-for"));
    var body = table && table.tBodies[0];
    if (!body || body.rows.length >= 50) { return; }
    var i = body.rows.length;
    var field = table.getAttribute("data-field");
    var tr = document.createElement("tr");
    ["name", "value"].forEach(function (part) {
      var td = document.createElement("td");
      var input = document.createElement("input");
      input.name = field + "." + part + "." + i;
      input.setAttribute("aria-label", field.slice(3) + " " + part + " " + i);
      td.appendChild(input);
      tr.appendChild(td);
    });
    body.appendChild(tr);
    tr.querySelector("input").focus();
  }
  document.addEventListener("DOMContentLoaded", function () {
    var kind = document.getElementById("kind");
    if (kind) {
      kind.addEventListener("change", showParams);
      showParams();
    }
    document.querySelectorAll("textarea.json-editor").forEach(checkJSON);
    document.addEventListener("input", function (ev) {
      if (ev.target.matches && ev.target.matches("textarea.json-editor")) { checkJSON(ev.target); }
    });
    // The agent form's pipeline editor: add a step row (a copy of the
    // empty one in <template>, numbered after the others), remove one.
    var steps = document.getElementById("pipeline-steps");
    var rowTemplate = document.getElementById("pipeline-row");
    var add = document.getElementById("add-step");
    if (steps && rowTemplate && add) {
      add.addEventListener("click", function () {
        if (steps.children.length >= 20) { return; }
        var next = 0;
        steps.querySelectorAll("li.pipeline-step").forEach(function (li) {
          next = Math.max(next, Number(li.getAttribute("data-index")) + 1);
        });
        var li = rowTemplate.content.firstElementChild.cloneNode(true);
        li.setAttribute("data-index", String(next));
        li.querySelectorAll("[name]").forEach(function (el) {
          el.name = el.name.replace(/\.\d+$/, "." + next);
        });
        li.querySelectorAll("[id]").forEach(function (el) {
          el.id = el.id.replace(/-\d+(-error)?$/, "-" + next + "$1");
        });
        steps.appendChild(li);
        li.querySelector("input").focus();
      });
      steps.addEventListener("click", function (ev) {
        var b = ev.target;
        if (!b.classList || !b.classList.contains("remove-step")) { return; }
        var li = b.closest("li.pipeline-step");
        if (steps.children.length > 1) {
          li.remove();
          return;
        }
        li.querySelectorAll("input, textarea").forEach(function (el) { el.value = ""; });
        li.querySelectorAll("select").forEach(function (el) { el.selectedIndex = 0; });
      });
    }
    document.querySelectorAll("form").forEach(function (form) {
      form.addEventListener("submit", function (ev) {
        var bad = null;
        form.querySelectorAll("textarea.json-editor").forEach(function (el) {
          if (!checkJSON(el) && bad === null) { bad = el; }
        });
        if (bad !== null) {
          ev.preventDefault();
          bad.focus();
        }
      });
    });
    document.querySelectorAll("button.add-row").forEach(function (b) {
      b.addEventListener("click", function () { addRow(b); });
    });
  });
})();
