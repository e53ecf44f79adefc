// Small DOM helpers: every value is inserted as text, never as HTML.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k === "value") el.value = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function replace(el, ...children) { el.replaceChildren(); append(el, children); return el; }

export const badge = (value, cls) => h("span", { class: `badge ${cls ?? value ?? ""}` }, value ?? "—");

export function table(columns, rows, { empty = "Nothing yet.", rowAttrs } = {}) {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  return h("table", {},
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.num ? "num" : "" }, c.label)))),
    h("tbody", {}, rows.map((r) => h("tr", rowAttrs ? rowAttrs(r) : {},
      columns.map((c) => h("td", { class: c.num ? "num" : "" }, c.cell(r)))))));
}

export function elapsed(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function stageElapsed(stage) {
  if (!stage.startedAt) return null;
  const end = stage.finishedAt ? Date.parse(stage.finishedAt) : Date.now();
  return (end - Date.parse(stage.startedAt)) / 1000;
}

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : "—");

// Errors from the API: each named field gets its message beside it; the message and hint go under the form.
export function clearErrors(form) {
  form.querySelectorAll(".field-error[data-for]").forEach((e) => e.remove());
  form.querySelectorAll("[aria-invalid]").forEach((e) => e.removeAttribute("aria-invalid"));
  form.querySelector(".form-error")?.remove();
}

export function showError(form, err) {
  clearErrors(form);
  let focused = false;
  for (const f of err.fields ?? []) {
    const input = form.querySelector(`[name="${CSS.escape(String(f.field))}"]`);
    if (!input) continue;
    const id = `err-${input.id || input.name}`;
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", id);
    const holder = input.closest(".field") ?? input.parentElement;
    holder.append(h("p", { class: "field-error", id, role: "alert", dataset: { for: f.field } }, f.message));
    if (!focused) { input.focus(); focused = true; }
  }
  form.append(errorBox(err));
}

export function errorBox(err) {
  return h("div", { class: "form-error", role: "alert" },
    h("strong", {}, err.code ? `${err.code}: ` : ""), err.message,
    err.hint ? h("p", { class: "hint" }, "Hint: ", err.hint) : null);
}

// A form field: label, control, optional hint; the control carries name= (the API field name).
export function field(labelText, control, hint) {
  if (!control.id) control.id = "f-" + control.name;
  return h("div", { class: "field" }, h("label", { for: control.id }, labelText), control, hint ? h("p", { class: "hint" }, hint) : null);
}

// Running timers: any element with data-start (ISO) and no data-end shows the time since start.
export function tick(root) {
  root.querySelectorAll("[data-start]").forEach((el) => {
    if (!el.dataset.start || el.dataset.end) return;
    el.textContent = elapsed((Date.now() - Date.parse(el.dataset.start)) / 1000);
  });
}

// A modal confirmation (keyboard: Enter confirms, Escape cancels); resolves true when confirmed.
export function confirmDialog(title, body, action = "Confirm", danger = true) {
  return new Promise((resolve) => {
    const dialog = h("dialog", { "aria-label": title, class: "confirm" });
    const done = (value) => { dialog.close(); dialog.remove(); resolve(value); };
    dialog.append(h("form", { method: "dialog", onsubmit: (e) => { e.preventDefault(); done(e.submitter?.value === "yes"); } },
      h("h2", {}, title), h("p", {}, body),
      h("div", { class: "actions" },
        h("button", { type: "submit", value: "yes", class: danger ? "danger solid" : "primary" }, action),
        h("button", { type: "submit", value: "no", autofocus: true }, "Keep"))));
    dialog.addEventListener("cancel", (e) => { e.preventDefault(); done(false); });
    document.body.append(dialog);
    dialog.showModal();
  });
}
