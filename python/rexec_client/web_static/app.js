// rexec approvals web (python/rexec_client/web.py): the page's only script. Everything from the
// server is written with textContent: no string becomes markup.
"use strict";
(function () {
  var token = document.querySelector('meta[name="rexec-csrf"]').getAttribute("content");
  var list = document.getElementById("list");
  var status = document.getElementById("status");
  var live = document.getElementById("live");
  var busy = false;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function say(text, bad) {
    status.textContent = text;
    status.className = bad ? "status error" : "status";
  }

  function segments(pre, segs) {
    segs.forEach(function (g) {
      if (g.kind === "text") {
        pre.appendChild(document.createTextNode(g.text));
      } else {
        var m = el("mark", g.kind === "param" ? "param" : "secret", g.text);
        m.title = (g.kind === "param" ? "parameter " : "secret ") + (g.name || "");
        pre.appendChild(m);
      }
    });
  }

  function row(table, key, value, keyClass) {
    var tr = el("tr"), th = el("th"), td = el("td", null, value);
    if (keyClass) th.appendChild(el("mark", keyClass, key)); else th.textContent = key;
    tr.appendChild(th); tr.appendChild(td); table.appendChild(tr);
  }

  function challenge(v) {
    var s = el("section", "challenge");
    s.dataset.id = v.challenge_id;
    var h = el("h2");
    h.appendChild(el("span", "action", v.action));
    h.appendChild(document.createTextNode(" on "));
    h.appendChild(el("span", "hosts", v.hosts.join(", ")));
    h.appendChild(document.createTextNode(" "));
    h.appendChild(el("span", "risk risk-" + v.risk.replace(/[^A-Za-z0-9]/g, ""), v.risk));
    s.appendChild(h);
    s.appendChild(el("p", "cid", v.challenge_id));
    var facts = el("table", "facts");
    row(facts, "hosts", v.hosts.join(", "));
    row(facts, "risk", v.risk);
    row(facts, "reason", v.reason);
    row(facts, "requester", v.requester);
    row(facts, "request", v.request_id);
    row(facts, "created", v.created);
    row(facts, "expires", v.expires);
    row(facts, "stdin", v.stdin);
    row(facts, "secrets", v.secrets.length ? v.secrets.join(", ") + " (by name; values never shown)" : "none");
    s.appendChild(facts);
    s.appendChild(el("h3", null, "Script"));
    var pre = el("pre", "script");
    segments(pre, v.script);
    s.appendChild(pre);
    v.scripts.forEach(function (hs) {
      s.appendChild(el("h3", null, "Script on " + hs[0]));
      var p = el("pre", "script");
      segments(p, hs[1]);
      s.appendChild(p);
    });
    s.appendChild(el("h3", null, "Parameters"));
    var params = el("table", "params");
    if (!v.params.length) {
      var tr = el("tr"), td = el("td", null, "none");
      td.colSpan = 2; tr.appendChild(td); params.appendChild(tr);
    }
    v.params.forEach(function (kv) { row(params, kv[0], kv[1], "param"); });
    s.appendChild(params);
    var f = el("form", "decide");
    f.dataset.id = v.challenge_id;
    var label = el("label", null, "Comment or reason ");
    var input = el("input");
    input.name = "text"; input.maxLength = 1024; input.autocomplete = "off";
    label.appendChild(input);
    f.appendChild(label);
    f.appendChild(document.createTextNode(" "));
    [["approve", "Approve"], ["deny", "Deny"]].forEach(function (b) {
      var btn = el("button", b[0], b[1]);
      btn.type = "submit"; btn.name = "decision"; btn.value = b[0];
      f.appendChild(btn); f.appendChild(document.createTextNode(" "));
    });
    s.appendChild(f);
    return s;
  }

  function render(views) {
    // Keep what the operator is typing: a challenge still pending keeps its section.
    var typing = {};
    list.querySelectorAll("form.decide").forEach(function (f) {
      typing[f.dataset.id] = f.elements.text.value;
    });
    while (list.firstChild) list.removeChild(list.firstChild);
    if (!views.length) list.appendChild(el("p", "empty", "No pending approvals."));
    views.forEach(function (v) {
      var s = challenge(v);
      if (typing[v.challenge_id]) s.querySelector("input").value = typing[v.challenge_id];
      list.appendChild(s);
    });
    document.body.dataset.pending = String(views.length);
  }

  function refresh() {
    return fetch("/api/approvals", {credentials: "same-origin", cache: "no-store"})
      .then(function (r) { return r.json(); })
      .then(function (j) {
        if (j.ok) render(j.approvals); else say("rexec serve: " + j.error, true);
      })
      .catch(function () { say("the page's server did not answer", true); });
  }

  function decide(id, op, text) {
    busy = true;
    return fetch("/api/" + op, {
      method: "POST", credentials: "same-origin", cache: "no-store",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": token},
      body: JSON.stringify({challenge_id: id, text: text})
    }).then(function (r) { return r.json(); }).then(function (j) {
      if (j.csrf) token = j.csrf;
      if (j.ok) say(j.message, false); else say("not done: " + j.error, true);
    }).catch(function () {
      say("the page's server did not answer", true);
    }).then(function () { busy = false; return refresh(); });
  }

  list.addEventListener("submit", function (e) {
    e.preventDefault();
    var f = e.target, op = e.submitter ? e.submitter.value : "approve";
    if (busy) return;
    if (op === "deny" && !f.elements.text.value) {
      say("say why in the reason field to deny", true);
      return;
    }
    decide(f.dataset.id, op, f.elements.text.value);
  });

  // Live updates: serve's watch, relayed as server-sent events; a poll as well in case the
  // stream is down (EventSource reconnects by itself).
  var es = new EventSource("/events");
  es.addEventListener("change", refresh);
  es.onopen = function () { live.textContent = "live"; live.className = "live on"; refresh(); };
  es.onerror = function () { live.textContent = "reconnecting"; live.className = "live off"; };
  setInterval(refresh, 10000);
  window.rexecWeb = {refresh: refresh, decide: decide};
})();
