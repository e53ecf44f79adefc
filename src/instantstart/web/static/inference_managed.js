// The managed-endpoint form of the Inference page: typed fields (model source, KV cache, routing), the lint of
// inference_managed_lint shown live as the fields change, and Deploy through inference_managed_deploy.
import { ApiError, newKey, post } from "./api.js";
import { clearErrors, field, h, replace, showError, table } from "./dom.js";

const input = (name, attrs = {}) => h("input", { type: "text", name, id: `m-${name}`, ...attrs });
const select = (name, options) => h("select", { name, id: `m-${name}` }, options.map(([v, label]) => h("option", { value: v }, label)));

function body(form) {
  const d = new FormData(form);
  const out = {
    name: d.get("name"), modelName: d.get("name"), image: d.get("image"), instanceType: d.get("instanceType"),
    gpuCount: Number(d.get("gpuCount") || 0), invocationPort: Number(d.get("invocationPort") || 0),
    replicas: Number(d.get("replicas") || 1),
    args: String(d.get("args") || "").split(/\s+/).filter(Boolean),
    modelSource: { type: d.get("sourceType") },
  };
  const location = d.get("sourceLocation");
  if (out.modelSource.type === "huggingface") out.modelSource.huggingFaceModelId = location;
  else if (out.modelSource.type === "s3") Object.assign(out.modelSource, { s3Bucket: d.get("s3Bucket"), s3Region: d.get("s3Region"), modelLocation: location });
  else out.modelSource.fsxFileSystemId = location;
  const l2 = d.get("l2Backend");
  if (d.get("enableL1") || l2) {
    out.kvCache = { enableL1: Boolean(d.get("enableL1")), enableL2: Boolean(l2) };
    if (l2) out.kvCache.l2Backend = l2;
    if (l2 === "redis") out.kvCache.l2Url = d.get("l2Url");
  }
  if (d.get("routingStrategy")) out.routingStrategy = d.get("routingStrategy");
  return out;
}

export function managedCard(shell, onDeployed) {
  const lint = h("div", { id: "managed-lint", role: "status", "aria-live": "polite", "data-operation": "inference_managed_lint" });
  const form = h("form", { novalidate: true },
    field("Name", input("name", { value: "qwen-managed" })),
    field("Worker image", input("image", { value: "vllm/vllm-openai:v0.11.0" })),
    field("Worker arguments", input("args", { value: "--model /opt/ml/model --served-model-name qwen-managed" })),
    field("Instance type", input("instanceType", { value: "ml.g6.4xlarge" })),
    field("GPUs per replica", input("gpuCount", { type: "number", min: "1", max: "64", value: "1" })),
    field("Replicas", input("replicas", { type: "number", min: "1", max: "64", value: "2" })),
    field("Invocation port", input("invocationPort", { type: "number", min: "1", max: "65535", value: "8000" })),
    field("Model source", select("sourceType", [["huggingface", "Hugging Face"], ["s3", "S3"], ["fsx", "FSx for Lustre"]])),
    field("Model (Hugging Face id, S3 prefix or FSx file system)", input("sourceLocation", { value: "Qwen/Qwen3-0.6B" })),
    field("S3 bucket", input("s3Bucket")), field("S3 Region", input("s3Region")),
    h("div", { class: "field" }, h("label", { for: "m-enableL1" }, h("input", { type: "checkbox", name: "enableL1", id: "m-enableL1", checked: true }), " KV cache L1 (CPU memory)")),
    field("KV cache L2", select("l2Backend", [["", "off"], ["tieredstorage", "tiered storage"], ["redis", "Redis"]])),
    field("Redis URL (L2 redis)", input("l2Url")),
    field("Routing", select("routingStrategy", [["", "none"], ["prefixaware", "prefix-aware"], ["kvaware", "KV-aware"], ["session", "session"], ["roundrobin", "round robin"]])),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "inference_managed_deploy" }, "Deploy managed endpoint"),
      h("span", { class: "muted small", id: "managed-progress", role: "status" })), lint);
  let timer = null;
  let seq = 0;
  async function check() {
    const mine = ++seq;
    try {
      const verdict = await post("/inference/managed/lint", body(form));
      if (mine !== seq) return;
      replace(lint, h("h3", {}, verdict.ok ? "Lint: no errors" : "Lint: fix before deploying"),
        table([
          { label: "Code", cell: (f) => h("span", { class: "mono" }, f.code) }, { label: "Severity", cell: (f) => f.severity },
          { label: "Field", cell: (f) => f.field }, { label: "Problem", cell: (f) => f.message }, { label: "Fix", cell: (f) => f.fix },
        ], verdict.findings, { empty: "Every rule passes.", rowAttrs: (f) => ({ dataset: { code: f.code } }) }));
    } catch (err) {
      if (mine !== seq) return;
      replace(lint, h("p", { class: "field-error" }, err instanceof ApiError ? `${err.code}: ${err.message}` : String(err)));
    }
  }
  const soon = () => { clearTimeout(timer); timer = setTimeout(check, 300); };
  form.addEventListener("input", soon);
  form.addEventListener("change", soon);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    const progress = form.querySelector("#managed-progress");
    try {
      const ref = await post("/inference/managed", body(form), { idempotencyKey: newKey() });
      progress.textContent = "Deploying through the inference operator…";
      const op = await shell.waitFor(ref.operationId, 600000);
      if (op.status !== "SUCCEEDED") throw new ApiError(409, op.error ?? { message: `deploy ${op.status}` });
      progress.textContent = `${op.result.name} is ${op.result.state}.`;
      await onDeployed();
    } catch (err) {
      progress.textContent = "";
      if (err instanceof ApiError) showError(form, err); else shell.fail(err);
    }
  });
  check();
  return h("section", { class: "card", id: "managed", "aria-labelledby": "managed-title" },
    h("h2", { id: "managed-title" }, "Deploy a managed endpoint (inference operator)"), form);
}
