// Advanced Features on the cluster page: every control starts at the state read from the cluster
// (hyperpod_get_advanced_features); Apply sends only the keys the user changed (hyperpod_update_advanced_features);
// progress comes through the live operation panel and each feature's result from the operation's result.
import { ApiError, get, newKey, post } from "./api.js";
import { badge, clearErrors, errorBox, h, replace, showError, table, tick } from "./dom.js";
import { events, fresher } from "./live.js";
import { isActive, progressPanel } from "./operations.js";

const KEYS = ["karpenter", "certManager", "fsxCsiDriver", "trainingOperator", "inferenceOperator", "tieredStorage",
  "kuberayOperator", "observability", "keda", "taskGovernance"];
const TITLES = { karpenter: "HyperPod-managed Karpenter" };
const STATE_CLASS = { ENABLED: "ok", DISABLED: "", IN_PROGRESS: "RUNNING", DEGRADED: "bad", BROKEN: "bad", FAILED: "bad",
  UNKNOWN: "", NOT_STARTED: "" };

// What the cluster has now, as the form's starting values.
function actualValues(view) {
  const out = {};
  for (const key of KEYS) out[key] = { enabled: Boolean(view[key]?.enabled) };
  const config = view.tieredStorage?.actual?.config ?? {};
  const pct = config.InstanceMemoryAllocationPercentage;
  out.tieredStorage.configMode = pct ? "custom" : "default";
  out.tieredStorage.percentage = pct ? String(pct) : "";
  out.tieredStorage.namespace = view.tieredStorage?.actual?.namespace ?? "default";
  out.tieredStorage.serviceAccount = view.tieredStorage?.actual?.serviceAccount ?? "hyperpod-checkpointing";
  out.inferenceOperator.tlsCertificateBucket = "";
  return out;
}

// The explicit diff: a key is sent only when one of its controls differs from what was read.
export function diff(actual, current) {
  const body = {};
  for (const key of KEYS) {
    const a = actual[key];
    const c = current[key];
    if (key === "tieredStorage") {
      const moved = c.namespace !== a.namespace || c.serviceAccount !== a.serviceAccount;
      const changed = c.enabled !== a.enabled || (c.enabled && (moved || c.configMode !== a.configMode ||
        (c.configMode === "custom" && c.percentage !== a.percentage)));
      if (!changed) continue;
      body[key] = { enabled: c.enabled };
      if (c.enabled) {
        body[key].configMode = c.configMode;
        if (c.configMode === "custom") body[key].percentage = Number(c.percentage);
        if (moved) Object.assign(body[key], { namespace: c.namespace, serviceAccount: c.serviceAccount });
      }
    } else if (key === "inferenceOperator") {
      if (c.enabled === a.enabled && !(c.enabled && c.tlsCertificateBucket)) continue;
      body[key] = { enabled: c.enabled };
      if (c.enabled && c.tlsCertificateBucket) body[key].tlsCertificateBucket = c.tlsCertificateBucket;
    } else if (c.enabled !== a.enabled) {
      body[key] = { enabled: c.enabled };
    }
  }
  return body;
}

// Each requested feature's outcome: the operation's result, or (failed) the feature named in its error.
function results(op) {
  const list = [...(op.result?.features ?? [])];
  const failed = op.error?.details?.feature;
  if (failed && !list.some((f) => f.key === failed.key)) list.push(failed);
  return list;
}

function resultTable(op) {
  const list = results(op);
  if (!list.length) return null;
  return h("div", { class: "feature-results" }, h("h3", {}, "Results"), table([
    { label: "Feature", cell: (f) => h("strong", {}, f.key) },
    { label: "Status", cell: (f) => badge(f.status ?? "—") },
    { label: "Action", cell: (f) => f.action ?? "—" },
    { label: "Message", cell: (f) => h("span", { class: "small" }, f.message ?? "",
      f.code ? h("div", {}, h("code", {}, f.code)) : null, f.hint ? h("div", { class: "hint" }, "Hint: ", f.hint) : null) },
  ], list, { rowAttrs: (f) => ({ dataset: { result: f.key, status: f.status ?? "" } }) }));
}

