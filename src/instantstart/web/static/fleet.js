// Fleet: every managed cluster with its health (cluster_list_all): watch state, nodes, GPUs allocated and free,
// running jobs and open alerts. Listing never keeps a cluster watched: a parked one shows its last figures, and
// "Read now" (cluster_get_status with its clusterTag) resumes its watches. "Monitor" makes it active and opens
// the Monitoring page.
import { get } from "./api.js";
import { badge, errorBox, h, replace, table, when } from "./dom.js";

const STATE_CLASS = { healthy: "ok", degraded: "bad", unknown: "" };
const WATCH_CLASS = { live: "ok", stale: "bad", starting: "", parked: "", unwatched: "" };

function totals(clusters) {
  const sum = (key) => clusters.reduce((n, c) => n + (c.health.numbers?.[key] ?? 0), 0);
  return { nodes: sum("nodes"), gpuAllocated: sum("gpuAllocated"), gpuFree: sum("gpuFree"), jobs: sum("runningJobs"),
    alerts: clusters.reduce((n, c) => n + c.health.openAlerts, 0) };
}

export async function render(view, _arg, shell) {
  const card = h("section", { class: "card", id: "fleet", "data-operation": "cluster_list_all" });
  const note = h("p", { class: "muted small", id: "fleet-note", role: "status" });
  replace(view, h("div", { class: "stack" }, card));

  const figure = (c, key) => (c.health.numbers ? c.health.numbers[key] : "—");
  async function readNow(tag) {
    note.textContent = `Reading ${tag}…`;
    try {
      const s = await get("/clusters/status", { clusterTag: tag });
      note.textContent = `${tag}: ${s.nodeCount} nodes, ${s.ready ? "ready" : `${s.problems.length} problem(s)`}.`;
    } catch (err) { shell.fail(err); }
    await refresh();
  }
  async function monitor(tag) {
    if (shell.clusters?.activeCluster !== tag) await shell.switchCluster(tag);
    location.hash = "#/monitoring";
  }
  function draw(data) {
    const sum = totals(data.clusters);
    replace(card,
      h("div", { class: "card-head" }, h("h1", {}, "Fleet"), h("span", { class: "spacer" }),
        h("span", { class: "muted small", id: "fleet-count" },
          `${data.count} clusters · ${data.watched} watched · idle watches park after ${Math.round(data.watchIdleSeconds)} s`)),
      h("p", { class: "small", id: "fleet-totals" },
        `${sum.nodes} nodes · ${sum.gpuAllocated} GPUs allocated · ${sum.gpuFree} GPUs free · `,
        `${sum.jobs} running jobs · ${sum.alerts} open alerts (figures of watched and parked clusters)`),
      note,
      table([
        { label: "Cluster", cell: (c) => h("span", {}, c.clusterTag, c.active ? h("span", { class: "muted small" }, " (active)") : null) },
        { label: "Region", cell: (c) => c.region },
        { label: "Health", cell: (c) => badge(c.health.state, STATE_CLASS[c.health.state]) },
        { label: "Watch", cell: (c) => badge(c.health.watch, WATCH_CLASS[c.health.watch]) },
        { label: "Nodes usable", num: true, cell: (c) => (c.health.numbers ? `${c.health.numbers.nodesUsable}/${c.health.numbers.nodes}` : "—") },
        { label: "Needing attention", num: true, cell: (c) => figure(c, "nodesUnhealthy") },
        { label: "GPUs allocated", num: true, cell: (c) => figure(c, "gpuAllocated") },
        { label: "GPUs free", num: true, cell: (c) => figure(c, "gpuFree") },
        { label: "Running jobs", num: true, cell: (c) => figure(c, "runningJobs") },
        { label: "Open alerts", num: true, cell: (c) => c.health.openAlerts },
        { label: "Figures of", cell: (c) => when(c.health.numbers?.asOf) },
        { label: "Actions", cell: (c) => h("span", { class: "actions" },
          h("button", { type: "button", class: "small", "data-operation": "cluster_get_status", "aria-label": `Read now: ${c.clusterTag}`,
            onclick: () => readNow(c.clusterTag) }, "Read now"), " ",
          h("button", { type: "button", class: "small", "data-op": "cluster_switch", "aria-label": `Monitor ${c.clusterTag}`,
            onclick: () => monitor(c.clusterTag).catch((err) => shell.fail(err)) }, "Monitor")) },
      ], data.clusters, { empty: "No managed clusters yet.", rowAttrs: (c) => ({ dataset: { cluster: c.clusterTag } }) }));
  }
  async function refresh() {
    try { draw(await get("/clusters")); } catch (error) { replace(card, h("h1", {}, "Fleet"), errorBox(error)); }
  }
  const timer = setInterval(refresh, 10000);
  await refresh();
  return { refresh, dispose: () => clearInterval(timer) };
}
