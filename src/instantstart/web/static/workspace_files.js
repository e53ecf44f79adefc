// Workspace files on the Storage page: the files of an S3 claim listed below a folder, one opened into a text area,
// saved over the version opened (ifMatch: a version written meanwhile answers CONFLICT, shown, the text kept) or as a
// new file, deleted while it is the version listed. Each control is the workspace_* REST operation.
import { ApiError, get, newKey, post } from "./api.js";
import { clearErrors, confirmDialog, errorBox, field, h, replace, showError, table, when } from "./dom.js";
import { input } from "./op_form.js";

// UTF-8 text <-> base64 (the operations move bytes; the editor holds text only).
const encode = (text) => btoa(Array.from(new TextEncoder().encode(text), (b) => String.fromCharCode(b)).join(""));
const decode = (b64) => new TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));

export function workspaceCard(shell) {
  const claim = h("select", { name: "storage", id: "ws-storage" });
  const prefix = input("prefix", "ws-prefix", { placeholder: "code/" });
  const files = h("div", { id: "ws-files", "data-operation": "workspace_list_files" });
  const listForm = h("form", { id: "ws-list", novalidate: true, onsubmit: (e) => { e.preventDefault(); list(); } },
    h("div", { class: "row3" }, field("Claim", claim), field("Folder", prefix, "Empty: the whole claim"),
      h("div", { class: "actions" }, h("button", { type: "submit", "data-operation": "workspace_list_files" }, "List files"))));
  const path = input("path", "ws-path", { placeholder: "src/train.py" });
  const content = h("textarea", { name: "contentBase64", id: "ws-content", rows: "12", class: "mono", spellcheck: "false" });
  const status = h("span", { class: "muted small", id: "ws-status", role: "status" });
  let opened = null;  // {storage, path, etag}: the version the text area holds; null: a new file
  const editor = h("form", { id: "ws-editor", novalidate: true, "data-op": "workspace_write_file", onsubmit: save },
    h("h3", {}, "Edit a file"),
    field("Path", path, "Relative to the claim; a new path creates the file"),
    field("Content", content, "UTF-8 text, at most 512 KiB"),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "workspace_write_file" }, "Save"),
      h("button", { type: "button", onclick: () => { opened = null; editor.reset(); clearErrors(editor); status.textContent = "New file."; } }, "New file"), status));
  const el = h("section", { class: "card", id: "workspace" }, h("h2", {}, "Workspace files"),
    h("p", { class: "hint" }, "What pods see under the claim's mount; ", h("code", {}, "instantstart workspace sync"), " keeps a local folder in step."),
    listForm, files, editor);

  async function list() {
    clearErrors(listForm);
    let page;
    try { page = await get("/workspace/files", { storage: claim.value, prefix: prefix.value.trim() }); }
    catch (err) { replace(files); if (err instanceof ApiError) showError(listForm, err); else shell.fail(err); return; }
    replace(files, table([
      { label: "Path", cell: (f) => h("span", { class: "mono small" }, f.path) },
      { label: "Bytes", num: true, cell: (f) => String(f.size) },
      { label: "Modified", cell: (f) => when(f.lastModified) },
      { label: "", cell: (f) => h("div", { class: "actions tight" },
        h("button", { type: "button", "data-operation": "workspace_read_file", "aria-label": `Open ${f.path}`, onclick: () => open(page.storage, f.path) }, "Open"),
        h("button", { type: "button", class: "danger", "data-operation": "workspace_delete_file", "data-op": "workspace_delete_file",
          "aria-label": `Delete ${f.path}`, onclick: () => remove(page.storage, f) }, "Delete…")) },
    ], page.files, { empty: "No files here.", rowAttrs: (f) => ({ dataset: { path: f.path } }) }),
    page.truncated ? h("p", { class: "hint" }, "More than 1000 files: narrow the folder.") : null);
  }

  async function open(storage, filePath) {
    clearErrors(editor);
    try {
      const f = await get("/workspace/files/content", { storage, path: filePath });
      let text;
      try { text = decode(f.contentBase64); } catch { editor.append(errorBox({ message: `${f.path} is no UTF-8 text: it is not edited here.` })); return; }
      opened = { storage, path: f.path, etag: f.etag };
      path.value = f.path; content.value = text;
      status.textContent = `Opened ${f.path} (${f.size} bytes, version ${f.etag}).`;
      content.focus();
    } catch (err) { if (err instanceof ApiError) showError(editor, err); else shell.fail(err); }
  }

  async function save(e) {
    e.preventDefault();
    clearErrors(editor);
    const body = { storage: claim.value, path: path.value.trim(), contentBase64: encode(content.value) };
    // Over the version opened when the path is still that file; otherwise only where no file is.
    if (opened && opened.storage === body.storage && opened.path === body.path) body.ifMatch = opened.etag;
    try {
      const w = await post("/workspace/files", body, { idempotencyKey: newKey() });
      opened = { storage: body.storage, path: w.path, etag: w.etag };
      status.textContent = `Saved ${w.path} (${w.size} bytes, version ${w.etag}).`;
      await list();
    } catch (err) {
      status.textContent = err.code === "CONFLICT" ? "Not saved: the file changed (or exists) since you opened it. Your text is kept; open the file again to see the current version." : "";
      if (err instanceof ApiError) showError(editor, err); else shell.fail(err);
    }
  }

  async function remove(storage, f) {
    if (!(await confirmDialog(`Delete ${f.path}?`, `The file goes from ${storage} (only while it is still the version listed).`, "Delete file"))) return;
    clearErrors(listForm);
    try {
      await post("/workspace/files/delete", { storage, path: f.path, ifMatch: f.etag }, { idempotencyKey: newKey() });
      if (opened?.storage === storage && opened.path === f.path) opened = null;
      shell.banner(`Deleted ${f.path} from ${storage}.`, "info");
      await list();
    } catch (err) { if (err instanceof ApiError) showError(listForm, err); else shell.fail(err); }
  }

  // The S3 claims of the active cluster (the workspace works on those only); the choice and the editor are kept.
  async function refresh(s3Claims) {
    el.hidden = !s3Claims.length;
    if (!s3Claims.length) return;
    const chosen = claim.value;
    replace(claim, s3Claims.map((n) => h("option", { value: n }, n)));
    claim.value = s3Claims.includes(chosen) ? chosen : s3Claims[0];
    await list();
  }
  return { el, refresh };
}