export function featuresSection(shell) {
  const el = h("section", { class: "card", id: "features", "aria-labelledby": "features-title", "data-operation": "hyperpod_get_advanced_features" });
  const body = h("div");
  const opBox = h("div", { class: "capacity-op" });
  replace(el, h("div", { class: "card-head" }, h("h2", { id: "features-title" }, "Advanced features"),
    h("span", { class: "muted small" }, "state read from AWS and Kubernetes; Apply sends only what you change")), opBox, body);
  let view = null;
  let actual = null;
  let current = null;
  let op = null;
  let key = newKey();
  let seq = 0;

  function drawOp() {
    replace(opBox, op ? h("div", { class: "card sub" }, progressPanel(op, shell, refresh), resultTable(op)) : null);
  }

  function draw() {
    if (view.error) {
      replace(body, ["NOT_FOUND", "PRECONDITION_FAILED"].includes(view.error.code)
        ? h("p", { class: "empty" }, view.error.message) : errorBox(view.error));
      return;
    }
    const count = h("span", { class: "muted small", "aria-live": "polite" });
    const apply = h("button", { type: "submit", class: "primary", "data-operation": "hyperpod_update_advanced_features" }, "Apply changes");
    const sync = () => {
      const n = Object.keys(diff(actual, current)).length;
      count.textContent = n ? `${n} change${n > 1 ? "s" : ""}: ${Object.keys(diff(actual, current)).join(", ")}` : "no changes";
      apply.disabled = n === 0 || Boolean(op && isActive(op));
      form.querySelectorAll("tr[data-feature]").forEach((tr) => {
        tr.classList.toggle("changed", tr.dataset.feature in diff(actual, current));
      });
    };
    const control = (k) => {
      const id = `feat-${k}`;
      const box = h("input", { type: "checkbox", id, name: k, checked: current[k].enabled });
      box.addEventListener("change", () => { current[k].enabled = box.checked; extrasFor(k); sync(); });
      return box;
    };
    const extras = {};
    const extrasFor = (k) => { if (extras[k]) extras[k].hidden = !current[k].enabled; };
    // tieredStorage: the share of instance memory; inferenceOperator: an optional TLS certificate location.
    const mode = h("select", { id: "feat-tiered-mode", name: "tieredStorage.configMode" },
      h("option", { value: "default" }, "default"), h("option", { value: "custom" }, "custom"));
    mode.value = current.tieredStorage.configMode;
    const pct = h("input", { type: "number", id: "feat-tiered-pct", name: "tieredStorage.percentage", min: "20", max: "100",
      class: "narrow", value: current.tieredStorage.percentage });
    const syncMode = () => { pct.disabled = mode.value !== "custom"; };
    mode.addEventListener("change", () => { current.tieredStorage.configMode = mode.value; syncMode(); sync(); });
    pct.addEventListener("input", () => { current.tieredStorage.percentage = pct.value; sync(); });
    syncMode();
    // The service account checkpointing pods run as (the role trusts exactly it).
    const ns = h("input", { type: "text", id: "feat-tiered-ns", name: "tieredStorage.namespace", class: "narrow",
      spellcheck: "false", pattern: "[a-z0-9]([-a-z0-9]*[a-z0-9])?", maxlength: "63", value: current.tieredStorage.namespace });
    const sa = h("input", { type: "text", id: "feat-tiered-sa", name: "tieredStorage.serviceAccount", class: "narrow",
      spellcheck: "false", pattern: "[a-z0-9]([-a-z0-9]*[a-z0-9])?", maxlength: "63", value: current.tieredStorage.serviceAccount });
    ns.addEventListener("input", () => { current.tieredStorage.namespace = ns.value.trim(); sync(); });
    sa.addEventListener("input", () => { current.tieredStorage.serviceAccount = sa.value.trim(); sync(); });
    extras.tieredStorage = h("div", { class: "inline-form" },
      h("label", { for: "feat-tiered-mode", class: "inline-label" }, "Memory"), mode,
      h("label", { for: "feat-tiered-pct", class: "inline-label" }, "%"), pct,
      h("label", { for: "feat-tiered-ns", class: "inline-label" }, "Namespace"), ns,
      h("label", { for: "feat-tiered-sa", class: "inline-label" }, "Service account"), sa);
    const tls = h("input", { type: "text", id: "feat-tls", name: "inferenceOperator.tlsCertificateBucket",
      placeholder: "s3://bucket/prefix (default: project bucket)", spellcheck: "false", value: current.inferenceOperator.tlsCertificateBucket });
    tls.addEventListener("input", () => { current.inferenceOperator.tlsCertificateBucket = tls.value.trim(); sync(); });
    extras.inferenceOperator = h("div", { class: "inline-form" }, h("label", { for: "feat-tls", class: "inline-label" }, "TLS"), tls);
    const title = (k) => TITLES[k] ?? view[k]?.title ?? k;
    const detail = (k) => {
      const v = view[k];
      if (k === "karpenter") return h("span", { class: "small muted" }, v.message ?? "");
      const last = v.lastResult;
      return h("span", { class: "small" },
        v.actual?.error ? h("span", { class: "field-error" }, v.actual.error) : null,
        v.needs?.length ? h("span", { class: "muted" }, `needs ${v.needs.join(", ")}`) : null,
        last ? h("div", { class: "muted" }, "last: ", last.status ?? "", last.action ? ` (${last.action})` : "") : null);
    };
    const form = h("form", { novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      const request = diff(actual, current);
      if (!Object.keys(request).length) return;
      apply.disabled = true;
      try {
        const ref = await post("/capacity/advanced-features", request, { idempotencyKey: key });
        key = newKey();
        op = fresher(await get(`/operations/${ref.operationId}`));
        drawOp(); sync();
      } catch (err) {
        sync();
        if (err instanceof ApiError) showError(form, err); else shell.fail(err);
      }
    } },
      table([
        { label: "Feature", cell: (k) => h("label", { for: `feat-${k}`, class: "feature-name" }, title(k)) },
        { label: "State", cell: (k) => badge(view[k]?.state ?? "UNKNOWN", STATE_CLASS[view[k]?.state] ?? "") },
        { label: "On", cell: (k) => h("span", { class: "field" }, control(k)) },
        { label: "Settings", cell: (k) => extras[k] ?? null },
        { label: "Details", cell: (k) => detail(k) },
      ], KEYS, { rowAttrs: (k) => ({ dataset: { feature: k, state: view[k]?.state ?? "" } }) }),
      h("div", { class: "actions" }, apply,
        h("button", { type: "button", onclick: () => { current = structuredClone(actual); draw(); } }, "Reset"), count));
    for (const k of KEYS) extrasFor(k);
    replace(body, form);
    sync();
  }

  async function refresh() {
    const mine = ++seq;
    let data;
    try { data = await get("/capacity/advanced-features"); } catch (error) { data = { error }; }
    if (mine !== seq) return;
    view = data;
    if (!view.error) { actual = actualValues(view); current = structuredClone(actual); }
    draw();
    if (op) { try { op = fresher(await get(`/operations/${op.operationId}`)); drawOp(); } catch { /* keep the last view */ } }
  }

  let pending = null;
  const onOp = (e) => {
    const o = e.detail.operation;
    if (!op || o.operationId !== op.operationId) return;
    op = o; drawOp();
    if (!isActive(o)) { clearTimeout(pending); pending = setTimeout(() => refresh().catch(() => {}), 300); }
  };
  events.addEventListener("operation", onOp);
  const ticker = setInterval(() => tick(opBox), 1000);
  return { el, refresh, dispose: () => { events.removeEventListener("operation", onOp); clearInterval(ticker); clearTimeout(pending); } };
}
