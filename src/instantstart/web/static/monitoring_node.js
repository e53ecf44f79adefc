// One node's page (#/monitoring/<node name>): its state from the watches (node_list), for a HyperPod node its
// pods and HyperPod view (node_describe), and its persistent timeline (HyperPod and Kubernetes events).
import { get } from "./api.js";
import { badge, errorBox, h, replace, table, when } from "./dom.js";
import { timelineCard } from "./timeline.js";

const HYPERPOD_NODE = /^(hyperpod-)?i-[0-9a-f]{8}([0-9a-f]{9})?$/;

export async function renderNode(view, name) {
  const head = h("section", { class: "card", id: "node", "data-operation": "node_describe" });
  const podsCard = h("section", { class: "card", id: "node-pods" });
  const hyperpod = HYPERPOD_NODE.test(name);
  const timeline = timelineCard("node-timeline", "Timeline", hyperpod ? { nodeId: name } : { objectKind: "Node", objectName: name });
  replace(view, h("div", { class: "stack" }, h("p", {}, h("a", { href: "#/monitoring" }, "← Monitoring")), head, podsCard, timeline.card));

  async function refresh() {
    const [page, described] = await Promise.all([
      get("/clusters/nodes", { nameContains: name, limit: 200 }).catch((error) => ({ error })),
      hyperpod ? get("/diagnostics/node", { nodeId: name }).catch((error) => ({ error })) : Promise.resolve(null),
    ]);
    if (page.error) { replace(head, h("h1", {}, name), errorBox(page.error)); return; }
    const n = page.nodes.find((x) => x.name === name);
    if (!n) {
      replace(head, h("h1", {}, name), h("p", { class: "empty" }, "This node is not in the cluster now (replaced or removed); its timeline stays below."));
    } else {
      replace(head, h("div", { class: "card-head" }, h("h1", {}, name),
        badge(n.ready ? "Ready" : "NotReady", n.ready ? "ok" : "bad"), badge(n.schedulable ? "schedulable" : "unschedulable", n.schedulable ? "ok" : "bad")),
      h("dl", { class: "kv" },
        h("dt", {}, "Instance type · group"), h("dd", {}, `${n.instanceType} · ${n.instanceGroup ?? "—"}`),
        h("dt", {}, "Zone"), h("dd", {}, n.zone ?? "—"),
        h("dt", {}, "Health"), h("dd", { id: "node-health" }, n.healthStatus ?? "—", n.deepHealthCheck ? ` · deep check ${n.deepHealthCheck}` : "",
          n.faultReasons ? ` · ${n.faultReasons}` : ""),
        h("dt", {}, "GPUs"), h("dd", {}, `${n.gpusAllocated} of ${n.gpus} requested`),
        h("dt", {}, "Taints"), h("dd", { class: "mono small" }, n.taints.join(", ") || "none"),
        described && !described.error && described.hyperpod ? [
          h("dt", {}, "HyperPod instance"), h("dd", {}, `${described.instanceId} · ${described.hyperpod.status ?? "—"}`,
            described.hyperpod.launchTime ? ` · launched ${when(described.hyperpod.launchTime)}` : ""),
        ] : null));
    }
    if (!described) { replace(podsCard, h("h2", {}, "Pods"), h("p", { class: "empty" }, "Pods are listed for HyperPod nodes.")); return; }
    if (described.error) { replace(podsCard, h("h2", {}, "Pods"), errorBox(described.error)); return; }
    replace(podsCard, h("h2", {}, `Pods (${described.pods.length})`), table([
      { label: "Namespace", cell: (p) => p.namespace }, { label: "Pod", cell: (p) => h("span", { class: "mono small" }, p.name) },
      { label: "Phase", cell: (p) => badge(p.phase) }, { label: "GPUs", num: true, cell: (p) => p.gpus },
    ], described.pods, { empty: "No pods on this node." }));
  }
  await Promise.all([refresh(), timeline.refresh()]);
  const timer = setInterval(() => refresh(), 10000);
  return { refresh: () => Promise.all([refresh(), timeline.refresh()]), dispose: () => clearInterval(timer) };
}
