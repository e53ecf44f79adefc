// Inference: model servers (self-managed and managed) with their status, a deploy form (GPU count asked, the free
// GPUs shown) and a "test the model" box; every value goes through the REST operations the MCP tools use.
import { ApiError, get, newKey, post } from "./api.js";
import { badge, clearErrors, errorBox, field, h, replace, showError, table } from "./dom.js";
import { renderEndpoint } from "./inference_endpoint.js";
import { managedCard } from "./inference_managed.js";
import { jumpstartCard, manageCard, publicServicesCard } from "./inference_manage.js";

const TEMPLATES = {
  vllm: "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280 --tensor-parallel-size 1",
  sglang: "python3 -m sglang.launch_server --model-path Qwen/Qwen3-0.6B --tp 1",
  other: "",
};

function freeGpus(status) {
  if (!status || status.error) return "GPU availability is unknown (the cluster status did not answer).";
  const accel = status.accelerators ?? [];
  if (!accel.length) return "No GPU nodes in this cluster.";
  return "Free GPUs: " + accel.map((a) => `${a.instanceType}: ${a.gpuAvailable} of ${a.gpuTotal}`).join(" · ");
}

export async function render(view, arg, shell) {
  if (arg) return renderEndpoint(view, arg);
  const servers = h("section", { class: "card", id: "services", "aria-labelledby": "services-title", "data-operation": "inference_list_services" });
  const deploy = h("section", { class: "card", id: "deploy", "aria-labelledby": "deploy-title" });
  const call = h("section", { class: "card", id: "call", "aria-labelledby": "call-title" });
  const managed = h("div", {});
  const manage = manageCard(shell, () => drawServers());
  const publicServices = publicServicesCard();
  replace(view, h("div", { class: "stack" }, h("h1", {}, "Inference"), servers, h("div", { class: "grid" }, deploy, call),
    h("div", { class: "grid" }, manage.card, h("div", { class: "stack" }, jumpstartCard(shell, () => drawServers()), publicServices.card)), managed));

  let names = [];
  const target = h("select", { name: "service_name", id: "call-service", required: true });
  async function drawServers() {
    const [own, managed] = await Promise.all([
      get("/inference/services").catch((error) => ({ error })),
      get("/inference/managed").catch((error) => ({ error })),
    ]);
    const head = h("div", { class: "card-head" }, h("h2", { id: "services-title" }, "Model servers"),
      own.clusterTag ? h("span", { class: "muted small" }, own.clusterTag) : null);
    if (own.error) { replace(servers, head, errorBox(own.error)); manage.update([], []); return; }
    replace(servers, head,
      h("h3", {}, `Self-managed (${own.count})`),
      table([
        { label: "Name", cell: (s) => h("a", { href: `#/inference/${encodeURIComponent(s.name)}` }, h("strong", {}, s.name)) },
        { label: "Engine", cell: (s) => s.engine },
        { label: "Model", cell: (s) => s.model ?? "—" },
        { label: "Ready", num: true, cell: (s) => h("span", { class: "ready" }, `${s.replicasReady}/${s.replicasDesired}`) },
        { label: "Status", cell: (s) => badge(s.replicasReady >= s.replicasDesired && s.replicasDesired ? "ready" : "starting",
          s.replicasReady >= s.replicasDesired && s.replicasDesired ? "ok" : "") },
        { label: "GPUs / replica", num: true, cell: (s) => s.gpusPerReplica },
        { label: "Service", cell: (s) => s.serviceType ? `${s.service} (${s.serviceType})` : "—" },
        { label: "URL", cell: (s) => h("span", { class: "mono small" }, s.url ?? "—") },
      ], own.services, { empty: "No model servers yet: deploy one below.", rowAttrs: (s) => ({ dataset: { service: s.name } }) }),
      h("h3", {}, `Managed (${managed.error ? "—" : managed.count})`),
      managed.error ? errorBox(managed.error) : table([
        { label: "Name", cell: (e) => h("a", { href: `#/inference/${encodeURIComponent(e.name)}` }, h("strong", {}, e.name)) },
        { label: "Kind", cell: (e) => e.kind },
        { label: "Model", cell: (e) => e.modelName ?? "—" }, { label: "Instance type", cell: (e) => e.instanceType ?? "—" },
        { label: "State", cell: (e) => badge(e.state, e.state === "DeploymentComplete" ? "ok" : "") },
        { label: "SageMaker endpoint", cell: (e) => e.endpointName ? `${e.endpointName} (${e.endpointState ?? "pending"})` : "—" },
      ], managed.endpoints, { empty: "No managed endpoints (inference_managed_deploy, inference_jumpstart_deploy)." }));
    const picked = target.value;
    names = [...own.services.map((s) => s.name), ...(managed.error ? [] : managed.endpoints.map((e) => e.name))];
    replace(target, names.length ? names.map((n) => h("option", { value: n }, n)) : h("option", { value: "" }, "nothing deployed"));
    if (names.includes(picked)) target.value = picked;
    manage.update(own.services, managed.error ? [] : managed.endpoints.map((e) => e.name));
  }

  const engine = h("select", { name: "engine", id: "deploy-engine" },
    h("option", { value: "vllm" }, "vLLM"), h("option", { value: "sglang" }, "SGLang"), h("option", { value: "other" }, "Other image"));
  const command = h("textarea", { name: "deploymentCommand", id: "deploy-command", rows: "3", required: true });
  command.value = TEMPLATES.vllm;
  engine.addEventListener("change", () => { command.value = TEMPLATES[engine.value]; });
  const gpus = h("input", { type: "number", name: "gpuCount", id: "deploy-gpus", min: "1", max: "64", required: true });
  const free = h("p", { class: "hint", id: "free-gpus", "data-operation": "cluster_get_status" }, "Free GPUs: …");
  gpus.setAttribute("aria-describedby", "free-gpus");
  const form = h("form", { novalidate: true },
    field("Engine", engine),
    field("Command", command, "Run as an argument list, never through a shell."),
    h("div", { class: "field" }, h("label", { for: gpus.id }, "GPUs per replica (required, never inferred)"), gpus, free),
    field("Name", h("input", { type: "text", name: "deploymentName", id: "deploy-name" }), "Default <engine>-model-<date>; the Service is <name>-service."),
    field("Replicas", h("input", { type: "number", name: "replicas", id: "deploy-replicas", min: "1", max: "64", value: "1" })),
    field("Service type", h("select", { name: "serviceType", id: "deploy-service-type" },
      h("option", { value: "clusterip" }, "clusterip (in-cluster)"), h("option", { value: "external" }, "external (load balancer)"),
      h("option", { value: "modelpool" }, "modelpool (warm workers)"))),
    field("Source ranges", h("input", { type: "text", name: "sourceRanges", id: "deploy-source-ranges" }), "External only, required: client CIDRs, comma-separated (e.g. 10.0.0.0/16)."),
    field("Load balancer", h("select", { name: "loadBalancerScheme", id: "deploy-lb-scheme" },
      h("option", { value: "internal" }, "internal (VPC only)"), h("option", { value: "internet-facing" }, "internet-facing (needs an API key)"))),
    field("API key", h("input", { type: "password", name: "apiKey", id: "deploy-api-key", autocomplete: "off" }), "External only; required when internet-facing. Kept in a Kubernetes Secret."),
    field("Image", h("input", { type: "text", name: "dockerImage", id: "deploy-image" }), "Default: the engine's image; required for another engine."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "inference_deploy_container" }, "Deploy"), h("span", { class: "muted small", id: "deploy-progress", role: "status" })));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    const data = new FormData(form);
    const body = { deploymentCommand: data.get("deploymentCommand"), serviceType: data.get("serviceType") };
    if (data.get("gpuCount") !== "") body.gpuCount = Number(data.get("gpuCount"));
    if (data.get("replicas")) body.replicas = Number(data.get("replicas"));
    for (const key of ["deploymentName", "dockerImage"]) if (data.get(key)) body[key] = data.get(key);
    if (body.serviceType === "external") {
      const ranges = String(data.get("sourceRanges") || "").split(",").map((r) => r.trim()).filter(Boolean);
      if (ranges.length) body.sourceRanges = ranges;
      body.loadBalancerScheme = data.get("loadBalancerScheme");
      if (data.get("apiKey")) body.apiKey = data.get("apiKey");
    }
    const progress = form.querySelector("#deploy-progress");
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const ref = await post("/inference/deployments", body, { idempotencyKey: newKey() });
      progress.textContent = "Deploying: waiting until every replica is Ready…";
      await drawServers();
      const op = await shell.waitFor(ref.operationId, 600000);
      if (op.status !== "SUCCEEDED") throw new ApiError(409, op.error ?? { message: `deploy ${op.status}` });
      progress.textContent = `${op.result.name} is ready (${op.result.url}).`;
      await drawServers();
      target.value = op.result.name;
    } catch (err) {
      progress.textContent = "";
      if (err instanceof ApiError) showError(form, err); else shell.fail(err);
    } finally { button.disabled = false; }
  });
  replace(deploy, h("h2", { id: "deploy-title" }, "Deploy a model server"), form);

  const prompt = h("textarea", { name: "prompt", id: "call-prompt", rows: "3", required: true });
  const answer = h("div", { id: "answer", role: "status", "aria-live": "polite" });
  const callForm = h("form", { novalidate: true },
    field("Model", target), field("Prompt", prompt),
    field("Max tokens", h("input", { type: "number", name: "max_tokens", id: "call-max-tokens", min: "1", max: "32768", value: "256" })),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "inference_call_model" }, "Send")), answer);
  callForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(callForm);
    const data = new FormData(callForm);
    replace(answer, h("p", { class: "muted" }, h("span", { class: "spinner" }), " Waiting for the model…"));
    try {
      const out = await post("/inference/call", { service_name: data.get("service_name"), prompt: data.get("prompt"),
        max_tokens: Number(data.get("max_tokens") || 256) });
      replace(answer, h("h3", {}, "Answer"), h("p", { class: "answer" }, out.answer),
        h("p", { class: "muted small" }, `${out.model ?? "model"} via ${out.route} · ${out.usage.prompt_tokens ?? "?"} prompt + `,
          `${out.usage.completion_tokens ?? "?"} completion tokens · finish: ${out.finishReason ?? "—"}`));
    } catch (err) {
      replace(answer);
      if (err instanceof ApiError) showError(callForm, err); else shell.fail(err);
    }
  });
  replace(call, h("h2", { id: "call-title" }, "Test the model"), callForm);

  replace(managed, managedCard(shell, () => drawServers()));

  async function refresh() {
    const status = await get("/clusters/status").catch((error) => ({ error }));
    free.textContent = freeGpus(status);
    await Promise.all([drawServers(), publicServices.refresh()]);
  }
  await refresh();
  return { refresh };
}
