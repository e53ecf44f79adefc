// Creation stage by stage on the cluster page (what cluster_create does in one go): the EKS stage with automatic
// or explicit subnet CIDRs, the dependencies, the HyperPod cluster; and each stage of the active cluster as the
// control plane reports it (cluster_get_eks_creation_status, cluster_get_dependency_status, hyperpod_get_creation_status).
import { ApiError, get, newKey, post } from "./api.js";
import { badge, clearErrors, elapsed, errorBox, field, h, replace, showError, table } from "./dom.js";

const STATE_CLASS = { SUCCEEDED: "ok", ACTIVE: "ok", FAILED: "bad", DEGRADED: "bad", BLOCKED: "bad", IN_PROGRESS: "RUNNING" };
const stateBadge = (s) => badge(s, STATE_CLASS[s] ?? s);
const input = (name, id, attrs = {}) => h("input", { type: "text", name, id, spellcheck: "false", autocomplete: "off", ...attrs });

// The instance types offered in one AZ, as options (the AZ and type pickers of both creation forms).
export function typeOptions(instances, az) {
  if (instances.error) return [h("option", { value: "" }, `unavailable: ${instances.error.message}`)];
  const here = instances.instances.filter((i) => i.availabilityZones.includes(az));
  if (!here.length) return [h("option", { value: "" }, "no instance type offered in this AZ")];
  return here.map((i) => h("option", { value: i.instanceType },
    `${i.instanceType} — ${i.gpus ? i.gpus + " GPU" : i.neuronDevices ? i.neuronDevices + " Neuron" : i.vcpus + " vCPU"}`));
}

// Submit a stage's operation, then follow it in the page's progress card (#/clusters/<operation id>).
async function start(form, path, body, shell) {
  clearErrors(form);
  try {
    const ref = await post(path, body, { idempotencyKey: newKey() });
    location.hash = `#/clusters/${ref.operationId}`;
  } catch (err) { if (err instanceof ApiError) showError(form, err); else shell.fail(err); }
}

function eksForm(region, shell) {
  const cidrs = [
    ["publicSubnet1Cidr", "Public subnet 1", "10.1.0.0/24"], ["publicSubnet2Cidr", "Public subnet 2", "10.1.1.0/24"],
    ["eksPrivateSubnet1Cidr", "EKS private subnet 1", "10.1.2.0/24"], ["eksPrivateSubnet2Cidr", "EKS private subnet 2", "10.1.3.0/24"],
    ["hyperPodPrivateSubnetCidr", "HyperPod compute subnet", "10.1.16.0/20"]];
  const subnetFields = cidrs.map(([name, label, example]) => field(label, input(name, `eks-${name}`, { placeholder: example })));
  const form = h("form", { id: "eks-form", novalidate: true, onsubmit: (e) => {
    e.preventDefault();
    const explicit = e.submitter?.value === "cidr";
    const body = {};
    for (const name of ["clusterTag", "region", "vpcCidr", "vpcId", "kubernetesVersion"]) {
      const v = form.elements[name].value.trim();
      if (v) body[name] = v;
    }
    const endpoints = form.elements.endpointPublicAccessCidrs.value.split(",").map((s) => s.trim()).filter(Boolean);
    if (endpoints.length) body.endpointPublicAccessCidrs = endpoints;
    if (explicit) for (const [name] of cidrs) body[name] = form.elements[name].value.trim();
    start(form, explicit ? "/clusters/eks-with-cidr" : "/clusters/eks", body, shell);
  } },
    h("h3", {}, "1. EKS"),
    h("div", { class: "row" }, field("Cluster tag", input("clusterTag", "eks-tag", { placeholder: "generated when empty" })),
      field("Region", input("region", "eks-region", { value: region }))),
    h("div", { class: "row" }, field("VPC CIDR", input("vpcCidr", "eks-vpc-cidr", { placeholder: "10.1.0.0/16" }), "New VPC: /16 to /18"),
      field("Reuse VPC id", input("vpcId", "eks-vpc-id", { placeholder: "vpc-…" }))),
    h("div", { class: "row" }, field("Kubernetes version", input("kubernetesVersion", "eks-version", { placeholder: "latest supported" })),
      field("API endpoint CIDRs", input("endpointPublicAccessCidrs", "eks-endpoint-cidrs", { placeholder: "0.0.0.0/0" }), "Comma-separated")),
    h("div", { class: "actions" },
      h("button", { type: "submit", value: "auto", class: "primary", "data-operation": "cluster_create_eks", "data-op": "cluster_create_eks" }, "Create EKS stage")),
    h("details", { id: "eks-cidrs" }, h("summary", {}, "Explicit subnet CIDRs"),
      h("p", { class: "hint" }, "Every subnet inside the VPC CIDR, none overlapping; the HyperPod compute subnet /20 or larger. Tag and Region are required here."),
      h("div", { class: "row" }, subnetFields),
      h("div", { class: "actions" }, h("button", { type: "submit", value: "cidr", "data-operation": "cluster_create_eks_with_cidr", "data-op": "cluster_create_eks_with_cidr" },
        "Create EKS with these CIDRs"))));
  return form;
}

