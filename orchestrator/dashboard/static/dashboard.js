// Ratchet dashboard: live updates over server-sent events. Written for this package, no
// library. When the ledger head moves, the page is fetched again and its live regions
// ([data-live] elements, matched by id) are swapped in; forms outside them keep their input.
"use strict";

(function () {
  const body = document.body;
  let seq = Number(body.dataset.headSeq || 0);
  let refreshing = false;
  let again = false;

  function state(text, cls) {
    const el = document.getElementById("live-state");
    if (el) {
      el.textContent = text;
      el.className = cls || "";
    }
  }

  async function refresh() {
    if (refreshing) {
      again = true; // a burst of appends (parallel workers) ends in one more refresh
      return;
    }
    refreshing = true;
    try {
      const url = new URL(window.location.href);
      url.searchParams.delete("injected"); // a notice belongs to the page that got it
      const response = await fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" });
      if (!response.ok) {
        state("update failed (" + response.status + ")", "bad");
        return;
      }
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const old of document.querySelectorAll("[data-live]")) {
        const next = fresh.getElementById(old.id);
        if (next) old.replaceWith(document.adoptNode(next));
      }
      const shown = document.getElementById("head-seq");
      if (shown) shown.textContent = String(seq);
      body.dataset.headSeq = String(seq);
      state("live", "ok");
    } catch (err) {
      state("update failed", "bad");
    } finally {
      refreshing = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }

  if (!window.EventSource) {
    state("no live updates in this browser", "bad");
    return;
  }
  const events = new EventSource("/events");
  events.addEventListener("open", function () { state("live", "ok"); });
  events.addEventListener("error", function () { state("reconnecting…", "bad"); });
  events.addEventListener("problem", function (e) { state(JSON.parse(e.data), "bad"); });
  events.addEventListener("head", function (e) {
    const head = JSON.parse(e.data);
    if (head.seq !== seq) {
      seq = head.seq;
      refresh();
    } else {
      state("live", "ok");
    }
  });
})();
