// Operations: every operation with kind, target, status, stages, error; filter; live detail; retry and cancel.
import { get, post } from "./api.js";
import { badge, confirmDialog, elapsed, errorBox, h, replace, stageElapsed, table, tick, when } from "./dom.js";
import { events } from "./live.js";

const STATUSES = ["", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"];
const ICON = { SUCCEEDED: "✓", FAILED: "!", RUNNING: "…", CANCELLED: "×", PENDING: "" };
export const isActive = (op) => op.status === "PENDING" || op.status === "RUNNING";

export const stageDots = (op) => h("span", { class: "stages", title: op.stages.map((s) => `${s.name}: ${s.status}`).join(", ") },
  op.stages.map((s) => h("span", { class: `stage-dot ${s.status}`, role: "img", "aria-label": `${s.name} ${s.status}` })));

// The staged progress panel: one indicator per stage with status, elapsed, attempts, message; retry/cancel.
export function progressPanel(op, shell, onChange) {
  const failedStage = op.stages.find((s) => s.status === "FAILED" || s.status === "CANCELLED");
  const retry = async (button) => {
    button.disabled = true;
    try { await post(`/operations/${op.operationId}/retry`, {}); onChange?.(); } catch (err) { shell.fail(err); button.disabled = false; }
  };
  const cancel = async (button) => {
    if (!(await confirmDialog(`Cancel ${op.kind}?`, `${op.operationId}: the running stage stops; finished stages stay, and Retry resumes it.`, "Cancel operation"))) return;
    button.disabled = true;
    try { await post(`/operations/${op.operationId}/cancel`, {}); onChange?.(); } catch (err) { shell.fail(err); button.disabled = false; }
  };
  return h("div", { class: "progress-panel", dataset: { operation: op.operationId, status: op.status } },
    h("div", { class: "card-head" },
      h("strong", {}, op.kind), badge(op.status), h("span", { class: "muted small mono" }, op.operationId),
      h("span", { class: "spacer" }),
      isActive(op) ? h("span", { class: "spinner", role: "img", "aria-label": "running" }) : null,
      h("span", { class: "muted small", title: "elapsed", dataset: { start: op.startedAt ?? op.createdAt ?? "", end: op.finishedAt ?? "" } }, elapsed(op.elapsedSeconds)),
      isActive(op) ? h("button", { type: "button", class: "danger", "data-operation": "operation_cancel", onclick: (e) => cancel(e.target) }, "Cancel") : null),
    h("ol", { class: "progress" }, op.stages.map((s) => h("li", { dataset: { stage: s.name, status: s.status } },
      h("span", { class: `icon ${s.status}`, "aria-hidden": "true" }, ICON[s.status] ?? ""),
      h("span", { class: "stage-name" }, s.name),
      badge(s.status),
      h("span", { class: "muted small" },
        h("span", { title: "elapsed", dataset: { start: s.startedAt ?? "", end: s.finishedAt ?? "" } }, elapsed(stageElapsed(s))),
        s.attempts > 1 ? ` · try ${s.attempts}` : ""),
      h("span", { class: "stage-msg" }, s.message || (s.status === "PENDING" ? "waiting" : "")),
      s === failedStage && !isActive(op)
        ? h("button", { type: "button", class: "primary", "data-operation": "operation_retry", onclick: (e) => retry(e.target), title: "operation_retry: resume from this stage" }, "Retry")
        : h("span")))),
    op.error ? errorBox(op.error) : null);
}

// What the list says about an operation: its error (code, message, hint), else the current stage's message.
function message(o) {
  if (o.error) {
    return h("span", { class: "small" }, h("code", {}, o.error.code), " ", o.error.message,
      o.error.hint ? h("div", { class: "hint" }, "Hint: ", o.error.hint) : null);
  }
  const stage = o.stages.find((s) => s.name === o.currentStage) ?? [...o.stages].reverse().find((s) => s.message);
  return h("span", { class: "small muted" }, stage?.message ?? "—");
}

export async function render(view, arg, shell) {
  if (arg) return renderDetail(view, arg, shell);
  const state = { status: "", kind: "", target: "", limit: 50 };
  const list = h("div", { "data-operation": "operation_list" });
  const count = h("span", { class: "muted small" });
  const statusSel = h("select", { id: "flt-status", name: "status" }, STATUSES.map((s) => h("option", { value: s }, s || "any")));
  const kindIn = h("input", { id: "flt-kind", name: "kind", type: "text", placeholder: "e.g. cluster_create" });
  const targetIn = h("input", { id: "flt-target", name: "target", type: "text", placeholder: "e.g. cluster:demo" });
  const form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); Object.assign(state, { status: statusSel.value, kind: kindIn.value.trim(), target: targetIn.value.trim() }); load(); } },
    h("div", {}, h("label", { for: "flt-status" }, "Status"), statusSel),
    h("div", {}, h("label", { for: "flt-kind" }, "Kind"), kindIn),
    h("div", {}, h("label", { for: "flt-target" }, "Target"), targetIn),
    h("button", { type: "submit" }, "Filter"));
  statusSel.addEventListener("change", () => form.requestSubmit());
  replace(view, h("section", { class: "card" },
    h("div", { class: "card-head" }, h("h1", {}, "Operations"), count), form, h("div", { class: "mt" }, list)));
  let timer = null;

  async function load() {
    const data = await get("/operations", { status: state.status, kind: state.kind, target: state.target, limit: state.limit });
    count.textContent = `${data.operations.length} of ${data.total}`;
    replace(list, table([
      { label: "Operation", cell: (o) => h("a", { href: `#/operations/${o.operationId}`, class: "mono" }, o.operationId) },
      { label: "Kind", cell: (o) => o.kind },
      { label: "Target", cell: (o) => o.target ?? "—" },
      { label: "Status", cell: (o) => badge(o.status) },
      { label: "Stages", cell: (o) => stageDots(o) },
      { label: "Current stage", cell: (o) => o.currentStage ?? "—" },
      { label: "Message", cell: (o) => message(o) },
      { label: "Created", cell: (o) => when(o.createdAt) },
      { label: "Elapsed", num: true, cell: (o) => elapsed(o.elapsedSeconds) },
    ], data.operations, { empty: "No operation matches.", rowAttrs: (o) => ({ class: "clickable", ondblclick: () => { location.hash = `#/operations/${o.operationId}`; } }) }),
    data.nextOffset !== null ? h("div", { class: "actions" }, h("button", { type: "button", onclick: () => { state.limit += 50; load().catch(shell.fail); } }, "Show more")) : null);
  }
  const onOp = () => { clearTimeout(timer); timer = setTimeout(() => load().catch(shell.fail), 300); };
  events.addEventListener("operation", onOp);
  await load();
  return { refresh: load, dispose: () => { events.removeEventListener("operation", onOp); clearTimeout(timer); } };
}

