"""HyperPod instances as Kubernetes Nodes: labels, taints, capacity by instance type, readiness, health."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Hashable, Iterable
from typing import Any

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj, node_drain
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import NODES
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.node_capacity import allocatable_of, capacity_of, label_value, node_name

log = logging.getLogger(__name__)

# Label and taint keys of HyperPod EKS nodes (FACTS §2).
HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
DHC_LABEL = "sagemaker.amazonaws.com/deep-health-check-status"
GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
CLUSTER_LABEL = "sagemaker.amazonaws.com/cluster-name"
COMPUTE_TYPE_LABEL = "sagemaker.amazonaws.com/compute-type"
FAULT_TYPES_LABEL = "sagemaker.amazonaws.com/fault-types"
FAULT_REASONS_LABEL = "sagemaker.amazonaws.com/fault-reasons"
FAULT_DETAILS_ANNOTATION = "sagemaker.amazonaws.com/fault-details"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
# HyperPod taints unhealthy nodes with this key and the value "Unschedulable" (FACTS §2, verified in the
# dependencies chart's tolerations), whatever the finer-grained label value is.
HEALTH_TAINT = {"key": HEALTH_LABEL, "value": "Unschedulable", "effect": "NoSchedule"}
UNHEALTHY = ("Unschedulable", "UnschedulablePendingReplacement", "UnschedulablePendingReboot")
GRAVITON_FAMILIES = ("c6g", "c7g", "c8g", "m6g", "m7g", "m8g")
KUBELET_VERSION = "v1.31.7-eks-473151a"

# Node status values that mean the instance is up and its kubelet reports.
_UP = ("Running",)


def _ip_of(instance_id: str) -> str:
    digest = hashlib.sha256(instance_id.encode()).digest()
    return f"10.1.{digest[0]}.{max(digest[1], 4)}"


class NodeController(Controller):
    """Keeps one Node per Running HyperPod instance; applies health findings as label + taint.

    Driven by the AWS side's bus topics (through the plugin) and by Node edits: an operator who
    labels a node `UnschedulablePendingReplacement` gets the taint too, and the plugin tells the
    AWS side (topic ``kube.node.health_label``) so it can recover the node per NodeRecovery.
    """

    watches = (NODES,)

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._instances: dict[str, Obj] = {}  # instance id -> last HyperPod node dict
        self._health_set: dict[str, str] = {}  # node name -> health label value we wrote
        self._group_cfg: dict[str, tuple[dict[str, str], list[Obj]]] = {}  # node -> group labels/taints applied
        # instance id -> sequence of the last HyperPod event applied (kept after removal: ids never come back)
        self._applied: dict[str, int] = {}

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        if event.type == "DELETED":
            return []
        return [event.object["metadata"]["name"]]

    def resync_keys(self) -> Iterable[Hashable]:
        return []

    # -- inputs from the AWS side --------------------------------------------------------------
    def stale(self, instance_id: str, sequence: int | None) -> bool:
        """Whether a HyperPod event numbered `sequence` is older than one already applied (then drop it);
        records it as the latest otherwise. Events without a number are always applied."""
        if sequence is None:
            return False
        if sequence <= self._applied.get(instance_id, 0):
            return True
        self._applied[instance_id] = sequence
        return False

    def instance_changed(
        self, cluster_name: str, node: Obj, instance_group: Obj | None = None, sequence: int | None = None
    ) -> None:
        """A HyperPod node changed state: create/refresh its Node, or mark it NotReady when not up.

        `instance_group` is the group's specification (KubernetesConfig labels/taints, deep health
        checks) as the AWS side publishes it; an event whose `sequence` is older than the last one applied
        for the instance (delivered late by another thread) is dropped.
        """
        instance_id = node.get("InstanceId", "")
        if not instance_id or self.stale(instance_id, sequence):
            return
        node = dict(node)
        if instance_group:
            node.setdefault("KubernetesConfig", instance_group.get("KubernetesConfig") or {})
            if instance_group.get("OnStartDeepHealthChecks"):
                node.setdefault("DeepHealthCheckStatus", "Passed")
        self._instances[instance_id] = dict(node, _cluster_name=cluster_name)
        status = (node.get("InstanceStatus") or {}).get("Status", "")
        name = node_name(instance_id)
        existing = self.sim.get(NODES, "", name)
        if status in _UP or status == "DeepHealthCheckInProgress":
            if existing is None:
                self.sim.create(NODES, self._build(cluster_name, node))
                created = self.sim.get(NODES, "", name)
                if created is not None:
                    self.sim.event(created, "RegisteredNode", f"Node {name} event: Registered Node {name}")
                    self.sim.event(created, "NodeReady", f"Node {name} status is now: NodeReady")
                return
            existing = self._refresh(existing, node, status)
            self._set_ready(node_drain.uncordon(self.sim, existing) if status in _UP else existing, True, status)
        elif existing is not None:
            if status == "SystemUpdating":  # HyperPod drains a node before it patches it
                existing = node_drain.drain(self.sim, existing, status)
            self._set_ready(existing, False, status)

    def _refresh(self, existing: Obj, node: Obj, status: str) -> Obj:
        """Follow group label/taint updates and the deep health check's progress on an existing Node."""
        name = existing["metadata"]["name"]
        labels = dict(existing["metadata"].get("labels") or {})
        taints = list(existing.get("spec", {}).get("taints") or [])
        old_labels, old_taints = self._group_cfg.get(name, ({}, []))
        # An event that does not carry the group's KubernetesConfig leaves the applied one alone.
        new_labels, new_taints = _group_config(node) if "KubernetesConfig" in node else (old_labels, old_taints)
        for key in old_labels:
            if key not in new_labels:
                labels.pop(key, None)
        labels.update(new_labels)
        taints = [t for t in taints if _taint_key(t) not in {_taint_key(o) for o in old_taints}] + new_taints
        self._group_cfg[name] = (new_labels, new_taints)
        if status == "DeepHealthCheckInProgress":
            labels[DHC_LABEL] = "InProgress"
            labels[HEALTH_LABEL] = "Unschedulable"
        elif labels.get(DHC_LABEL) == "InProgress":
            labels[DHC_LABEL] = "Passed"
            if labels.get(HEALTH_LABEL) == "Unschedulable":
                labels[HEALTH_LABEL] = "Schedulable"
        self._health_set[name] = labels.get(HEALTH_LABEL, "")
        updated = {
            **existing,
            "metadata": {**existing["metadata"], "labels": labels},
            "spec": {**existing.get("spec", {}), "taints": taints},
        }
        _apply_health_taint(updated)
        if updated == existing:
            return existing
        updated["metadata"].pop("resourceVersion", None)
        result: Obj = self.sim.update(NODES, updated)
        return result

    def instance_removed(self, instance_id: str, sequence: int | None = None) -> None:
        """The instance is gone (deleted, replaced, scaled in): remove its Node (a later-delivered older
        change of the instance is then dropped)."""
        if self.stale(instance_id, sequence):
            return
        self._instances.pop(instance_id, None)
        name = node_name(instance_id)
        self._health_set.pop(name, None)
        self._group_cfg.pop(name, None)
        self.sim.delete(NODES, "", name)

    def health_finding(
        self,
        instance_id: str,
        status: str,
        *,
        deep_health_check_status: str | None = None,
        fault_type: str | None = None,
        fault_reason: str | None = None,
    ) -> None:
        """Set the node-health label (and the taint for unhealthy values) as HMA/DHC would."""
        node = self.sim.get(NODES, "", node_name(instance_id))
        if node is None:
            return
        labels = kobj.meta(node).setdefault("labels", {})
        labels[HEALTH_LABEL] = status
        if deep_health_check_status:
            labels[DHC_LABEL] = deep_health_check_status
        if fault_type:
            labels[FAULT_TYPES_LABEL] = label_value(fault_type)
        if fault_reason:
            labels[FAULT_REASONS_LABEL] = label_value(fault_reason)
        annotations = kobj.meta(node).setdefault("annotations", {})
        if status == "Schedulable":
            labels.pop(FAULT_TYPES_LABEL, None)
            labels.pop(FAULT_REASONS_LABEL, None)
        elif fault_type or fault_reason:
            # The full text goes to the fault-details annotation (a JSON list of recent faults).
            try:
                details = json.loads(annotations.get(FAULT_DETAILS_ANNOTATION, "[]"))
            except ValueError:
                details = []
            details = [
                *details,
                {"faultType": fault_type or status, "faultReason": fault_reason or "", "timestamp": self.sim.now()},
            ]
            annotations[FAULT_DETAILS_ANNOTATION] = json.dumps(details[-10:])
        self._health_set[node["metadata"]["name"]] = status
        _apply_health_taint(node)
        node["metadata"].pop("resourceVersion", None)
        self.sim.update(NODES, node)
        if status in UNHEALTHY:
            self.sim.event(node, "NodeNotSchedulable", f"Node {node['metadata']['name']} health: {status}", "Warning")

    # -- reacting to Node edits ----------------------------------------------------------------
    def reconcile(self, key: Hashable) -> None:
        name = str(key)
        node = self.sim.get(NODES, "", name)
        if node is None:
            return
        before = list(node.get("spec", {}).get("taints") or [])
        _apply_health_taint(node)
        if (node.get("spec", {}).get("taints") or []) != before:
            self.sim.update(NODES, node)
        status = (node["metadata"].get("labels") or {}).get(HEALTH_LABEL, "")
        if status != self._health_set.get(name, status) or (name not in self._health_set and status in UNHEALTHY):
            # Someone else (kubectl label, an agent) set the health label: HyperPod acts on it.
            self._health_set[name] = status
            instance_id = name.removeprefix("hyperpod-")
            bus = self.sim.bus
            if bus is not None and status in UNHEALTHY:
                # Published from the clock, outside the drain, so the AWS side's handler never runs
                # while the simulator holds its queue.
                arn = self.sim.runtime.arn

                def report() -> None:
                    bus.publish("kube.node.health_label", eks_cluster_arn=arn, instance_id=instance_id, status=status)

                self.sim.clock.schedule(0, report)

    # -- building ------------------------------------------------------------------------------
    def _build(self, cluster_name: str, node: Obj) -> Obj:
        instance_id = node["InstanceId"]
        itype = node.get("InstanceType", "")
        zone = node.get("AvailabilityZone") or (node.get("Placement") or {}).get("AvailabilityZone") or ""
        region = zone[:-1] if zone else ""
        family = itype.removeprefix("ml.").split(".")[0]
        arch = "arm64" if family in GRAVITON_FAMILIES else "amd64"
        name = node_name(instance_id)
        status = (node.get("InstanceStatus") or {}).get("Status", "")
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": arch,
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": arch,
            INSTANCE_TYPE_LABEL: itype,
            "beta.kubernetes.io/instance-type": itype,
            COMPUTE_TYPE_LABEL: "hyperpod",
            GROUP_LABEL: node.get("InstanceGroupName", ""),
            CLUSTER_LABEL: cluster_name,
            HEALTH_LABEL: "Unschedulable" if status == "DeepHealthCheckInProgress" else "Schedulable",
        }
        if zone:
            labels[ZONE_LABEL] = zone
            labels["topology.kubernetes.io/region"] = region
        dhc = node.get("DeepHealthCheckStatus")
        if status == "DeepHealthCheckInProgress":
            dhc = "InProgress"
        if dhc:
            labels[DHC_LABEL] = dhc
        group_labels, taints = _group_config(node)
        labels.update(group_labels)
        self._group_cfg[name] = (group_labels, list(taints))
        capacity = capacity_of(itype)
        now = self.sim.now()
        ip = node.get("PrivatePrimaryIp") or _ip_of(instance_id)
        obj: Obj = {
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
            },
            "spec": {"providerID": f"aws:///{zone}/{instance_id}", "taints": taints},
            "status": {
                "capacity": capacity,
                "allocatable": allocatable_of(capacity),
                "conditions": [
                    _cond("MemoryPressure", "False", "KubeletHasSufficientMemory", now),
                    _cond("DiskPressure", "False", "KubeletHasNoDiskPressure", now),
                    _cond("PIDPressure", "False", "KubeletHasSufficientPID", now),
                    _cond("Ready", "True", "KubeletReady", now, "kubelet is posting ready status"),
                ],
                "addresses": [
                    {"type": "InternalIP", "address": ip},
                    {"type": "InternalDNS", "address": f"ip-{ip.replace('.', '-')}.{region}.compute.internal"},
                    {"type": "Hostname", "address": name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "architecture": arch,
                    "operatingSystem": "linux",
                    "osImage": "Amazon Linux 2023.7.20250512",
                    "kernelVersion": "6.1.134-152.225.amzn2023.x86_64",
                    "containerRuntimeVersion": "containerd://1.7.27",
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": KUBELET_VERSION,
                    "machineID": hashlib.md5(instance_id.encode(), usedforsecurity=False).hexdigest(),
                    "systemUUID": instance_id,
                    "bootID": hashlib.md5(f"{instance_id}{now}".encode(), usedforsecurity=False).hexdigest(),
                },
            },
        }
        _apply_health_taint(obj)
        self._health_set[name] = labels[HEALTH_LABEL]
        return obj

    def _set_ready(self, node: Obj, ready: bool, instance_status: str) -> None:
        status = node.setdefault("status", {})
        now = self.sim.now()
        if ready:
            changed = kobj.set_condition(
                status, "Ready", "True", now, "KubeletReady", "kubelet is posting ready status"
            )
        else:
            changed = kobj.set_condition(
                status, "Ready", "False", now, "KubeletNotReady", f"instance is {instance_status}"
            )
        if not changed:
            return
        taints = [t for t in node.setdefault("spec", {}).get("taints") or [] if t.get("key") != _NOT_READY]
        if not ready:
            taints.append({"key": _NOT_READY, "effect": "NoSchedule", "timeAdded": now})
        node["spec"]["taints"] = taints
        self.sim.save(NODES, node)
        name = node["metadata"]["name"]
        if ready:
            self.sim.event(node, "NodeReady", f"Node {name} status is now: NodeReady")
        else:
            self.sim.event(node, "NodeNotReady", f"Node {name} status is now: NodeNotReady")


