// A form that runs one catalog operation to its end: posted with a fresh idempotency key, followed with
// operation_get, its refusal or failure shown beside the field it names (nothing typed is lost).
import { ApiError, newKey, post } from "./api.js";
import { clearErrors, h, showError } from "./dom.js";

export const num = (v) => (v === "" || v === null ? undefined : Number(v));
export const text = (v) => (String(v ?? "").trim() || undefined);
export const input = (name, id, attrs = {}) => h("input", { type: "text", name, id, spellcheck: "false", ...attrs });
export const select = (name, id, options) => h("select", { name, id }, options.map(([v, t]) => h("option", { value: v }, t)));

// One form = one operation: submit posts `body()` with a fresh idempotency key, waits for the operation's end, says
// so in the form's status line; the API's refusal (or the operation's error) lands beside the field it names.
export function opForm({ id, operation, path, button, fields, body, shell, done, confirm, extra = [] }) {
  const status = h("span", { class: "muted small", id: `${id}-status`, role: "status" });
  const submit = h("button", { type: "submit", class: "primary", "data-operation": operation }, button);
  // data-op: hidden for a role that may not call the operation (app.js), like every other control.
  const form = h("form", { id, novalidate: true, "data-op": operation }, fields, h("div", { class: "actions" }, submit, extra, status));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    await run(form, status, submit, { operation, path, body: body(new FormData(form)), shell, done, confirm });
  });
  return form;
}

export async function run(form, status, button, { operation, path, body, shell, done, confirm }) {
  clearErrors(form);
  if (confirm && !(await confirm(body))) return;
  button.disabled = true;
  status.textContent = "Working…";
  try {
    const ref = await post(path, body, { idempotencyKey: newKey() });
    status.textContent = `${operation}: waiting for ${ref.operationId}…`;
    const op = await shell.waitFor(ref.operationId, 600000);
    if (op.status !== "SUCCEEDED") throw new ApiError(409, op.error ?? { message: `${operation} ${op.status}` });
    status.textContent = `Done (${ref.operationId}).`;
    await done?.(op);
  } catch (err) {
    status.textContent = "";
    if (err instanceof ApiError) showError(form, err); else shell.fail(err);
  } finally { button.disabled = false; }
}