async function renderDetail(view, id, shell) {
  const panel = h("div", { "data-operation": "operation_get" });
  const info = h("div");
  let ticker = null;
  let op = null;
  function draw() {
    replace(panel, progressPanel(op, shell, load));
    replace(info,
      h("dl", { class: "kv" },
        h("dt", {}, "Kind"), h("dd", {}, op.kind),
        h("dt", {}, "Target"), h("dd", {}, op.target ?? "—"),
        h("dt", {}, "Status"), h("dd", {}, badge(op.status), op.cancelRequested ? " (cancel requested)" : ""),
        h("dt", {}, "Current stage"), h("dd", {}, op.currentStage ?? "—"),
        h("dt", {}, "Created"), h("dd", {}, when(op.createdAt)),
        h("dt", {}, "Finished"), h("dd", {}, when(op.finishedAt))),
      h("h3", {}, "Parameters"), h("pre", { class: "json", tabindex: "0", role: "region", "aria-label": "Parameters" }, JSON.stringify(op.params, null, 2)),
      op.result ? [h("h3", {}, "Result"), h("pre", { class: "json", tabindex: "0", role: "region", "aria-label": "Result" }, JSON.stringify(op.result, null, 2))] : null);
  }
  async function load() { op = await get(`/operations/${encodeURIComponent(id)}`); draw(); }
  replace(view, h("div", { class: "stack" },
    h("p", {}, h("a", { href: "#/operations" }, "← All operations")),
    h("section", { class: "card" }, h("h1", {}, "Operation ", h("span", { class: "mono" }, id)), panel),
    h("section", { class: "card" }, info)));
  await load();
  const onOp = (e) => { if (e.detail.operation.operationId === id) { op = e.detail.operation; draw(); } };
  events.addEventListener("operation", onOp);
  ticker = setInterval(() => tick(panel), 1000);  // elapsed times keep moving between events
  return { refresh: load, dispose: () => { events.removeEventListener("operation", onOp); clearInterval(ticker); } };
}
