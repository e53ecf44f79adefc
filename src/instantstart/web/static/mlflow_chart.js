// MLflow run metrics of a training job as line charts: SVG drawn here (no library), each chart an image with a
// title and a description, and its points as a table for screen readers and copying.
import { get } from "./api.js";
import { h, replace, table } from "./dom.js";

const NS = "http://www.w3.org/2000/svg";
const W = 420, H = 180, PAD = { left: 52, right: 12, top: 12, bottom: 30 };
let serial = 0;

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

const fmt = (v) => (Math.abs(v) >= 1000 || (v !== 0 && Math.abs(v) < 0.01) ? v.toExponential(2) : String(+v.toFixed(3)));

// One metric's history as an SVG line chart (steps on x, values on y), labelled for assistive technology.
export function lineChart(runName, key, points) {
  const id = `mlflow-chart-${++serial}`;
  const steps = points.map((p) => p.step), values = points.map((p) => p.value);
  const [x0, x1] = [Math.min(...steps), Math.max(...steps)], [y0, y1] = [Math.min(...values), Math.max(...values)];
  const sx = (s) => PAD.left + (x1 === x0 ? 0.5 : (s - x0) / (x1 - x0)) * (W - PAD.left - PAD.right);
  const sy = (v) => PAD.top + (y1 === y0 ? 0.5 : 1 - (v - y0) / (y1 - y0)) * (H - PAD.top - PAD.bottom);
  const line = points.map((p, i) => `${i ? "L" : "M"}${sx(p.step).toFixed(1)},${sy(p.value).toFixed(1)}`).join(" ");
  const last = points[points.length - 1];
  const summary = `${key} of run ${runName}: ${points.length} point(s) from step ${x0} to ${x1}; ` +
    `first ${fmt(points[0].value)}, last ${fmt(last.value)}, min ${fmt(y0)}, max ${fmt(y1)}.`;
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", class: "chart",
    "aria-labelledby": `${id}-title ${id}-desc`, "data-metric": key },
  svg("title", { id: `${id}-title` }, `${key} per step (run ${runName})`),
  svg("desc", { id: `${id}-desc` }, summary),
  svg("line", { x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom, stroke: "#5b6678" }),
  svg("line", { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: H - PAD.bottom, stroke: "#5b6678" }),
  svg("text", { x: PAD.left - 6, y: PAD.top + 4, "text-anchor": "end", "font-size": 11, fill: "#1c2430" }, fmt(y1)),
  svg("text", { x: PAD.left - 6, y: H - PAD.bottom, "text-anchor": "end", "font-size": 11, fill: "#1c2430" }, fmt(y0)),
  svg("text", { x: PAD.left, y: H - 10, "font-size": 11, fill: "#1c2430" }, `step ${x0}`),
  svg("text", { x: W - PAD.right, y: H - 10, "text-anchor": "end", "font-size": 11, fill: "#1c2430" }, `step ${x1}`),
  svg("path", { d: line, fill: "none", stroke: "#2563eb", "stroke-width": 2 }),
  ...points.map((p) => svg("circle", { cx: sx(p.step).toFixed(1), cy: sy(p.value).toFixed(1), r: 3, fill: "#2563eb" })));
  const data = h("details", {}, h("summary", {}, `${key}: the points`),
    table([{ label: "Step", num: true, cell: (p) => p.step }, { label: key, num: true, cell: (p) => fmt(p.value) }], points));
  return h("figure", { class: "metric" }, chart, h("figcaption", { class: "small muted" }, summary), data);
}

// The card for a job: its runs' metrics (newest run first), or why there are none.
export function metricsCard(jobName) {
  const card = h("section", { class: "card", id: "job-metrics", "data-operation": "training_history" }, h("h2", {}, "MLflow metrics"));
  let drawn = "";
  async function refresh() {
    const answer = await get("/training/history", { jobName, maxRuns: 3 }).catch((error) => ({ error }));
    if (answer.error) {
      const text = answer.error.code === "PRECONDITION_FAILED"
        ? "MLflow is not configured for this cluster (mlflow_configure sets it up)."
        : `MLflow history unavailable: ${answer.error.message ?? answer.error}`;
      if (drawn !== text) { drawn = text; replace(card, h("h2", {}, "MLflow metrics"), h("p", { class: "muted" }, text)); }
      return;
    }
    const key = JSON.stringify(answer.runs.map((r) => [r.runId, r.status, r.history]));
    if (key === drawn) return;
    drawn = key;
    if (!answer.runs.length) {
      replace(card, h("h2", {}, "MLflow metrics"), h("p", { class: "muted" }, `No MLflow runs of ${jobName} yet.`));
      return;
    }
    replace(card, h("h2", {}, "MLflow metrics"), answer.runs.map((run) => h("div", { class: "run" },
      h("p", {}, h("strong", {}, run.runName ?? run.runId), ` · ${run.status} · server ${answer.trackingServerName}`),
      Object.entries(run.history).map(([metric, points]) => (points.length ? lineChart(run.runName ?? run.runId, metric, points) : null)))));
  }
  return { card, refresh };
}
