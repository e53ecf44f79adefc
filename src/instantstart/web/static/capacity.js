// Capacity on the cluster page: the active cluster's instance groups and nodes (cluster_get_status).
import { get } from "./api.js";
import { badge, errorBox, h, replace, table } from "./dom.js";
import { events } from "./live.js";

export function capacitySection(shell) {
  const el = h("section", { class: "card", id: "capacity" });
  function draw(status) {
    if (status.error) {
      replace(el, h("div", { class: "card-head" }, h("h2", {}, "Capacity")),
        status.error.code === "NOT_FOUND" || status.error.code === "PRECONDITION_FAILED"
          ? h("p", { class: "empty" }, status.error.message) : errorBox(status.error));
      return;
    }
    replace(el,
      h("div", { class: "card-head" }, h("h2", {}, "Capacity"), h("span", { class: "muted small" }, status.clusterTag),
        h("span", { class: "spacer" }), h("span", { class: "small" }, "HyperPod ", badge(status.hyperpodStatus))),
      h("h3", {}, "Instance groups"),
      table([
        { label: "Group", cell: (g) => h("strong", {}, g.name) },
        { label: "Type", cell: (g) => g.instanceType ?? "—" },
        { label: "Status", cell: (g) => badge(g.status) },
        { label: "Current / target", num: true, cell: (g) => `${g.currentCount} / ${g.targetCount}` },
        { label: "Ready & schedulable", num: true, cell: (g) => g.nodesReadySchedulable },
      ], status.instanceGroups, { empty: "No instance groups.", rowAttrs: (g) => ({ dataset: { group: g.name } }) }),
      h("h3", {}, "Nodes"),
      nodeTable(status.nodes));
  }
  async function refresh() {
    try { draw(await get("/clusters/status")); } catch (err) { draw({ error: err }); }
  }
  const onResources = (e) => { if (e.detail.status) draw(e.detail.status); };
  events.addEventListener("resources", onResources);
  return { el, refresh, dispose: () => events.removeEventListener("resources", onResources) };
}

export function nodeTable(nodes) {
  return table([
    { label: "Node", cell: (n) => h("span", { class: "mono small" }, n.name) },
    { label: "Type", cell: (n) => n.instanceType },
    { label: "Group", cell: (n) => n.instanceGroup ?? "—" },
    { label: "Zone", cell: (n) => n.zone ?? "—" },
    { label: "Ready", cell: (n) => badge(n.ready ? "Ready" : "NotReady", n.ready ? "ok" : "bad") },
    { label: "Schedulable", cell: (n) => badge(n.schedulable ? "yes" : "no", n.schedulable ? "ok" : "bad") },
    { label: "Health", cell: (n) => h("span", {}, n.healthStatus ?? "—", n.deepHealthCheck ? ` · deep check ${n.deepHealthCheck}` : "") },
    { label: "GPUs (alloc)", num: true, cell: (n) => `${n.gpus} (${n.gpusAllocated})` },
  ], nodes, { empty: "No nodes.", rowAttrs: (n) => ({ dataset: { node: n.name } }) });
}
