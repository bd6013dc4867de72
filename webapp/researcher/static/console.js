// Poll the study's live.json and update counts and the participant table without a reload.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live-url]");
  if (!main) { return; }
  var url = main.getAttribute("data-live-url");

  function setText(el, value) {
    var text = value === null || value === undefined ? "" : String(value);
    if (el.textContent !== text) { el.textContent = text; }
  }

  function update(data) {
    Object.keys(data.counts).forEach(function (key) {
      document.querySelectorAll('[data-count="' + key + '"]').forEach(function (el) {
        setText(el, data.counts[key]);
      });
    });
    document.querySelectorAll("[data-median]").forEach(function (el) {
      setText(el, data.median_duration_s === null ? "–" : data.median_duration_s);
    });
    Object.keys(data.by_sequence).forEach(function (status) {
      ["A", "B", "total"].forEach(function (seq) {
        document.querySelectorAll('[data-seq="' + status + "-" + seq + '"]').forEach(function (el) {
          setText(el, data.by_sequence[status][seq]);
        });
      });
    });
    var pairs = document.querySelector("tbody[data-pairs]");
    if (pairs) {
      Object.keys(data.per_pair).forEach(function (pair) {
        var row = pairs.querySelector('tr[data-pair="' + CSS.escape(pair) + '"]');
        if (!row) {
          row = document.createElement("tr");
          row.setAttribute("data-pair", pair);
          ["pair", "original", "summary"].forEach(function (k) {
            var cell = document.createElement(k === "pair" ? "th" : "td");
            cell.setAttribute("data-k", k);
            row.appendChild(cell);
          });
          pairs.appendChild(row);
        }
        setText(row.querySelector('[data-k="pair"]'), pair);
        setText(row.querySelector('[data-k="original"]'), data.per_pair[pair].original);
        setText(row.querySelector('[data-k="summary"]'), data.per_pair[pair].summary);
      });
    }
    var table = document.querySelector("tbody[data-participants]");
    if (table) {
      data.participants.forEach(function (p) {
        var row = table.querySelector('tr[data-participant="' + p.participant_id + '"]');
        if (!row) {
          row = document.createElement("tr");
          row.setAttribute("data-participant", p.participant_id);
          ["participant_id", "platform", "status", "sequence", "progress_pct", "started_at",
           "duration_s", "excluded", "platform_status", "reconcile_note"].forEach(function (k) {
            var cell = document.createElement("td");
            cell.setAttribute("data-k", k);
            row.appendChild(cell);
          });
          table.insertBefore(row, table.firstChild);
        }
        row.querySelectorAll("[data-k]").forEach(function (cell) {
          var k = cell.getAttribute("data-k");
          var v = p[k];
          if (k === "excluded") { v = p.excluded ? "excluded: " + (p.exclusion_reason || "") : ""; }
          if (k === "progress_pct") { v = v + "%"; }
          if (k === "participant_id" && p.is_preview) { v = v + " (preview)"; }
          setText(cell, v);
        });
      });
    }
    document.querySelectorAll("[data-updated]").forEach(function (el) {
      setText(el, data.updated_at);
    });
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) { if (data) { update(data); } })
      .catch(function () { /* keep the last numbers; the next poll retries */ })
      .finally(function () { window.setTimeout(poll, 2000); });
  }
  window.setTimeout(poll, 2000);
}());
