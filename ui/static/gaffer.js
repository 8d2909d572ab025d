// Gaffer dashboard: live refresh of [data-live] regions, confirmations,
// select-all. Everything works without it; it only saves reloads.
(function () {
  "use strict";
  var INTERVAL = 2000;
  var live = localStorage.getItem("gaffer-live") !== "off";
  var timer = null;

  function setLive(on) {
    live = on;
    localStorage.setItem("gaffer-live", on ? "on" : "off");
    var b = document.getElementById("live-toggle");
    if (b) {
      b.classList.toggle("off", !on);
      b.textContent = on ? "Live" : "Paused";
      b.setAttribute("aria-pressed", on ? "true" : "false");
    }
    schedule();
  }

  function schedule() {
    clearTimeout(timer);
    if (live && document.querySelector("[data-live]")) {
      timer = setTimeout(refresh, INTERVAL);
    }
  }

  // busy: the user is working inside the region; leave it alone.
  function busy(el) {
    return el.contains(document.activeElement) && document.activeElement !== document.body ||
      el.querySelector("input[type=checkbox]:checked, details[open]") !== null;
  }

  function refresh() {
    if (document.hidden) { schedule(); return; }
    fetch(location.href, { headers: { "X-Gaffer-Live": "1" }, credentials: "same-origin", redirect: "follow" })
      .then(function (res) {
        if (!res.ok || res.url.indexOf("/ui/login") >= 0) { throw new Error("session ended or page gone"); }
        return res.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live][id]").forEach(function (el) {
          var next = doc.getElementById(el.id);
          if (next && !busy(el) && next.innerHTML !== el.innerHTML) { el.innerHTML = next.innerHTML; }
        });
        document.body.classList.remove("stale");
        schedule();
      })
      .catch(function () {
        document.body.classList.add("stale");
        schedule();
      });
  }

  document.addEventListener("submit", function (e) {
    var btn = e.submitter;
    var msg = (btn && btn.getAttribute("data-confirm")) || e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) { e.preventDefault(); }
  });

  document.addEventListener("change", function (e) {
    if (e.target.id === "select-all") {
      var form = e.target.closest("form");
      form.querySelectorAll("input[name=id]").forEach(function (c) { c.checked = e.target.checked; });
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var b = document.getElementById("live-toggle");
    if (b) { b.addEventListener("click", function () { setLive(!live); }); }
    setLive(live);
  });
})();
