// Cluster Management: create (with preflight), staged progress, list, switch, import, upgrade, delete with its plan.
import { ApiError, get, newKey, post } from "./api.js";
import { badge, clearErrors, errorBox, field, h, replace, showError, table, tick, when } from "./dom.js";
import { events, fresher } from "./live.js";
import { isActive, progressPanel } from "./operations.js";
import { capacitySection } from "./capacity.js";
import { featuresSection } from "./features.js";
import { stagesSection } from "./stages.js";
import { timelineCard } from "./timeline.js";
import { upgradeCard } from "./upgrade.js";

const CLUSTER_KINDS = ["cluster_create", "cluster_delete", "cluster_import", "cluster_create_eks", "cluster_configure_dependencies", "hyperpod_create", "cluster_upgrade"];
const STAGES = ["eks", "activate", "dependencies", "hyperpod", "storage", "verification"];

export async function render(view, opArg, shell) {
  const progressCard = h("section", { class: "card", id: "progress" });
  const listCard = h("section", { class: "card", id: "clusters", "data-operation": "cluster_list_all" });
  const capacity = capacitySection(shell);
  const features = featuresSection(shell);
  // The active cluster's own timeline: its operations and stages, HyperPod and Kubernetes events.
  const timeline = timelineCard("cluster-timeline", "Cluster timeline", {});
  const drawTimeline = () => (shell.clusters?.activeCluster ? timeline.refresh()
    : replace(timeline.card, h("h2", {}, "Cluster timeline"), h("p", { class: "empty" }, "No active cluster.")));
  const [zones, instances] = await Promise.all([
    get("/availability-zones").catch((err) => ({ error: err })),
    get("/instances").catch((err) => ({ error: err })),
  ]);
  const createCard = h("section", { class: "card", id: "create", "data-op": "cluster_create" }, createForm(zones, instances, shell));
  const stages = stagesSection(shell, zones, instances);
  replace(view, h("div", { class: "stack" }, h("div", { class: "grid" },
    h("div", { class: "stack" }, createCard, importCard(shell)),
    h("div", { class: "stack" }, progressCard, listCard)), stages.el, upgradeCard(), capacity.el, features.el, timeline.card));

  let op = null;
  let listTimer = null;
  async function loadProgress() {
    if (opArg) op = fresher(await get(`/operations/${encodeURIComponent(opArg)}`));
    else {
      const recent = await get("/operations", { limit: 20 });
      op = recent.operations.find((o) => CLUSTER_KINDS.includes(o.kind)) ?? null;
    }
    drawProgress();
  }
  function drawProgress() {
    replace(progressCard, h("div", { class: "card-head" }, h("h2", {}, "Progress"),
      h("span", { class: "spacer" }), op ? h("a", { href: `#/operations/${op.operationId}`, class: "small" }, "details") : null),
    op ? progressPanel(op, shell, loadProgress)
      : h("p", { class: "empty" }, "No cluster operation yet. Create or import a cluster and its stages show here."));
  }
  function drawList(data) {
    replace(listCard, h("div", { class: "card-head" }, h("h2", {}, "Clusters"), h("span", { class: "muted small" }, `${data.count}`)),
      table([
        { label: "Tag", cell: (c) => h("span", {}, h("strong", {}, c.clusterTag), c.active ? [" ", badge("active", "ok")] : null) },
        { label: "Region", cell: (c) => c.region },
        { label: "EKS / HyperPod", cell: (c) => h("span", { class: "small" }, c.eksClusterName, h("br"), c.hyperpodClusterName ?? "—") },
        { label: "Stages", cell: (c) => h("span", { class: "stages-list" }, stageBadges(c)) },
        { label: "Created", cell: (c) => h("span", { class: "small" }, when(c.createdAt), c.imported ? " (imported)" : "") },
        { label: "", cell: (c) => h("span", { class: "actions tight" },
          c.active ? null : h("button", { type: "button", "data-op": "cluster_switch", "data-operation": "cluster_switch", onclick: () => switchTo(c.clusterTag) }, "Switch"),
          h("button", { type: "button", class: "danger", "data-op": "cluster_delete", "data-operation": "cluster_delete", onclick: () => confirmDelete(c.clusterTag, shell) }, "Delete…")) },
      ], data.clusters, { empty: "No clusters yet.", rowAttrs: (c) => ({ dataset: { cluster: c.clusterTag } }) }));
  }
  async function switchTo(tag) {
    const sel = document.getElementById("active-cluster");
    sel.value = tag;
    sel.dispatchEvent(new Event("change"));
  }

  const onOp = (e) => {
    const o = e.detail.operation;
    if (op && o.operationId === op.operationId) { op = o; drawProgress(); }
    else if (!opArg && CLUSTER_KINDS.includes(o.kind) && (!op || o.createdAt > op.createdAt)) { op = o; drawProgress(); }
    if (CLUSTER_KINDS.includes(o.kind) || o.kind === "cluster_switch") {
      // Stage changes show in the cluster list too (debounced: progress events can be frequent).
      clearTimeout(listTimer);
      listTimer = setTimeout(() => shell.reloadClusters().catch(() => {}), 500);
      if (["SUCCEEDED", "FAILED", "CANCELLED"].includes(o.status)) {
        capacity.refresh().catch(() => {});
        stages.refresh().catch(() => {});
        features.refresh().catch(() => {});
        drawTimeline()?.catch?.(() => {});
      }
    }
  };
  const onClusters = (e) => drawList(e.detail);
  events.addEventListener("operation", onOp);
  events.addEventListener("clusters", onClusters);
  const ticker = setInterval(() => tick(progressCard), 1000);
  if (shell.clusters) drawList(shell.clusters);
  features.refresh().catch(() => {});  // reads AWS and Kubernetes: the rest of the page does not wait for it
  drawTimeline()?.catch?.(() => {});  // not waited for either: a first read refreshes HyperPod events
  stages.refresh().catch(() => {});
  await Promise.all([loadProgress(), capacity.refresh()]);
  return {
    refresh: async () => { await Promise.all([loadProgress(), capacity.refresh(), features.refresh(), drawTimeline(), stages.refresh()]); },
    dispose: () => {
      events.removeEventListener("operation", onOp); events.removeEventListener("clusters", onClusters);
      clearInterval(ticker); clearTimeout(listTimer); capacity.dispose(); features.dispose();
    },
  };
}

