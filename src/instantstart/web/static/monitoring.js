// Monitoring: nodes, GPU totals per instance type, and live pods, services and deployments of the active cluster.
import { get } from "./api.js";
import { badge, errorBox, h, replace, table, when } from "./dom.js";
import { events } from "./live.js";
import { nodeTable } from "./capacity.js";

export async function render(view, _arg, shell) {
  const summary = h("section", { class: "card", id: "summary" });
  const gpus = h("section", { class: "card", id: "gpus" });
  const nodes = h("section", { class: "card", id: "nodes" });
  const work = h("section", { class: "card", id: "workloads" });
  const timeline = h("section", { class: "card", id: "timeline" });
  replace(view, h("div", { class: "stack" }, summary, gpus, nodes, work, timeline));

  function drawStatus(s) {
    if (s.error) {
      replace(summary, h("h1", {}, "Monitoring"), errorBox(s.error));
      replace(gpus); replace(nodes);
      return;
    }
    replace(summary,
      h("div", { class: "card-head" }, h("h1", {}, "Monitoring ", h("span", { class: "muted" }, s.clusterTag)),
        badge(s.ready ? "ready" : "not ready", s.ready ? "ok" : "bad"), h("span", { class: "spacer" }),
        s.watch && s.watch.stale ? badge(`stale: ${Math.round(s.watch.dataAgeSeconds ?? 0)}s old`, "bad") : null,
        h("span", { class: "muted small" }, "checked ", when(s.checkedAt))),
      h("dl", { class: "kv" },
        h("dt", {}, "HyperPod"), h("dd", {}, s.hyperpodClusterName ?? "—", " ", badge(s.hyperpodStatus)),
        h("dt", {}, "Kubernetes API"), h("dd", {}, badge(s.kubernetesReachable ? "reachable" : "unreachable", s.kubernetesReachable ? "ok" : "bad")),
        h("dt", {}, "Nodes ready & schedulable"), h("dd", {}, `${s.nodesReadySchedulable} of ${s.nodeCount}`),
        h("dt", {}, "Storage claims"), h("dd", {}, s.storage.length ? s.storage.map((c) => h("span", {}, `${c.namespace}/${c.name} `, badge(c.phase, c.bound ? "ok" : "bad"), " ")) : "—"),
        h("dt", {}, "Dependencies"), h("dd", {}, s.dependencies.length ? s.dependencies.map((d) => h("span", { title: d.message ?? "" }, badge(d.name, d.healthy ? "ok" : "bad"), " ")) : (s.dependenciesRecorded ? "—" : "not recorded")),
        h("dt", {}, "Problems"), h("dd", {}, s.problems.length ? h("ul", { class: "plain-list" }, s.problems.map((p) => h("li", {}, p))) : "none")));
    replace(gpus, h("h2", {}, "Accelerators"),
      s.accelerators.length ? h("div", { class: "totals" }, s.accelerators.map((a) => h("div", { class: "total", dataset: { instanceType: a.instanceType } },
        h("div", { class: "muted small" }, a.instanceType, ` · ${a.nodesReady}/${a.nodes} nodes ready`),
        h("div", { class: "big" }, h("span", { class: "gpu-total" }, a.gpuTotal), h("span", { class: "muted small" }, " GPUs")),
        h("div", { class: "small" }, h("span", { class: "gpu-allocated" }, a.gpuAllocated), " allocated · ",
          h("span", { class: "gpu-available" }, a.gpuAvailable), " available",
          a.neuronTotal ? ` · Neuron ${a.neuronAllocated}/${a.neuronTotal}` : ""))))
        : h("p", { class: "empty" }, "No accelerated nodes."));
  }
  // Every node (the status lists only a few): one page of node_list, served from the cluster's watches.
  async function drawNodes() {
    const page = await get("/clusters/nodes?limit=200").catch((error) => ({ error }));
    if (page.error) { replace(nodes, h("h2", {}, "Nodes"), errorBox(page.error)); return; }
    replace(nodes, h("div", { class: "card-head" }, h("h2", {}, "Nodes"),
      h("span", { class: "muted small" }, `${page.nodes.length} of ${page.total}`)), nodeTable(page.nodes));
  }
  async function drawTimeline() {
    const page = await get("/clusters/timeline?limit=20").catch((error) => ({ error }));
    if (page.error) { replace(timeline, h("h2", {}, "Timeline"), errorBox(page.error)); return; }
    replace(timeline, h("h2", {}, "Timeline"),
      table([
        { label: "Last seen", cell: (e) => when(e.lastAt) }, { label: "Type", cell: (e) => badge(e.type, e.type === "Warning" ? "bad" : "ok") },
        { label: "Object", cell: (e) => h("span", { class: "mono small" }, `${e.objectKind}/${e.objectName}`) },
        { label: "Reason", cell: (e) => e.reason }, { label: "Message", cell: (e) => e.message },
        { label: "Count", num: true, cell: (e) => e.count }, { label: "Source", cell: (e) => e.source },
      ], page.entries, { empty: "Nothing recorded yet." }));
  }
  function drawWork(w) {
    if (w.error) { replace(work, h("h2", {}, "Workloads"), errorBox(w.error)); return; }
    replace(work, h("div", { class: "card-head" }, h("h2", {}, "Workloads"), h("span", { class: "muted small" }, "all namespaces"),
      w.truncated ? badge("truncated at 500", "bad") : null),
      h("h3", {}, `Pods (${w.pods.length})`),
      table([
        { label: "Namespace", cell: (p) => p.namespace }, { label: "Pod", cell: (p) => h("span", { class: "mono small" }, p.name) },
        { label: "Phase", cell: (p) => badge(p.phase) }, { label: "Ready", cell: (p) => p.ready },
        { label: "Restarts", num: true, cell: (p) => p.restarts }, { label: "Node", cell: (p) => p.node ?? "—" },
        { label: "GPUs", num: true, cell: (p) => p.gpusRequested },
      ], w.pods, { empty: "No pods." }),
      h("h3", {}, `Services (${w.services.length})`),
      table([
        { label: "Namespace", cell: (s) => s.namespace }, { label: "Service", cell: (s) => s.name },
        { label: "Type", cell: (s) => s.type }, { label: "Cluster IP", cell: (s) => s.clusterIp ?? "—" },
        { label: "Ports", cell: (s) => s.ports.join(", ") || "—" },
      ], w.services, { empty: "No services." }),
      h("h3", {}, `Deployments (${w.deployments.length})`),
      table([
        { label: "Namespace", cell: (d) => d.namespace }, { label: "Deployment", cell: (d) => d.name },
        { label: "Ready", num: true, cell: (d) => `${d.readyReplicas}/${d.replicas}` },
        { label: "Available", num: true, cell: (d) => d.availableReplicas }, { label: "Up to date", num: true, cell: (d) => d.updatedReplicas },
      ], w.deployments, { empty: "No deployments." }));
  }
  async function refresh() {
    const [s, w] = await Promise.all([
      get("/clusters/status").catch((error) => ({ error })),
      get("/clusters/workloads").catch((error) => ({ error })),
    ]);
    drawStatus(s); drawWork(w);
    if (!s.error) await Promise.all([drawNodes(), drawTimeline()]);
  }
  const onResources = (e) => {
    if (e.detail.status) drawStatus(e.detail.status);
    if (e.detail.workloads) drawWork(e.detail.workloads);
    if (e.detail.status && !e.detail.status.error) { drawNodes(); drawTimeline(); }
  };
  events.addEventListener("resources", onResources);
  await refresh();
  return { refresh, dispose: () => events.removeEventListener("resources", onResources) };
}
