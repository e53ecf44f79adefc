// Teams (#/teams): HyperPod task governance. Each team with its quota, members and its Kueue queue now (team_list:
// admitted and pending jobs, accelerators in use and borrowed); operators create, change and delete teams
// (team_create/team_update/team_delete; data-op hides those for members and viewers). Errors show beside the field.
import { ApiError, get, newKey, post } from "./api.js";
import { badge, clearErrors, confirmDialog, errorBox, field, h, replace, showError, table } from "./dom.js";

const SHARING = ["LendAndBorrow", "Lend", "DontLend"];
const amounts = (m) => Object.entries(m ?? {}).map(([k, v]) => `${v} ${k}`).join(", ") || "0";
const quotaText = (q) => `${q.accelerators ?? q.instanceCount} ${q.accelerators != null ? "GPUs" : "instances"} of ${q.instanceType}`
  + ` · ${q.sharing ?? "LendAndBorrow"}${(q.sharing ?? "LendAndBorrow") === "LendAndBorrow" ? ` (borrow ≤ ${q.borrowLimitPercent ?? 50} %)` : ""}`;
const memberList = (text) => text.split(",").map((m) => m.trim()).filter(Boolean);

function input(name, id, attrs = {}) {
  return h("input", { type: "text", name, id, autocomplete: "off", spellcheck: "false", ...attrs });
}

// The quota fields of a form (names are the API's field paths, so errors land beside them).
function quotaFields(prefix, q = {}) {
  return [
    field("Instance type", input("quota.instanceType", `${prefix}-type`, { value: q.instanceType ?? "", placeholder: "ml.g5.12xlarge" })),
    field("GPUs", input("quota.accelerators", `${prefix}-gpus`, { type: "number", min: "0", value: q.accelerators ?? "" }), "GPUs (Neuron devices on trn) of the quota."),
    field("Sharing", h("select", { name: "quota.sharing", id: `${prefix}-sharing` },
      SHARING.map((s) => h("option", { value: s, selected: s === (q.sharing ?? "LendAndBorrow") }, s)))),
    field("Borrow limit (%)", input("quota.borrowLimitPercent", `${prefix}-borrow`, { type: "number", min: "1", max: "500", value: q.borrowLimitPercent ?? "", placeholder: "50" })),
  ];
}

function quotaOf(d) {
  const q = { instanceType: String(d.get("quota.instanceType")).trim(), sharing: d.get("quota.sharing") };
  const gpus = String(d.get("quota.accelerators")).trim();
  if (gpus !== "") q.accelerators = Number(gpus);
  if (q.sharing === "LendAndBorrow" && String(d.get("quota.borrowLimitPercent")) !== "") q.borrowLimitPercent = Number(d.get("quota.borrowLimitPercent"));
  return q;
}

