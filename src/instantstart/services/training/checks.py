"""Refusals before a training job is submitted: name, GPUs per node, instance type present, operator, Spot."""

from __future__ import annotations

import re
import shlex
from typing import Any

from instantstart.context import AppContext
from instantstart.errors import Conflict, InvalidInput, NotFound, PreconditionFailed
from instantstart.kube import core_kinds
from instantstart.kube.apply import read_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.manifests import training as training_manifests
from instantstart.manifests.fsx import FSX_MOUNT
from instantstart.manifests.resources import PodResources
from instantstart.services.base.hyperpod_groups import capacity_type, described
from instantstart.services.core import sizing
from instantstart.services.core.instance_types import InstanceType, catalog
from instantstart.store.models import ClusterRow

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
NPROC = re.compile(r"^(auto|cpu|gpu|[1-9][0-9]{0,2})$")


def field_error(field: str, message: str, hint: str) -> InvalidInput:
    """InvalidInput naming one field, what is wrong and the fix."""
    return InvalidInput(f"Invalid input: {field}: {message}", hint=hint,
                        details={"fields": [{"field": field, "message": message}]})


def check_name(name: str) -> None:
    """A job name must be a DNS label (it names pods and their hostnames)."""
    if not DNS_LABEL.match(name):
        raise field_error("jobName", f"{name!r} is not a DNS label",
                          "Use 1-63 lowercase letters, digits and '-', starting with a letter and ending with a "
                          "letter or digit, e.g. llama-ft-1.")


def check_nproc(value: str) -> None:
    """nprocPerNode: auto, cpu, gpu or a positive integer."""
    if not NPROC.match(value):
        raise field_error("nprocPerNode", f"{value!r} is not auto, cpu, gpu or a positive integer",
                          "Leave it at auto (one process per accelerator) or give a number.")


def facts_of(instance_type: str) -> InstanceType:
    """The catalog's facts of `instance_type`; an error naming instanceType when unknown."""
    known = catalog()
    facts = known.get(instance_type)
    if facts is None:
        gpu_types = sorted(n for n, f in known.items() if f.gpus > 0)
        raise field_error("instanceType", f"{instance_type} is not a known instance type",
                          f"Use an ml.* type of the cluster, e.g. {', '.join(gpu_types[:6])}.")
    return facts


async def instance_type_or_default(app: AppContext, row: ClusterRow, asked: str) -> str:
    """`asked`, or (when empty) the cluster's accelerated instance type if its groups have exactly one; else an
    error naming instanceType and the cluster's accelerated types."""
    if asked:
        return asked
    known = catalog()
    groups = list((await described(app, row)).get("InstanceGroups") or [])
    types = sorted({str(g.get("InstanceType")) for g in groups if g.get("InstanceType") in known
                    and known[str(g.get("InstanceType"))].accelerated})
    if len(types) == 1:
        return types[0]
    have = f"its accelerated types are {', '.join(types)}" if types else "it has no accelerated instance group"
    raise field_error("instanceType", f"required: cluster {row.tag} has no single default ({have})",
                      "Name the instance type of the group to run on (cluster_get_instance_groups lists them).")


def gpus_per_node(instance_type: str, asked: int | None) -> int:
    """The accelerators (GPUs, or Neuron devices on trn) each pod requests: asked (at most what the type has) or all
    of the type's."""
    return sizing.accelerators(facts_of(instance_type), asked)


def pod_resources(shape: Any) -> PodResources:
    """A training pod's requests from the catalog: accelerators, EFA (multi-node, unless efa is false), cpu/memory
    (its share of the node, or the vcpu/memoryGiB asked); what cannot fit a node is refused naming the numbers."""
    facts = facts_of(shape.instance_type)
    count = sizing.accelerators(facts, shape.gpus_per_node)
    nodes = max(shape.nodes, shape.elastic.max_replicas if shape.elastic else 1)
    return sizing.pod_resources(facts, accelerators_per_pod=count, nodes=nodes, efa=shape.efa,
                                vcpu=shape.vcpu, memory_gib=shape.memory_gib)


