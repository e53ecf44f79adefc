// The Capacity section's rolling software update and lifecycle script forms: plan the batches (cluster_update_plan:
// which nodes, which jobs and model servers each batch interrupts), roll the update out with a batch size, a wait
// and CloudWatch alarms (hyperpod_update_software), or give a group a new lifecycle script (hyperpod_update_lifecycle_script).
import { ApiError, post } from "./api.js";
import { clearErrors, confirmDialog, field, h, replace, showError, table } from "./dom.js";

const num = (v) => (v === "" || v === null ? undefined : Number(v));
const text = (v) => (String(v ?? "").trim() || undefined);

function groupSelect(name, id, groups, allLabel) {
  const options = groups.map((g) => h("option", { value: g.name }, g.name));
  return h("select", { name, id }, allLabel ? [h("option", { value: "" }, allLabel), ...options] : options);
}

function batchFields(prefix) {
  return h("div", { class: "row3" },
    field("Batch size", h("select", { name: "batchType", id: `${prefix}-batch-type` },
      h("option", { value: "INSTANCE_COUNT" }, "nodes"), h("option", { value: "CAPACITY_PERCENTAGE" }, "% of the group"))),
    field("Nodes or %", h("input", { type: "number", name: "batchValue", id: `${prefix}-batch-value`, min: "1", max: "6758" }),
      "Empty: every node at once."),
    field("Wait between batches (s)", h("input", { type: "number", name: "wait", id: `${prefix}-wait`, min: "0", max: "3600" })));
}

// deploymentConfig from the form's batch fields and alarm (only what was filled in).
function deploymentConfig(d) {
  const config = {};
  const value = num(d.get("batchValue"));
  if (value !== undefined) config.rollingUpdatePolicy = { maximumBatchSize: { type: d.get("batchType"), value } };
  const wait = num(d.get("wait"));
  if (wait !== undefined) config.waitIntervalInSeconds = wait;
  const alarm = text(d.get("alarm"));
  if (alarm) config.autoRollbackConfiguration = [{ alarmName: alarm }];
  return Object.keys(config).length ? config : undefined;
}

function planView(plan) {
  const rows = plan.groups.flatMap((g) => g.batches.map((b) => ({ ...b, group: g, count: g.batches.length })));
  return h("div", { id: "update-plan" },
    h("p", { class: "small" }, plan.groups.map((g) => `${g.instanceGroup}: ${g.currentRelease ?? "?"} → ${g.targetRelease}, ${g.nodes} node(s), batches of ${g.batchSize}`).join(" · "),
      plan.alarms.length ? ` · roll back on ${plan.alarms.join(", ")}` : ""),
    table([
      { label: "Group", cell: (r) => r.group.instanceGroup },
      { label: "Batch", cell: (r) => `${r.number}/${r.count}` },
      { label: "Nodes", cell: (r) => h("span", { class: "mono small" }, r.nodes.join(", ")) },
      { label: "Interrupts", cell: (r) => [...r.jobs, ...r.modelServers].join(", ") || (r.otherPods ? `${r.otherPods} other pod(s)` : "nothing") },
    ], rows, { empty: "No running node to update." }));
}

export function softwareForms(groups, act) {
  const planBox = h("div");
  const rolling = h("form", { id: "rolling-form", novalidate: true },
    h("div", { class: "row" },
      field("Instance group", groupSelect("group", "rolling-group", groups, "every group")),
      field("Roll back on CloudWatch alarm", h("input", { type: "text", name: "alarm", id: "rolling-alarm", spellcheck: "false" }), "Watched during and between batches.")),
    batchFields("rolling"));
  const body = () => {
    const d = new FormData(rolling);
    const group = text(d.get("group"));
    return { instanceGroups: group ? [{ instanceGroupName: group }] : undefined, deploymentConfig: deploymentConfig(d) };
  };
  const planButton = h("button", { type: "button", "data-operation": "cluster_update_plan", "data-op": "cluster_update_plan", onclick: async () => {
    clearErrors(rolling);
    try { replace(planBox, planView(await post("/capacity/software-update/plan", body()))); } catch (err) {
      if (err instanceof ApiError) showError(rolling, err); else throw err;
    }
  } }, "Plan");
  const rollButton = h("button", { type: "submit", class: "primary", "data-operation": "hyperpod_update_software", "data-op": "hyperpod_update_software" }, "Roll out…");
  rolling.append(h("div", { class: "actions" }, planButton, rollButton));
  rolling.addEventListener("submit", async (e) => {
    e.preventDefault();
    const ok = await confirmDialog("Roll the software update out?", "Each batch's nodes are drained (their pods evicted) and go SystemUpdating; an alarm in ALARM rolls the group back.", "Roll out");
    if (ok) await act("/capacity/software-update", body(), "Rolling software update", rolling);
  });

  const lifecycle = h("form", { id: "lifecycle-form", novalidate: true },
    h("div", { class: "row" },
      field("Instance group", groupSelect("instanceGroupName", "lifecycle-group", groups)),
      field("Apply to", h("select", { name: "apply", id: "lifecycle-apply" },
        h("option", { value: "newNodes" }, "new nodes only"), h("option", { value: "rolling" }, "every node, in batches")))),
    field("on_create.sh", h("textarea", { name: "script", id: "lifecycle-script", rows: "6", spellcheck: "false", placeholder: "#!/bin/bash" }),
      "Runs as root on every node; no secrets: it is stored in the cluster's bucket. Its SHA-256 is recorded and checked before every launch."),
    batchFields("lifecycle"),
    h("div", { class: "actions" }, h("button", { type: "submit", "data-operation": "hyperpod_update_lifecycle_script",
      "data-op": "hyperpod_update_lifecycle_script" }, "Update lifecycle script…")));
  lifecycle.addEventListener("submit", async (e) => {
    e.preventDefault();
    const d = new FormData(lifecycle);
    const apply = d.get("apply");
    const payload = { instanceGroupName: d.get("instanceGroupName"), script: String(d.get("script") ?? ""), apply,
      deploymentConfig: apply === "rolling" ? deploymentConfig(d) : undefined };
    const ok = await confirmDialog(`New lifecycle script for ${payload.instanceGroupName}?`,
      apply === "rolling" ? "Every node runs it, batch by batch: each batch is drained first." : "Nodes launched from now on run it.", "Update script");
    if (ok) await act("/capacity/lifecycle-script", payload, "Lifecycle script", lifecycle);
  });
  return h("div", { id: "software" }, h("h4", {}, "Rolling software update"), rolling, planBox, h("h4", {}, "Lifecycle script"), lifecycle);
}
