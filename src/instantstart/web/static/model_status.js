// Storage & Models: where one model's download into the chosen claim stands (model_download_status): COMPLETE
// with its files, RUNNING with its progress, FAILED, or ABSENT.
import { ApiError, get } from "./api.js";
import { badge, clearErrors, errorBox, field, h, replace, showError } from "./dom.js";

const STATE_CLASS = { COMPLETE: "ok", FAILED: "bad" };

// `claim()`: the S3 claim the models card shows now.
export function modelStatusForm(claim) {
  const answer = h("div", { id: "model-status", role: "status", "aria-live": "polite" });
  const form = h("form", { id: "model-status-form", class: "filters", novalidate: true },
    field("Model id", h("input", { type: "text", name: "modelId", id: "status-model-id", placeholder: "Qwen/Qwen3-0.6B", spellcheck: "false" })),
    field("Revision", h("input", { type: "text", name: "revision", id: "status-revision", placeholder: "main", spellcheck: "false" })),
    h("div", { class: "actions" }, h("button", { type: "submit", "data-operation": "model_download_status" }, "Check")));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    replace(answer);
    const d = new FormData(form);
    const params = { modelId: String(d.get("modelId")).trim(), revision: String(d.get("revision")).trim(), s3Storage: claim() };
    try {
      const s = await get("/models/status", params);
      const p = s.progress;
      replace(answer, h("p", {}, h("strong", {}, `${s.modelId}@${s.revision}`), ` in ${s.storage}: `, badge(s.state, STATE_CLASS[s.state] ?? ""),
        s.state === "COMPLETE" ? ` ${s.files.length} file(s), ${s.totalBytes ?? "?"} bytes.` : "",
        p ? ` ${p.files ?? 0} of ${p.filesTotal ?? "?"} files, ${p.bytes ?? 0} of ${p.bytesTotal ?? "?"} bytes.` : "",
        s.jobName && s.state !== "ABSENT" ? h("span", { class: "muted small" }, ` Job ${s.jobName}.`) : ""));
    } catch (err) { if (err instanceof ApiError) showError(form, err); else replace(answer, errorBox({ message: String(err) })); }
  });
  return h("div", { id: "model-check" }, h("h3", {}, "Check a download"), form, answer);
}
