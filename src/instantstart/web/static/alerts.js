// The header's bell: how many alerts are open (alert_list), and their list on demand.
import { get } from "./api.js";
import { h, replace } from "./dom.js";

const POLL_MS = 15000;

export function startBell(shell) {
  const bell = document.getElementById("alerts-bell");
  const count = document.getElementById("alerts-count");
  const panel = document.getElementById("alerts-panel");
  let alerts = [];

  function draw() {
    replace(panel, h("h2", { class: "small" }, "Open alerts"),
      alerts.length ? h("ul", {}, alerts.map((a) => h("li", { class: "alert-item" },
        h("strong", {}, a.rule), ` · ${a.clusterTag} · `, h("span", {}, a.message),
        h("div", { class: "muted small" }, `${a.subject}, open since ${new Date(a.openedAt).toLocaleString()}`))))
        : h("p", { class: "muted" }, "No open alerts."),
      h("p", { class: "small" }, h("a", { href: "#/alerts", onclick: close }, "Alert rules & channels")));
  }

  async function refresh() {
    try {
      const found = await get("/alerts", { state: "open", limit: 50 });
      alerts = found.alerts;
      count.textContent = String(found.openCount);
      bell.classList.toggle("has-alerts", found.openCount > 0);
      if (!panel.hidden) draw();
    } catch (err) { shell.fail(err); }
  }

  function close() { panel.hidden = true; bell.setAttribute("aria-expanded", "false"); }
  bell.addEventListener("click", () => {
    const open = panel.hidden;
    panel.hidden = !open;
    bell.setAttribute("aria-expanded", String(open));
    if (open) draw();
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !panel.hidden) { panel.hidden = true; bell.setAttribute("aria-expanded", "false"); bell.focus(); }
  });
  document.getElementById("refresh").addEventListener("click", refresh);
  refresh();
  setInterval(refresh, POLL_MS);
}
