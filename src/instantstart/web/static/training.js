// Training: a recipe's form generated from its fields, a job from an image and a command (PyTorch or Ray), the jobs
// of both paths (deleted from their row) and every job of the cluster, and a job's pods, restarts against its budget,
// MLflow run metrics as charts, its last log lines and live logs (over /api/v1/ws/logs, resumed after a reconnect
// without repeating a line).
import { get, newKey, post } from "./api.js";
import { badge, clearErrors, confirmDialog, errorBox, field, h, replace, showError, table, when } from "./dom.js";
import { jobForms } from "./training_forms.js";
import { timelineCard } from "./timeline.js";
import { metricsCard } from "./mlflow_chart.js";

const STATE_CLASS = { Running: "Running", Completed: "ok", Failed: "Failed", Restarting: "Pending", Created: "Pending" };
const stateBadge = (state) => badge(state, STATE_CLASS[state] ?? "");

export async function render(view, arg, shell) {
  return arg ? renderJob(view, arg, shell) : renderList(view, shell);
}

function control(name, spec) {
  const id = "recipe-" + name;
  if (spec.type === "bool") return h("input", { type: "checkbox", id, name: `fields.${name}`, checked: !!spec.default });
  if (spec.type === "choice") {
    return h("select", { id, name: `fields.${name}` },
      (spec.values ?? []).map((v) => h("option", { value: v, selected: v === spec.default }, v)));
  }
  const numeric = spec.type === "int" || spec.type === "float";
  return h("input", {
    id, name: `fields.${name}`, type: numeric ? "number" : "text", value: spec.default ?? "",
    step: spec.type === "int" ? "1" : numeric ? "any" : undefined, min: spec.min ?? undefined, max: spec.max ?? undefined,
  });
}

function fieldValues(form, recipe) {
  const out = {};
  for (const [name, spec] of Object.entries(recipe.fields)) {
    const input = form.elements[`fields.${name}`];
    if (spec.type === "bool") out[name] = input.checked;
    else if (spec.type === "int") out[name] = input.value === "" ? spec.default : parseInt(input.value, 10);
    else if (spec.type === "float") out[name] = input.value === "" ? spec.default : parseFloat(input.value);
    else out[name] = input.value;
  }
  // A framework config file replaces the other fields: send it alone.
  const config = Object.entries(recipe.fields).find(([name, spec]) => spec.type === "config" && out[name]);
  return config ? { [config[0]]: out[config[0]] } : out;
}

