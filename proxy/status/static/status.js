// Refreshes the page's figures from status.json. The page is complete
// without it; this only spares a reload. Formats and states must match
// format.go, and shape() must match handler.go's shape.
(function () {
  "use strict";
  var body = document.body;
  var every = Number(body.getAttribute("data-refresh")) || 5000;
  var live = document.getElementById("live");

  function get(o, path) {
    var parts = path.split(".");
    for (var i = 0; i < parts.length && o != null; i++) o = o[parts[i]];
    return o;
  }
  function fixed(x, d) { return Number(x || 0).toFixed(d); }
  function count(n) { return String(Math.round(Number(n) || 0)).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function span(s) {
    s = Math.floor(Number(s) || 0);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor(s % 3600 / 60) + " min";
    return Math.floor(s / 86400) + " d " + Math.floor(s % 86400 / 3600) + " h";
  }
  var taken = 0;
  var fmt = {
    text: function (v) { return v == null ? "" : String(v); },
    pct: function (v) { return fixed((Number(v) || 0) * 100, 1) + " %"; },
    per: function (v) { return fixed(v, 2); },
    rate: function (v) { return v >= 1000 ? count(v) + "/s" : fixed(v, 1) + "/s"; },
    dur: function (v) {
      if (!(v > 0)) return "\u2013";
      if (v < 0.001) return fixed(v * 1e6, 0) + " \u00b5s";
      if (v < 1) return fixed(v * 1e3, 1) + " ms";
      return fixed(v, 2) + " s";
    },
    size: function (n) {
      if (n < 1024) return count(n).replace(/,/g, "") + " B";
      var u = "KMGTPE", i = 0;
      n /= 1024;
      while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
      return fixed(n, 1) + " " + u[i] + "iB";
    },
    count: count,
    span: span,
    ago: function (t) {
      if (!t) return "never";
      return span(Math.max(0, (taken - Date.parse(t)) / 1000)) + " ago";
    },
    stamp: function (t) {
      if (!t) return "never";
      return new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$|Z$/, "") + " UTC";
    },
    yesno: function (v) { return v ? "yes" : "no"; },
    breaker: function (v) { return v || "none"; },
    verdict: function (v) { return v === "green" ? "Healthy" : v === "amber" ? "Needs a look" : "Failing"; }
  };
  var state = {
    health: function (v) { return "h-" + v; },
    breaker: function (v) { return v ? "st-" + (v === "open" ? "bad" : v === "half-open" ? "warn" : "ok") : ""; },
    err: function (v) { return "st-" + (v >= 0.05 ? "bad" : v >= 0.01 ? "warn" : "ok"); },
    days: function (v) { return "st-" + (v < 7 ? "bad" : v < 21 ? "warn" : "ok"); },
    store: function (v) { return v === "ok" ? "st-ok" : v === "degraded" ? "st-warn" : v === "down" ? "st-bad" : ""; },
    okbad: function (v) { return v ? "st-ok" : "st-bad"; },
    none: function (v) { return v ? "st-bad" : "st-ok"; },
    lagging: function (v) { return v ? "st-warn" : "st-ok"; }
  };
  // value reads data-<attr>, divided by data-d when the element has one
  // (a ratio of two rates, which the JSON keeps apart so they add up).
  function value(s, el, attr) {
    var v = get(s, el.getAttribute(attr));
    var d = el.getAttribute("data-d");
    if (d != null) { var den = Number(get(s, d)); v = den > 0 ? Number(v) / den : 0; }
    return v;
  }
  function shape(s) {
    var mig = s.migration ? s.migration.keys.length : -1;
    var nat = s.native ? s.native.routes.length : -1;
    var str = s.streams ? s.streams.routes.length : -1;
    return [s.routes.length, s.limits.refused.length, s.limits.top_keys.length, s.tls.length,
      s.fleet.replicas.length, mig, s.cache.l2.present, s.fleet.enabled, nat, str].join("/");
  }
  function apply(s) {
    if (shape(s) !== body.getAttribute("data-shape")) { location.reload(); return; }
    taken = Date.parse(s.taken);
    var els = document.querySelectorAll("[data-f]");
    for (var i = 0; i < els.length; i++) {
      var el = els[i], f = fmt[el.getAttribute("data-fmt") || "text"] || fmt.text;
      var text = f(value(s, el, "data-f"));
      if (el.textContent !== text) el.textContent = text;
    }
    els = document.querySelectorAll("[data-s]");
    for (i = 0; i < els.length; i++) {
      el = els[i];
      var cls = state[el.getAttribute("data-sk")](value(s, el, "data-s"));
      var list = el.className.split(/\s+/).filter(function (c) { return c && !/^(st|h)-/.test(c); });
      if (cls) list.push(cls);
      el.className = list.join(" ");
    }
    els = document.querySelectorAll("meter[data-v]");
    for (i = 0; i < els.length; i++) els[i].value = Number(get(s, els[i].getAttribute("data-v"))) || 0;
    var ul = document.getElementById("reasons");
    while (ul.firstChild) ul.removeChild(ul.firstChild);
    s.health.reasons.forEach(function (r) {
      var li = document.createElement("li");
      li.textContent = r;
      ul.appendChild(li);
    });
    document.title = "tradergate \u00b7 " + s.replica + " \u00b7 " + fmt.verdict(s.health.state);
    live.textContent = "live, updated " + new Date().toLocaleTimeString();
  }
  function tick() {
    fetch("status.json", { cache: "no-store", credentials: "same-origin" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(apply)
      .catch(function (e) { live.textContent = "refresh failed (" + e.message + "), retrying"; })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
