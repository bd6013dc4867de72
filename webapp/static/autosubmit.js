// Send the MTurk completion form at once; the visible button is the no-JavaScript fallback.
(function () {
  var form = document.getElementById("autosubmit");
  if (form) { form.submit(); }
})();
