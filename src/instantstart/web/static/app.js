// The shell: hash router, active-cluster switcher (the header's and shell.switchCluster for pages), banner, manual refresh, live connection.
import { ApiError, get, post } from "./api.js";
import { h } from "./dom.js";
import { askSnapshot, connect, events } from "./live.js";
import { startBell } from "./alerts.js";
import * as admin from "./admin.js";
import * as alertSettings from "./alert_settings.js";
import * as clusters from "./clusters.js";
import * as fleet from "./fleet.js";
import * as inference from "./inference.js";
import * as monitoring from "./monitoring.js";
import * as operations from "./operations.js";
import * as storage from "./storage.js";
import * as teams from "./teams.js";
import * as training from "./training.js";
import * as usage from "./usage.js";

const pages = { clusters, fleet, operations, monitoring, storage, training, inference, teams, usage, admin, alerts: alertSettings };
const view = document.getElementById("view");
const banner = document.getElementById("banner");
const select = document.getElementById("active-cluster");
let current = null;

export const shell = {
  clusters: null,
  banner(message, kind = "error") {
    if (!message) { banner.hidden = true; return; }
    banner.className = `banner ${kind === "info" ? "info" : ""}`;
    banner.replaceChildren(message instanceof Node ? message : document.createTextNode(message));
    banner.hidden = false;
  },
  fail(err) {
    if (err instanceof ApiError) shell.banner(`${err.code}: ${err.message}${err.hint ? " — " + err.hint : ""}`);
    else shell.banner(String(err));
  },
  setClusters(data) {
    shell.clusters = data;
    const active = data.activeCluster ?? "";
    select.replaceChildren(h("option", { value: "" }, data.count ? "— choose —" : "no clusters"),
      ...data.clusters.map((c) => h("option", { value: c.clusterTag }, `${c.clusterTag} (${c.region})`)));
    select.value = active;
    events.dispatchEvent(new CustomEvent("clusters", { detail: data }));
  },
  async reloadClusters() {
    shell.setClusters(await get("/clusters"));
  },
  async waitFor(operationId, timeoutMs = 120000) {
    const end = Date.now() + timeoutMs;
    while (Date.now() < end) {
      const op = await get(`/operations/${operationId}`);
      if (["SUCCEEDED", "FAILED", "CANCELLED"].includes(op.status)) return op;
      await new Promise((r) => setTimeout(r, 500));
    }
    throw new Error(`Operation ${operationId} is still running; see Operations.`);
  },
};

// cluster_switch to `tag`, then the cluster list again; true when it succeeded (a failure is in the banner).
shell.switchCluster = async (tag) => {
  select.disabled = true;
  try {
    shell.banner(`Switching the active cluster to ${tag}…`, "info");
    const ref = await post(`/clusters/${encodeURIComponent(tag)}/switch`, {});
    const op = await shell.waitFor(ref.operationId);
    const ok = op.status === "SUCCEEDED";
    if (!ok) shell.fail(new ApiError(409, op.error ?? { message: `switch ${op.status}` }));
    else shell.banner("");
    await shell.reloadClusters();
    return ok;
  } finally { select.disabled = false; }
};

select.addEventListener("change", async () => {
  const tag = select.value;
  if (!tag) return;
  try { await shell.switchCluster(tag); current?.refresh(); } catch (err) { shell.fail(err); }
});

document.getElementById("refresh").addEventListener("click", async () => {
  shell.banner("");
  try { await shell.reloadClusters(); await current?.refresh(); askSnapshot(); } catch (err) { shell.fail(err); }
});

events.addEventListener("resources", (e) => {
  const clustersData = e.detail.clusters;
  if (clustersData && !clustersData.error) shell.setClusters(clustersData);
});

function parseHash() {
  const parts = (location.hash.replace(/^#\/?/, "") || "clusters").split("/");
  return { page: pages[parts[0]] ? parts[0] : "clusters", arg: parts[1] ? decodeURIComponent(parts[1]) : null };
}

// Each route draws into its own container, shown only if no newer route started meanwhile: a slow page (the
// first one after sign-in) must never replace the page the user has moved on to, nor the form they are filling.
let generation = 0;
async function route() {
  const mine = ++generation;
  const { page, arg } = parseHash();
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("current", a.dataset.nav === page));
  current?.dispose?.();
  current = null;
  shell.banner("");
  view.replaceChildren(h("p", { class: "muted" }, h("span", { class: "spinner" }), " Loading…"));
  const target = h("div", { class: "route" });
  try {
    const drawn = await pages[page].render(target, arg, shell);
    if (mine !== generation) { drawn?.dispose?.(); return; }
    view.replaceChildren(target);
    current = drawn;
  } catch (err) { if (mine === generation) shell.fail(err); }
}

// Who is signed in (user_me): shown in the header; an element marked data-op="<operation>" is hidden when the
// role may not call that operation (the server refuses such a call FORBIDDEN all the same).
function hideForbidden(root) {
  const allowed = shell.allowed;
  if (!allowed) return;
  root.querySelectorAll?.("[data-op]").forEach((el) => { el.hidden = !allowed.has(el.dataset.op); });
}
async function whoami() {
  const me = await get("/me");
  shell.me = me;
  shell.allowed = new Set(me.allowedOperations);
  document.getElementById("whoami").textContent = `${me.user} (${me.role})`;
  select.disabled = !shell.allowed.has("cluster_switch");
  hideForbidden(document);
  new MutationObserver(() => hideForbidden(view)).observe(view, { childList: true, subtree: true });
}

window.addEventListener("hashchange", route);
startBell(shell);
connect(document.getElementById("live"));
shell.whoami = whoami().catch((err) => shell.fail(err));
shell.reloadClusters().catch((err) => shell.fail(err)).finally(route);