export async function render(view, _arg, shell) {
  await shell.whoami;
  const list = h("div", { id: "teams-list", "data-operation": "team_list", "aria-live": "polite" });
  const status = h("p", { id: "teams-status", role: "status", class: "small" });

  // Submit an operation, wait for it, redraw; a refusal or a failed operation shows on the form.
  async function run(form, path, body) {
    clearErrors(form);
    replace(status, "Working…");
    try {
      const ref = await post(path, body, { idempotencyKey: newKey() });
      const op = await shell.waitFor(ref.operationId);
      if (op.status !== "SUCCEEDED") throw new ApiError(409, op.error ?? { message: `${op.type ?? "operation"} ${op.status}` });
      replace(status, "Done.");
      await draw();
      return true;
    } catch (err) {
      replace(status);
      if (err instanceof ApiError) showError(form, err); else shell.fail(err);
      return false;
    }
  }

  function changeForm(t) {
    const id = `team-${t.name}`;
    const form = h("form", { class: "filters", novalidate: true, id: `${id}-change` },
      ...quotaFields(id, t.quota),
      field("Members", input("members", `${id}-members`, { value: t.members.join(", ") }), "User names, comma-separated (the complete list)."),
      h("div", { class: "actions" }, h("button", { type: "submit", "data-operation": "team_update" }, `Save ${t.name}`)));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const d = new FormData(form);
      run(form, `/teams/${encodeURIComponent(t.name)}`, { name: t.name, clusterTag: t.clusterTag, quota: quotaOf(d), members: memberList(String(d.get("members"))) });
    });
    return h("details", { "data-op": "team_update" }, h("summary", {}, `Change ${t.name}`), form);
  }

  async function remove(t, button) {
    if (!(await confirmDialog(`Delete team ${t.name}?`, `Its compute quota and queues go; the namespace ${t.namespace} and what runs there stay.`, "Delete team"))) return;
    const holder = button.closest("td");
    const form = h("form", { class: "inline-form" });
    holder.append(form);
    if (!(await run(form, `/teams/${encodeURIComponent(t.name)}/delete`, { name: t.name, clusterTag: t.clusterTag }))) return;
    form.remove();
  }

  async function draw() {
    const found = await get("/teams").catch((error) => ({ error }));
    if (found.error) { replace(list, errorBox(found.error)); return; }
    replace(list, table([
      { label: "Team", cell: (t) => h("strong", {}, t.name) },
      { label: "Cluster", cell: (t) => t.clusterTag },
      { label: "Namespace and queue", cell: (t) => h("span", { class: "mono small" }, `${t.namespace} · ${t.queue}`) },
      { label: "Quota", cell: (t) => h("span", {}, quotaText(t.quota), " ", badge(t.quotaStatus ?? "gone", t.quotaStatus === "Created" ? "ok" : "bad")) },
      { label: "Members", cell: (t) => t.members.join(", ") || "—" },
      { label: "Queue now", cell: (t) => t.usage
        ? `${t.usage.admittedWorkloads} admitted, ${t.usage.pendingWorkloads} pending; in use ${amounts(t.usage.inUse)}; borrowed ${amounts(t.usage.borrowed)}`
        : "no queue yet" },
      { label: "", cell: (t) => h("div", { class: "stack" }, changeForm(t),
        h("button", { type: "button", class: "danger", "data-operation": "team_delete", "data-op": "team_delete", "aria-label": `Delete team ${t.name}`,
          onclick: (e) => remove(t, e.currentTarget) }, "Delete…")) },
    ], found.teams, { empty: "No teams yet.", rowAttrs: (t) => ({ dataset: { team: t.name } }) }));
  }

  const create = h("form", { id: "team-create", class: "filters", novalidate: true },
    field("Name", input("name", "team-name"), "1-40 lowercase letters, digits, '-': the namespace hyperpod-ns-<name>."),
    ...quotaFields("team-new"),
    field("Members", input("members", "team-members"), "User names, comma-separated."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "team_create" }, "Create team")));
  create.addEventListener("submit", async (e) => {
    e.preventDefault();
    const d = new FormData(create);
    const body = { name: String(d.get("name")).trim(), quota: quotaOf(d), members: memberList(String(d.get("members"))) };
    if (shell.clusters?.activeCluster) body.clusterTag = shell.clusters.activeCluster;
    if (await run(create, "/teams", body)) create.reset();
  });
  replace(view, h("div", { class: "stack" }, h("h1", { id: "teams-title" }, "Teams"),
    h("p", { class: "muted" }, "HyperPod task governance: each team is a namespace with a compute quota; its members' jobs queue in its Kueue queue, borrow idle GPUs of other teams and give them back when the lender needs them."),
    h("section", { class: "card", id: "teams", "aria-labelledby": "teams-list-title" }, h("h2", { id: "teams-list-title" }, "Teams"), list, status),
    h("section", { class: "card", id: "team-create-card", "aria-labelledby": "team-new-title", "data-op": "team_create" },
      h("h2", { id: "team-new-title" }, "Create a team"), create)));
  await draw();
  return { refresh: draw };
}
