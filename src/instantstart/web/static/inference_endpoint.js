// One inference endpoint's page (#/inference/<name>): a self-managed model server or a managed endpoint, its state,
// and its persistent timeline (events of the object, its ReplicaSets and pods: <name>-…).
import { get } from "./api.js";
import { badge, errorBox, h, replace } from "./dom.js";
import { timelineCard } from "./timeline.js";

export async function renderEndpoint(view, name) {
  const head = h("section", { class: "card", id: "endpoint" });
  const timeline = timelineCard("endpoint-timeline", "Timeline", { objectPrefix: name });
  replace(view, h("div", { class: "stack" }, h("p", {}, h("a", { href: "#/inference" }, "← Inference")), head, timeline.card));

  async function refresh() {
    const [own, managed] = await Promise.all([
      get("/inference/services").catch((error) => ({ error })),
      get("/inference/managed").catch((error) => ({ error })),
    ]);
    const server = own.error ? null : own.services.find((s) => s.name === name);
    const endpoint = managed.error ? null : managed.endpoints.find((e) => e.name === name);
    if (server) {
      const ready = server.replicasReady >= server.replicasDesired && server.replicasDesired;
      replace(head, h("div", { class: "card-head" }, h("h1", {}, name), badge(ready ? "ready" : "starting", ready ? "ok" : "")),
        h("dl", { class: "kv" },
          h("dt", {}, "Path"), h("dd", {}, "self-managed model server"),
          h("dt", {}, "Namespace"), h("dd", {}, server.namespace),
          h("dt", {}, "Engine · model"), h("dd", {}, `${server.engine} · ${server.model ?? "—"}`),
          h("dt", {}, "Replicas ready"), h("dd", { id: "endpoint-replicas" }, `${server.replicasReady}/${server.replicasDesired}`),
          h("dt", {}, "GPUs per replica"), h("dd", {}, String(server.gpusPerReplica)),
          h("dt", {}, "URL"), h("dd", { class: "mono small" }, server.url ?? "—")));
    } else if (endpoint) {
      replace(head, h("div", { class: "card-head" }, h("h1", {}, name), badge(endpoint.state, endpoint.state === "DeploymentComplete" ? "ok" : "")),
        h("dl", { class: "kv" },
          h("dt", {}, "Path"), h("dd", {}, `managed (${endpoint.kind})`),
          h("dt", {}, "Namespace"), h("dd", {}, endpoint.namespace),
          h("dt", {}, "Model · instance type"), h("dd", {}, `${endpoint.modelName ?? "—"} · ${endpoint.instanceType ?? "—"}`),
          h("dt", {}, "SageMaker endpoint"), h("dd", {}, endpoint.endpointName ? `${endpoint.endpointName} (${endpoint.endpointState ?? "pending"})` : "—"),
          endpoint.message ? [h("dt", {}, "Message"), h("dd", {}, endpoint.message)] : null));
    } else {
      const why = own.error ?? managed.error;
      replace(head, h("h1", {}, name), why ? errorBox(why) : h("p", { class: "empty" }, "No endpoint of this name on the active cluster (it may have been removed); its timeline stays below."));
    }
  }
  await Promise.all([refresh(), timeline.refresh()]);
  const timer = setInterval(() => refresh(), 5000);
  return { refresh: () => Promise.all([refresh(), timeline.refresh()]), dispose: () => clearInterval(timer) };
}