function dependenciesForm(shell) {
  const form = h("form", { id: "deps-form", novalidate: true, onsubmit: (e) => { e.preventDefault(); start(form, "/clusters/dependencies", {}, shell); } },
    h("h3", {}, "2. Dependencies"),
    h("p", { class: "hint" }, "On the active cluster: Pod Identity agent, the HyperPod dependencies chart, the Mountpoint for S3 CSI driver, metrics-server."),
    h("div", { class: "actions" }, h("button", { type: "submit", "data-operation": "cluster_configure_dependencies", "data-op": "cluster_configure_dependencies" }, "Configure dependencies")));
  return form;
}

function hyperpodForm(zones, instances, shell) {
  const az = h("select", { name: "availabilityZone", id: "hp-az" },
    (zones.availabilityZones ?? []).map((z) => h("option", { value: z.zoneName ?? z.name }, `${z.zoneName ?? z.name} (${z.zoneId ?? z.id})`)));
  const type = h("select", { name: "acceleratedInstanceType", id: "hp-type" });
  const fill = () => { const chosen = type.value; replace(type, typeOptions(instances, az.value)); if ([...type.options].some((o) => o.value === chosen)) type.value = chosen; };
  az.addEventListener("change", fill);
  fill();
  const deep = h("input", { type: "checkbox", name: "onStartDeepHealthChecks", id: "hp-deep" });
  const strict = h("input", { type: "checkbox", name: "strictAvailabilityZone", id: "hp-strict" });
  const form = h("form", { id: "hyperpod-form", novalidate: true, onsubmit: (e) => {
    e.preventDefault();
    const els = form.elements;
    const body = { acceleratedInstanceType: type.value, acceleratedInstanceCount: Number(els.acceleratedInstanceCount.value), availabilityZone: az.value };
    if (els.acceleratedEBSVolumeSize.value !== "500") body.acceleratedEBSVolumeSize = Number(els.acceleratedEBSVolumeSize.value);
    if (els.capacityType.value !== "OnDemand") body.capacityType = els.capacityType.value;
    for (const name of ["hyperPodTag", "acceleratedTrainingPlanArn", "computeSubnetId"]) if (els[name].value.trim()) body[name] = els[name].value.trim();
    if (deep.checked) body.onStartDeepHealthChecks = true;
    if (strict.checked) body.strictAvailabilityZone = true;
    start(form, "/clusters/hyperpod", body, shell);
  } },
    h("h3", {}, "3. HyperPod"),
    h("div", { class: "row" }, field("Availability Zone", az), field("Instance type", type)),
    h("div", { class: "row3" }, field("Count", h("input", { type: "number", name: "acceleratedInstanceCount", id: "hp-count", value: "1", min: "0", max: "6758" })),
      field("EBS volume (GB)", h("input", { type: "number", name: "acceleratedEBSVolumeSize", id: "hp-ebs", value: "500", min: "1", max: "16384" })),
      field("Capacity type", h("select", { name: "capacityType", id: "hp-capacity" }, h("option", { value: "OnDemand" }, "On-Demand"), h("option", { value: "Spot" }, "Spot")))),
    h("div", { class: "row3" }, field("HyperPod tag", input("hyperPodTag", "hp-tag", { placeholder: "the cluster tag" })),
      field("Training plan", input("acceleratedTrainingPlanArn", "hp-plan", { placeholder: "arn:aws:sagemaker:…" })),
      field("Compute subnet", input("computeSubnetId", "hp-subnet", { placeholder: "subnet-… (default: chosen)" }))),
    h("div", {}, h("label", { class: "radio", for: "hp-deep" }, deep, "Deep health checks on start"), " ",
      h("label", { class: "radio", for: "hp-strict" }, strict, "Only this Availability Zone")),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", "data-operation": "hyperpod_create", "data-op": "hyperpod_create" }, "Create HyperPod cluster")));
  return form;
}

// One stage's state: state badge, elapsed, message, error and hint, and what AWS reports right now.
function stageView(title, s) {
  if (s.error && !s.state) {
    return h("div", { class: "stage-view" }, h("h4", {}, title),
      ["NOT_FOUND", "PRECONDITION_FAILED"].includes(s.error.code) ? h("p", { class: "empty" }, s.error.message) : errorBox(s.error));
  }
  return h("div", { class: "stage-view", dataset: { state: s.state } },
    h("h4", {}, title, " ", stateBadge(s.state)),
    h("p", { class: "small" }, s.message || "—", ` · ${elapsed(s.elapsedSeconds)}`,
      s.resourceStatus ? [" · AWS reports ", h("strong", {}, s.resourceStatus)] : null),
    s.error ? errorBox(s.error) : null);
}

export function stagesSection(shell, zones, instances) {
  const region = zones.region ?? instances.region ?? "";
  const eksBox = h("div", { id: "eks-status", "data-operation": "cluster_get_eks_creation_status" });
  const depsBox = h("div", { id: "dependency-status", "data-operation": "cluster_get_dependency_status" });
  const hpBox = h("div", { id: "hyperpod-status", "data-operation": "hyperpod_get_creation_status" });
  const el = h("section", { class: "card", id: "stages", "aria-labelledby": "stages-title" },
    h("h2", { id: "stages-title" }, "Stages"),
    h("details", { id: "stages-create" }, h("summary", {}, "Create stage by stage"),
      h("p", { class: "muted small" }, "The stages of Create a cluster one at a time: EKS first, then make the cluster active (header), then its dependencies and its HyperPod cluster."),
      h("div", { class: "row" }, eksForm(region, shell), h("div", {}, dependenciesForm(shell), hyperpodForm(zones, instances, shell)))),
    h("h3", {}, "Stages of the active cluster"), h("div", { class: "row3" }, eksBox, depsBox, hpBox));

  async function refresh() {
    if (!shell.clusters?.activeCluster) {
      for (const box of [eksBox, depsBox, hpBox]) replace(box, h("p", { class: "empty" }, "No active cluster."));
      return;
    }
    const [eks, deps, hp] = await Promise.all(["/clusters/eks-status", "/clusters/dependency-status", "/clusters/hyperpod-status"]
      .map((p) => get(p).catch((error) => ({ error }))));
    replace(eksBox, stageView("EKS", eks));
    replace(hpBox, stageView("HyperPod", hp));
    replace(depsBox, stageView("Dependencies", deps), deps.dependencies ? table([
      { label: "Dependency", cell: (d) => d.name }, { label: "Status", cell: (d) => stateBadge(d.status) },
      { label: "Note", cell: (d) => h("span", { class: "small" }, d.message ?? "", d.hint ? h("span", { class: "hint" }, " ", d.hint) : null) },
    ], deps.dependencies, { empty: "No dependency recorded.", rowAttrs: (d) => ({ dataset: { dependency: d.name } }) }) : null);
  }
  return { el, refresh };
}
