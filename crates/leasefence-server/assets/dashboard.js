// leasefence dashboard: refreshes the counts and the tables by a light poll while the page is
// visible. Every page works without this script; it only saves a reload. No dependencies.
(function () {
  "use strict";
  var EVERY_MS = 3000;

  function lookup(data, path) {
    return path.split(".").reduce(function (o, k) {
      return o === null || o === undefined ? undefined : o[k];
    }, data);
  }

  function stamp() {
    var s = document.getElementById("live-stamp");
    if (s) s.textContent = "Updated " + new Date().toLocaleTimeString();
  }

  // The figures: elements with data-live="totals.ready", or data-live-q + data-live-s for a
  // queue's count (queue names may hold dots, so they are looked up whole).
  function refreshCounts() {
    var plain = document.querySelectorAll("[data-live]");
    var queued = document.querySelectorAll("[data-live-q]");
    if (!plain.length && !queued.length) return Promise.resolve();
    return fetch("/dashboard/live", { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (!data) return;
        plain.forEach(function (el) {
          var v = lookup(data, el.getAttribute("data-live"));
          if (v !== undefined && v !== null) el.textContent = String(v);
        });
        // A card's link follows its figure (the oldest ready job is another job now).
        document.querySelectorAll("[data-live-href]").forEach(function (el) {
          var v = lookup(data, el.getAttribute("data-live-href"));
          if (typeof v === "string" && v.indexOf("/dashboard/") === 0) el.setAttribute("href", v);
        });
        var shown = Object.create(null);
        queued.forEach(function (el) {
          var name = el.getAttribute("data-live-q");
          shown[name] = true;
          var q = data.queues && data.queues[name];
          var v = q && q[el.getAttribute("data-live-s")];
          if (v !== undefined) el.textContent = String(v);
        });
        stamp();
        // A queue that came or went since the page was drawn: its table drawn again.
        var names = Object.keys(data.queues || {});
        var changed = names.length !== Object.keys(shown).length ||
          names.some(function (n) { return !Object.prototype.hasOwnProperty.call(shown, n); });
        if (changed && document.getElementById("queue-table")) return swap("queue-table");
      });
  }

  // The element `id` swapped for the same one of this page fetched again. The server's HTML
  // is escaped; a parsed document runs no script.
  function swap(id) {
    return fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById(id);
        var current = document.getElementById(id);
        if (fresh && current && !current.contains(document.activeElement)) {
          current.replaceWith(document.importNode(fresh, true));
          stamp();
        }
      });
  }

  // A table marked data-live-table: the same page fetched again, its table swapped in.
  function refreshTable() {
    var table = document.getElementById("live-table");
    if (!table || !table.hasAttribute("data-live-table")) return Promise.resolve();
    return swap("live-table");
  }

  function tick() {
    if (document.visibilityState !== "visible") return;
    refreshCounts().catch(function () {});
    refreshTable().catch(function () {});
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.setAttribute("data-live-ready", "yes");
    window.setInterval(tick, EVERY_MS);
  });
})();