def _groups_text(groups: list[dict[str, Any]]) -> str:
    parts = [f"{g.get('InstanceGroupName')} ({g.get('InstanceType')}, {int(g.get('CurrentCount') or 0)} node(s), "
             f"{capacity_type(g)})" for g in groups]
    return "; ".join(parts) or "none"


async def check_capacity(app: AppContext, row: ClusterRow, instance_type: str, elastic: bool) -> None:
    """Elastic jobs never run on a type that has Spot groups; the instance type has nodes in some group."""
    cluster = await described(app, row)
    groups = list(cluster.get("InstanceGroups") or [])
    mine = [g for g in groups if g.get("InstanceType") == instance_type]
    spot = [str(g.get("InstanceGroupName")) for g in mine if capacity_type(g) == "Spot"]
    if elastic and spot:
        raise field_error(
            "elastic", f"elastic training on Spot capacity is refused: {instance_type} runs in Spot group(s) "
            f"{', '.join(spot)}",
            "Run elastic jobs on OnDemand or training-plan groups; on Spot submit a fixed-size job whose recovery "
            "budget restarts it.",
        )
    if not any(int(g.get("CurrentCount") or 0) > 0 for g in mine):
        raise PreconditionFailed(
            f"No nodes of {instance_type} in cluster {row.tag}. Instance groups: {_groups_text(groups)}.",
            hint="Pick the instance type of a group with nodes, or add/scale one (hyperpod_add_instance_group, "
            "hyperpod_scale_instance_group).",
            details={"instanceType": instance_type,
                     "groups": [g.get("InstanceGroupName") for g in groups]},
        )


def check_operator_and_name(api: Api, row: ClusterRow, *, crd: str, api_version: str, kind: str,
                            name: str, namespace: str, operator: str, feature: str) -> None:
    """Blocking: the operator serves `crd` (else PreconditionFailed naming the feature key) and no `kind` of that
    name exists in the namespace (else Conflict)."""
    try:
        kube_call(f"read the {kind} CRD", core_kinds.read_crd, api, crd)
    except NotFound:
        raise PreconditionFailed(
            f"The {operator} is not enabled on cluster {row.tag} (no CRD {crd}).",
            hint=f'Enable it: hyperpod_update_advanced_features {{"{feature}": {{"enabled": true}}}}.',
        ) from None
    existing = read_object(api, {"apiVersion": api_version, "kind": kind,
                                 "metadata": {"name": name, "namespace": namespace}})
    if existing is not None:
        raise Conflict(f"{kind} {namespace}/{name} already exists.",
                       hint="Pick another jobName, or training_job_delete the existing one first.")


def check_cluster(app: AppContext, row: ClusterRow, name: str, namespace: str, claim: str | None,
                  needs_claim: bool) -> str | None:
    """Blocking: the training operator serves its CRD, the name is free, the S3 claim exists when needed.
    Returns the claim to mount (None when the namespace has none and nothing needs it)."""
    api = kube_api(app.kube, row.eks_cluster_name, row.region)
    check_operator_and_name(
        api,
        row,
        crd=training_manifests.CRD,
        api_version=training_manifests.API_VERSION,
        kind=training_manifests.KIND,
        name=name,
        namespace=namespace,
        operator="HyperPod training operator",
        feature="trainingOperator",
    )
    return claim_to_mount(api, namespace, claim, needs_claim)


