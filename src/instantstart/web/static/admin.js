// Users & tokens (#/admin): users and their roles, API tokens (a new token is shown once), the audit trail filtered
// by user, operation and outcome. Users and the audit trail are admin-only (data-op hides them for other roles);
// anyone manages their own tokens.
import { ApiError, get, newKey, post } from "./api.js";
import { badge, clearErrors, confirmDialog, errorBox, field, h, replace, showError, table, when } from "./dom.js";

const ROLES = ["viewer", "member", "operator", "admin"];
const OUTCOMES = ["", "ok", "denied", "error"];
const roleSelect = (name, id, value) => h("select", { name, id }, ROLES.map((r) => h("option", { value: r, selected: r === value }, r)));

export async function render(view, _arg, shell) {
  await shell.whoami;  // who is signed in decides what this page offers
  const usersCard = h("section", { class: "card", id: "users", "aria-labelledby": "users-title", "data-op": "user_list" });
  const tokensCard = h("section", { class: "card", id: "tokens", "aria-labelledby": "tokens-title" });
  const auditCard = h("section", { class: "card", id: "audit", "aria-labelledby": "audit-title", "data-op": "audit_list" });
  replace(view, h("div", { class: "stack" }, h("h1", {}, "Users & tokens"), usersCard, tokensCard, auditCard,
    h("p", { class: "muted small" }, "Alert thresholds and notification channels: ", h("a", { href: "#/alerts" }, "Alert settings"), ".")));
  const isAdmin = () => shell.allowed?.has("user_list") ?? false;
  const me = shell.me?.user ?? "";

  // -- users ---------------------------------------------------------------------------------------------------
  const userList = h("div", { "data-operation": "user_list" });
  const addUser = h("form", { id: "add-user", class: "filters", novalidate: true, "data-op": "user_create" },
    field("Name", h("input", { type: "text", name: "name", id: "user-name", autocomplete: "off", spellcheck: "false" })),
    field("Role", roleSelect("role", "user-role", "viewer")),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "user_create" }, "Add user")));
  addUser.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(addUser);
    const d = new FormData(addUser);
    try {
      await post("/users", { name: String(d.get("name")).trim(), role: d.get("role") }, { idempotencyKey: newKey() });
      addUser.reset();
      await Promise.all([drawUsers(), drawTokens()]);
    } catch (err) { if (err instanceof ApiError) showError(addUser, err); else shell.fail(err); }
  });
  replace(usersCard, h("h2", { id: "users-title" }, "Users"), userList, h("h3", {}, "Add a user"), addUser);

  function roleForm(u) {
    const select = roleSelect("role", `role-${u.name}`, u.role);
    select.setAttribute("aria-label", `Role of ${u.name}`);
    const form = h("form", { class: "inline-form", novalidate: true }, select,
      h("button", { type: "submit", "data-operation": "user_update", "aria-label": `Save the role of ${u.name}` }, "Save"));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      clearErrors(form);
      try { await post(`/users/${encodeURIComponent(u.name)}/role`, { role: select.value }); await drawUsers(); }
      catch (err) { if (err instanceof ApiError) showError(form, err); else shell.fail(err); }
    });
    return form;
  }
  async function removeUser(u) {
    if (!(await confirmDialog(`Delete user ${u.name}?`, "Their tokens stop working at once; the audit trail keeps their calls.", "Delete user"))) return;
    try { await post(`/users/${encodeURIComponent(u.name)}/delete`, {}); await Promise.all([drawUsers(), drawTokens()]); }
    catch (err) { shell.fail(err); }
  }
  let users = [];
  async function drawUsers() {
    if (!isAdmin()) { users = []; return; }
    const list = await get("/users").catch((error) => ({ error }));
    if (list.error) { replace(userList, errorBox(list.error)); return; }
    users = list.users;
    replace(userList, table([
      { label: "User", cell: (u) => h("strong", {}, u.name) },
      { label: "Role", cell: (u) => roleForm(u) },
      { label: "Created", cell: (u) => h("span", { class: "small" }, when(u.createdAt), ` by ${u.createdBy}`) },
      { label: "", cell: (u) => u.name === me ? h("span", { class: "muted small" }, "you")
        : h("button", { type: "button", class: "danger", "data-operation": "user_delete", "aria-label": `Delete ${u.name}`, onclick: () => removeUser(u) }, "Delete…") },
    ], users, { empty: "No users yet.", rowAttrs: (u) => ({ dataset: { user: u.name } }) }));
    const chosen = owner.value;
    replace(owner, h("option", { value: "" }, `me (${me})`), users.filter((u) => u.name !== me).map((u) => h("option", { value: u.name }, u.name)));
    owner.value = users.some((u) => u.name === chosen) ? chosen : "";
  }

  // -- tokens --------------------------------------------------------------------------------------------------
  const owner = h("select", { name: "user", id: "token-user" }, h("option", { value: "" }, `me (${me})`));
  const ownerField = h("div", { "data-op": "user_list" }, field("Whose tokens", owner, "Admins manage anyone's tokens."));
  const tokenList = h("div", { "data-operation": "token_list" });
  const shown = h("div", { id: "token-shown", role: "status", "aria-live": "polite" });
  const addToken = h("form", { id: "add-token", class: "filters", novalidate: true },
    field("Token name", h("input", { type: "text", name: "name", id: "token-name", autocomplete: "off", spellcheck: "false", placeholder: "ci" })),
    field("Expires in (days)", h("input", { type: "number", name: "expiresInDays", id: "token-days", min: "1", max: "3650", value: "90" })),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "token_create" }, "Create token")));
  addToken.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(addToken);
    replace(shown);
    const d = new FormData(addToken);
    const body = { name: String(d.get("name")).trim() };
    if (owner.value) body.user = owner.value;
    if (d.get("expiresInDays") !== "") body.expiresInDays = Number(d.get("expiresInDays"));
    try {
      const made = await post("/tokens", body, { idempotencyKey: newKey() });
      addToken.reset();
      // The secret is only in this box, until the next token or leaving the page: the server keeps its digest only.
      replace(shown, h("div", { class: "card sub" },
        h("p", {}, h("strong", {}, `Token ${made.name} for ${made.user}`), ": copy it now, it is shown this once."),
        h("p", {}, h("code", { class: "mono", id: "token-secret", tabindex: "0" }, made.token))));
      await drawTokens();
    } catch (err) { if (err instanceof ApiError) showError(addToken, err); else shell.fail(err); }
  });
  owner.addEventListener("change", () => { replace(shown); drawTokens(); });
  replace(tokensCard, h("h2", { id: "tokens-title" }, "API tokens"), ownerField, tokenList, h("h3", {}, "Create a token"), addToken, shown);

  async function revoke(t) {
    if (!(await confirmDialog(`Revoke token ${t.name}?`, `Calls with it are refused from now on (${t.user}).`, "Revoke token"))) return;
    const body = { name: t.name };
    if (t.user !== me) body.user = t.user;
    try { await post("/tokens/revoke", body); await drawTokens(); } catch (err) { shell.fail(err); }
  }
  async function drawTokens() {
    const list = await get("/tokens", { user: owner.value }).catch((error) => ({ error }));
    if (list.error) { replace(tokenList, errorBox(list.error)); return; }
    replace(tokenList, table([
      { label: "Token", cell: (t) => h("strong", {}, t.name) },
      { label: "User", cell: (t) => t.user },
      { label: "State", cell: (t) => badge(t.state, t.state === "active" ? "ok" : "bad") },
      { label: "Created", cell: (t) => when(t.createdAt) },
      { label: "Expires", cell: (t) => when(t.expiresAt) },
      { label: "", cell: (t) => t.state === "active"
        ? h("button", { type: "button", class: "danger", "data-operation": "token_revoke", "aria-label": `Revoke ${t.name}`, onclick: () => revoke(t) }, "Revoke…") : null },
    ], list.tokens, { empty: "No tokens.", rowAttrs: (t) => ({ dataset: { token: t.name } }) }));
  }

  // -- audit ---------------------------------------------------------------------------------------------------
  const auditList = h("div", { "data-operation": "audit_list", id: "audit-list" });
  const auditForm = h("form", { class: "filters", id: "audit-filter", novalidate: true },
    field("User", h("input", { type: "text", name: "user", id: "audit-user", spellcheck: "false" })),
    field("Operation", h("input", { type: "text", name: "operation", id: "audit-operation", spellcheck: "false", placeholder: "e.g. cluster_create" })),
    field("Outcome", h("select", { name: "outcome", id: "audit-outcome" }, OUTCOMES.map((o) => h("option", { value: o }, o || "any")))),
    field("Entries", h("input", { type: "number", name: "limit", id: "audit-limit", min: "1", max: "1000", value: "100" })),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Filter")));
  auditForm.addEventListener("submit", (e) => { e.preventDefault(); drawAudit(); });
  replace(auditCard, h("h2", { id: "audit-title" }, "Audit trail"),
    h("p", { class: "hint" }, "Every call through every face, newest first; no arguments are kept."), auditForm, h("div", { class: "mt" }, auditList));
  async function drawAudit() {
    if (!isAdmin()) return;
    clearErrors(auditForm);
    const d = new FormData(auditForm);
    const params = { user: String(d.get("user")).trim(), operation: String(d.get("operation")).trim(), outcome: d.get("outcome"), limit: d.get("limit") };
    try {
      const found = await get("/audit", params);
      replace(auditList, table([
        { label: "When", cell: (a) => h("span", { class: "small" }, when(a.at)) },
        { label: "User", cell: (a) => `${a.user} (${a.role})` },
        { label: "Token", cell: (a) => a.tokenName || "—" },
        { label: "Face", cell: (a) => a.face },
        { label: "Operation", cell: (a) => h("span", { class: "mono small" }, a.operation) },
        { label: "Cluster", cell: (a) => a.clusterTag || "—" },
        { label: "Outcome", cell: (a) => badge(a.outcome, a.outcome === "ok" ? "ok" : "bad") },
        { label: "Error", cell: (a) => a.errorCode || "—" },
        { label: "Operation id", cell: (a) => a.operationId ? h("a", { href: `#/operations/${a.operationId}`, class: "mono small" }, a.operationId) : "—" },
      ], found.entries, { empty: "No entry matches.", rowAttrs: (a) => ({ dataset: { auditOperation: a.operation, user: a.user } }) }));
    } catch (err) { replace(auditList); if (err instanceof ApiError) showError(auditForm, err); else shell.fail(err); }
  }

  async function refresh() { await drawUsers(); await Promise.all([drawTokens(), drawAudit()]); }
  await refresh();
  return { refresh };
}
