// The console's small scripts: copy buttons, confirmations naming a consequence, and the live
// dashboard (poll live.json every 2 s and update the numbers without a reload).
(function () {
  "use strict";

  // Copy buttons next to the recruitment links.
  document.querySelectorAll("[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      var field = document.getElementById(button.getAttribute("data-copy"));
      var status = document.querySelector("[data-copied]");
      function done(ok) {
        if (status) { status.textContent = ok ? "Copied to the clipboard." : "Select the text and copy it (Ctrl+C)."; }
      }
      field.select();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(field.value).then(function () { done(true); }, function () { done(false); });
      } else {
        try { done(document.execCommand("copy")); } catch (e) { done(false); }
      }
    });
  });

  // Buttons whose action cannot be undone say what it does before it is sent.
  document.querySelectorAll("[data-confirm]").forEach(function (button) {
    button.addEventListener("click", function (event) {
      if (!window.confirm(button.getAttribute("data-confirm"))) { event.preventDefault(); }
    });
  });

  var main = document.querySelector("main[data-live-url]");
  if (!main) { return; }
  var url = main.getAttribute("data-live-url") + window.location.search;

  function setText(el, value) {
    var text = value === null || value === undefined ? "" : String(value);
    if (el && el.textContent !== text) { el.textContent = text; }
  }

  function cell(tag, text) {
    var el = document.createElement(tag);
    el.textContent = text === null || text === undefined ? "–" : String(text);
    return el;
  }

  function fillRows(tbody, rows, build) {
    if (!tbody) { return; }
    var fragment = document.createDocumentFragment();
    rows.forEach(function (row) { fragment.appendChild(build(row)); });
    tbody.replaceChildren(fragment);
  }

  function share(c) {
    return c.n ? Math.round(100 * c.share) + "% of " + c.n : "–";
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
      Object.keys(data.by_sequence[status]).forEach(function (seq) {
        document.querySelectorAll('[data-seq="' + status + "-" + seq + '"]').forEach(function (el) {
          setText(el, data.by_sequence[status][seq]);
        });
      });
    });
    var t = data.target;
    var bar = document.querySelector("[data-target-bar]");
    if (bar) { bar.value = Math.min(t.completed, t.target); }
    setText(document.querySelector("[data-target-text]"),
      t.target ? t.completed + " of " + t.target + " (" + t.pct + "%)" : t.completed + " completed");
    if (data.funnel.length) {
      fillRows(document.querySelector("tbody[data-funnel]"), data.funnel, function (r) {
        var tr = document.createElement("tr");
        var th = cell("th", r.page);
        th.setAttribute("scope", "row");
        tr.appendChild(th);
        [r.reached, r.left, r.screened_out, r.in_progress, r.median_s].forEach(function (v) {
          tr.appendChild(cell("td", v));
        });
        return tr;
      });
    }
    fillRows(document.querySelector("tbody[data-shares]"), data.shares, function (r) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-pair", r.pair);
      var th = cell("th", r.pair);
      th.setAttribute("scope", "row");
      tr.appendChild(th);
      data.formats.forEach(function (fmt) {
        var td = cell("td", share(r[fmt]));
        td.setAttribute("data-k", fmt);
        tr.appendChild(td);
      });
      return tr;
    });
    if (data.slots) {
      ["confirmed", "reserved", "needed"].forEach(function (k) {
        setText(document.querySelector('[data-slot="' + k + '"]'), data.slots[k]);
      });
    }
    var table = document.querySelector("tbody[data-participants]");
    if (table) {
      var base = table.getAttribute("data-base");
      fillRows(table, data.participants, function (p) {
        var tr = document.createElement("tr");
        tr.setAttribute("data-participant", p.participant_id);
        ["participant_id", "platform", "status", "sequence", "progress_pct", "started_at",
         "last_seen_at", "duration_s", "excluded", "platform_status", "reconcile_note",
         "authenticity"].forEach(function (k) {
          var v = p[k];
          if (k === "excluded") { v = p.excluded ? "excluded: " + (p.exclusion_reason || "") : ""; }
          if (k === "progress_pct") { v = v + "%"; }
          if (v === null || v === undefined) { v = ""; }
          var td = document.createElement("td");
          td.setAttribute("data-k", k);
          if (k === "participant_id") {
            var a = document.createElement("a");
            a.href = base.replace("CODE", encodeURIComponent(p.participant_id));
            a.textContent = p.participant_id;
            td.appendChild(a);
            if (p.is_preview) { td.appendChild(document.createTextNode(" (preview)")); }
            else if (p.is_test) { td.appendChild(document.createTextNode(" (test)")); }
          } else {
            td.textContent = String(v);
          }
          if (k === "reconcile_note") { td.className = "mismatch"; }
          tr.appendChild(td);
        });
        return tr;
      });
      setText(document.querySelector("[data-table-total]"), data.table.total);
      setText(document.querySelector("[data-table-page]"), "Page " + data.table.page + " of " + data.table.pages);
    }
    setText(document.querySelector("[data-flagged]"), data.authenticity.text);
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
