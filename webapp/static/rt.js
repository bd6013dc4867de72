// Optional: measure the time from page display to submission into hidden rt_ms fields.
// Pages work without it (rt_ms is then empty and only server timing is recorded).
(function () {
  var t0 = performance.now();
  document.querySelectorAll("form").forEach(function (form) {
    form.addEventListener("submit", function () {
      form.querySelectorAll("input[data-rt]").forEach(function (input) {
        input.value = String(Math.round(performance.now() - t0));
      });
    });
  });
})();
