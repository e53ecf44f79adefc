// The observability card of the Monitoring page: links to the AMP workspace and Grafana, and GPU utilisation
// (monitoring_gpu_utilization) drawn as our own SVG line chart, with its text alternative (summary and tables).
import { get } from "./api.js";
import { errorBox, h, replace, table } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 640, HT = 180, PAD = { l: 40, r: 10, t: 10, b: 24 };

// The feature's Grafana workspace when it has an ACTIVE one, else the Amazon Managed Grafana console.
function grafanaLink(o) {
  if (o.grafanaWorkspaceUrl) {
    return [h("a", { href: o.grafanaWorkspaceUrl, target: "_blank", rel: "noopener", id: "grafana-link" },
      `Amazon Managed Grafana workspace ${o.grafanaWorkspaceId}`)];
  }
  return [h("a", { href: o.grafanaUrl ?? o.grafanaConsoleUrl, target: "_blank", rel: "noopener", id: "grafana-link" },
    "Amazon Managed Grafana"),
    h("span", { class: "muted small" }, " (add the workspace as a Prometheus data source)")];
}

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function time(iso) { return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }); }

// A line chart of [{at, percent}] on a 0..100 % scale; role=img, named and described by the summary sentence.
export function lineChart(points, titleId, descId) {
  const x = (i) => PAD.l + (points.length > 1 ? (i / (points.length - 1)) * (W - PAD.l - PAD.r) : 0);
  const y = (v) => PAD.t + (1 - v / 100) * (HT - PAD.t - PAD.b);
  const svg = s("svg", { viewBox: `0 0 ${W} ${HT}`, width: "100%", class: "chart", role: "img",
    "aria-labelledby": titleId, "aria-describedby": descId, preserveAspectRatio: "none" });
  for (const v of [0, 50, 100]) {
    svg.append(s("line", { x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v), stroke: "#dfe3ea" }),
      s("text", { x: PAD.l - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#5b6678" }, `${v}%`));
  }
  if (points.length) {
    svg.append(s("text", { x: PAD.l, y: HT - 6, "font-size": 11, fill: "#5b6678" }, time(points[0].at)),
      s("text", { x: W - PAD.r, y: HT - 6, "text-anchor": "end", "font-size": 11, fill: "#5b6678" }, time(points[points.length - 1].at)));
    const d = points.map((p, i) => `${i ? "L" : "M"}${x(i).toFixed(1)},${y(p.percent).toFixed(1)}`).join(" ");
    svg.append(s("path", { d, fill: "none", stroke: "#2563eb", "stroke-width": 2, class: "series" }));
  }
  return svg;
}

export function summarise(u) {
  if (u.meanPercent === null || u.meanPercent === undefined) return "No GPU reports any utilisation yet.";
  const values = u.series.map((p) => p.percent);
  const range = values.length ? ` Over the last ${Math.round((u.series.length * (u.stepSeconds ?? 60)) / 60)} minutes the mean went from ${Math.min(...values)}% to ${Math.max(...values)}%.` : "";
  return `Mean GPU utilisation now: ${u.meanPercent}% over ${u.gpusReporting} GPUs.${range}`;
}

export function observabilityCard() {
  const card = h("section", { class: "card", id: "observability", "aria-labelledby": "observability-title", "data-operation": "monitoring_gpu_utilization" });
  let range = 60;
  async function draw() {
    const u = await get("/monitoring/gpu-utilization", { rangeMinutes: range }).catch((error) => ({ error }));
    const title = h("h2", { id: "observability-title" }, "GPU utilisation");
    if (u.error) { replace(card, title, errorBox(u.error)); return; }
    const o = u.observability;
    if (!o.enabled) {
      replace(card, title, h("p", { class: "empty", id: "observability-off" }, o.reason ?? "The observability feature is off."));
      return;
    }
    const pick = h("select", { id: "gpu-range", name: "rangeMinutes" },
      [[60, "last hour"], [360, "last 6 hours"], [1440, "last day"]].map(([v, t]) => h("option", { value: v, selected: v === range }, t)));
    pick.addEventListener("change", () => { range = parseInt(pick.value, 10); draw(); });
    const summary = summarise(u);
    replace(card,
      h("div", { class: "card-head" }, title, h("span", { class: "spacer" }),
        h("label", { for: "gpu-range", class: "small" }, "Range "), pick),
      h("p", { class: "links", id: "observability-links" },
        h("a", { href: o.prometheusConsoleUrl, target: "_blank", rel: "noopener", id: "amp-link" }, `Amazon Managed Prometheus workspace ${o.workspaceId}`),
        " · ",
        ...grafanaLink(o)),
      h("h3", { id: "gpu-chart-title" }, "Mean GPU utilisation (DCGM_FI_DEV_GPU_UTIL)"),
      lineChart(u.series, "gpu-chart-title", "gpu-summary"),
      h("p", { id: "gpu-summary" }, summary),
      h("div", { class: "grid" },
        table([
          { label: "Instance type", cell: (g) => g.name }, { label: "GPUs", num: true, cell: (g) => g.gpus },
          { label: "Utilisation", num: true, cell: (g) => `${g.percent}%` },
        ], u.byInstanceType, { empty: "No GPU reports.", rowAttrs: (g) => ({ dataset: { type: g.name } }) }),
        table([
          { label: "Node", cell: (g) => h("a", { href: `#/monitoring/${encodeURIComponent(g.name)}`, class: "mono small" }, g.name) },
          { label: "GPUs", num: true, cell: (g) => g.gpus }, { label: "Utilisation", num: true, cell: (g) => `${g.percent}%` },
        ], u.byNode, { empty: "No GPU reports.", rowAttrs: (g) => ({ dataset: { gpuNode: g.name } }) })),
      u.nodesTotal > u.byNode.length ? h("p", { class: "hint" }, `The ${u.byNode.length} busiest of ${u.nodesTotal} nodes.`) : null,
      h("details", {}, h("summary", {}, "Chart data"),
        table([{ label: "Time", cell: (p) => new Date(p.at).toLocaleString() }, { label: "Mean utilisation", num: true, cell: (p) => `${p.percent}%` }],
          u.series, { empty: "No samples." })));
  }
  return { card, refresh: draw };
}
