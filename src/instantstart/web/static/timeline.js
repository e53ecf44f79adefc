// One object's persistent timeline (cluster_timeline, filtered to the object), a page at a time: "Older" follows
// nextBefore, "Newest" goes back to the first page. Used on the cluster, node, job and endpoint pages.
import { get } from "./api.js";
import { badge, errorBox, h, replace, table, when } from "./dom.js";

const PAGE = 20;

// `query`: the cluster_timeline filters ({objectPrefix, namespace, nodeId, objectKind, objectName, source…}).
export function timelineCard(id, title, query) {
  const card = h("section", { class: "card timeline", id, "aria-labelledby": `${id}-title`, "data-operation": "cluster_timeline" });
  const pages = [];  // the `before` of each page shown so far (null: the newest)
  let warningsOnly = false;

  async function draw() {
    const before = pages.length ? pages[pages.length - 1] : null;
    const params = { ...query, limit: PAGE };
    if (before) params.before = before;
    if (warningsOnly) params.warningsOnly = true;
    const page = await get("/clusters/timeline", params).catch((error) => ({ error }));
    const warn = h("input", { type: "checkbox", id: `${id}-warnings`, checked: warningsOnly });
    warn.addEventListener("change", () => { warningsOnly = warn.checked; pages.length = 0; draw(); });
    const head = h("div", { class: "card-head" }, h("h2", { id: `${id}-title` }, title),
      h("span", { class: "spacer" }),
      h("label", { for: `${id}-warnings`, class: "small" }, warn, " Warnings only"));
    if (page.error) { replace(card, head, errorBox(page.error)); return; }
    const newer = h("button", { type: "button", class: "small", disabled: !pages.length }, "Newest");
    newer.addEventListener("click", () => { pages.length = 0; draw(); });
    const older = h("button", { type: "button", class: "small", disabled: !page.nextBefore }, "Older");
    older.addEventListener("click", () => { pages.push(page.nextBefore); draw(); });
    replace(card, head,
      page.unavailable?.length ? h("p", { class: "hint" }, "Not refreshed now: ", page.unavailable.join("; ")) : null,
      table([
        { label: "Last seen", cell: (e) => when(e.lastAt) },
        { label: "Type", cell: (e) => badge(e.type, e.type === "Warning" ? "bad" : "ok") },
        { label: "Object", cell: (e) => h("span", { class: "mono small" }, `${e.objectKind}/${e.objectName}`) },
        { label: "Reason", cell: (e) => e.reason }, { label: "Message", cell: (e) => e.message },
        { label: "Count", num: true, cell: (e) => e.count }, { label: "Source", cell: (e) => e.source },
      ], page.entries, { empty: "Nothing recorded yet.", rowAttrs: (e) => ({ dataset: { entry: String(e.id), reason: e.reason } }) }),
      h("nav", { class: "actions", "aria-label": `${title} pages` },
        newer, older, h("span", { class: "muted small" }, `page ${pages.length + 1}`)));
  }
  return { card, refresh: draw };
}
