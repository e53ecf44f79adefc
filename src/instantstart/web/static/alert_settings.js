// Alert settings (#/alerts, linked from the bell): each rule's threshold, duration and switch (alert_rules_get,
// alert_rules_update: only the changed fields are sent), and where notifications go (alert_channels_update: an SNS
// topic and a signed webhook; the webhook secret is sent when typed and never shown).
import { ApiError, get, newKey, post } from "./api.js";
import { badge, clearErrors, errorBox, field, h, replace, showError, table } from "./dom.js";

export async function render(view, _arg, shell) {
  const rulesCard = h("section", { class: "card", id: "alert-rules", "aria-labelledby": "alert-rules-title", "data-operation": "alert_rules_get" });
  const channelsCard = h("section", { class: "card", id: "alert-channels", "aria-labelledby": "alert-channels-title", "data-op": "alert_channels_update" });
  replace(view, h("div", { class: "stack" }, h("h1", {}, "Alert settings"), rulesCard, channelsCard));
  let data = null;

  // -- rules ---------------------------------------------------------------------------------------------------
  const rulesStatus = h("span", { class: "muted small", id: "rules-status", role: "status" });
  const rulesBody = h("div");
  const rulesForm = h("form", { id: "rules-form", novalidate: true }, rulesBody,
    h("div", { class: "actions", "data-op": "alert_rules_update" },
      h("button", { type: "submit", class: "primary", "data-operation": "alert_rules_update" }, "Save rules"), rulesStatus));
  replace(rulesCard, h("div", { class: "card-head" }, h("h2", { id: "alert-rules-title" }, "Rules"), h("span", { class: "spacer" }),
    h("a", { href: "#/admin", class: "small" }, "Users & tokens")), rulesForm);

  const input = (rule, key, attrs) => h("input", { type: "number", name: `rules.${rule.name}.${key}`, id: `rule-${rule.name}-${key}`,
    class: "narrow", "aria-label": `${rule.name} ${key === "value" ? rule.unit : "minutes"}`, ...attrs });
  function drawRules() {
    replace(rulesBody, table([
      { label: "Rule", cell: (r) => h("span", {}, h("strong", { class: "mono small" }, r.name), h("div", { class: "hint" }, r.description)) },
      { label: "On", cell: (r) => h("input", { type: "checkbox", name: `rules.${r.name}.enabled`, id: `rule-${r.name}-enabled`,
        checked: r.enabled, "aria-label": `${r.name} enabled` }) },
      { label: "Threshold", cell: (r) => r.value === null && r.defaultValue === null ? h("span", { class: "muted" }, "—")
        : h("span", { class: "field" }, input(r, "value", { min: "0", max: "1000000", step: "any", value: String(r.value ?? "") }),
          ` ${r.unit}`, h("div", { class: "hint" }, `default ${r.defaultValue}`)) },
      { label: "For (minutes)", cell: (r) => h("span", { class: "field" }, input(r, "minutes", { min: "0", max: "10080", value: String(r.minutes) }),
        h("div", { class: "hint" }, `default ${r.defaultMinutes}`)) },
    ], data.rules, { empty: "No rules.", rowAttrs: (r) => ({ dataset: { rule: r.name } }) }),
    data.notBuilt.length ? h("p", { class: "hint" }, "Not evaluated yet: ", data.notBuilt.join("; ")) : null);
  }
  // Only what changed: a rule left alone keeps its value even if someone else saves meanwhile.
  function changedRules() {
    const rules = {};
    for (const r of data.rules) {
      const change = {};
      const on = rulesForm.querySelector(`[name="rules.${r.name}.enabled"]`).checked;
      if (on !== r.enabled) change.enabled = on;
      const value = rulesForm.querySelector(`[name="rules.${r.name}.value"]`);
      if (value && value.value !== String(r.value ?? "")) change.value = value.value === "" ? null : Number(value.value);
      const minutes = rulesForm.querySelector(`[name="rules.${r.name}.minutes"]`).value;
      if (minutes !== String(r.minutes)) change.minutes = minutes === "" ? null : Number(minutes);
      if (Object.keys(change).length) rules[r.name] = change;
    }
    return rules;
  }
  rulesForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(rulesForm);
    const rules = changedRules();
    if (!Object.keys(rules).length) { rulesStatus.textContent = "Nothing changed."; return; }
    const button = rulesForm.querySelector("button[type=submit]");
    button.disabled = true;
    rulesStatus.textContent = "Saving…";
    try {
      const ref = await post("/alerts/rules", { rules }, { idempotencyKey: newKey() });
      const op = await shell.waitFor(ref.operationId);
      if (op.status !== "SUCCEEDED") throw new ApiError(409, op.error ?? { message: `alert_rules_update ${op.status}` });
      rulesStatus.textContent = `Saved: ${Object.keys(rules).join(", ")}.`;
      await load();
    } catch (err) {
      rulesStatus.textContent = "";
      if (err instanceof ApiError) showError(rulesForm, err); else shell.fail(err);
    } finally { button.disabled = false; }
  });

  // -- channels ------------------------------------------------------------------------------------------------
  const current = h("dl", { class: "kv", id: "channels-current" });
  const sns = h("input", { type: "text", name: "snsTopicArn", id: "channel-sns", spellcheck: "false", placeholder: "arn:aws:sns:us-west-2:123456789012:alerts" });
  const url = h("input", { type: "text", name: "webhookUrl", id: "channel-webhook", spellcheck: "false", placeholder: "https://hooks.example.com/instantstart" });
  const secret = h("input", { type: "password", name: "webhookSecret", id: "channel-secret", autocomplete: "new-password" });
  const channelsStatus = h("span", { class: "muted small", id: "channels-status", role: "status" });
  const channelsForm = h("form", { id: "channels-form", novalidate: true },
    field("SNS topic ARN", sns, "Empty: no SNS notifications. The topic must exist in the server's account."),
    field("Webhook URL", url, "Empty: no webhook. Each POST is signed with the secret (HMAC-SHA256)."),
    field("Webhook secret", secret, "At least 8 characters; required with a new webhook URL. Kept in a 0600 file, never shown."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "alert_channels_update" }, "Save channels"), channelsStatus));
  replace(channelsCard, h("h2", { id: "alert-channels-title" }, "Notification channels"), current, channelsForm);
  function drawChannels() {
    const c = data.channels;
    replace(current, h("dt", {}, "SNS topic"), h("dd", { class: "mono small" }, c.snsTopicArn || "—"),
      h("dt", {}, "Webhook"), h("dd", { class: "mono small" }, c.webhookUrl || "—"),
      h("dt", {}, "Webhook secret"), h("dd", {}, badge(c.webhookSecretSet ? "set" : "not set", c.webhookSecretSet ? "ok" : "")));
  }
  channelsForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(channelsForm);
    const body = { snsTopicArn: sns.value.trim(), webhookUrl: url.value.trim() };
    if (secret.value) body.webhookSecret = secret.value;
    secret.value = "";  // the secret leaves the page with this request and nowhere else
    channelsStatus.textContent = "Saving…";
    try {
      const ref = await post("/alerts/channels", body, { idempotencyKey: newKey() });
      const op = await shell.waitFor(ref.operationId);
      if (op.status !== "SUCCEEDED") throw new ApiError(409, op.error ?? { message: `alert_channels_update ${op.status}` });
      channelsStatus.textContent = "Saved.";
      await load();
    } catch (err) {
      channelsStatus.textContent = "";
      if (err instanceof ApiError) showError(channelsForm, err); else shell.fail(err);
    }
  });

  async function load() {
    try { data = await get("/alerts/rules"); } catch (err) { replace(rulesBody, errorBox(err)); return; }
    drawRules();
    drawChannels();
  }
  await load();
  sns.value = data?.channels.snsTopicArn ?? "";
  url.value = data?.channels.webhookUrl ?? "";
  return { refresh: load };
}
