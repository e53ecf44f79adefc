// Inference page, acting on what is deployed: a model server's replicas, KEDA autoscaling, an SGLang router in
// front of it, warm-pool binding, undeploy (a router picked: only its replicas and undeploy); a managed endpoint's removal; a JumpStart deployment; the services
// reachable from outside the cluster. Every action is a catalog operation followed to its end (operation_get).
import { get } from "./api.js";
import { confirmDialog, errorBox, field, h, replace, table } from "./dom.js";
import { input, num, opForm, run, select, text } from "./op_form.js";

// The "Manage a model server" card: every form acts on the server picked at its top.
export function manageCard(shell, onChange) {
  const server = h("select", { name: "deploymentName", id: "manage-server" });
  const managed = h("select", { name: "name", id: "manage-managed" });
  const picked = () => server.value;
  const common = { shell, done: onChange };
  const scale = opForm({ ...common, id: "scale-form", operation: "inference_scale", path: "/inference/deployments/scale", button: "Scale",
    fields: field("Replicas", input("replicas", "scale-replicas", { type: "number", min: "0", max: "64", value: "1" }), "0 stops every replica and keeps the server."),
    body: (d) => ({ deploymentName: picked(), replicas: num(d.get("replicas")) }) });
  const autoscale = opForm({ ...common, id: "autoscale-form", operation: "inference_autoscaling_apply", path: "/inference/autoscaling", button: "Apply autoscaling",
    fields: [
      field("Prometheus URL", input("serverAddress", "as-server", { placeholder: "http://prometheus.monitoring:9090" }), "Where KEDA reads the metric."),
      field("Query", input("query", "as-query", { placeholder: "sum(vllm:num_requests_waiting)" }), "Empty: the router's in-flight requests (with an SGLang router)."),
      h("div", { class: "row3" },
        field("Threshold", input("threshold", "as-threshold", { type: "number", step: "any", min: "0", value: "5" })),
        field("Min replicas", input("minReplicas", "as-min", { type: "number", min: "0", max: "64", value: "1" })),
        field("Max replicas", input("maxReplicas", "as-max", { type: "number", min: "1", max: "64", value: "4" })))],
    body: (d) => ({ deploymentName: picked(), serverAddress: text(d.get("serverAddress")), query: text(d.get("query")),
      threshold: num(d.get("threshold")), minReplicas: num(d.get("minReplicas")), maxReplicas: num(d.get("maxReplicas")) }) });
  const router = opForm({ ...common, id: "router-form", operation: "inference_router_deploy", path: "/inference/routers", button: "Deploy router",
    fields: h("div", { class: "row" },
      field("Router name", input("routerName", "router-name"), "Default <server>-router."),
      field("Policy", select("policy", "router-policy", [["cache_aware", "cache-aware"], ["round_robin", "round robin"], ["random", "random"], ["power_of_two", "power of two"]]))),
    body: (d) => ({ deploymentName: picked(), routerName: text(d.get("routerName")), policy: d.get("policy") }) });
  const release = h("button", { type: "button", "data-operation": "inference_pool_release" }, "Release");
  const pool = opForm({ ...common, id: "pool-form", operation: "inference_pool_assign", path: "/inference/pool/assign", button: "Assign workers",
    fields: h("div", { class: "row" },
      field("Service", input("service", "pool-service", { placeholder: "chat" }), "The Service (<name>-service) the workers are bound to."),
      field("Workers", input("count", "pool-count", { type: "number", min: "1", max: "64", value: "1" }))),
    body: (d) => ({ service: text(d.get("service")), count: num(d.get("count")), pool: picked() }), extra: [release] });
  const poolStatus = pool.querySelector("#pool-form-status");
  release.addEventListener("click", () => {
    const service = text(new FormData(pool).get("service"));
    run(pool, poolStatus, release, { ...common, operation: "inference_pool_release", path: "/inference/pool/release", body: { service, pool: picked() } });
  });
  const undeploy = opForm({ ...common, id: "undeploy-form", operation: "inference_undeploy", path: "/inference/deployments/delete", button: "Undeploy…",
    fields: field("Remove", select("scope", "undeploy-scope", [["all", "the server (its Service and autoscaler too)"], ["autoscaling", "only its autoscaler"]])),
    body: (d) => ({ deploymentName: picked(), scope: d.get("scope") }),
    confirm: (b) => confirmDialog(`Undeploy ${b.deploymentName}?`, b.scope !== "all" ? "Its KEDA autoscaler is deleted; the replicas stay as they are."
      : isRouter() ? "The router's pods, Service and RBAC are deleted; the model server behind it stays." : "Its pods, Service and autoscaler are deleted, with the routers in front of it.", "Undeploy") });
  const removeManaged = opForm({ ...common, id: "managed-delete-form", operation: "inference_managed_delete", path: "/inference/managed/delete", button: "Delete…",
    fields: field("Managed endpoint", managed),
    body: () => ({ name: managed.value }),
    confirm: (b) => confirmDialog(`Delete managed endpoint ${b.name}?`, "The operator removes its workers, its routing and its SageMaker endpoint.", "Delete endpoint") });
  removeManaged.querySelector("button[type=submit]").classList.replace("primary", "danger");
  undeploy.querySelector("button[type=submit]").classList.replace("primary", "danger");

  const section = (title, form) => h("div", { class: "card sub", "data-op": form.dataset.op }, h("h3", {}, title), form);
  // What acts on model workers only (each refuses a router): hidden while a router is picked.
  const workersOnly = h("div", { class: "stack", id: "manage-workers-only" }, section("Autoscaling (KEDA)", autoscale), section("SGLang router", router),
    section("Model pool: bind warm workers of this server (serviceType modelpool) to a service", pool));
  const isRouter = () => server.selectedOptions[0]?.dataset.kind === "router";
  server.addEventListener("change", () => { workersOnly.hidden = isRouter(); });
  const card = h("section", { class: "card", id: "manage", "aria-labelledby": "manage-title" },
    h("h2", { id: "manage-title" }, "Manage a model server"),
    field("Model server", server, "Self-managed servers and the SGLang routers in front of them, of the active cluster."),
    section("Replicas", scale), workersOnly, section("Undeploy", undeploy), section("Delete a managed endpoint", removeManaged));
  // own: inference_list_services' entries (name, kind); endpoints: managed endpoint names.
  function update(own, endpoints) {
    const fill = (sel, options, none) => {
      const chosen = sel.value;
      replace(sel, options.length ? options : h("option", { value: "" }, none));
      if (options.some((o) => o.value === chosen)) sel.value = chosen;
    };
    fill(server, own.map((s) => h("option", { value: s.name, dataset: { kind: s.kind } }, s.kind === "router" ? `${s.name} (router)` : s.name)), "no model server deployed");
    fill(managed, endpoints.map((n) => h("option", { value: n }, n)), "no managed endpoint");
    workersOnly.hidden = isRouter();
  }
  return { card, update };
}

