// Fleet validation on the Monitoring page: run cluster_validate (DCGM diagnostic and EFA check per node, nccl-tests
// per node pair and across all nodes), follow its stages, then the per-node verdicts with each problem's next step
// and the per-pair bus bandwidth. The newest validation of the active cluster is shown on load.
import { get, newKey, post } from "./api.js";
import { badge, confirmDialog, errorBox, h, replace, table } from "./dom.js";
import { events, fresher } from "./live.js";
import { isActive, progressPanel } from "./operations.js";

const gbps = (v) => (v === null || v === undefined ? "—" : `${Number(v).toFixed(2)}`);
const STATUS_CLASS = { passed: "ok", ok: "ok", failed: "bad", missing: "bad", "not-run": "bad" };

export function validationCard(shell) {
  const card = h("section", { class: "card", id: "validation", "aria-labelledby": "validation-title" });
  const panel = h("div", { id: "validation-progress" });
  const results = h("div", { id: "validation-results" });
  let op = null;
  let tag = null;

  const button = h("button", { type: "button", class: "primary", id: "validate-run", "data-operation": "cluster_validate", onclick: () => run() }, "Validate nodes");
  replace(card,
    h("div", { class: "card-head" }, h("h2", { id: "validation-title" }, "Fleet validation"), h("span", { class: "spacer" }), button),
    h("p", { class: "hint" }, "Per node a DCGM diagnostic (dcgmi diag -r 2) and an EFA check (fi_info -p efa); then an NCCL ",
      "all-reduce (nccl-tests over EFA) per node pair and across all nodes. Check pods wait for free GPUs."),
    panel, results);

  async function run() {
    const go = await confirmDialog("Validate the GPU nodes?",
      "Each check takes every GPU (and EFA device) of its node while it runs; jobs that need them wait, and the " +
      "check waits for busy nodes. No node is changed.", "Validate nodes", false);
    if (!go) return;
    button.disabled = true;
    try {
      const ref = await post("/capacity/validate", {}, { idempotencyKey: newKey() });
      op = fresher(await get(`/operations/${ref.operationId}`));
      draw();
    } catch (err) {
      replace(panel, errorBox(err));
    } finally {
      button.disabled = !!op && isActive(op);
    }
  }

  function draw() {
    if (!op) { replace(panel); replace(results, h("p", { class: "empty" }, "No validation has run on this cluster yet.")); return; }
    button.disabled = isActive(op);
    replace(panel, progressPanel(op, shell, () => reload()));
    const r = op.result;
    if (!r || isActive(op)) { replace(results); return; }
    replace(results,
      h("p", { id: "validation-summary" }, badge(r.passed ? "passed" : "attention", r.passed ? "ok" : "bad"), " ", r.summary,
        r.ncclSkipped ? h("span", { class: "muted" }, ` · NCCL skipped: ${r.ncclSkipped}`) : null),
      h("h3", {}, "Nodes"),
      table([
        { label: "Node", cell: (n) => h("a", { href: `#/monitoring/${encodeURIComponent(n.node)}` }, n.node) },
        { label: "Instance type", cell: (n) => n.instanceType ?? "—" },
        { label: "DCGM", cell: (n) => badge(n.dcgm, STATUS_CLASS[n.dcgm] ?? "") },
        { label: "EFA", cell: (n) => badge(n.efa, STATUS_CLASS[n.efa] ?? "") },
        { label: "Best pair busbw (GB/s)", num: true, cell: (n) => gbps(n.bestPairBusbwGbps) },
        { label: "Verdict", cell: (n) => badge(n.straggler ? "straggler" : n.verdict, n.verdict === "passed" ? "ok" : "bad") },
        { label: "Problem and next step", cell: (n) => n.problems.length
          ? h("ul", { class: "plain-list" }, n.problems.map((p) => h("li", {}, p.problem, " → ",
            h("code", {}, p.nextStep.tool), ` (nodeId ${p.nextStep.arguments.nodeId}): ${p.nextStep.why}`)))
          : "—" },
      ], r.nodes, { empty: "No nodes were validated.", rowAttrs: (n) => ({ dataset: { validatedNode: n.node, verdict: n.verdict } }) }),
      h("h3", {}, "Node pairs (all_reduce_perf)"),
      table([
        { label: "Nodes", cell: (p) => p.nodes.join(" ↔ ") },
        { label: "Network", cell: (p) => badge(p.transport, p.transport === "efa" ? "ok" : "bad") },
        { label: "Bus bandwidth (GB/s)", num: true, cell: (p) => gbps(p.busbwGbps) },
        { label: "Result", cell: (p) => badge(p.status, STATUS_CLASS[p.status] ?? "") },
      ], [...r.pairs, ...(r.allNodes ? [{ ...r.allNodes, nodes: ["all nodes"] }] : [])],
      { empty: "No pair tests ran.", rowAttrs: (p) => ({ dataset: { pair: p.nodes.join(",") } }) }));
  }

  async function reload() {
    if (op) { try { op = fresher(await get(`/operations/${op.operationId}`)); } catch { /* keep the last view */ } }
    draw();
  }

  // The newest validation of the active cluster (its tag comes with the status the page reads).
  async function refresh(clusterTag) {
    if (clusterTag && clusterTag !== tag) {
      tag = clusterTag;
      const list = await get("/operations", { kind: "cluster_validate", target: `cluster:${tag}`, limit: 1 }).catch(() => null);
      op = list && list.operations && list.operations.length ? list.operations[0] : null;
      if (op) op = fresher(await get(`/operations/${op.operationId}`));
    }
    draw();
  }

  const onOp = (e) => {
    const o = e.detail.operation;
    if (op && o.operationId === op.operationId) {
      op = fresher(o);
      if (!isActive(op) && !op.result) reload(); else draw();
    }
  };
  events.addEventListener("operation", onOp);
  return { card, refresh, dispose: () => events.removeEventListener("operation", onOp) };
}