function stageBadges(c) {
  const names = [...STAGES, ...Object.keys(c.stages).filter((k) => !STAGES.includes(k))].filter((k) => k in c.stages);
  if (!names.length) return h("span", { class: "muted" }, "—");
  return names.map((k) => h("span", { class: `badge gap ${c.stages[k]}`, title: `${k}: ${c.stages[k]}` }, k));
}

// -- create ------------------------------------------------------------------------------------------------

function createForm(zones, instances, shell) {
  const region = zones.region ?? instances.region ?? "";
  let key = newKey();
  const tag = h("input", { type: "text", name: "clusterTag", placeholder: "generated when empty", autocomplete: "off", spellcheck: "false" });
  const regionIn = h("input", { type: "text", name: "region", value: region });
  const netNew = h("input", { type: "radio", name: "network", value: "new", checked: true, id: "net-new" });
  const netReuse = h("input", { type: "radio", name: "network", value: "reuse", id: "net-reuse" });
  const cidr = h("input", { type: "text", name: "vpcCidr", placeholder: "chosen automatically when empty, e.g. 10.1.0.0/16", spellcheck: "false" });
  const vpc = h("input", { type: "text", name: "vpcId", placeholder: "vpc-…", spellcheck: "false", disabled: true });
  const az = h("select", { name: "availabilityZone", "data-operation": "cluster_get_availability_zones" });
  const type = h("select", { name: "instanceType", "data-operation": "cluster_get_available_instances" });
  const count = h("input", { type: "number", name: "instanceCount", value: "1", min: "0", max: "6758" });
  const capacityType = h("select", { name: "capacityType" }, h("option", { value: "OnDemand" }, "On-Demand"), h("option", { value: "Spot" }, "Spot"));
  const plan = h("input", { type: "text", name: "trainingPlanArn", placeholder: "optional: arn:aws:sagemaker:…:training-plan/…", spellcheck: "false" });
  const ebs = h("input", { type: "number", name: "ebsVolumeSize", value: "500", min: "1", max: "16384" });
  const preflight = h("div", { class: "preflight", "aria-live": "polite", "data-operation": "cluster_plan_create" });
  const submit = h("button", { type: "submit", class: "primary", "data-op": "cluster_create", "data-operation": "cluster_create" }, "Create cluster");
  const status = h("span", { class: "muted small" });

  if (zones.error) az.append(h("option", { value: "" }, `unavailable: ${zones.error.message}`));
  else az.append(...zones.availabilityZones.map((z) => h("option", { value: z.zoneName ?? z.name }, `${z.zoneName ?? z.name} (${z.zoneId ?? z.id})`)));
  const fillTypes = () => {
    const chosen = type.value;
    if (instances.error) { replace(type, h("option", { value: "" }, `unavailable: ${instances.error.message}`)); return; }
    const here = instances.instances.filter((i) => i.availabilityZones.includes(az.value));
    replace(type, here.length ? null : h("option", { value: "" }, "no instance type offered in this AZ"),
      here.map((i) => h("option", { value: i.instanceType },
        `${i.instanceType} — ${i.gpus ? i.gpus + " GPU" : i.neuronDevices ? i.neuronDevices + " Neuron" : i.vcpus + " vCPU"}` +
        (i.headroom === null ? "" : ` · quota headroom ${i.headroom}`))));
    if (here.some((i) => i.instanceType === chosen)) type.value = chosen;
  };
  fillTypes();
  az.addEventListener("change", fillTypes);
  const syncNet = () => { cidr.disabled = !netNew.checked; vpc.disabled = netNew.checked; };
  netNew.addEventListener("change", syncNet); netReuse.addEventListener("change", syncNet);

  const values = () => {
    const body = { instanceType: type.value, instanceCount: Number(count.value), availabilityZone: az.value };
    if (tag.value.trim()) body.clusterTag = tag.value.trim();
    if (regionIn.value.trim() && regionIn.value.trim() !== region) body.region = regionIn.value.trim();
    if (netNew.checked && cidr.value.trim()) body.vpcCidr = cidr.value.trim();
    if (netReuse.checked && vpc.value.trim()) body.vpcId = vpc.value.trim();
    if (capacityType.value !== "OnDemand") body.capacityType = capacityType.value;
    if (plan.value.trim()) body.trainingPlanArn = plan.value.trim();
    if (ebs.value !== "500") body.ebsVolumeSize = Number(ebs.value);
    return body;
  };

  let planSeq = 0;
  async function runPlan() {
    const seq = ++planSeq;
    const v = values();
    const body = { instanceType: v.instanceType, instanceCount: v.instanceCount, availabilityZone: v.availabilityZone };
    for (const k of ["clusterTag", "region", "vpcId", "trainingPlanArn"]) if (v[k] !== undefined) body[k] = v[k];
    replace(preflight, h("p", { class: "muted small" }, h("span", { class: "spinner" }), " Checking the plan (cluster_plan_create)…"));
    try {
      const result = await post("/clusters/plan", body);
      if (seq !== planSeq) return;
      clearErrors(form);
      for (const b of result.blockers) if (b.field) markField(b.field, b.message);
      replace(preflight, h("div", { class: "card sub" },
        h("div", { class: "card-head" }, h("strong", {}, "Preflight"), badge(result.ok ? "ok" : "blocked", result.ok ? "ok" : "bad"),
          h("span", { class: "muted small" }, `${result.checked.length} checks`)),
        h("ul", { class: "findings" },
          result.blockers.map((b) => h("li", { class: "blocker", dataset: { code: b.code } }, h("strong", {}, "Blocker "), b.message, b.hint ? h("div", { class: "hint" }, b.hint) : null)),
          result.warnings.map((w) => h("li", { class: "warning", dataset: { code: w.code } }, h("strong", {}, "Warning "), w.message, w.hint ? h("div", { class: "hint" }, w.hint) : null)),
          !result.blockers.length && !result.warnings.length ? h("li", {}, "No blockers or warnings.") : null)));
      submit.disabled = !result.ok;
      submit.title = result.ok ? "" : "The preflight found blockers; fix them first.";
    } catch (err) {
      if (seq !== planSeq) return;
      submit.disabled = false;
      replace(preflight);
      if (err instanceof ApiError) showError(form, err); else shell.fail(err);
    }
  }
  function markField(name, message) {
    const input = form.querySelector(`[name="${CSS.escape(name)}"]`);
    if (!input) return;
    input.setAttribute("aria-invalid", "true");
    (input.closest(".field") ?? input.parentElement).append(h("p", { class: "field-error", role: "alert", dataset: { for: name } }, message));
  }
  let debounce = null;
  const schedule = () => { clearTimeout(debounce); debounce = setTimeout(runPlan, 400); };

  const form = h("form", { novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clearErrors(form);
    submit.disabled = true;
    status.replaceChildren(h("span", { class: "spinner" }), " Submitting…");
    try {
      const ref = await post("/clusters", values(), { idempotencyKey: key });
      key = newKey();
      location.hash = `#/clusters/${ref.operationId}`;
    } catch (err) {
      status.textContent = "";
      submit.disabled = false;
      if (err instanceof ApiError) showError(form, err); else shell.fail(err);
    }
  } },
    h("div", { class: "card-head" }, h("h2", {}, "Create a cluster")),
    h("p", { class: "muted small" }, "Six stages in one operation: EKS → activate → dependencies → HyperPod (automatic node recovery), with the S3 storage claim made while its nodes come up → verification."),
    h("div", { class: "row" }, field("Cluster tag", tag, "1-32 lowercase letters, digits, hyphens"), field("Region", regionIn, `AZ and instance choices below are for ${region || "the server's Region"}`)),
    h("label", {}, "Network"),
    h("div", {}, h("label", { class: "radio", for: "net-new" }, netNew, "New VPC"), h("label", { class: "radio", for: "net-reuse" }, netReuse, "Reuse a VPC")),
    h("div", { class: "row" }, field("VPC CIDR", cidr), field("VPC id", vpc)),
    h("div", { class: "row" }, field("Availability Zone", az, "From cluster_get_availability_zones"), field("Instance type", type, "Offered in the chosen AZ (cluster_get_available_instances)")),
    h("div", { class: "row3" }, field("Instance count", count), field("Capacity type", capacityType), field("EBS volume (GB)", ebs)),
    field("Training plan", plan),
    preflight,
    h("div", { class: "actions" }, submit, h("button", { type: "button", onclick: runPlan, "data-operation": "cluster_plan_create" }, "Check plan"), status));
  for (const el of [az, type, count, vpc, plan, regionIn, netNew, netReuse]) el.addEventListener("change", schedule);
  setTimeout(runPlan, 0);
  return form;
}

