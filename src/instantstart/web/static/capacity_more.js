// More of the Capacity section: the HyperPod software update, the EKS managed node groups (scale, delete) and
// HyperPod-managed Karpenter (status, enable with its settings, disable). Each action runs through `act`, the
// section's operation runner, so its progress shows in the section's panel.
import { get } from "./api.js";
import { badge, clearErrors, confirmDialog, errorBox, field, h, replace, table } from "./dom.js";

export function softwareButton(act) {
  return h("button", { type: "button", id: "software-update", "data-operation": "hyperpod_update_software", "data-op": "hyperpod_update_software",
    onclick: async () => {
      const ok = await confirmDialog("Update the HyperPod software?",
        "Every instance group is patched to the latest HyperPod AMI release: its nodes go SystemUpdating in turn and the jobs on them are interrupted.",
        "Update software");
      if (ok) await act("/capacity/software-update", {}, "Software update");
    } }, "Update software…");
}

// The EKS managed node groups (CPU system capacity) read with the instance groups.
export function nodeGroupsTable(nodeGroups, act) {
  const scale = (g) => {
    const num = (name, value, min, label) => h("input", { type: "number", name, min, max: "1000", value: String(value ?? ""), class: "narrow",
      "aria-label": `${label} of ${g.name}` });
    const form = h("form", { class: "inline-form", novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      const body = { name: g.name, minSize: Number(form.elements.minSize.value), maxSize: Number(form.elements.maxSize.value),
        desiredSize: Number(form.elements.desiredSize.value) };
      await act("/capacity/nodegroups/scale", body, "Scale node group", form);
    } }, num("minSize", g.minSize, "0", "Minimum size"), num("desiredSize", g.desiredSize, "0", "Desired size"), num("maxSize", g.maxSize, "1", "Maximum size"),
    h("button", { type: "submit", "data-operation": "cluster_nodegroup_scale", "data-op": "cluster_nodegroup_scale" }, "Resize"));
    return form;
  };
  const remove = async (g) => {
    const ok = await confirmDialog(`Delete node group ${g.name}?`, "Its nodes drain and terminate; the system pods on them need somewhere else to run.", "Delete node group");
    if (ok) await act("/capacity/nodegroups/delete", { nodeGroupName: g.name }, "Delete node group");
  };
  return table([
    { label: "Node group", cell: (g) => h("strong", {}, g.name) },
    { label: "Status", cell: (g) => badge(g.status ?? "—") },
    { label: "Types", cell: (g) => g.instanceTypes.join(", ") || "—" },
    { label: "Min / desired / max", cell: scale },
    { label: "", cell: (g) => h("button", { type: "button", class: "danger", "data-operation": "cluster_nodegroup_delete", "data-op": "cluster_nodegroup_delete", onclick: () => remove(g) }, "Delete…") },
  ], nodeGroups, { empty: "No EKS managed node groups.", rowAttrs: (g) => ({ dataset: { nodegroup: g.name } }) });
}

// Karpenter: its state, and either the enable form (groups that start at 0) or the disable button.
export function karpenterBox(act) {
  const el = h("div", { id: "karpenter", "data-operation": "karpenter_get_status" });
  async function refresh(groups) {
    const s = await get("/capacity/karpenter-status").catch((error) => ({ error }));
    if (s.error) { replace(el, errorBox(s.error)); return; }
    const pool = s.nodePool?.status ?? null;
    replace(el, h("p", { id: "karpenter-state" }, badge(s.state, s.enabled ? "ok" : s.state === "FAILED" ? "bad" : ""), " ", s.message,
      s.settings?.instanceGroups ? ` · groups ${s.settings.instanceGroups.join(", ")}` : "", pool ? ` · NodePool ${JSON.stringify(pool.resources ?? {})}` : ""),
    s.error ? errorBox(s.error) : null,
    s.enabled || s.state === "IN_PROGRESS" ? h("div", { class: "actions" },
      h("button", { type: "button", class: "danger", id: "karpenter-uninstall", "data-operation": "karpenter_uninstall", "data-op": "karpenter_uninstall",
        disabled: s.state === "IN_PROGRESS", onclick: async () => {
          const ok = await confirmDialog("Disable Karpenter?", "Its NodePool, node class, cluster autoscaling and IAM role go; the groups keep their counts and are scaled by hand again.", "Disable Karpenter");
          if (ok && await act("/capacity/karpenter/uninstall", {}, "Disable Karpenter")) await refresh(groups);
        } }, "Disable Karpenter…"))
      : installForm(groups));
  }
  function installForm(groups) {
    const picks = groups.filter((g) => !g.karpenterManaged).map((g) => {
      const box = h("input", { type: "checkbox", name: "instanceGroups", value: g.name, id: `kp-group-${g.name}`, checked: g.targetCount === 0 });
      return h("label", { class: "radio", for: box.id }, box, `${g.name} (${g.currentCount}/${g.targetCount})`);
    });
    const form = h("form", { id: "karpenter-form", novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      clearErrors(form);
      const els = form.elements;
      const body = { instanceGroups: [...form.querySelectorAll("input[name=instanceGroups]:checked")].map((b) => b.value),
        consolidationPolicy: els.consolidationPolicy.value, consolidateAfter: els.consolidateAfter.value.trim() || "60s",
        budgetNodes: els.budgetNodes.value.trim() || "10%" };
      if (els.gpuLimit.value !== "") body.gpuLimit = Number(els.gpuLimit.value);
      if (await act("/capacity/karpenter", body, "Enable Karpenter", form)) await refresh(groups);
    } },
      h("fieldset", {}, h("legend", {}, "Instance groups Karpenter scales (they start at 0)"), picks.length ? picks : h("p", { class: "empty" }, "No instance group.")),
      h("div", { class: "row" }, field("Consolidation", h("select", { name: "consolidationPolicy", id: "kp-policy" },
        h("option", { value: "WhenEmptyOrUnderutilized" }, "When empty or underutilized"), h("option", { value: "WhenEmpty" }, "When empty"))),
      field("Consolidate after", h("input", { type: "text", name: "consolidateAfter", id: "kp-after", placeholder: "60s" }), "Never, or e.g. 30s, 5m, 1h")),
      h("div", { class: "row" }, field("Disruption budget", h("input", { type: "text", name: "budgetNodes", id: "kp-budget", placeholder: "10%" }), "Nodes or a percentage"),
        field("GPU limit", h("input", { type: "number", name: "gpuLimit", id: "kp-gpus", min: "0", max: "100000" }), "Empty: no limit")),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "karpenter_install", "data-op": "karpenter_install" }, "Enable Karpenter")));
    return form;
  }
  return { el, refresh };
}
