// Capacity on the cluster page: instance groups (add, scale, delete), the software update, EKS node groups,
// Karpenter, and nodes (reboot, replace, delete).
import { ApiError, get, newKey, post } from "./api.js";
import { badge, clearErrors, confirmDialog, errorBox, field, h, replace, showError, table, tick } from "./dom.js";
import { events, fresher } from "./live.js";
import { progressPanel } from "./operations.js";
import { karpenterBox, nodeGroupsTable, softwareButton } from "./capacity_more.js";
import { softwareForms } from "./software.js";

export function capacitySection(shell) {
  const el = h("section", { class: "card", id: "capacity" });
  const head = h("div", { class: "card-head" });
  const groupsBox = h("div", { "data-operation": "cluster_get_instance_groups" });
  const nodesBox = h("div", { "data-operation": "cluster_get_status" });
  const addBox = h("div");
  const opBox = h("div", { class: "capacity-op" });
  const nodeGroupsBox = h("div", { id: "nodegroups" });
  const karpenter = karpenterBox(act);
  const softwareBox = h("div");
  const more = h("div", {}, h("h3", {}, "EKS node groups"), nodeGroupsBox, h("h3", {}, "Karpenter autoscaling"), karpenter.el,
    h("h3", {}, "Software and lifecycle scripts"), softwareBox);
  replace(el, head, opBox, h("h3", {}, "Instance groups"), groupsBox, addBox, more, h("h3", {}, "Nodes"), nodesBox);
  let groups = null;
  let instances = null;
  let zones = null;
  let op = null;
  let addOpen = false;

  // Start an operation and follow it in the panel; a refusal shows beside `form`'s fields, else in the banner.
  async function act(path, body, label, form = null) {
    if (form) clearErrors(form);
    try {
      const ref = await post(path, body, { idempotencyKey: newKey() });
      op = fresher(await get(`/operations/${ref.operationId}`));
      drawOp();
      return ref;
    } catch (err) {
      if (err instanceof ApiError && form) showError(form, err);
      else if (err instanceof ApiError) shell.banner(`${label}: ${err.code}: ${err.message}${err.hint ? " — " + err.hint : ""}`);
      else shell.fail(err);
      return null;
    }
  }
  function drawOp() { replace(opBox, op ? h("div", { class: "card sub" }, progressPanel(op, shell, refresh)) : null); }

  function drawGroups() {
    if (groups.error) {
      replace(head, h("h2", {}, "Capacity"));
      replace(groupsBox, ["NOT_FOUND", "PRECONDITION_FAILED"].includes(groups.error.code)
        ? h("p", { class: "empty" }, groups.error.message) : errorBox(groups.error));
      replace(addBox); replace(nodesBox);
      more.hidden = true;
      return;
    }
    more.hidden = false;
    replace(head, h("h2", {}, "Capacity"), h("span", { class: "muted small" }, groups.clusterTag), h("span", { class: "spacer" }),
      h("span", { class: "small" }, "HyperPod ", badge(groups.hyperpodStatus ?? "NOT_FOUND")), groups.hyperpodStatus ? softwareButton(act) : null);
    replace(nodeGroupsBox, nodeGroupsTable(groups.nodeGroups ?? [], act));
    // Drawn once: a refresh must not wipe what is typed in the forms.
    if (!softwareBox.firstChild && groups.hyperpodStatus) replace(softwareBox, softwareForms(groups.instanceGroups, act));
    replace(groupsBox, table([
      { label: "Group", cell: (g) => h("strong", {}, g.name) },
      { label: "Type", cell: (g) => g.instanceType ?? "—" },
      { label: "Status", cell: (g) => badge(g.status) },
      { label: "Count", num: true, cell: (g) => h("span", { class: "count" }, `${g.currentCount} / ${g.targetCount}`) },
      { label: "Capacity", cell: (g) => h("span", {}, g.capacityType, g.trainingPlanArn ? h("div", { class: "muted small mono" }, g.trainingPlanArn.split("/").pop()) : null) },
      { label: "Subnet / AZ", cell: (g) => h("span", { class: "small" }, g.subnetIds.join(", ") || "—", g.dedicatedSubnet ? " (dedicated)" : "", h("br"), g.availabilityZones.join(", ")) },
      { label: "EFA", cell: (g) => g.networkInterface },
      { label: "Software", cell: (g) => g.imageVersionStatus ?? "—" },
      { label: "Scale to", cell: (g) => scaleForm(g) },
      { label: "", cell: (g) => h("button", { type: "button", class: "danger", "data-operation": "hyperpod_delete_instance_group",
        onclick: () => deleteGroup(g) }, "Delete…") },
    ], groups.instanceGroups, { empty: "No instance groups.", rowAttrs: (g) => ({ dataset: { group: g.name } }) }));
    if (!addBox.firstChild) replace(addBox, h("div", { class: "actions" }, h("button", { type: "button", "data-operation": "hyperpod_add_instance_group", onclick: () => { addOpen = true; drawAdd(); } }, "Add instance group…")));
  }

  function scaleForm(g) {
    const input = h("input", { type: "number", name: "targetCount", min: "0", max: "6758", value: String(g.targetCount), "aria-label": `Target count of ${g.name}`, class: "narrow" });
    const form = h("form", { class: "inline-form", novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      if (Number(input.value) === g.targetCount) return;
      const body = { name: g.name, targetCount: Number(input.value) };
      try {
        const ref = await post("/capacity/instance-groups/scale", body, { idempotencyKey: newKey() });
        op = fresher(await get(`/operations/${ref.operationId}`)); drawOp();
      } catch (err) { if (err instanceof ApiError) showError(form, err); else shell.fail(err); }
    } }, input, h("button", { type: "submit", "data-operation": "hyperpod_scale_instance_group" }, "Scale"));
    return form;
  }

  async function deleteGroup(g) {
    const ok = await confirmDialog(`Delete instance group ${g.name}?`,
      `Its ${g.currentCount} node(s) are terminated and their instance volumes lost. A dedicated subnet stays for a successor.`, "Delete group");
    if (ok) await act("/capacity/instance-groups/delete", { instanceGroupName: g.name }, "Delete group");
  }

  // -- add instance group: only the fields the user set are sent ------------------------------------------
  function subnetsIn(az) {
    const found = new Set();
    for (const g of groups.instanceGroups) {
      if (g.availabilityZones.length === 1 && g.availabilityZones[0] === az) g.subnetIds.forEach((s) => found.add(s));
    }
    return [...found].sort();
  }
  function drawAdd() {
    if (!addOpen) return;
    const types = instances.error ? [] : instances.instances;
    const name = h("input", { type: "text", name: "instanceGroupName", required: true, spellcheck: "false", id: "ig-name" });
    const az = h("select", { name: "availabilityZone", id: "ig-az" }, (zones.availabilityZones ?? []).map((z) => h("option", { value: z.name ?? z.zoneName }, `${z.name ?? z.zoneName} (${z.id ?? z.zoneId})`)));
    const type = h("select", { name: "instanceType", id: "ig-type" });
    const count = h("input", { type: "number", name: "instanceCount", value: "1", min: "0", max: "6758", id: "ig-count" });
    const cap = h("select", { name: "capacity", id: "ig-capacity" }, h("option", { value: "OnDemand" }, "On-Demand"), h("option", { value: "Spot" }, "Spot"), h("option", { value: "TrainingPlan" }, "Training plan"));
    const plan = h("input", { type: "text", name: "trainingPlanArn", id: "ig-plan", placeholder: "arn:aws:sagemaker:…:training-plan/…", spellcheck: "false" });
    const efa = h("input", { type: "checkbox", name: "efaOnly", id: "ig-efa" });
    const dedicated = h("input", { type: "checkbox", name: "newSubnet", id: "ig-new-subnet" });
    const subnet = h("select", { name: "subnetId", id: "ig-subnet" });
    const ebs = h("input", { type: "number", name: "volumeSize", value: "500", min: "1", max: "16384", id: "ig-ebs" });
    const planRow = h("div", {}, field("Training plan ARN", plan, "A plan pins the group to its AZ."));
    const efaRow = h("div", {}, h("label", { class: "radio", for: "ig-efa" }, efa, "EFA-only network interfaces"),
      h("p", { class: "hint" }, "Fixed for the life of the group: it cannot be changed after creation."));
    const subnetNote = h("p", { class: "hint", id: "ig-subnet-note" });
    const subnetRow = h("div", {}, field("Subnet", subnet), subnetNote);
    const sync = () => {
      const chosen = type.value;
      const here = types.filter((i) => i.availabilityZones.includes(az.value));
      replace(type, here.map((i) => h("option", { value: i.instanceType }, `${i.instanceType} — ${i.gpus ? i.gpus + " GPU" : i.vcpus + " vCPU"}`)));
      if (here.some((i) => i.instanceType === chosen)) type.value = chosen;
      const facts = types.find((i) => i.instanceType === type.value);
      efaRow.hidden = !facts?.efaOnlyEligible;
      if (efaRow.hidden) efa.checked = false;
      planRow.hidden = cap.value !== "TrainingPlan";
      const candidates = subnetsIn(az.value);
      replace(subnet, candidates.length > 1 ? h("option", { value: "" }, "— choose a subnet —") : null, candidates.map((s) => h("option", { value: s }, s)));
      subnet.disabled = dedicated.checked || candidates.length === 0;
      subnetRow.querySelector(".field").hidden = dedicated.checked || candidates.length === 0;
      subnetNote.textContent = dedicated.checked ? "A dedicated subnet is created for this group and outlives it."
        : candidates.length === 0 ? `No subnet of this cluster is in ${az.value}: a shared compute subnet will be created there.`
          : candidates.length === 1 ? `The cluster's subnet in ${az.value} is used.` : `Several subnets in ${az.value}: pick one.`;
    };
    for (const c of [az, type, cap, dedicated]) c.addEventListener("change", sync);
    const form = h("form", { id: "add-group", novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      const body = { instanceGroupName: name.value.trim(), instanceType: type.value, instanceCount: Number(count.value), availabilityZone: az.value };
      if (cap.value === "Spot") body.isSpot = true;
      if (cap.value === "TrainingPlan") body.trainingPlanArn = plan.value.trim();
      if (efa.checked) body.efaOnly = true;
      if (dedicated.checked) body.newSubnet = true;
      else if (!subnet.disabled && subnet.value && subnetsIn(az.value).length > 1) body.subnetId = subnet.value;
      if (ebs.value !== "500") body.volumeSize = Number(ebs.value);
      try {
        const ref = await post("/capacity/instance-groups", body, { idempotencyKey: key });
        key = newKey();
        op = fresher(await get(`/operations/${ref.operationId}`)); drawOp();
        addOpen = false; replace(addBox); drawGroups();
      } catch (err) { if (err instanceof ApiError) showError(form, err); else shell.fail(err); }
    } },
      h("h3", {}, "Add instance group"),
      h("div", { class: "row" }, field("Name", name), field("Availability Zone", az)),
      h("div", { class: "row3" }, field("Instance type", type), field("Count", count), field("EBS volume (GB)", ebs)),
      h("div", { class: "row" }, field("Capacity type", cap, "Fixed for the life of the group."),
        h("div", { class: "field" }, h("label", {}, "Placement"), h("label", { class: "radio", for: "ig-new-subnet" }, dedicated, "Dedicated subnet"))),
      planRow, efaRow, subnetRow,
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "hyperpod_add_instance_group" }, "Add group"),
        h("button", { type: "button", onclick: () => { addOpen = false; replace(addBox); drawGroups(); } }, "Cancel")));
    let key = newKey();
    replace(addBox, h("div", { class: "card sub" }, form));
    sync();
    name.focus();
  }

  function drawNodes(status) {
    if (status.error) { replace(nodesBox, h("p", { class: "empty" }, status.error.message)); return; }
    replace(nodesBox, nodeTable(status.nodes, (n) => h("span", { class: "actions tight" },
      h("button", { type: "button", "data-operation": "hyperpod_node_reboot", onclick: () => act("/capacity/nodes/reboot", { nodeId: n.name }, "Reboot") }, "Reboot"),
      h("button", { type: "button", "data-operation": "hyperpod_node_replace", onclick: async () => {
        if (await confirmDialog(`Replace ${n.name}?`, "A new instance takes its place; the instance volumes (root, EBS secondary, NVMe) of this node are lost.", "Replace node"))
          await act("/capacity/nodes/replace", { nodeId: n.name }, "Replace");
      } }, "Replace…"),
      h("button", { type: "button", class: "danger", "data-operation": "hyperpod_node_delete", onclick: async () => {
        if (await confirmDialog(`Delete ${n.name}?`, "The instance is terminated and its group's target count drops by one, so no replacement is launched.", "Delete node"))
          await act("/capacity/nodes/delete", { nodeId: n.name }, "Delete");
      } }, "Delete…"))));
  }

  async function refresh() {
    const [g, s] = await Promise.all([
      get("/capacity/instance-groups").catch((error) => ({ error })),
      get("/clusters/status").catch((error) => ({ error })),
      instances ? null : get("/instances").then((v) => { instances = v; }).catch((error) => { instances = { error }; }),
      zones ? null : get("/availability-zones").then((v) => { zones = v; }).catch(() => { zones = { availabilityZones: [] }; }),
    ]);
    groups = g;
    drawGroups();
    if (!g.error) { drawNodes(s); await karpenter.refresh(g.instanceGroups); }
    if (op) { try { op = fresher(await get(`/operations/${op.operationId}`)); drawOp(); } catch { /* keep the last view */ } }
  }
  let pending = null;
  const onResources = (e) => { if (e.detail.status && groups && !groups.error) drawNodes(e.detail.status); };
  const onOp = (e) => {
    const o = e.detail.operation;
    if (op && o.operationId === op.operationId) {
      const before = op.currentStage;
      op = o; drawOp();
      if (!["PENDING", "RUNNING"].includes(o.status) || o.currentStage !== before) {
        clearTimeout(pending); pending = setTimeout(() => refresh().catch(() => {}), 300);
      }
    }
  };
  events.addEventListener("resources", onResources);
  events.addEventListener("operation", onOp);
  const ticker = setInterval(() => tick(opBox), 1000);
  return { el, refresh, dispose: () => {
    events.removeEventListener("resources", onResources); events.removeEventListener("operation", onOp);
    clearInterval(ticker); clearTimeout(pending);
  } };
}

export function nodeTable(nodes, actions, { link = false } = {}) {
  return table([
    { label: "Node", cell: (n) => link ? h("a", { href: `#/monitoring/${encodeURIComponent(n.name)}`, class: "mono small" }, n.name)
      : h("span", { class: "mono small" }, n.name) },
    { label: "Type", cell: (n) => n.instanceType },
    { label: "Group", cell: (n) => n.instanceGroup ?? "—" },
    { label: "Zone", cell: (n) => n.zone ?? "—" },
    { label: "Ready", cell: (n) => badge(n.ready ? "Ready" : "NotReady", n.ready ? "ok" : "bad") },
    { label: "Schedulable", cell: (n) => badge(n.schedulable ? "yes" : "no", n.schedulable ? "ok" : "bad") },
    { label: "Health", cell: (n) => h("span", {}, n.healthStatus ?? "—", n.deepHealthCheck ? ` · deep check ${n.deepHealthCheck}` : "") },
    { label: "GPUs (alloc)", num: true, cell: (n) => `${n.gpus} (${n.gpusAllocated})` },
    actions ? { label: "", cell: actions } : null,
  ].filter(Boolean), nodes, { empty: "No nodes.", rowAttrs: (n) => ({ dataset: { node: n.name } }) });
}