export function jumpstartCard(shell, onChange) {
  const form = opForm({ shell, done: onChange, id: "jumpstart-form", operation: "inference_jumpstart_deploy", path: "/inference/jumpstart", button: "Deploy from JumpStart",
    fields: [
      h("div", { class: "row" },
        field("JumpStart model id", input("modelId", "js-model", { placeholder: "huggingface-llm-qwen2-5-7b-instruct" })),
        field("Version", input("modelVersion", "js-version", { placeholder: "latest" }))),
      h("div", { class: "row" },
        field("Instance type", input("instanceType", "js-type", { value: "ml.g6.4xlarge" })),
        field("Replicas", input("replicas", "js-replicas", { type: "number", min: "1", max: "64", value: "1" }))),
      h("div", { class: "row" },
        field("Name", input("name", "js-name"), "Default: derived from the model id."),
        field("SageMaker endpoint name", input("endpointName", "js-endpoint"))),
      h("div", { class: "field" }, h("label", { for: "js-sagemaker" }, h("input", { type: "checkbox", name: "sagemakerEndpoint", id: "js-sagemaker", checked: true }), " Register a SageMaker endpoint")),
      h("div", { class: "field" }, h("label", { for: "js-eula" }, h("input", { type: "checkbox", name: "acceptEula", id: "js-eula" }), " I accept the model's EULA (gated models)"))],
    body: (d) => ({ modelId: text(d.get("modelId")), modelVersion: text(d.get("modelVersion")), instanceType: text(d.get("instanceType")),
      replicas: num(d.get("replicas")), name: text(d.get("name")), endpointName: text(d.get("endpointName")),
      sagemakerEndpoint: d.get("sagemakerEndpoint") === "on", acceptEula: d.get("acceptEula") === "on" }) });
  return h("section", { class: "card", id: "jumpstart", "aria-labelledby": "jumpstart-title", "data-op": "inference_jumpstart_deploy" },
    h("h2", { id: "jumpstart-title" }, "Deploy a JumpStart model"),
    h("p", { class: "hint" }, "Checked against the SageMaker hub first; the inference operator runs it on the cluster's GPUs."), form);
}

export function publicServicesCard() {
  const card = h("section", { class: "card", id: "public-services", "aria-labelledby": "public-title", "data-operation": "inference_list_public_services" });
  async function refresh() {
    const found = await get("/inference/public-services").catch((error) => ({ error }));
    const title = h("h2", { id: "public-title" }, "Reachable from outside the cluster");
    if (found.error) { replace(card, title, errorBox(found.error)); return; }
    replace(card, title, table([
      { label: "Name", cell: (s) => h("strong", {}, s.name) },
      { label: "Engine", cell: (s) => s.engine },
      { label: "Load balancer", cell: (s) => s.loadBalancer ?? "—" },
      { label: "URL", cell: (s) => h("span", { class: "mono small" }, s.url ?? "—") },
      { label: "Source ranges", cell: (s) => s.sourceRanges?.join(", ") || "—" },
    ], found.services ?? [], { empty: "No model server is reachable from outside the cluster.", rowAttrs: (s) => ({ dataset: { service: s.name } }) }));
  }
  return { card, refresh };
}