async function renderList(view, shell) {
  const [recipes, status] = await Promise.all([get("/training/recipes"), get("/clusters/status").catch(() => null)]);
  const types = (status?.accelerators ?? []).map((a) => a.instanceType);
  const jobsCard = h("section", { class: "card", id: "jobs", "data-operation": "training_job_list" });
  const allJobsCard = h("section", { class: "card", id: "all-jobs", "data-operation": "job_list_all" });
  const fieldsBox = h("div", { class: "row", id: "recipe-fields" });
  const description = h("p", { class: "hint", id: "recipe-description" });
  const recipeSelect = h("select", { name: "recipe", id: "f-recipe", "data-operation": "training_recipe_list" },
    recipes.recipes.map((r) => h("option", { value: r.name }, `${r.name} (${r.path === "kuberay" ? "KubeRay" : "HyperPod training operator"})`)));
  const form = h("form", { id: "recipe-form", novalidate: true },
    h("div", { class: "row" },
      field("Recipe", recipeSelect),
      field("Job name", h("input", { name: "jobName", required: true, placeholder: "llama-ft-1" }), "A DNS label: names the job and its pods."),
      field("Instance type", types.length
        ? h("select", { name: "instanceType" }, types.map((t) => h("option", { value: t }, t)))
        : h("input", { name: "instanceType", placeholder: "ml.g6.4xlarge" })),
      field("Nodes", h("input", { name: "nodes", type: "number", min: 1, max: 256, value: 1 }))),
    description, h("h3", {}, "Recipe fields"), fieldsBox,
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "training_recipe_submit" }, "Submit job")));
  const pick = () => {
    const recipe = recipes.recipes.find((r) => r.name === recipeSelect.value);
    description.textContent = `${recipe.description} Image: ${recipe.image}`;
    replace(fieldsBox, Object.entries(recipe.fields).map(([name, spec]) => field(name, control(name, spec), spec.description)));
  };
  recipeSelect.addEventListener("change", pick);
  pick();
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearErrors(form);
    const recipe = recipes.recipes.find((r) => r.name === recipeSelect.value);
    const body = {
      recipe: recipe.name, jobName: form.elements.jobName.value.trim(), instanceType: form.elements.instanceType.value,
      nodes: parseInt(form.elements.nodes.value || "1", 10), fields: fieldValues(form, recipe),
    };
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const ref = await post("/training/recipes/submit", body, { idempotencyKey: newKey() });
      const op = await shell.waitFor(ref.operationId);
      if (op.status !== "SUCCEEDED") form.append(errorBox(op.error ?? { message: `submission ${op.status}` }));
      else shell.banner(h("span", {}, "Submitted ", h("a", { href: `#/training/${encodeURIComponent(body.jobName)}` }, body.jobName)), "info");
      await drawJobs();
    } catch (err) { showError(form, err); } finally { button.disabled = false; }
  });
  let shown = null;  // what the table shows: an unchanged list is not redrawn, so keyboard focus stays on its row
  async function drawJobs() {
    const list = await get("/training/jobs").catch((error) => ({ error }));
    const seen = JSON.stringify(list.error ? list.error.message : list.jobs);
    if (seen === shown) { await drawAllJobs(); return; }
    shown = seen;
    if (list.error) { replace(jobsCard, h("h2", {}, "Jobs"), errorBox(list.error)); return; }
    replace(jobsCard, h("div", { class: "card-head" }, h("h2", {}, "Jobs"), h("span", { class: "muted small" }, list.clusterTag)),
      table([
        { label: "Job", cell: (j) => h("a", { href: `#/training/${encodeURIComponent(j.name)}` }, j.name) },
        { label: "Kind", cell: (j) => j.kind }, { label: "State", cell: (j) => stateBadge(j.state) },
        { label: "Nodes", num: true, cell: (j) => j.nodes }, { label: "Instance type", cell: (j) => j.instanceType ?? "—" },
        { label: "Restarts", num: true, cell: (j) => j.restartCount }, { label: "Recipe", cell: (j) => j.recipe ?? "—" },
        { label: "Created", cell: (j) => when(j.createdAt) },
        { label: "", cell: (j) => deleteButton(j, shell, drawJobs) },
      ], list.jobs, { empty: "No training jobs.", rowAttrs: (j) => ({ dataset: { job: j.name } }) }));
    await drawAllJobs();
  }
  // Every job of the cluster in one shape, with the Kubernetes batch Jobs (model downloads and the like).
  let allShown = null;
  async function drawAllJobs() {
    const all = await get("/jobs").catch((error) => ({ error }));
    const seen = JSON.stringify(all.error ? all.error.message : all.jobs);
    if (seen === allShown) return;
    allShown = seen;
    const head = h("div", { class: "card-head" }, h("h2", {}, "Every job of the cluster"), h("span", { class: "muted small" }, "with batch Jobs such as model downloads"));
    if (all.error) { replace(allJobsCard, head, errorBox(all.error)); return; }
    replace(allJobsCard, head, table([
      { label: "Job", cell: (j) => j.name }, { label: "Namespace", cell: (j) => j.namespace }, { label: "Kind", cell: (j) => j.kind },
      { label: "State", cell: (j) => stateBadge(j.state) }, { label: "Created", cell: (j) => when(j.createdAt) },
    ], all.jobs, { empty: "No jobs.", rowAttrs: (j) => ({ dataset: { job: j.name, kind: j.kind } }) }));
  }
  replace(view, h("div", { class: "stack" },
    h("section", { class: "card" }, h("h1", {}, "Training"), form), jobForms(shell, types, drawJobs), jobsCard, allJobsCard));
  await drawJobs();
  const timer = setInterval(() => drawJobs(), 5000);
  return { refresh: drawJobs, dispose: () => clearInterval(timer) };
}

