// Optional: show "N of MAX characters" under text answers that have a maxlength. The limit is
// also stated in the hint and checked by the server, so pages work without this script.
(function () {
  document.querySelectorAll("[data-counter-for]").forEach(function (counter) {
    var input = document.getElementById(counter.getAttribute("data-counter-for"));
    if (!input || !input.maxLength || input.maxLength < 0) { return; }
    var update = function () {
      counter.textContent = input.value.length + " of " + input.maxLength + " characters";
    };
    input.addEventListener("input", update);
    update();
  });
})();