def split_words(field: str, text: str) -> list[str]:
    """`text` split like a shell would (nothing runs through a shell); an error naming `field` otherwise."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise field_error(field, f"cannot be split into words: {exc}", "Balance the quotes.") from None


def claim_to_mount(api: Api, namespace: str, claim: str | None, needs_claim: bool) -> str | None:
    """Blocking: the claim to mount at /s3 (None when the namespace has none and nothing needs it)."""
    if not claim:
        return None
    found = read_object(api, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                              "metadata": {"name": claim, "namespace": namespace}})
    if found is None:
        if needs_claim:
            raise PreconditionFailed(
                f"The job reads or writes under {training_manifests.S3_MOUNT}, but namespace {namespace} "
                f"has no claim {claim}.",
                hint="Create it with s3_storage_create, or name the claim in s3Claim.",
            )
        return None
    return claim


def under(value: str, mount: str) -> bool:
    """Whether a path lies under `mount` (no `..` step out of it)."""
    normal = re.sub(r"/+", "/", value)
    return (normal == mount or normal.startswith(mount + "/")) and "/../" not in normal + "/"


def check_under_mount(field: str, value: str) -> None:
    """A path field of a recipe must lie under the S3 mount or the FSx mount (/fsx needs fsxClaim)."""
    if not (under(value, training_manifests.S3_MOUNT) or under(value, FSX_MOUNT)):
        raise field_error(
            field,
            f"{value!r} is not under {training_manifests.S3_MOUNT} or {FSX_MOUNT}",
            f"Give a path under {training_manifests.S3_MOUNT} (the cluster's S3 claim), "
            f"e.g. {training_manifests.S3_MOUNT}/data/train.json, or under "
            f"{FSX_MOUNT} with fsxClaim naming an FSx claim.",
        )


def check_config_path(field: str, value: str, suffixes: list[str]) -> None:
    """A framework config file of a recipe: a file under the S3 mount (its existence in the claim's bucket is
    checked at submit), no `.`/`..` steps, one of the framework's suffixes."""
    steps = value.split("/")
    fix = (
        f"Upload the file into the cluster's S3 claim and give its path under {training_manifests.S3_MOUNT}, e.g. "
        f"{training_manifests.S3_MOUNT}/configs/sft{suffixes[0]} (s3_storage_list_contents lists the claim's files)."
    )
    if (
        not under(value, training_manifests.S3_MOUNT)
        or value.rstrip("/") == training_manifests.S3_MOUNT
        or value.endswith("/")
    ):
        raise field_error(field, f"{value!r} is not a file under {training_manifests.S3_MOUNT}", fix)
    if ".." in steps or "." in steps or any(ord(c) < 32 for c in value) or len(value) > 1024:
        raise field_error(field, f"{value!r} has '.'/'..' steps, control characters or is over 1024 characters",
                          f"Give the file's plain path under {training_manifests.S3_MOUNT}. {fix}")
    if not value.endswith(tuple(suffixes)):
        raise field_error(field, f"{value!r} does not end in {' or '.join(suffixes)}",
                          f"The framework reads {', '.join(suffixes)} config files; rename the file or fix the path.")


def _regex(field: str, pattern: str, max_groups: int | None) -> None:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise field_error(field, f"{pattern!r} is not a regular expression: {exc}",
                          r"Use Python/RE2-style syntax, e.g. `.*step (\d+).*`.") from None
    if max_groups is not None and compiled.groups > max_groups:
        raise field_error(field, f"{pattern!r} has {compiled.groups} capture groups, at most {max_groups} is allowed",
                          "Keep one group around the number to read (or none); make others non-capturing "
                          "with (?:...).")


def hang_monitors(monitors: list[Any]) -> tuple[training_manifests.LogMonitor, ...]:
    """hangDetection entries as runPolicy.logMonitoringConfiguration; each must set a deadline to be useful."""
    seen: set[str] = set()
    out: list[training_manifests.LogMonitor] = []
    for i, mon in enumerate(monitors):
        where = f"hangDetection[{i}]"
        if mon.name in seen:
            raise field_error(f"{where}.name", f"{mon.name!r} is used twice", "Give each monitor its own name.")
        seen.add(mon.name)
        _regex(f"{where}.logPattern", mon.log_pattern, 1)
        if mon.stop_pattern is not None:
            _regex(f"{where}.stopPattern", mon.stop_pattern, None)
        if mon.expected_start_cut_off_in_seconds is None and mon.expected_recurring_frequency_in_seconds is None:
            raise field_error(where, "sets neither expectedStartCutOffInSeconds nor "
                              "expectedRecurringFrequencyInSeconds, so it can never detect a hang",
                              "Set expectedStartCutOffInSeconds (first match deadline), "
                              "expectedRecurringFrequencyInSeconds (longest gap), or both.")
        out.append(training_manifests.LogMonitor(mon.name, mon.log_pattern, mon.expected_start_cut_off_in_seconds,
                                mon.expected_recurring_frequency_in_seconds, mon.stop_pattern))
    return tuple(out)
