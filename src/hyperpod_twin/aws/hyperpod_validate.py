"""Validation of HyperPod CreateCluster/UpdateCluster input, with the ValidationException texts AWS uses."""

from __future__ import annotations

import copy
import json
import re
from typing import Any
from urllib.parse import unquote

from . import instance_types
from .protocol import AwsError, validation

NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
EKS_ARN_RE = re.compile(r"^arn:aws[a-z\-]*:eks:([a-z0-9\-]*):([0-9]{12}):cluster/([0-9A-Za-z][A-Za-z0-9\-_]{0,99})$")
PLAN_ARN_RE = re.compile(r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.+$")
ROLE_ARN_RE = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$")
DEEP_HEALTH_CHECKS = ("InstanceStress", "InstanceConnectivity", "MultiNodeTrainingValidation")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# Fields of an existing instance group that UpdateCluster may not change.
IMMUTABLE = ("InstanceType", "CapacityRequirements", "NetworkInterface", "TrainingPlanArn")


def check_name(value: Any, member: str) -> str:
    """A cluster or instance group name (1..63, alnum and hyphens)."""
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise validation(
            f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: "
            "Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
        )
    return value


def normalize_group(raw: dict[str, Any], index: int) -> dict[str, Any]:
    """Validate one ClusterInstanceGroupSpecification; return it with defaults filled in."""
    spec = copy.deepcopy(raw)
    where = f"instanceGroups.{index}.member"
    name = check_name(spec.get("InstanceGroupName"), f"{where}.instanceGroupName")
    count = spec.get("InstanceCount")
    if not isinstance(count, int) or not 0 <= count <= 6758:
        raise validation(
            f"1 validation error detected: Value '{count}' at '{where}.instanceCount' failed to satisfy "
            "constraint: Member must have value between 0 and 6758"
        )
    min_count = spec.get("MinInstanceCount")
    if min_count is not None and (not isinstance(min_count, int) or min_count < 0 or min_count > count):
        raise validation(f"MinInstanceCount of instance group {name} must be between 0 and InstanceCount.")
    has_type = "InstanceType" in spec
    has_req = "InstanceRequirements" in spec
    if has_type == has_req:
        raise validation(f"Instance group {name} must specify exactly one of InstanceType or InstanceRequirements.")
    types = [spec["InstanceType"]] if has_type else list(spec["InstanceRequirements"].get("InstanceTypes") or [])
    if not types or len(types) > 20:
        raise validation(f"InstanceRequirements.InstanceTypes of instance group {name} must list 1 to 20 types.")
    for t in types:
        if instance_types.get(str(t)) is None:
            raise validation(
                f"1 validation error detected: Value '{t}' at '{where}.instanceType' failed to satisfy "
                "constraint: Member must satisfy enum value set: "
                f"[{', '.join(t.name for t in instance_types.all_types())}]"
            )
    infos = [instance_types.get(str(t)) for t in types]
    if not spec.get("ExecutionRole") or not ROLE_ARN_RE.match(str(spec["ExecutionRole"])):
        raise validation(f"Instance group {name} needs a valid ExecutionRole IAM role ARN.")
    tpc = spec.get("ThreadsPerCore")
    if tpc is None:
        tpc = 1
    if tpc not in (1, 2):
        raise validation(
            f"1 validation error detected: Value '{tpc}' at '{where}.threadsPerCore' failed to satisfy "
            "constraint: Member must have value between 1 and 2"
        )
    if tpc == 2 and any(i is not None and not i.smt for i in infos):
        raise validation(
            f"ThreadsPerCore 2 is not supported for instance type {types[0]} of instance group {name}: "
            "this instance type does not support multithreading. Use ThreadsPerCore 1."
        )
    spec["ThreadsPerCore"] = tpc
    cap = spec.get("CapacityRequirements")
    if cap is not None and (not isinstance(cap, dict) or len(cap) != 1 or next(iter(cap)) not in ("Spot", "OnDemand")):
        raise validation(f"CapacityRequirements of instance group {name} must set exactly one of Spot or OnDemand.")
    net = spec.get("NetworkInterface")
    if net is not None:
        kind = (net or {}).get("InterfaceType")
        if kind not in ("efa", "efa-only"):
            raise validation(
                f"1 validation error detected: Value '{kind}' at '{where}.networkInterface.interfaceType' failed "
                "to satisfy constraint: Member must satisfy enum value set: [efa, efa-only]"
            )
        for t, info in zip(types, infos, strict=True):
            if info is None:
                continue
            if info.efa == 0:
                raise validation(f"Instance type {t} of instance group {name} does not support EFA.")
            if kind == "efa-only" and not info.efa_only_capable:
                raise validation(
                    f"Instance type {t} of instance group {name} does not support the efa-only interface type."
                )
    checks = spec.get("OnStartDeepHealthChecks")
    if checks is not None:
        if not 1 <= len(checks) <= 3 or any(c not in DEEP_HEALTH_CHECKS for c in checks):
            raise validation(
                f"OnStartDeepHealthChecks of instance group {name} must list 1 to 3 of {', '.join(DEEP_HEALTH_CHECKS)}."
            )
        if any(i is not None and not i.accelerators for i in infos):
            raise validation(
                f"Deep health checks are supported only for accelerated instance types; instance group {name} "
                f"uses {types[0]}."
            )
    plan = spec.get("TrainingPlanArn")
    if plan is not None and not PLAN_ARN_RE.match(str(plan)):
        raise validation(f"TrainingPlanArn of instance group {name} is not a training plan ARN.")
    lcc = spec.get("LifeCycleConfig")
    if lcc is not None:
        uri = str(lcc.get("SourceS3Uri", ""))
        if not re.match(r"^(https|s3)://([^/]+)/?(.*)$", uri) or not lcc.get("OnCreate"):
            raise validation(f"LifeCycleConfig of instance group {name} needs an s3:// SourceS3Uri and OnCreate.")
    storage = spec.get("InstanceStorageConfigs")
    if storage is not None:
        if len(storage) > 4:
            raise validation(f"Instance group {name} may have at most 4 InstanceStorageConfigs.")
        for item in storage:
            ebs = item.get("EbsVolumeConfig")
            if ebs is not None and not ebs.get("RootVolume"):
                size = ebs.get("VolumeSizeInGB")
                if not isinstance(size, int) or not 1 <= size <= 16384:
                    raise validation(f"VolumeSizeInGB of instance group {name} must be between 1 and 16384.")
    kube = spec.get("KubernetesConfig")
    if kube is not None:
        for taint in kube.get("Taints") or []:
            if taint.get("Effect") not in TAINT_EFFECTS:
                raise validation(f"Taint effect of instance group {name} must be one of {', '.join(TAINT_EFFECTS)}.")
        labels = kube.get("Labels") or {}
        if len(labels) > 50:
            raise validation(f"Instance group {name} may have at most 50 Kubernetes labels.")
    return spec


def immutable_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Names of immutable fields that differ between the existing group and the submitted one."""
    changed = []
    for key in IMMUTABLE:
        before, after = old.get(key), new.get(key)
        if key == "CapacityRequirements":
            before = before or {"OnDemand": {}}
            after = after or {"OnDemand": {}}
        if key == "InstanceType" and "InstanceType" not in new and "InstanceType" not in old:
            continue
        if before != after:
            changed.append(key)
    return changed


def immutable_error(group: str, fields: list[str], old: dict[str, Any], new: dict[str, Any]) -> AwsError:
    """The ValidationException for an attempt to change fields fixed at group creation."""
    parts = [f"{f} (current: {_fmt(old.get(f))}, requested: {_fmt(new.get(f))})" for f in fields]
    return validation(
        f"Cannot update instance group {group}: {', '.join(parts)} cannot be changed for an existing "
        "instance group. Create a new instance group instead."
    )


def _fmt(value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, dict) and len(value) == 1 and next(iter(value.values())) in ({}, None):
        return str(next(iter(value)))
    if isinstance(value, dict) and "InterfaceType" in value:
        return str(value["InterfaceType"])
    return str(value)


def trusts(document: Any, service: str) -> bool:
    """Whether a trust policy lets `service` call sts:AssumeRole."""
    try:
        policy = json.loads(document) if isinstance(document, str) else document
    except ValueError:
        policy = json.loads(unquote(str(document)))
    statements = policy.get("Statement") or []
    for st in statements if isinstance(statements, list) else [statements]:
        if st.get("Effect") != "Allow":
            continue
        actions = st.get("Action") or []
        actions = [actions] if isinstance(actions, str) else actions
        if not any(a in ("sts:AssumeRole", "sts:*", "*") for a in actions):
            continue
        principals = (st.get("Principal") or {}).get("Service") or []
        principals = [principals] if isinstance(principals, str) else principals
        if service in principals:
            return True
    return False
