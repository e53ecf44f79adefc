// Storage & Models: the active cluster's S3 and FSx claims (contents browser, add with the S3 defaults shown, FSx
// created or adopted, delete) and the models in an S3 claim (download into it or into an FSx claim instead, with live
// progress; where a download stands; the list read from manifests), the workspace files of an S3 claim
// (workspace_files.js). Every action is the REST operation.
import { ApiError, get, newKey, post } from "./api.js";
import { badge, clearErrors, confirmDialog, errorBox, field, h, replace, showError, table, tick, when } from "./dom.js";
import { events, fresher } from "./live.js";
import { progressPanel } from "./operations.js";
import { workspaceCard } from "./workspace_files.js";

const size = (n) => {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n); let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
};

// Only the fields the user filled are sent: the API owns every default.
function filled(form, numbers = []) {
  const body = {};
  for (const el of form.querySelectorAll("[name]")) {
    if (el.type === "checkbox") { if (el.checked) body[el.name] = true; continue; }
    const v = el.value.trim();
    if (v !== "") body[el.name] = numbers.includes(el.name) ? Number(v) : v;
  }
  return body;
}

export async function render(view, _arg, shell) {
  const claimsCard = h("section", { class: "card", id: "claims", "data-operation": "storage_list" });
  const browseCard = h("section", { class: "card", id: "browser", hidden: true, "data-operation": "s3_storage_list_contents" });
  const addCard = h("section", { class: "card", id: "add-storage" });
  const modelsCard = h("section", { class: "card", id: "models" });
  const opBox = h("div", { id: "storage-op" });
  const workspace = workspaceCard(shell);
  replace(view, h("div", { class: "stack" }, claimsCard, opBox, browseCard, workspace.el, addCard, modelsCard));
  let claims = [];
  let fsx = {};
  let browsing = null;  // {storage, prefix, token}
  let op = null;
  let modelClaim = null;
  const ticker = setInterval(() => tick(opBox), 1000);

  function drawOp() { replace(opBox, op ? h("div", { class: "card sub" }, progressPanel(op, shell, refresh)) : null); }
  async function track(ref) { op = fresher(await get(`/operations/${ref.operationId}`)); drawOp(); }

  // -- claims ------------------------------------------------------------------------------------------------
  function source(c) {
    if (c.type === "s3") return h("span", { class: "mono small" }, `s3://${c.bucketName}/${c.prefix ?? ""}`);
    const fs = fsx[c.name]?.fileSystem;
    return h("span", { class: "small" }, h("span", { class: "mono" }, c.fileSystemId ?? "—"), " ",
      fs ? badge(fs.lifecycle ?? "gone", fs.lifecycle === "AVAILABLE" ? "ok" : "bad") : null,
      fs?.storageCapacity ? ` ${fs.storageCapacity} GiB ${fs.deploymentType ?? ""}` : "",
      fs?.throughputCapacity ? ` Intelligent-Tiering ${fs.throughputCapacity} MBps` : "",
      fs && !fs.createdByInstantstart ? " (adopted)" : "");
  }
  async function drawClaims() {
    const [list, fsxList] = await Promise.all([
      get("/storage").catch((error) => ({ error })), get("/storage/fsx").catch(() => ({ claims: [] }))]);
    if (list.error) {
      replace(claimsCard, h("h1", {}, "Storage & Models"),
        ["NOT_FOUND", "PRECONDITION_FAILED"].includes(list.error.code) ? h("p", { class: "empty" }, list.error.message) : errorBox(list.error));
      return false;
    }
    claims = list.claims;
    fsx = Object.fromEntries(fsxList.claims.filter((c) => c.name).map((c) => [c.name, c]));
    replace(claimsCard,
      h("div", { class: "card-head" }, h("h1", {}, "Storage & Models ", h("span", { class: "muted" }, list.clusterTag)),
        h("span", { class: "muted small" }, `${list.count} claim(s)`)),
      h("h2", {}, "Volumes"),
      h("div", { "data-operation": "fsx_storage_list" }, table([
        { label: "Claim", cell: (c) => h("strong", {}, `${c.namespace}/${c.name}`) },
        { label: "Type", cell: (c) => c.type === "s3" ? "S3" : "FSx for Lustre" },
        { label: "Phase", cell: (c) => badge(c.phase, c.phase === "Bound" ? "ok" : "bad") },
        { label: "Bucket / file system", cell: source },
        { label: "Mounted by", cell: (c) => c.mountedBy.length ? c.mountedBy.join(", ") : "—" },
        { label: "", cell: (c) => h("div", { class: "actions tight" },
          c.type === "s3" ? h("button", { type: "button", "data-operation": "s3_storage_list_contents", onclick: () => browse(c.name, "") , "aria-label": `Browse ${c.name}` }, "Browse") : null,
          h("button", { type: "button", class: "danger", "data-operation": "storage_delete", onclick: () => remove(c), "aria-label": `Delete ${c.name}` }, "Delete…")) },
      ], claims, { empty: "No S3 or FSx claims yet: add one below.", rowAttrs: (c) => ({ dataset: { claim: c.name, type: c.type } }) })));
    return true;
  }

  async function remove(c) {
    const fs = fsx[c.name]?.fileSystem;
    const what = c.type === "s3" ? "The bucket and its objects are kept."
      : fs?.createdByInstantstart ? `The file system ${c.fileSystemId} that InstantStart created is deleted too, with its data.`
        : `The file system ${c.fileSystemId} is kept (it was adopted).`;
    if (!(await confirmDialog(`Delete storage ${c.name}?`, `The claim and its PersistentVolume go. ${what}`, "Delete"))) return;
    try {
      const result = await post("/storage/delete", { name: c.name, namespace: c.namespace });
      if (result.fileSystemDeletion) await track(result.fileSystemDeletion);
      shell.banner(`Deleted ${c.namespace}/${c.name}.`, "info");
      if (browsing?.storage === c.name) { browsing = null; browseCard.hidden = true; }
      await drawClaims(); await drawModels();
    } catch (err) { shell.fail(err); }
  }

  // -- contents browser ------------------------------------------------------------------------------------
  async function browse(storage, prefix, token = null) {
    browsing = { storage, prefix, token };
    browseCard.hidden = false;
    let page;
    try { page = await get("/storage/s3/contents", { storage, prefix, continuationToken: token, maxKeys: 100 }); }
    catch (err) { replace(browseCard, h("h2", {}, `Contents of ${storage}`), errorBox(err)); return; }
    const parts = prefix.split("/").filter(Boolean);
    const crumbs = [h("button", { type: "button", class: "linklike", onclick: () => browse(storage, "") }, storage)];
    parts.forEach((p, i) => crumbs.push(" / ", h("button", { type: "button", class: "linklike", onclick: () => browse(storage, parts.slice(0, i + 1).join("/") + "/") }, p)));
    const rows = [...page.commonPrefixes.map((p) => ({ folder: p })), ...page.objects];
    replace(browseCard,
      h("div", { class: "card-head" }, h("h2", {}, "Contents"), h("nav", { "aria-label": "Folder path", class: "small" }, crumbs),
        h("span", { class: "spacer" }), h("span", { class: "muted small mono" }, `s3://${page.bucketName}/${page.prefix}`)),
      table([
        { label: "Path", cell: (r) => r.folder
          ? h("button", { type: "button", class: "linklike", onclick: () => browse(storage, r.folder) }, "📁 ", r.folder)
          : h("span", { class: "mono small" }, r.path) },
        { label: "Size", num: true, cell: (r) => r.folder ? "—" : size(r.size) },
        { label: "Modified", cell: (r) => r.folder ? "—" : when(r.lastModified) },
      ], rows, { empty: "Empty folder.", rowAttrs: (r) => ({ dataset: { path: r.folder ?? r.path } }) }),
      page.truncated ? h("div", { class: "actions" }, h("button", { type: "button", onclick: () => browse(storage, prefix, page.nextContinuationToken) }, "Next page")) : null);
  }

  // -- add S3 / FSx (built once: a redraw after an operation never loses what the user is typing) ----------
  const s3Defaults = h("p", { class: "hint", id: "s3-defaults", "data-operation": "s3_storage_get_defaults" });
  // What s3_storage_create uses when given nothing: shown under the form and as each field's greyed hint text.
  async function drawDefaults() {
    const d = await get("/storage/s3/defaults").catch((error) => ({ error }));
    if (d.error) { replace(s3Defaults, `Defaults unavailable: ${d.error.message}`); return; }
    addCard.querySelector("#s3-name").placeholder = d.name;
    addCard.querySelector("#s3-bucket").placeholder = d.bucketName;
    replace(s3Defaults, "Given nothing: claim ", h("code", {}, `${d.namespace}/${d.name}`), " on ", h("code", {}, `s3://${d.bucketName}/${d.prefix ?? ""}`),
      ` (${d.region}${d.bucketExists ? "" : ", bucket not created yet"}), ${d.accessModes.join(", ")}, mount options `,
      h("code", {}, d.mountOptions.join(" ") || "none"), ".");
  }
  function addForms() {
    const s3 = h("form", { id: "add-s3", novalidate: true },
      h("h3", {}, "S3 (Mountpoint)"), s3Defaults,
      h("div", { class: "row3" },
        field("Name", h("input", { type: "text", name: "name", id: "s3-name", placeholder: "s3-claim" }), "Claim name; the PV is <name>-pv"),
        field("Bucket", h("input", { type: "text", name: "bucketName", id: "s3-bucket" }), "Default: the project bucket"),
        field("Prefix", h("input", { type: "text", name: "prefix", id: "s3-prefix", placeholder: "team-a/" }), "Pods see it as the root")),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "s3_storage_create" }, "Add S3 volume")));
    s3.addEventListener("submit", (e) => submit(e, s3, "/storage/s3", []));
    const deploy = h("select", { name: "deploymentType", id: "fsx-deployment" },
      ["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2", "SCRATCH_1"].map((d) => h("option", { value: d }, d)));
    const storageType = h("select", { name: "storageType", id: "fsx-storage-type" },
      ["SSD", "HDD", "INTELLIGENT_TIERING"].map((t) => h("option", { value: t }, t)));
    const numbers = ["storageCapacity", "perUnitStorageThroughput", "throughputCapacity"];
    const fsxForm = h("form", { id: "add-fsx", novalidate: true },
      h("h3", {}, "FSx for Lustre"),
      h("div", { class: "row3" },
        field("Name", h("input", { type: "text", name: "name", id: "fsx-name", placeholder: "fsx-claim" })),
        field("Existing file system id", h("input", { type: "text", name: "fileSystemId", id: "fsx-id", placeholder: "fs-…" }), "Adopt it instead of creating one"),
        field("Deployment type", deploy)),
      h("div", { class: "row3" },
        field("Storage type", storageType, "INTELLIGENT_TIERING: PERSISTENT_2, elastic, sized by throughput capacity"),
        field("Capacity (GiB)", h("input", { type: "number", name: "storageCapacity", id: "fsx-capacity", placeholder: "1200" }), "SSD: 1200, 2400, then +2400"),
        field("Throughput (MB/s/TiB)", h("input", { type: "number", name: "perUnitStorageThroughput", id: "fsx-throughput", placeholder: "250" }), "PERSISTENT_2: 125, 250, 500, 1000")),
      h("div", { class: "row3" },
        field("Throughput capacity (MBps)", h("input", { type: "number", name: "throughputCapacity", id: "fsx-throughput-capacity", placeholder: "4000" }), "INTELLIGENT_TIERING only: multiples of 4000"),
        h("div", { class: "field" }, h("label", { class: "radio" }, h("input", { type: "checkbox", name: "enableCsiDriver" }), " Enable the FSx CSI driver if needed")),
        h("div", { class: "field" }, h("label", { class: "radio" }, h("input", { type: "checkbox", name: "allowLustreFromNodes" }), " Adopting: add the Lustre rules for the nodes if missing"))),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "fsx_storage_create" }, "Add FSx volume"),
        h("span", { class: "hint" }, "With a file system id the volume adopts it (kept when the claim is deleted); without, a new one is created.")));
    fsxForm.addEventListener("submit", (e) => submit(e, fsxForm, "/storage/fsx", numbers));
    replace(addCard, h("h2", {}, "Add a volume"), s3, fsxForm);
  }

  async function submit(e, form, path, numbers) {
    e.preventDefault();
    clearErrors(form);
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      await track(await post(path, filled(form, numbers), { idempotencyKey: newKey() }));
      form.reset();
    } catch (err) { if (err instanceof ApiError) showError(form, err); else shell.fail(err); }
    finally { button.disabled = false; }
  }

  // -- models: the head and list redraw; the download form is built once --------------------------------
  const modelsHead = h("div", { class: "card-head" });
  const modelsList = h("div", { id: "models-list", "data-operation": "model_list" });
  const downloadTitle = h("h3", {}, "Download a model");
  const token = h("input", { type: "password", name: "hfToken", id: "model-token", autocomplete: "off" });
  const fsxTarget = h("select", { name: "fsxStorage", id: "model-fsx" }, h("option", { value: "" }, "none"));
  const download = h("form", { id: "download", novalidate: true },
    h("div", { class: "row3" },
      field("Model id", h("input", { type: "text", name: "modelId", id: "model-id", placeholder: "Qwen/Qwen3-0.6B" }), "Hugging Face repo id"),
      field("Revision", h("input", { type: "text", name: "revision", id: "model-revision", placeholder: "main" })),
      field("Hugging Face token", token, "Gated repos only; kept in a Kubernetes Secret until the Job ends, never stored")),
    h("div", { class: "row" },
      field("CPU", h("input", { type: "text", name: "cpu", id: "model-cpu", placeholder: "4" }), "No GPU is ever requested"),
      field("Memory (GiB)", h("input", { type: "text", name: "memory", id: "model-memory", placeholder: "16" })),
      field("Into an FSx claim instead", fsxTarget, "At /fsx/models/<id>/<revision> for jobs that mount it")),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "model_download_enhanced" }, "Download")));
  // Where one download stands (model_download_status), in the chosen claim.
  const statusOut = h("p", { id: "model-status-result", role: "status", "data-operation": "model_download_status" });
  const statusForm = h("form", { id: "model-status", novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    clearErrors(statusForm);
    const params = { s3Storage: modelClaim, modelId: statusForm.elements.modelId.value.trim(), revision: statusForm.elements.revision.value.trim() };
    if (fsxTarget.value) params.fsxStorage = fsxTarget.value;
    try {
      const s = await get("/models/status", params);
      const p = s.progress;
      replace(statusOut, badge(s.state, s.state === "COMPLETE" ? "ok" : s.state === "FAILED" ? "bad" : ""), ` ${s.modelId}@${s.revision} in ${s.storage}`,
        s.state === "COMPLETE" ? ` · ${s.files.length} file(s), ${size(s.totalBytes)}` : "",
        p ? ` · ${p.files ?? 0}/${p.filesTotal ?? "?"} files, ${size(p.bytes)} of ${size(p.bytesTotal)}` : "", s.jobName ? ` · job ${s.jobName}` : "");
    } catch (err) { replace(statusOut); if (err instanceof ApiError) showError(statusForm, err); else shell.fail(err); }
  } },
    h("h3", {}, "Where is a download?"),
    h("div", { class: "row3" }, field("Model id", h("input", { type: "text", name: "modelId", id: "status-model-id", placeholder: "Qwen/Qwen3-0.6B" })),
      field("Revision", h("input", { type: "text", name: "revision", id: "status-revision", placeholder: "main" })),
      h("div", { class: "actions" }, h("button", { type: "submit", "data-operation": "model_download_status" }, "Check"))),
    statusOut);
  download.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(download);
    const body = { ...filled(download), s3Storage: modelClaim };
    token.value = "";  // the token leaves the page with this request and nowhere else
    try { await track(await post("/models/download", body, { idempotencyKey: newKey() })); download.reset(); }
    catch (err) { if (err instanceof ApiError) showError(download, err); else shell.fail(err); }
  });
  replace(modelsCard, modelsHead, modelsList, downloadTitle, download, statusForm);

  async function drawModels() {
    const s3Claims = claims.filter((c) => c.type === "s3");
    downloadTitle.hidden = download.hidden = statusForm.hidden = !s3Claims.length;
    const fsxNames = claims.filter((c) => c.type !== "s3").map((c) => c.name);
    if ([...fsxTarget.options].slice(1).map((o) => o.value).join() !== fsxNames.join()) {
      const chosen = fsxTarget.value;
      replace(fsxTarget, h("option", { value: "" }, "none"), fsxNames.map((n) => h("option", { value: n }, n)));
      fsxTarget.value = fsxNames.includes(chosen) ? chosen : "";
    }
    if (!s3Claims.length) {
      replace(modelsHead, h("h2", {}, "Models"));
      replace(modelsList, h("p", { class: "empty" }, "Models go into an S3 claim: add one first."));
      return;
    }
    if (!s3Claims.some((c) => c.name === modelClaim)) modelClaim = s3Claims[0].name;
    const picker = h("select", { id: "model-claim", onchange: () => { modelClaim = picker.value; drawModels(); } },
      s3Claims.map((c) => h("option", { value: c.name }, c.name)));
    picker.value = modelClaim;
    const list = await get("/models", { s3Storage: modelClaim }).catch((error) => ({ error }));
    replace(modelsHead, h("h2", {}, "Models"), h("label", { for: "model-claim", class: "small" }, "Claim"), picker,
      h("span", { class: "spacer" }), h("span", { class: "muted small" }, "Hub: ", h("span", { class: "mono", id: "hub-endpoint" }, list.hubEndpoint ?? "—")));
    replace(modelsList, list.error ? errorBox(list.error) : table([
      { label: "Model", cell: (m) => h("strong", {}, m.modelId) }, { label: "Revision", cell: (m) => m.revision },
      { label: "Path in the claim", cell: (m) => h("span", { class: "mono small" }, m.path) },
      { label: "Files", num: true, cell: (m) => m.files }, { label: "Size", num: true, cell: (m) => size(m.totalBytes) },
    ], list.models, { empty: "No complete model in this claim yet.", rowAttrs: (m) => ({ dataset: { model: `${m.modelId}@${m.revision}` } }) }));
  }

  const onOp = (e) => {
    const o = e.detail.operation;
    if (!op || o.operationId !== op.operationId) return;
    const finished = o.status !== op.status && ["SUCCEEDED", "FAILED", "CANCELLED"].includes(o.status);
    op = fresher(o); drawOp();
    if (finished) refresh();
  };
  events.addEventListener("operation", onOp);
  // The lists redraw; the forms keep their input (hidden, not rebuilt, while there is no cluster to act on).
  async function refresh() {
    const ready = await drawClaims();
    addCard.hidden = modelsCard.hidden = workspace.el.hidden = !ready;
    if (ready) {
      await Promise.all([drawModels(), drawDefaults(), workspace.refresh(claims.filter((c) => c.type === "s3").map((c) => c.name))]);
      if (browsing) await browse(browsing.storage, browsing.prefix, browsing.token);
    }
  }
  addForms();
  await refresh();
  return { refresh, dispose: () => { events.removeEventListener("operation", onOp); clearInterval(ticker); } };
}
