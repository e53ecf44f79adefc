// Monitoring: the active cluster's nodes, GPU totals, pods, services, deployments, training jobs and inference
// endpoints (both paths) with filters; GPU utilisation and the AMP / Grafana links when observability is on; the
// cluster timeline. Live over the WebSocket. #/monitoring/<node> is one node's page.
import { get } from "./api.js";
import { badge, errorBox, h, replace, table, when } from "./dom.js";
import { askSnapshot, events } from "./live.js";
import { nodeTable } from "./capacity.js";
import { observabilityCard } from "./gpu_chart.js";
import { renderNode } from "./monitoring_node.js";
import { timelineCard } from "./timeline.js";
import { validationCard } from "./validation.js";
import { podLogsCard } from "./diagnostics.js";

const HEALTH = ["Schedulable", "Unschedulable", "UnschedulablePendingReplacement", "UnschedulablePendingReboot"];

export async function render(view, arg, shell) {
  if (arg) return renderNode(view, arg);
  const summary = h("section", { class: "card", id: "summary", "data-operation": "cluster_get_status" });
  const gpus = h("section", { class: "card", id: "gpus" });
  const filters = h("section", { class: "card", id: "filters", "aria-labelledby": "filters-title" });
  const nodes = h("section", { class: "card", id: "nodes", "data-operation": "node_list" });
  const work = h("section", { class: "card", id: "workloads", "data-operation": "cluster_list_workloads" });
  const jobsCard = h("section", { class: "card", id: "jobs", "data-operation": "training_job_list" });
  const endpointsCard = h("section", { class: "card", id: "endpoints", "data-operation": "inference_managed_list" });
  const observability = observabilityCard();
  const timeline = timelineCard("timeline", "Timeline", {}, { events: true });
  const validation = validationCard(shell);
  const podLogs = podLogsCard(shell);
  const switcher = clusterSwitcher(shell, () => refresh());
  replace(view, h("div", { class: "stack" }, switcher.card, summary, gpus, observability.card, filters, nodes, validation.card, work, podLogs.card,
    jobsCard, endpointsCard, timeline.card));

  // The filters: text (names), instance type, instance group, node health, namespace (where each applies).
  const f = { text: "", instanceType: "", instanceGroup: "", health: "", namespace: "" };
  const text = h("input", { type: "search", id: "filter-text", name: "text", placeholder: "name contains…" });
  const type = h("select", { id: "filter-type", name: "instanceType" }, h("option", { value: "" }, "all"));
  const group = h("select", { id: "filter-group", name: "instanceGroup" }, h("option", { value: "" }, "all"));
  const health = h("select", { id: "filter-health", name: "health" }, h("option", { value: "" }, "all"),
    h("option", { value: "attention" }, "needs attention"), HEALTH.map((x) => h("option", { value: x }, x)));
  const namespace = h("select", { id: "filter-namespace", name: "namespace" }, h("option", { value: "" }, "all"));
  const labelled = (label, control, applies) => h("div", { class: "field" },
    h("label", { for: control.id }, label), control, h("p", { class: "hint" }, applies));
  replace(filters, h("h2", { id: "filters-title" }, "Filters"),
    h("div", { class: "filters" },
      labelled("Name", text, "every table"), labelled("Instance type", type, "nodes; jobs and endpoints where known"),
      labelled("Instance group", group, "nodes"), labelled("Health", health, "nodes"),
      labelled("Namespace", namespace, "pods, services, deployments, jobs, endpoints")));
  const options = (select, values) => {
    const chosen = select.value;
    const wanted = ["", ...[...new Set(values)].sort()];
    if ([...select.options].map((o) => o.value).join("\n") === wanted.join("\n")) return;
    replace(select, wanted.map((v) => h("option", { value: v }, v || "all")));
    select.value = wanted.includes(chosen) ? chosen : "";
  };
  const named = (name) => !f.text || name.toLowerCase().includes(f.text.toLowerCase());
  const inNamespace = (ns) => !f.namespace || ns === f.namespace;
  // A row whose instance type is not known (a self-managed server may run on any GPU type) is never hidden by it.
  const ofType = (t) => !f.instanceType || !t || t === f.instanceType;

  let lastWork = null, lastJobs = null, lastEndpoints = null;
  let debounce = null;
  const onFilter = () => {
    Object.assign(f, { text: text.value.trim(), instanceType: type.value, instanceGroup: group.value, health: health.value, namespace: namespace.value });
    clearTimeout(debounce);
    debounce = setTimeout(() => { drawNodes(); if (lastWork) drawWork(lastWork); drawJobs(); drawEndpoints(); }, 150);
  };
  for (const c of [type, group, health, namespace]) c.addEventListener("change", onFilter);
  text.addEventListener("input", onFilter);

  function drawStatus(s) {
    if (s.error) {
      replace(summary, h("h1", {}, "Monitoring"), errorBox(s.error));
      replace(gpus); replace(nodes);
      return;
    }
    options(type, s.accelerators.map((a) => a.instanceType).concat(s.instanceGroups.map((g) => g.instanceType).filter(Boolean)));
    options(group, s.instanceGroups.map((g) => g.name));
    validation.refresh(s.clusterTag);
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
  // Nodes: one filtered page of node_list (the filters run on the server, over every node of the watches).
  async function drawNodes() {
    const q = { limit: 200, nameContains: f.text || undefined, instanceType: f.instanceType || undefined,
      instanceGroup: f.instanceGroup || undefined };
    if (f.health === "attention") q.unhealthyOnly = true; else if (f.health) q.healthStatus = f.health;
    const page = await get("/clusters/nodes", q).catch((error) => ({ error }));
    if (page.error) { replace(nodes, h("h2", {}, "Nodes"), errorBox(page.error)); return; }
    replace(nodes, h("div", { class: "card-head" }, h("h2", {}, "Nodes"),
      h("span", { class: "muted small", id: "nodes-count" }, `${page.nodes.length} of ${page.total}`)),
    nodeTable(page.nodes, null, { link: true }));
  }
  function drawWork(w) {
    lastWork = w;
    if (w.error) { replace(work, h("h2", {}, "Workloads"), errorBox(w.error)); return; }
    options(namespace, [...w.pods, ...w.services, ...w.deployments].map((x) => x.namespace)
      .concat((lastJobs?.jobs ?? []).map((j) => j.namespace)));
    const keep = (x) => named(x.name) && inNamespace(x.namespace);
    const pods = w.pods.filter(keep), services = w.services.filter(keep), deployments = w.deployments.filter(keep);
    replace(work, h("div", { class: "card-head" }, h("h2", {}, "Workloads"), h("span", { class: "muted small" }, f.namespace || "all namespaces"),
      w.truncated ? badge("truncated at 500", "bad") : null),
      h("h3", {}, `Pods (${pods.length})`),
      table([
        { label: "Namespace", cell: (p) => p.namespace }, { label: "Pod", cell: (p) => h("span", { class: "mono small" }, p.name) },
        { label: "Phase", cell: (p) => badge(p.phase) }, { label: "Ready", cell: (p) => p.ready },
        { label: "Restarts", num: true, cell: (p) => p.restarts }, { label: "Node", cell: (p) => p.node ?? "—" },
        { label: "GPUs", num: true, cell: (p) => p.gpusRequested },
        { label: "", cell: (p) => h("button", { type: "button", class: "small", "data-operation": "pod_logs", "aria-label": `Logs of ${p.name}`,
          onclick: () => podLogs.open(p.namespace, p.name) }, "Logs") },
      ], pods, { empty: "No pods.", rowAttrs: (p) => ({ dataset: { pod: p.name } }) }),
      h("h3", {}, `Services (${services.length})`),
      table([
        { label: "Namespace", cell: (s) => s.namespace }, { label: "Service", cell: (s) => s.name },
        { label: "Type", cell: (s) => s.type }, { label: "Cluster IP", cell: (s) => s.clusterIp ?? "—" },
        { label: "Ports", cell: (s) => s.ports.join(", ") || "—" },
      ], services, { empty: "No services." }),
      h("h3", {}, `Deployments (${deployments.length})`),
      table([
        { label: "Namespace", cell: (d) => d.namespace }, { label: "Deployment", cell: (d) => d.name },
        { label: "Ready", num: true, cell: (d) => `${d.readyReplicas}/${d.replicas}` },
        { label: "Available", num: true, cell: (d) => d.availableReplicas }, { label: "Up to date", num: true, cell: (d) => d.updatedReplicas },
      ], deployments, { empty: "No deployments." }));
  }
  // Training jobs of both paths (HyperPodPyTorchJob, RayJob) with their state.
  function drawJobs() {
    const list = lastJobs;
    const head = h("div", { class: "card-head" }, h("h2", {}, "Training jobs"));
    if (!list) return;
    if (list.error) { replace(jobsCard, head, errorBox(list.error)); return; }
    const jobs = list.jobs.filter((j) => named(j.name) && inNamespace(j.namespace) && ofType(j.instanceType));
    replace(jobsCard, head, table([
      { label: "Job", cell: (j) => h("a", { href: `#/training/${encodeURIComponent(j.name)}` }, j.name) },
      { label: "Namespace", cell: (j) => j.namespace }, { label: "Kind", cell: (j) => j.kind },
      { label: "State", cell: (j) => badge(j.state, j.state === "Completed" || j.state === "Running" ? "ok" : j.state === "Failed" ? "bad" : "") },
      { label: "Nodes", num: true, cell: (j) => j.nodes }, { label: "Instance type", cell: (j) => j.instanceType ?? "—" },
      { label: "Restarts", num: true, cell: (j) => j.restartCount }, { label: "Created", cell: (j) => when(j.createdAt) },
    ], jobs, { empty: list.jobs.length ? "No job matches the filters." : "No training jobs.", rowAttrs: (j) => ({ dataset: { job: j.name } }) }));
  }
  // Inference endpoints of both paths: self-managed model servers and managed endpoints.
  function drawEndpoints() {
    const e = lastEndpoints;
    const head = h("div", { class: "card-head" }, h("h2", {}, "Inference endpoints"));
    if (!e) return;
    const rows = [
      ...(e.own.error ? [] : e.own.services.map((s) => ({ name: s.name, namespace: s.namespace, path: "self-managed", detail: `${s.engine} · ${s.model ?? "—"}`,
        instanceType: null, state: s.replicasReady >= s.replicasDesired && s.replicasDesired ? "ready" : "starting", replicas: `${s.replicasReady}/${s.replicasDesired}` }))),
      ...(e.managed.error ? [] : e.managed.endpoints.map((m) => ({ name: m.name, namespace: m.namespace, path: `managed (${m.kind})`, detail: m.modelName ?? "—",
        instanceType: m.instanceType, state: m.state, replicas: m.replicas ?? "—" }))),
    ].filter((r) => named(r.name) && inNamespace(r.namespace) && ofType(r.instanceType));
    replace(endpointsCard, head,
      e.own.error ? errorBox(e.own.error) : null, e.managed.error ? errorBox(e.managed.error) : null,
      table([
        { label: "Endpoint", cell: (r) => h("a", { href: `#/inference/${encodeURIComponent(r.name)}` }, r.name) },
        { label: "Namespace", cell: (r) => r.namespace }, { label: "Path", cell: (r) => r.path }, { label: "Model", cell: (r) => r.detail },
        { label: "Instance type", cell: (r) => r.instanceType ?? "—" },
        { label: "State", cell: (r) => badge(r.state, ["ready", "DeploymentComplete"].includes(r.state) ? "ok" : "") },
        { label: "Replicas", num: true, cell: (r) => String(r.replicas) },
      ], rows, { empty: "No inference endpoints match.", rowAttrs: (r) => ({ dataset: { endpoint: r.name } }) }));
  }
  async function loadWorkloads() {
    const [jobs, own, managed] = await Promise.all([
      get("/training/jobs").catch((error) => ({ error })),
      get("/inference/services").catch((error) => ({ error })),
      get("/inference/managed").catch((error) => ({ error })),
    ]);
    lastJobs = jobs; lastEndpoints = { own, managed };
    drawJobs(); drawEndpoints();
  }
  async function refresh() {
    const [s, w] = await Promise.all([
      get("/clusters/status").catch((error) => ({ error })),
      get("/clusters/workloads").catch((error) => ({ error })),
    ]);
    drawStatus(s); drawWork(w);
    if (!s.error) await Promise.all([drawNodes(), timeline.refresh(), loadWorkloads(), observability.refresh()]);
  }
  // Pushed over the WebSocket: a snapshot at once when the cluster's watches see a change (pods, deployments,
  // training jobs, endpoints), else every few seconds; no poll of the job and endpoint tables.
  const onResources = (e) => {
    const d = e.detail;
    if (d.status) drawStatus(d.status);
    if (d.workloads) drawWork(d.workloads);
    if (d.jobs) { lastJobs = d.jobs; drawJobs(); }
    if (d.servers && d.managed) { lastEndpoints = { own: d.servers, managed: d.managed }; drawEndpoints(); }
    if (d.status && !d.status.error) { drawNodes(); timeline.refresh(); }
  };
  events.addEventListener("resources", onResources);
  const gpuTimer = setInterval(() => observability.refresh(), 15000);  // the workspace scrapes every 30 s
  await refresh();
  return { refresh, dispose: () => { events.removeEventListener("resources", onResources); clearInterval(gpuTimer); validation.dispose(); switcher.dispose(); } };
}

// The Monitoring page's cluster switcher: every managed cluster with its fleet health; choosing one makes it the
// active cluster (cluster_switch) and the page shows it (the Fleet page compares them all).
function clusterSwitcher(shell, switched) {
  const select = h("select", { id: "monitor-cluster", name: "cluster" });
  const card = h("section", { class: "card", id: "cluster-switcher", "data-op": "cluster_switch" },
    h("div", { class: "card-head" }, h("label", { for: "monitor-cluster" }, "Cluster shown"), select,
      h("span", { class: "spacer" }), h("a", { href: "#/fleet" }, "Fleet overview")));
  const fill = (data) => {
    if (!data) return;
    replace(select, data.clusters.map((c) => h("option", { value: c.clusterTag },
      `${c.clusterTag} (${c.region}) — ${c.health?.state ?? "unknown"}`)));
    select.value = data.activeCluster ?? "";
  };
  const onClusters = (e) => fill(e.detail);
  select.addEventListener("change", async () => {
    if (!select.value || select.value === shell.clusters?.activeCluster) return;
    try { if (await shell.switchCluster(select.value)) { await switched(); askSnapshot(); } } catch (err) { shell.fail(err); }
  });
  events.addEventListener("clusters", onClusters);
  fill(shell.clusters);
  return { card, dispose: () => events.removeEventListener("clusters", onClusters) };
}