// -- import ------------------------------------------------------------------------------------------------

function importCard(shell) {
  const name = h("input", { type: "text", name: "eksClusterName", required: true, spellcheck: "false" });
  const tag = h("input", { type: "text", name: "clusterTag", id: "imp-tag", placeholder: "derived from the name", spellcheck: "false" });
  const region = h("input", { type: "text", name: "region", id: "imp-region", placeholder: "the server's Region", spellcheck: "false" });
  let key = newKey();
  const form = h("form", { novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clearErrors(form);
    const body = { eksClusterName: name.value.trim() };
    if (tag.value.trim()) body.clusterTag = tag.value.trim();
    if (region.value.trim()) body.region = region.value.trim();
    try {
      const ref = await post("/clusters/import", body, { idempotencyKey: key });
      key = newKey();
      location.hash = `#/clusters/${ref.operationId}`;
    } catch (err) { if (err instanceof ApiError) showError(form, err); else shell.fail(err); }
  } },
    field("EKS cluster name", name), h("div", { class: "row" }, field("Cluster tag", tag), field("Region", region)),
    h("div", { class: "actions" }, h("button", { type: "submit", "data-op": "cluster_import", "data-operation": "cluster_import" }, "Import")));
  return h("section", { class: "card", id: "import", "data-op": "cluster_import" }, h("details", {}, h("summary", {}, "Import an existing cluster"),
    h("p", { class: "muted small" }, "Registers an EKS cluster (and its HyperPod cluster) without owning it: deleting it later never removes what it did not create."), form));
}