_NOT_READY = "node.kubernetes.io/not-ready"


def _group_config(node: Obj) -> tuple[dict[str, str], list[Obj]]:
    """The instance group's KubernetesConfig labels and taints as the node carries them."""
    k8s_config = node.get("KubernetesConfig") or {}
    labels = dict(k8s_config.get("CurrentLabels") or k8s_config.get("Labels") or {})
    taints = [
        {"key": t["Key"], "value": t.get("Value", ""), "effect": t["Effect"]}
        for t in (k8s_config.get("CurrentTaints") or k8s_config.get("Taints") or [])
    ]
    return labels, taints


def _taint_key(taint: Obj) -> tuple[str, str]:
    return str(taint.get("key", "")), str(taint.get("effect", ""))


def _cond(ctype: str, status: str, reason: str, now: str, message: str = "") -> Obj:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message or reason,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def _apply_health_taint(node: Obj) -> None:
    """Keep the health taint in step with the health label."""
    status = (node.get("metadata", {}).get("labels") or {}).get(HEALTH_LABEL, "")
    spec = node.setdefault("spec", {})
    taints: list[dict[str, Any]] = [t for t in spec.get("taints") or [] if t.get("key") != HEALTH_LABEL]
    if status in UNHEALTHY:
        taints.append(dict(HEALTH_TAINT))
    spec["taints"] = taints


def is_ready(node: Obj) -> bool:
    """Node condition Ready=True."""
    return kobj.is_true(node, "Ready")
