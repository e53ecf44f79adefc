// Usage (#/usage): GPU-hours, Neuron-device-hours and node-hours per team and per user over a period
// (usage_report), a bar chart of GPU-hours per team with its text alternative (the summary and the tables), and the
// rows as a CSV download. A member sees their own usage; operators and admins everyone's.
import { ApiError, get } from "./api.js";
import { clearErrors, errorBox, field, h, replace, showError, table, when } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 640, ROW = 26, PAD = { l: 150, r: 70, t: 6 };
const teamName = (t) => t || "(no team)";
const userName = (u) => u || "(not via InstantStart)";
const hours = (v) => v.toFixed(2);

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

// Horizontal bars of GPU-hours per team; role=img, named by the heading and described by the summary sentence.
export function barChart(groups, titleId, descId) {
  const max = Math.max(...groups.map((g) => g.gpuHours), 0) || 1;
  const height = PAD.t * 2 + Math.max(groups.length, 1) * ROW;
  const svg = s("svg", { viewBox: `0 0 ${W} ${height}`, width: W, height, class: "usage-chart", role: "img",
    "aria-labelledby": titleId, "aria-describedby": descId });
  groups.forEach((g, i) => {
    const y = PAD.t + i * ROW;
    const w = ((W - PAD.l - PAD.r) * g.gpuHours) / max;
    svg.append(
      s("text", { x: PAD.l - 8, y: y + ROW / 2 + 4, "text-anchor": "end", "font-size": 12, fill: "#1f2937" }, teamName(g.team)),
      s("rect", { x: PAD.l, y: y + 4, width: Math.max(w, 1).toFixed(1), height: ROW - 8, fill: "#2563eb", class: "bar" }),
      s("text", { x: PAD.l + w + 6, y: y + ROW / 2 + 4, "font-size": 12, fill: "#1f2937" }, `${hours(g.gpuHours)} h`));
  });
  return svg;
}

export function summarise(r) {
  if (!r.byTeam.length) return "No pod held an accelerator in this period.";
  const top = r.byTeam[0];
  return `${hours(r.total.gpuHours)} GPU-hours and ${hours(r.total.nodeHours)} node-hours over ${r.total.pods} pods; `
    + `${teamName(top.team)} used the most (${hours(top.gpuHours)} GPU-hours).`;
}

const columns = (first) => [
  ...first,
  { label: "GPU-hours", num: true, cell: (g) => hours(g.gpuHours) },
  { label: "Neuron device-hours", num: true, cell: (g) => hours(g.neuronDeviceHours) },
  { label: "Node-hours", num: true, cell: (g) => hours(g.nodeHours) },
  { label: "Pods", num: true, cell: (g) => g.pods },
];

function isoOf(local) { return local ? new Date(local).toISOString() : undefined; }

export async function render(view) {
  const card = h("section", { class: "card", id: "usage", "aria-labelledby": "usage-title", "data-operation": "usage_report" });
  const since = h("input", { type: "datetime-local", name: "since", id: "usage-since" });
  const until = h("input", { type: "datetime-local", name: "until", id: "usage-until" });
  const team = h("input", { type: "text", name: "team", id: "usage-team", autocomplete: "off", spellcheck: "false" });
  const form = h("form", { id: "usage-filters", class: "filters", novalidate: true },
    field("From", since, "Default: 7 days before To."), field("To", until, "Default: now."),
    field("Team", team, "Only this team (hyperpod-ns-<team>)."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Show usage")));
  const body = h("div", { id: "usage-body", "aria-live": "polite" });
  let csvUrl = null;
  replace(view, h("div", { class: "stack" }, h("h1", { id: "usage-title" }, "Usage"),
    h("p", { class: "muted" }, "Accelerator-hours held by pods, per team (the namespace hyperpod-ns-<team>) and per user (who submitted the job or model server)."),
    card));
  replace(card, form, body);

  async function draw() {
    clearErrors(form);
    const params = { since: isoOf(since.value), until: isoOf(until.value), team: team.value.trim() || undefined };
    let r;
    try { r = await get("/usage", params); }
    catch (err) { if (err instanceof ApiError) { showError(form, err); replace(body); return; } replace(body, errorBox(err)); return; }
    if (csvUrl) URL.revokeObjectURL(csvUrl);
    csvUrl = URL.createObjectURL(new Blob([r.csv], { type: "text/csv" }));
    replace(body,
      h("p", { class: "small", id: "usage-period" }, `${r.clusterTag}: ${when(r.since)} – ${when(r.until)}`,
        r.scope === "own" ? " · your own usage" : " · everyone's usage"),
      r.unavailable.length ? h("p", { class: "hint", id: "usage-unavailable" }, r.unavailable.join(" ")) : null,
      h("h2", { id: "usage-chart-title" }, "GPU-hours per team"),
      barChart(r.byTeam, "usage-chart-title", "usage-summary"),
      h("p", { id: "usage-summary" }, summarise(r)),
      h("p", {}, h("a", { href: csvUrl, download: `usage-${r.clusterTag}.csv`, id: "usage-csv" }, "Download CSV")),
      h("h2", {}, "Per team"),
      table(columns([{ label: "Team", cell: (g) => teamName(g.team) }]), r.byTeam,
        { empty: "No usage in this period.", rowAttrs: (g) => ({ dataset: { team: g.team } }) }),
      h("h2", {}, "Per user"),
      table(columns([{ label: "User", cell: (g) => userName(g.user) }]), r.byUser,
        { empty: "No usage in this period.", rowAttrs: (g) => ({ dataset: { user: g.user } }) }),
      h("details", {}, h("summary", {}, "Per team, namespace and user"),
        table(columns([{ label: "Team", cell: (g) => teamName(g.team) }, { label: "Namespace", cell: (g) => g.namespace },
          { label: "User", cell: (g) => userName(g.user) }]), r.rows, { empty: "No usage in this period." })));
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); draw(); });
  await draw();
  return { dispose() { if (csvUrl) URL.revokeObjectURL(csvUrl); } };
}