// -- delete ------------------------------------------------------------------------------------------------

async function confirmDelete(tag, shell) {
  const dialog = h("dialog", { "aria-label": `Delete ${tag}` });
  document.body.append(dialog);
  const close = () => { dialog.close(); dialog.remove(); };
  const bucket = h("input", { type: "checkbox", name: "deleteBucket", id: "del-bucket" });
  const typed = h("input", { type: "text", name: "confirmTag", id: "del-confirm", autocomplete: "off", spellcheck: "false" });
  const body = h("div", { "data-operation": "cluster_delete_plan" }, h("p", {}, h("span", { class: "spinner" }), " Reading the deletion plan…"));
  const go = h("button", { type: "submit", class: "danger solid", disabled: true }, "Delete");
  let plan = null;
  async function load() {
    try {
      plan = await get(`/clusters/${encodeURIComponent(tag)}/deletion-plan`, { deleteBucket: bucket.checked ? "true" : "" });
      replace(body,
        h("p", {}, plan.note, " ", h("strong", {}, `${plan.resources.length} resource(s)`), " are deleted in this order:"),
        h("div", { class: "plan-scroll", tabindex: "0", role: "region", "aria-label": "Resources to delete" }, table([
          { label: "#", num: true, cell: (r) => r.order },
          { label: "Type", cell: (r) => r.resourceType },
          { label: "Id", cell: (r) => h("code", {}, r.resourceId) },
          { label: "Region", cell: (r) => r.region },
          { label: "Found by", cell: (r) => r.source },
        ], plan.resources, { empty: "Nothing to delete on AWS." })),
        plan.kept.length ? [h("h3", {}, "Kept"), table([
          { label: "Type", cell: (r) => r.resourceType }, { label: "Id", cell: (r) => h("code", {}, r.resourceId) },
          { label: "Why", cell: (r) => r.details?.reason ?? r.source }], plan.kept)] : null,
        h("p", { class: "muted small" }, "Plan digest ", h("code", {}, plan.planDigest), ": the deletion runs only if nothing changed since this plan."));
      sync();
    } catch (err) { replace(body, errorBox(err)); }
  }
  const sync = () => { go.disabled = !plan || typed.value.trim() !== tag; };
  typed.addEventListener("input", sync);
  bucket.addEventListener("change", load);
  const form = h("form", { onsubmit: async (e) => {
    e.preventDefault();
    if (e.submitter?.value === "cancel") { close(); return; }
    go.disabled = true;
    try {
      const ref = await post(`/clusters/${encodeURIComponent(tag)}/delete`, { planDigest: plan.planDigest, deleteBucket: bucket.checked });
      close();
      location.hash = `#/clusters/${ref.operationId}`;
    } catch (err) { showError(form, err); sync(); }
  } },
    h("h2", {}, "Delete cluster ", h("code", {}, tag)), body,
    h("label", { class: "radio", for: "del-bucket" }, bucket, "Also empty and delete the project bucket"),
    field(`Type ${tag} to confirm`, typed),
    h("div", { class: "actions" }, go, h("button", { type: "submit", value: "cancel", formnovalidate: true }, "Cancel")));
  dialog.append(form);
  dialog.addEventListener("cancel", () => dialog.remove());
  dialog.showModal();
  await load();
}

export { isActive };
