// Kubernetes upgrade of the active cluster: the plan (add-ons, helm charts, removed APIs, HyperPod software), then
// the upgrade itself (control plane → add-ons → HyperPod software), followed as an operation like any other.
import { get, newKey, post } from "./api.js";
import { badge, confirmDialog, errorBox, h, replace, table } from "./dom.js";

function planView(plan) {
  return [
    h("p", {}, "Kubernetes ", h("strong", {}, plan.currentVersion), " → ", h("strong", {}, plan.targetVersion),
      " on ", h("code", {}, plan.eksClusterName), " (", plan.clusterStatus, "). Stages: ", plan.stages.join(" → "), "."),
    plan.blockers.length
      ? h("div", { class: "form-error", role: "alert" }, h("strong", {}, "Blocked: "), h("ul", {}, plan.blockers.map((b) => h("li", {}, b))))
      : h("p", {}, badge("ready", "ok"), " Nothing blocks the upgrade."),
    h("h3", {}, "EKS add-ons"),
    table([
      { label: "Add-on", cell: (a) => a.name },
      { label: "Installed", cell: (a) => h("code", {}, a.currentVersion ?? "—") },
      { label: `Runs on ${plan.targetVersion}`, cell: (a) => badge(a.compatible ? "yes" : "no", a.compatible ? "ok" : "bad") },
      { label: "Move to", cell: (a) => (a.action === "update" ? h("code", {}, a.targetVersion) : a.action) },
    ], plan.addons, { empty: "No EKS add-ons installed." }),
    h("h3", {}, "Helm charts"),
    table([
      { label: "Release", cell: (c) => `${c.namespace}/${c.release}` },
      { label: "Chart", cell: (c) => `${c.chart} ${c.chartVersion ?? ""}` },
      { label: "kubeVersion", cell: (c) => h("code", {}, c.kubeVersion ?? "any") },
      { label: "Verdict", cell: (c) => h("span", {}, badge(c.compatible ? "ok" : "blocked", c.compatible ? "ok" : "bad"), " ", c.message) },
    ], plan.charts, { empty: "No helm release of ours." }),
    h("h3", {}, "Removed APIs in use"),
    table([
      { label: "Object", cell: (f) => `${f.kind} ${f.name}` }, { label: "From", cell: (f) => f.source },
      { label: "API", cell: (f) => h("code", {}, f.apiVersion) }, { label: "Use instead", cell: (f) => h("code", {}, f.replacement) },
    ], plan.removedApis, { empty: "None: our objects use APIs the target serves." }),
    h("h3", {}, "HyperPod software (patched last)"),
    plan.hyperpod ? table([
      { label: "Group", cell: (g) => g.name }, { label: "Image", cell: (g) => g.currentImageReleaseVersion ?? "—" },
      { label: "Status", cell: (g) => g.imageVersionStatus ?? "—" },
    ], plan.hyperpod.groups, { empty: "No instance groups." }) : h("p", { class: "empty" }, "No HyperPod cluster."),
  ];
}

export function upgradeCard() {
  const out = h("div", { id: "upgrade-plan", "aria-live": "polite" });
  let plan = null;
  let key = newKey();
  const go = h("button", { type: "button", class: "danger", disabled: true, "data-op": "cluster_upgrade", "data-operation": "cluster_upgrade" }, "Upgrade…");
  const check = h("button", { type: "button", "data-op": "cluster_upgrade_plan", "data-operation": "cluster_upgrade_plan" }, "Plan the next version");
  check.addEventListener("click", async () => {
    check.disabled = true;
    replace(out, h("p", {}, h("span", { class: "spinner" }), " Reading the upgrade plan…"));
    try {
      plan = await get("/clusters/upgrade-plan");
      replace(out, planView(plan));
      go.disabled = !plan.ok;
      go.textContent = `Upgrade to ${plan.targetVersion}…`;
    } catch (err) { plan = null; go.disabled = true; replace(out, errorBox(err)); }
    check.disabled = false;
  });
  go.addEventListener("click", async () => {
    if (!plan) return;
    const sure = await confirmDialog(`Upgrade to Kubernetes ${plan.targetVersion}`,
      `EKS cannot go back to ${plan.currentVersion}. The control plane, then the add-ons, then the HyperPod nodes' software are updated.`, "Upgrade");
    if (!sure) return;
    go.disabled = true;
    try {
      const ref = await post("/clusters/upgrade", { targetVersion: plan.targetVersion }, { idempotencyKey: key });
      key = newKey();
      location.hash = `#/clusters/${ref.operationId}`;
    } catch (err) { replace(out, errorBox(err)); go.disabled = false; }
  });
  return h("section", { class: "card", id: "upgrade", "data-op": "cluster_upgrade" },
    h("h2", {}, "Kubernetes upgrade"),
    h("p", { class: "muted small" }, "One minor version at a time, as EKS allows: which add-ons must move and to which version, whether our helm charts allow the new version, APIs it no longer serves. Runs only when nothing blocks it."),
    h("div", { class: "actions" }, check, go), out);
}