// Delete a job of either path with its pods, after a confirmation; `after` redraws once it is gone.
function deleteButton(job, shell, after) {
  return h("button", { type: "button", class: "danger", "data-operation": "training_job_delete", "data-op": "training_job_delete",
    onclick: async (e) => {
      const button = e.currentTarget;
      const ok = await confirmDialog(`Delete job ${job.name}?`, "The job and its pods go (their GPUs are released); its logs in the pods go with them.", "Delete job");
      if (!ok) return;
      button.disabled = true;
      try {
        const ref = await post("/training/jobs/delete", { jobName: job.name, namespace: job.namespace }, { idempotencyKey: newKey() });
        const op = await shell.waitFor(ref.operationId);
        if (op.status !== "SUCCEEDED") shell.fail(op.error?.message ?? `delete ${op.status}`);
        else shell.banner(`Deleted ${job.name}.`, "info");
        await after();
      } catch (err) { shell.fail(err); } finally { button.disabled = false; }
    } }, "Delete…");
}

// job_get_status's `network`: what NCCL uses between the job's nodes (read from its NCCL_DEBUG=INFO lines).
const NETWORK = {
  efa: "EFA (NCCL over aws-ofi-nccl)",
  socket: "TCP sockets: no EFA",
  unknown: "not known yet (NCCL logs it with NCCL_DEBUG=INFO)",
  "single-node": "single node: no network between nodes",
};

