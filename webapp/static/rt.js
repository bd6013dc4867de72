// Optional: measure the time from page display to submission into hidden rt_ms fields, and how
// the answer was given into the hidden signals field (docs/platform.md, "Authenticity
// signals"): counts only — paste events and pasted characters, keystrokes and characters in
// text fields, times and milliseconds the page was hidden, whether a real pointer or key event
// happened, automation hints, and a short hash of screen, time zone and languages. No key, no
// pasted text, no coordinate leaves the page. Pages work without it (both fields stay empty).
(function () {
  var t0 = performance.now();
  var s = { pe: 0, pc: 0, ks: 0, hc: 0, hm: 0, ia: 0 };
  var hiddenSince = document.hidden ? t0 : null;
  var isText = function (el) {
    return el && el.name !== "fl_code" &&
      (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && el.type === "text"));
  };
  document.addEventListener("paste", function (e) {
    if (!isText(e.target)) { return; }
    s.pe += 1;
    var data = e.clipboardData ? e.clipboardData.getData("text") : "";
    s.pc += data.length;  // the length only: the text itself is never kept
  }, true);
  document.addEventListener("keydown", function (e) {
    if (!e.isTrusted) { return; }
    s.ia = 1;
    if (isText(e.target)) { s.ks += 1; }
  }, true);
  ["pointerdown", "touchstart", "mousedown"].forEach(function (type) {
    document.addEventListener(type, function (e) { if (e.isTrusted) { s.ia = 1; } }, true);
  });
  var hide = function () {
    if (hiddenSince === null) { hiddenSince = performance.now(); s.hc += 1; }
  };
  var show = function () {
    if (hiddenSince !== null) { s.hm += performance.now() - hiddenSince; hiddenSince = null; }
  };
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) { hide(); } else { show(); }
  });
  window.addEventListener("blur", hide);
  window.addEventListener("focus", show);
  var automation = function () {
    var n = navigator, bits = 0;
    if (n.webdriver) { bits |= 1; }
    if (/HeadlessChrome/.test(n.userAgent)) { bits |= 2; }
    if (!n.languages || n.languages.length === 0) { bits |= 4; }
    if (window.outerWidth === 0 && window.outerHeight === 0) { bits |= 8; }
    if (window.callPhantom || window._phantom || window.__nightmare || window.domAutomation ||
        window.__playwright__binding__ || window.__pwInitScripts) { bits |= 16; }
    return bits;
  };
  var device = function () {
    var tz = "";
    try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { tz = ""; }
    var text = [screen.width, screen.height, screen.colorDepth, window.devicePixelRatio, tz,
      (navigator.languages || []).join(","), navigator.hardwareConcurrency || 0].join("|");
    var h = 0x811c9dc5;  // FNV-1a, 32 bits: a short hint, not an identifier
    for (var i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h.toString(16);
  };
  document.querySelectorAll("form").forEach(function (form) {
    form.addEventListener("submit", function () {
      var now = performance.now();
      form.querySelectorAll("input[data-rt]").forEach(function (input) {
        input.value = String(Math.round(now - t0));
      });
      var tc = 0;
      form.querySelectorAll("textarea, input[type=text]").forEach(function (el) {
        if (isText(el)) { tc += el.value.length; }
      });
      var hm = s.hm + (hiddenSince !== null ? now - hiddenSince : 0);
      var value = "pe=" + s.pe + ";pc=" + s.pc + ";ks=" + s.ks + ";tc=" + tc + ";hc=" + s.hc +
        ";hm=" + Math.round(hm) + ";ia=" + s.ia + ";au=" + automation() + ";dv=" + device();
      form.querySelectorAll("input[data-signals]").forEach(function (input) {
        input.value = value;
      });
    });
  });
})();
