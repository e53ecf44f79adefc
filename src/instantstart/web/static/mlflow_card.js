// Training page: set up MLflow for the active cluster (mlflow_configure: a SageMaker managed tracking server,
// created or adopted, and the cluster wired to it), so training jobs log runs the job pages chart.
import { field, h } from "./dom.js";
import { input, opForm, select, text } from "./op_form.js";

export function mlflowCard(shell) {
  const form = opForm({ shell, id: "mlflow-form", operation: "mlflow_configure", path: "/training/mlflow", button: "Configure MLflow",
    fields: [
      h("div", { class: "row" },
        field("Tracking server", input("trackingServerName", "mlflow-server"), "Default: one named after the cluster."),
        field("Size", select("size", "mlflow-size", [["Small", "Small"], ["Medium", "Medium"], ["Large", "Large"]]))),
      h("div", { class: "field" }, h("label", { for: "mlflow-adopt" }, h("input", { type: "checkbox", name: "adopt", id: "mlflow-adopt" }),
        " Adopt an existing tracking server of this name (never deleted with the cluster)"))],
    body: (d) => ({ trackingServerName: text(d.get("trackingServerName")), size: d.get("size"), adopt: d.get("adopt") === "on" }),
    done: (op) => { form.querySelector("#mlflow-form-status").textContent = `MLflow ready: ${op.result?.trackingServerName ?? op.result?.trackingServerArn ?? "configured"}.`; } });
  return h("section", { class: "card", id: "mlflow", "aria-labelledby": "mlflow-title", "data-op": "mlflow_configure" },
    h("h2", { id: "mlflow-title" }, "MLflow tracking"),
    h("p", { class: "hint" }, "Jobs submitted after this log their runs; each job's page charts them."), form);
}
