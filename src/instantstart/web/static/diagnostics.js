// Diagnostics on the Monitoring page: the last lines of any pod's container (pod_logs), opened from the pods table
// or typed in. Log text is untrusted: it is inserted as text only.
import { ApiError, get } from "./api.js";
import { clearErrors, field, h, replace, showError } from "./dom.js";

export function podLogsCard(shell) {
  const out = h("div", { class: "log", id: "pod-log", role: "log", tabindex: "0", "aria-label": "Pod log lines", "data-operation": "pod_logs" });
  const note = h("p", { class: "hint", id: "pod-log-note" });
  const text = (name, id, attrs = {}) => h("input", { type: "text", name, id, spellcheck: "false", autocomplete: "off", ...attrs });
  const previous = h("input", { type: "checkbox", name: "previous", id: "pod-log-previous" });
  const form = h("form", { id: "pod-logs-form", novalidate: true, onsubmit: (e) => { e.preventDefault(); load(); } },
    h("div", { class: "row3" }, field("Namespace", text("namespace", "pod-log-ns", { value: "default" })),
      field("Pod", text("podName", "pod-log-pod")), field("Container", text("container", "pod-log-container", { placeholder: "when the pod has several" }))),
    h("div", { class: "row3" }, field("Last lines", h("input", { type: "number", name: "tailLines", id: "pod-log-tail", value: "100", min: "1", max: "1000" })),
      field("Since (seconds)", h("input", { type: "number", name: "sinceSeconds", id: "pod-log-since", min: "1", max: "86400" })),
      h("div", { class: "field" }, h("label", { class: "radio", for: "pod-log-previous" }, previous, "The crashed (previous) container"))),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "pod_logs" }, "Show logs")));
  const card = h("section", { class: "card", id: "pod-logs", "aria-labelledby": "pod-logs-title" },
    h("h2", { id: "pod-logs-title" }, "Pod logs"), form, note, out);

  async function load() {
    clearErrors(form);
    const els = form.elements;
    const params = { namespace: els.namespace.value.trim(), podName: els.podName.value.trim(), container: els.container.value.trim(),
      tailLines: els.tailLines.value, sinceSeconds: els.sinceSeconds.value };
    if (previous.checked) params.previous = "true";
    try {
      const logs = await get("/diagnostics/pod-logs", params);
      replace(out, logs.lines.map((line) => h("div", { class: "log-line" }, line)));
      note.textContent = `${logs.namespace}/${logs.podName}${logs.container ? " · " + logs.container : ""}: ${logs.lines.length} line(s)` +
        (logs.truncated ? " (cut at the size limit)" : "");
    } catch (err) { replace(out); note.textContent = ""; if (err instanceof ApiError) showError(form, err); else shell.fail(err); }
  }
  // From the pods table: fill the form and read at once; focus moves to the log for keyboard users.
  function open(namespace, pod) {
    form.elements.namespace.value = namespace;
    form.elements.podName.value = pod;
    form.elements.container.value = "";
    load().then(() => out.focus());
  }
  return { card, open };
}
