// Training without a recipe: a HyperPodPyTorchJob (training_job_submit) or a KubeRay RayJob (ray_job_submit) from
// an image and a command; the cluster's MLflow tracking server (mlflow_configure). Only the fields the user
// filled are sent: the API owns every default.
import { ApiError, newKey, post } from "./api.js";
import { clearErrors, errorBox, field, h, showError } from "./dom.js";

const text = (name, id, attrs = {}) => h("input", { type: "text", name, id, spellcheck: "false", autocomplete: "off", ...attrs });
const num = (name, id, attrs = {}) => h("input", { type: "number", name, id, ...attrs });

// KEY=VALUE lines into an env object (values stay text; a secret belongs in a Secret, referenced by the API's form).
function envOf(value) {
  const env = {};
  for (const line of value.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const at = line.indexOf("=");
    if (at > 0) env[line.slice(0, at).trim()] = line.slice(at + 1);
    else env[line] = "";
  }
  return env;
}

function bodyOf(form, numbers) {
  const body = {};
  for (const el of form.querySelectorAll("[name]")) {
    if (el.type === "checkbox") { if (el.checked) body[el.name] = true; continue; }
    const v = el.value.trim();
    if (v === "") continue;
    body[el.name] = el.name === "env" ? envOf(el.value) : numbers.includes(el.name) ? Number(v) : v;
  }
  return body;
}

// Submit, wait for the operation, report in the banner with a link to the job; refusals beside their fields.
function submitter(form, path, numbers, shell, done) {
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    const body = bodyOf(form, numbers);
    try {
      const ref = await post(path, body, { idempotencyKey: newKey() });
      const op = await shell.waitFor(ref.operationId);
      if (op.status !== "SUCCEEDED") form.append(errorBox(op.error ?? { message: `${op.kind} ${op.status}` }));
      else {
        shell.banner(body.jobName ? h("span", {}, "Submitted ", h("a", { href: `#/training/${encodeURIComponent(body.jobName)}` }, body.jobName))
          : `${op.kind} succeeded.`, "info");
        form.reset();  // a submitted form starts afresh
        await done?.();
      }
    } catch (err) { if (err instanceof ApiError) showError(form, err); else shell.fail(err); } finally { button.disabled = false; }
  });
}

function typeControl(name, id, types) {
  return types.length ? h("select", { name, id }, types.map((t) => h("option", { value: t }, t))) : text(name, id, { placeholder: "ml.g6.4xlarge" });
}

export function jobForms(shell, types, done) {
  const pytorch = h("form", { id: "job-form", novalidate: true },
    h("h3", {}, "PyTorch job (HyperPod training operator)"),
    h("div", { class: "row3" }, field("Job name", text("jobName", "job-name", { placeholder: "train-1" }), "A DNS label"),
      field("Image", text("image", "job-image", { placeholder: "…/pytorch-training:2.5" })),
      field("Instance type", typeControl("instanceType", "job-type", types))),
    field("Command", text("command", "job-command", { placeholder: "train.py --epochs 3" }), "Launched through hyperpodrun on every node"),
    h("div", { class: "row3" }, field("Nodes", num("nodes", "job-nodes", { value: "1", min: "1", max: "256" })),
      field("GPUs per node", num("gpusPerNode", "job-gpus", { min: "0", max: "64", placeholder: "all" })),
      field("Namespace", text("namespace", "job-namespace", { placeholder: "default" }))),
    h("div", { class: "row3" }, field("S3 claim", text("s3Claim", "job-s3", { placeholder: "s3-claim" }), "Mounted at /s3"),
      field("FSx claim", text("fsxClaim", "job-fsx", { placeholder: "none" }), "Mounted at /fsx"),
      field("Queue", text("queueName", "job-queue", { placeholder: "none" }), "Task governance")),
    field("Environment", h("textarea", { name: "env", id: "job-env", rows: "2", placeholder: "KEY=value, one a line" })),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "training_job_submit", "data-op": "training_job_submit" }, "Submit PyTorch job")));
  submitter(pytorch, "/training/jobs", ["nodes", "gpusPerNode"], shell, done);

  const ray = h("form", { id: "ray-form", novalidate: true },
    h("h3", {}, "Ray job (KubeRay)"),
    h("div", { class: "row3" }, field("Job name", text("jobName", "ray-name", { placeholder: "ray-1" }), "A DNS label"),
      field("Image", text("image", "ray-image", { placeholder: "rayproject/ray:2.41.0-gpu" })),
      field("Instance type", typeControl("instanceType", "ray-type", types))),
    field("Entrypoint", text("entrypoint", "ray-entrypoint", { placeholder: "python3 /s3/code/train.py" }), "Run by the submitter; no shell operators"),
    h("div", { class: "row3" }, field("Worker nodes", num("nodes", "ray-nodes", { value: "1", min: "1", max: "256" })),
      field("GPUs per worker", num("gpusPerNode", "ray-gpus", { min: "0", max: "64", placeholder: "all" })),
      field("Retries", num("retries", "ray-retries", { min: "0", max: "10", placeholder: "0" }))),
    h("div", { class: "row3" }, field("Namespace", text("namespace", "ray-namespace", { placeholder: "default" })),
      field("S3 claim", text("s3Claim", "ray-s3", { placeholder: "s3-claim" }), "Mounted at /s3"),
      field("Deadline (seconds)", num("activeDeadlineSeconds", "ray-deadline", { min: "60", max: "2592000" }))),
    field("Environment", h("textarea", { name: "env", id: "ray-env", rows: "2", placeholder: "KEY=value, one a line" })),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "ray_job_submit", "data-op": "ray_job_submit" }, "Submit Ray job")));
  submitter(ray, "/training/ray-jobs", ["nodes", "gpusPerNode", "retries", "activeDeadlineSeconds"], shell, done);

  const mlflow = h("form", { id: "mlflow-form", novalidate: true },
    h("h3", {}, "MLflow tracking server"),
    h("p", { class: "hint" }, "SageMaker managed MLflow for the active cluster; training pods in the namespace may log to it."),
    h("div", { class: "row3" }, field("Server name", text("trackingServerName", "mlflow-name", { placeholder: "instantstart-<cluster tag>" })),
      field("Size", h("select", { name: "size", id: "mlflow-size" }, ["Small", "Medium", "Large"].map((s) => h("option", { value: s }, s)))),
      field("Namespace", text("namespace", "mlflow-namespace", { placeholder: "default" }))),
    h("div", {}, h("label", { class: "radio", for: "mlflow-adopt" }, h("input", { type: "checkbox", name: "adopt", id: "mlflow-adopt" }), "Attach to an existing server of that name")),
    h("div", { class: "actions" }, h("button", { type: "submit", "data-operation": "mlflow_configure", "data-op": "mlflow_configure" }, "Set up MLflow")));
  submitter(mlflow, "/training/mlflow", [], shell, null);

  return h("section", { class: "card", id: "more-jobs", "aria-labelledby": "more-jobs-title" },
    h("h2", { id: "more-jobs-title" }, "Run your own code"), h("div", { class: "row" }, pytorch, ray), mlflow);
}
