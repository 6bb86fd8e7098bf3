// Follows a claim after a decision: polls its state and updates the page,
// until the claim has an outcome. The page works without it (reload).
(function () {
  var live = document.getElementById("live");
  if (!live) { return; }
  var url = live.getAttribute("data-url");
  var done = { paid: 1, rejected: 1, expired: 1, withdrawn: 1, "dead-lettered": 1 };
  var state = live.querySelector(".state");
  if (state && done[state.textContent]) { return; }
  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (s) {
        if (!s) { return; }
        var text = "State: " + s.state + (s.step ? " at " + s.step : "") +
          (s.quorum > 1 ? "; four eyes: " + s.votes + " of " + s.quorum : "") +
          (s.transfer_id ? "; paid " + s.payout + " " + s.currency + " by transfer " + s.transfer_id : "");
        var p = live.querySelector("p");
        p.textContent = text;
        p.setAttribute("data-state", s.state);
        if (s.state !== "waiting" && s.state !== "escalated") {
          // Decided: the request's deadlines and forms no longer apply.
          var stale = document.querySelectorAll(".while-waiting");
          for (var i = 0; i < stale.length; i++) { stale[i].hidden = true; }
        }
        if (!done[s.state]) { setTimeout(poll, 1500); }
      })
      .catch(function () { setTimeout(poll, 3000); });
  }
  setTimeout(poll, 1000);
})();
