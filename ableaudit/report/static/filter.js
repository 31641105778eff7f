/* Filters for an evidence page: arm, domain, disability, outcome and free text; read from the address
   (#arm=baseline&disability=vision&metric=vader&outcome=degraded) so a table cell opens its own pairs:
   a metric with outcome 'degraded' (or a judge dimension with 'yes') selects the outcome
   'degraded:<metric>' ('yes:<dimension>:<judge>'). No request, no animation. */
(function () {
  "use strict";
  var form = document.getElementById("filters");
  var status = document.getElementById("filter-status");
  if (!form || !status) { return; }
  var pairs = Array.prototype.slice.call(document.querySelectorAll("article.pair"));
  var fields = ["arm", "domain", "disability", "outcome", "q"];
  form.hidden = false;

  function apply() {
    var want = {};
    fields.forEach(function (name) { want[name] = form.elements[name].value; });
    var q = want.q.trim().toLowerCase();
    var shown = 0;
    pairs.forEach(function (pair) {
      var d = pair.dataset;
      var ok = (!want.arm || d.arm === want.arm) &&
        (!want.domain || d.domain === want.domain) &&
        (!want.disability || d.disability === want.disability) &&
        (!want.outcome || (" " + d.outcomes + " ").indexOf(" " + want.outcome + " ") >= 0) &&
        (!q || pair.textContent.toLowerCase().indexOf(q) >= 0);
      pair.hidden = !ok;
      if (ok) { shown += 1; }
    });
    status.textContent = shown + " of " + pairs.length + " pairs on this page match the filters.";
  }

  function fromAddress() {
    var hash = window.location.hash.slice(1);
    if (hash.indexOf("=") < 0) { apply(); return; }
    var params = new URLSearchParams(hash);
    if (params.get("metric") && params.get("outcome")) {
      params.set("outcome", params.get("outcome") + ":" + params.get("metric"));
    }
    fields.forEach(function (name) {
      var field = form.elements[name];
      var value = params.get(name) || "";
      if (field.tagName === "SELECT" && value && !Array.prototype.some.call(field.options, function (o) { return o.value === value; })) {
        value = "";
      }
      field.value = value;
    });
    apply();
  }

  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (event) { event.preventDefault(); apply(); });
  form.addEventListener("reset", function () { window.setTimeout(apply, 0); });
  window.addEventListener("hashchange", fromAddress);
  fromAddress();
}());