async function renderJob(view, name, shell) {
  const head = h("section", { class: "card", id: "job", "data-operation": "job_get_status" });
  const podsCard = h("section", { class: "card", id: "job-pods" });
  const logBox = h("div", { class: "log", id: "job-logs", role: "log", tabindex: "0", "data-operation": "training_job_logs", "aria-label": `Log of ${name}` });
  const logState = h("span", { class: "muted small", id: "log-state" }, "");
  const podSelect = h("select", { id: "log-pod", name: "pod" });
  const follow = h("button", { type: "button", id: "log-follow" }, "Pause");
  // The last lines at once (training_job_logs): after the pods are gone they come from CloudWatch when it kept them.
  const tailBox = h("div", { class: "log", id: "job-log-tail", role: "log", tabindex: "0", "aria-label": `Last lines of ${name}`,
    "data-operation": "training_job_logs", hidden: true });
  const tailNote = h("span", { class: "muted small", id: "job-log-tail-note" });
  const tail = h("button", { type: "button", id: "log-tail", "data-operation": "training_job_logs", onclick: async () => {
    const params = { jobName: name, tail: 200 };
    if (podSelect.value) params.pod = podSelect.value;
    try {
      const logs = await get("/training/jobs/logs", params);
      replace(tailBox, logs.lines.map((line) => h("div", { class: "log-line" }, line)));
      tailNote.textContent = `${logs.pod}: last ${logs.lines.length} line(s) from ${logs.source}${logs.truncated ? ", cut at the size limit" : ""}`;
    } catch (err) { replace(tailBox, errorBox(err)); tailNote.textContent = ""; }
    tailBox.hidden = false;
    tailBox.focus();
  } }, "Last lines");
  const logsCard = h("section", { class: "card", id: "logs" },
    h("div", { class: "card-head" }, h("h2", {}, "Logs"), field("Pod", podSelect), follow, tail, logState), logBox, tailNote, tailBox);
  // The job's persistent timeline: events of the job object and of its pods (<job>-…), kept after Kubernetes drops them.
  const timeline = timelineCard("job-timeline", "Timeline", { objectPrefix: name });
  const metrics = metricsCard(name);
  replace(view, h("div", { class: "stack" }, h("p", {}, h("a", { href: "#/training" }, "← Training")), head, podsCard,
    metrics.card, logsCard, timeline.card));
  let kind = null;
  let stream = null;

  async function refresh() {
    const s = await get("/training/jobs/status", { jobName: name }).catch((error) => ({ error }));
    if (s.error) { replace(head, h("h1", {}, name), errorBox(s.error)); return; }
    kind = s.job.kind;
    const b = s.budget;
    replace(head, h("div", { class: "card-head" }, h("h1", {}, name), stateBadge(s.job.state), h("span", { class: "spacer" }),
      deleteButton(s.job, shell, async () => { location.hash = "#/training"; })),
      h("dl", { class: "kv" },
        h("dt", {}, "Kind"), h("dd", {}, s.job.kind, s.job.recipe ? ` · recipe ${s.job.recipe}` : ""),
        h("dt", {}, "Image"), h("dd", { class: "mono" }, s.image ?? "—"),
        h("dt", {}, "Command"), h("dd", { class: "mono" }, s.command.join(" ")),
        h("dt", {}, "Restarts"), h("dd", { id: "job-budget" }, `${b.restarts} of ${b.jobMaxRetryCount} allowed`,
          s.job.kind === "HyperPodPyTorchJob" ? ` (in place ${b.inPlaceRestarts}, full ${b.fullJobRestarts} of ${b.maxFullJobRestarts ?? "—"})` : ""),
        h("dt", {}, "Nodes"), h("dd", {}, `${s.job.nodes} × ${s.job.instanceType ?? "—"}`),
        h("dt", {}, "Network"), h("dd", { id: "job-network" }, NETWORK[s.network?.transport] ?? "—")),
      s.network?.warning ? h("div", { class: "findings", id: "job-network-warning", role: "status" },
        h("p", { class: "warning" }, h("strong", {}, "Warning "), s.network.warning)) : null);
    replace(podsCard, h("h2", {}, "Pods"), table([
      { label: "Pod", cell: (p) => h("span", { class: "mono" }, p.name) }, { label: "Phase", cell: (p) => badge(p.phase) },
      { label: "Node", cell: (p) => p.node ?? "—" }, { label: "Restarts", num: true, cell: (p) => p.restarts },
    ], s.pods, { empty: "No pods now (a finished job's pods are removed)." }));
    const names = s.pods.map((p) => p.name);
    if (names.join() !== [...podSelect.options].map((o) => o.value).join()) {
      const chosen = podSelect.value;
      replace(podSelect, names.map((n) => h("option", { value: n }, n)));
      if (names.includes(chosen)) podSelect.value = chosen;
      if (!stream && names.length) openLogs();
    }
  }

  // One stream per pod: the ts of the last line and how many lines carry exactly that ts let a new socket resume.
  function openLogs() {
    stream?.close(true);
    logBox.replaceChildren();
    const pod = podSelect.value;
    if (!pod) return;
    const state = { last: null, same: 0, paused: false, ended: false, socket: null, retry: 500 };
    const connect = () => {
      const q = new URLSearchParams({ pod });
      if (kind === "HyperPodPyTorchJob") q.set("container", "pytorch-job-container");
      if (state.last) { q.set("after", state.last); q.set("skip", String(state.same)); }
      const socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/v1/ws/logs?" + q);
      state.socket = socket;
      socket.addEventListener("open", () => { logState.textContent = "following"; });
      socket.addEventListener("message", (msg) => {
        const m = JSON.parse(msg.data);
        state.retry = 500;  // admitted: a refused socket (4429, too many log streams) closes before any message
        if (m.type === "line") {
          if (m.ts && m.ts === state.last) state.same += 1; else { state.last = m.ts || state.last; state.same = 1; }
          const atEnd = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 4;
          logBox.append(h("div", { class: "log-line" }, m.text));
          if (atEnd) logBox.scrollTop = logBox.scrollHeight;
        } else if (m.type === "end") {
          state.ended = true; logState.textContent = "the container has ended";
        } else if (m.type === "error") {
          state.ended = true; logState.textContent = ""; logBox.append(errorBox(m));
        }
      });
      socket.addEventListener("close", (e) => {
        if (state.paused || state.ended || stream !== handle) return;
        logState.textContent = e.code === 4429 ? "too many log streams open; retrying…" : "reconnecting…";
        setTimeout(() => { if (!state.paused && stream === handle) connect(); }, state.retry);
        state.retry = Math.min(state.retry * 2, 10000);
      });
    };
    const handle = {
      close(final) { state.paused = true; state.socket?.close(); if (final) stream = null; },
      pause() { state.paused = true; state.socket?.close(); logState.textContent = "paused"; follow.textContent = "Follow"; },
      resume() { state.paused = false; follow.textContent = "Pause"; if (!state.ended) connect(); },
      get paused() { return state.paused; },
    };
    stream = handle;
    follow.textContent = "Pause";
    connect();
  }
  follow.addEventListener("click", () => { if (stream) { if (stream.paused) stream.resume(); else stream.pause(); } });
  podSelect.addEventListener("change", openLogs);
  await Promise.all([refresh(), timeline.refresh()]);
  metrics.refresh();
  const timer = setInterval(() => { refresh(); metrics.refresh(); }, 5000);
  return { refresh: () => Promise.all([refresh(), timeline.refresh()]), dispose: () => { clearInterval(timer); stream?.close(true); } };
}
