"""HyperPod-managed Karpenter: pending pods scale an instance group up; empty nodes are consolidated away."""

from __future__ import annotations

import copy
import functools
import logging
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.certmanager import parse_duration
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.karpenter_calls import SCALING_ACTIONS, as_cluster_role, group_spec, update_group
from hyperpod_twin.sim.karpenter_fit import POOL_LABEL, admits, room_under_limits, virtual_node
from hyperpod_twin.sim.kinds import NODES, PODS, TypeKey
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.nodes import GROUP_LABEL, INSTANCE_TYPE_LABEL
from hyperpod_twin.sim.scheduler import needs_scheduling

log = logging.getLogger(__name__)

NODEPOOLS: TypeKey = ("karpenter.sh", "nodepools")
NODECLASSES: TypeKey = ("karpenter.sagemaker.amazonaws.com", "hyperpodnodeclasses")
NODECLAIMS: TypeKey = ("karpenter.sh", "nodeclaims")
ALL = "all"
class KarpenterController(Controller):
    """Acts for NodePools whose nodeClassRef names a HyperpodNodeClass.

    Scale-up: unschedulable pods that a node of one of the class's instance groups would admit
    (requirements, selectors, affinity, taints, resources of an empty node) are packed onto new
    nodes; the group's count goes up through SageMaker UpdateCluster. Consolidation: a node of a
    managed group with no pods but DaemonSet pods for `consolidateAfter` is removed with
    BatchDeleteClusterNodes. AWS calls run on a worker thread (the AWS side publishes node events
    synchronously, which the simulator must be free to handle). The HyperPod cluster's groups come
    from the AWS side's `hyperpod.cluster.changed` events (kept by the plugin in sim.extra).
    """

    watches = (NODEPOOLS, NODECLASSES, PODS, NODES)

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._executor: ThreadPoolExecutor | None = None
        self._requested: dict[str, int] = {}  # group → count we asked for, until DescribeCluster shows it
        self._idle_since: dict[str, float] = {}
        self._deleting: set[str] = set()
        self._timer = False

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        if event.rtype.key == PODS and event.type != "DELETED":
            pod = event.object
            if not (needs_scheduling(pod) or kobj.pod_is_terminal(pod)):
                return []
        return [ALL] if self.sim.list(NODEPOOLS) or event.rtype.key == NODEPOOLS else []

    def resync_keys(self) -> Iterable[Hashable]:
        return [ALL]

    def stop(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    # -- reconcile -----------------------------------------------------------------------------------
    def reconcile(self, key: Hashable) -> None:
        pools = [p for p in self.sim.list(NODEPOOLS) if self._class_name(p)]
        if not pools:
            return
        cluster: Obj = self.sim.extra.get("hyperpod_cluster") or {}
        groups = {g["InstanceGroupName"]: g for g in cluster.get("InstanceGroups") or []}
        for name, count in list(self._requested.items()):
            if int((groups.get(name) or {}).get("TargetCount", -1)) >= count:
                del self._requested[name]
        managed = self._update_statuses(pools, groups)
        self._label_nodes(managed)
        if cluster.get("ClusterName"):
            self._scale_up(pools, groups, str(cluster["ClusterName"]), managed)
            self._consolidate(managed, str(cluster["ClusterName"]))
        if not self._timer:
            self._timer = True

            def tick() -> None:
                self._timer = False
                self.sim.enqueue(self, ALL)

            self.sim.after(self.sim.config.karpenter_interval_seconds, tick)

    def _class_name(self, pool: Obj) -> str:
        ref = (((pool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
        if ref.get("kind", "HyperpodNodeClass") != "HyperpodNodeClass":
            return ""
        return str(ref.get("name", ""))

    def _update_statuses(self, pools: list[Obj], groups: dict[str, Obj]) -> dict[str, Obj]:
        """Status of node classes and pools; returns instance group → NodePool for managed groups."""
        now = self.sim.now()
        managed: dict[str, Obj] = {}
        for pool in sorted(pools, key=lambda p: -int((p.get("spec") or {}).get("weight", 0) or 0)):
            nodeclass = self.sim.get(NODECLASSES, "", self._class_name(pool))
            status = copy.deepcopy(pool.get("status") or {})
            kobj.set_condition(status, "ValidationSucceeded", "True", now, "ValidationSucceeded")
            ready = nodeclass is not None and kobj.is_true(nodeclass, "Ready")
            if nodeclass is not None:
                names = list((nodeclass.get("spec") or {}).get("instanceGroups") or [])
                self._nodeclass_status(nodeclass, names, groups)
                ready = all(n in groups for n in names) and bool(names)
                for name in names:
                    if name in groups:
                        managed.setdefault(name, pool)
            kobj.set_condition(
                status,
                "NodeClassReady",
                "True" if ready else "False",
                now,
                "NodeClassReady" if ready else "NodeClassNotReady",
            )
            kobj.set_condition(
                status, "Ready", "True" if ready else "False", now, "Ready" if ready else "NodeClassNotReady"
            )
            nodes = [
                n
                for n in self.sim.list(NODES)
                if (n["metadata"].get("labels") or {}).get(POOL_LABEL) == pool["metadata"]["name"]
            ]
            resources: Counter[str] = Counter()
            for node in nodes:
                resources.update(
                    {k: kobj.quantity(v) for k, v in (node.get("status", {}).get("capacity") or {}).items()}
                )
            status["resources"] = {k: kobj.format_quantity(k, v) for k, v in sorted(resources.items())}
            status["nodes"] = len(nodes)
            self.sim.patch_status(NODEPOOLS, pool, status)
        return managed

    def _nodeclass_status(self, nodeclass: Obj, names: list[str], groups: dict[str, Obj]) -> None:
        now = self.sim.now()
        status = copy.deepcopy(nodeclass.get("status") or {})
        found = [n for n in names if n in groups]
        status["instanceGroups"] = [
            {
                "name": n,
                "instanceTypes": [groups[n].get("InstanceType", "")],
                "capacities": copy.deepcopy(groups[n].get("CapacityRequirements") or {"OnDemand": {}}),
                "subnets": [{"id": s} for s in ((groups[n].get("OverrideVpcConfig") or {}).get("Subnets") or [])],
            }
            for n in found
        ]
        ok = bool(names) and len(found) == len(names)
        message = "" if ok else f"instance groups not found: {', '.join(n for n in names if n not in groups)}"
        kobj.set_condition(
            status,
            "InstanceGroupReady",
            "True" if ok else "False",
            now,
            "InstanceGroupReady" if ok else "InstanceGroupNotFound",
            message,
        )
        kobj.set_condition(status, "SubnetsReady", "True", now, "SubnetsReady")
        kobj.set_condition(
            status, "Ready", "True" if ok else "False", now, "Ready" if ok else "InstanceGroupNotFound", message
        )
        self.sim.patch_status(NODECLASSES, nodeclass, status)

    def _label_nodes(self, managed: dict[str, Obj]) -> None:
        nodes = self.sim.list(NODES)
        self._sync_claims(managed, nodes)
        for node in nodes:
            labels = node["metadata"].get("labels") or {}
            pool = managed.get(labels.get(GROUP_LABEL, ""))
            if pool is None or labels.get(POOL_LABEL) == pool["metadata"]["name"]:
                continue
            template = (pool.get("spec") or {}).get("template") or {}
            labels.update((template.get("metadata") or {}).get("labels") or {})
            labels.update(
                {
                    POOL_LABEL: pool["metadata"]["name"],
                    "karpenter.sh/registered": "true",
                    "karpenter.sh/initialized": "true",
                    "karpenter.sh/capacity-type": "on-demand",
                }
            )
            node["metadata"]["labels"] = labels
            taints = list(node.get("spec", {}).get("taints") or [])
            for taint in (template.get("spec") or {}).get("taints") or []:
                if taint not in taints:
                    taints.append(dict(taint))
            node.setdefault("spec", {})["taints"] = taints
            node["metadata"].pop("resourceVersion", None)
            self.sim.update(NODES, node)

    def _sync_claims(self, managed: dict[str, Obj], nodes: list[Obj]) -> None:
        """One NodeClaim per node of a managed group (named after the node), removed with the node."""
        wanted = {}
        for node in nodes:
            pool = managed.get((node["metadata"].get("labels") or {}).get(GROUP_LABEL, ""))
            if pool is not None:
                wanted[node["metadata"]["name"]] = (node, pool)
        for claim in self.sim.list(NODECLAIMS):
            if claim["metadata"]["name"] not in wanted:
                self.sim.delete(NODECLAIMS, "", claim["metadata"]["name"])
        now = self.sim.now()
        for name, (node, pool) in wanted.items():
            if self.sim.get(NODECLAIMS, "", name) is not None:
                continue
            template = (pool.get("spec") or {}).get("template") or {}
            created = self.sim.create(
                NODECLAIMS,
                {
                    "metadata": {
                        "name": name,
                        "labels": {
                            POOL_LABEL: pool["metadata"]["name"],
                            INSTANCE_TYPE_LABEL: node["metadata"]["labels"].get(INSTANCE_TYPE_LABEL, ""),
                        },
                        "ownerReferences": [kobj.owner_ref(pool, controller=False)],
                    },
                    "spec": {
                        "nodeClassRef": copy.deepcopy((template.get("spec") or {}).get("nodeClassRef") or {}),
                        "requirements": copy.deepcopy((template.get("spec") or {}).get("requirements") or []),
                        "taints": copy.deepcopy((template.get("spec") or {}).get("taints") or []),
                    },
                },
            )
            if created is None:
                continue
            status: Obj = {
                "nodeName": name,
                "providerID": node.get("spec", {}).get("providerID", ""),
                "capacity": dict(node.get("status", {}).get("capacity") or {}),
                "allocatable": dict(node.get("status", {}).get("allocatable") or {}),
            }
            for ctype in ("Launched", "Registered", "Initialized", "Ready"):
                kobj.set_condition(status, ctype, "True", now, ctype)
            self.sim.patch_status(NODECLAIMS, created, status)

    # -- scale up ------------------------------------------------------------------------------------
    def _scale_up(self, pools: list[Obj], groups: dict[str, Obj], cluster_name: str, managed: dict[str, Obj]) -> None:
        pending = [
            p
            for p in self.sim.list(PODS)
            if needs_scheduling(p) and (kobj.condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable"
        ]
        if not pending:
            return
        # Capacity the group already has or has asked for absorbs pods first (as Karpenter simulates
        # scheduling against existing nodes and in-flight NodeClaims), so a node that is up but not yet
        # used, or still launching, never triggers a second scale-up.
        bins: dict[str, list[tuple[Counter[str], bool]]] = {}
        for name, details in groups.items():
            nodes = [n for n in self.sim.list(NODES) if (n["metadata"].get("labels") or {}).get(GROUP_LABEL) == name]
            target = max(int(details.get("TargetCount", 0) or 0), self._requested.get(name, 0))
            group_bins = [(self._used_on(n["metadata"]["name"]), False) for n in nodes]
            group_bins += [(Counter(), False) for _ in range(max(target - len(nodes), 0))]
            bins[name] = group_bins
        for pod in sorted(pending, key=lambda p: p["metadata"].get("creationTimestamp", "")):
            self._place(pod, pools, groups, bins)
        for name, group_bins in bins.items():
            extra = sum(1 for _, new in group_bins if new)
            pool = managed.get(name)
            if extra and pool is not None:
                extra = min(extra, room_under_limits(pool, groups, managed, self._requested))
            if extra <= 0:
                continue
            details = groups[name]
            count = max(int(details.get("TargetCount", 0) or 0), self._requested.get(name, 0)) + extra
            self._requested[name] = count
            self._submit(
                "update_cluster",
                cluster_name,
                name,
                functools.partial(update_group, cluster_name=cluster_name, spec=group_spec(details, count)),
            )
            for pod in pending:
                self.sim.event(
                    pod,
                    "Nominated",
                    f"Pod should schedule on: new node of instance group {name} (scaling to {count})",
                    source="karpenter",
                )

    def _used_on(self, node_name: str) -> Counter[str]:
        used: Counter[str] = Counter()
        for pod in self.sim.list(PODS):
            if pod.get("spec", {}).get("nodeName") == node_name and kobj.pod_is_active(pod):
                used.update(kobj.pod_requests(pod))
        return used

    def _place(
        self, pod: Obj, pools: list[Obj], groups: dict[str, Obj], bins: dict[str, list[tuple[Counter[str], bool]]]
    ) -> None:
        """First fit of `pod` into a managed group's existing, in-flight or (new) node."""
        requests = kobj.pod_requests(pod)
        for pool in sorted(pools, key=lambda p: -int((p.get("spec") or {}).get("weight", 0) or 0)):
            nodeclass = self.sim.get(NODECLASSES, "", self._class_name(pool))
            for name in list(((nodeclass or {}).get("spec") or {}).get("instanceGroups") or []):
                details = groups.get(name)
                if details is None:
                    continue
                labels, taints, alloc = virtual_node(pool, details)
                if not admits(pod, pool, labels, taints, requests, alloc):
                    continue
                for used, _ in bins[name]:
                    if all(used[r] + v <= kobj.quantity(alloc.get(r, 0)) for r, v in requests.items()):
                        used.update(requests)
                        return
                bins[name].append((Counter(requests), True))
                return

    # -- consolidation -------------------------------------------------------------------------------
    def _consolidate(self, managed: dict[str, Obj], cluster_name: str) -> None:
        now = self.sim.clock.now()
        pods = self.sim.list(PODS)
        busy = {
            p["spec"].get("nodeName")
            for p in pods
            if p.get("spec", {}).get("nodeName")
            and kobj.pod_is_active(p)
            and (kobj.controller_of(p) or {}).get("kind") != "DaemonSet"
        }
        live = set()
        doomed: list[str] = []
        for node in self.sim.list(NODES):
            name = node["metadata"]["name"]
            live.add(name)
            pool = managed.get((node["metadata"].get("labels") or {}).get(GROUP_LABEL, ""))
            if pool is None or name in busy or name in self._deleting:
                self._idle_since.pop(name, None)
                continue
            disruption = (pool.get("spec") or {}).get("disruption") or {}
            after = str(disruption.get("consolidateAfter", "0s"))
            if after == "Never":
                continue
            since = self._idle_since.setdefault(name, now)
            if now - since >= parse_duration(after, 0.0):
                doomed.append(name)
        for name in list(self._idle_since):
            if name not in live:
                self._idle_since.pop(name, None)
        self._deleting &= live
        if not doomed:
            return
        self._deleting.update(doomed)
        ids = [n.removeprefix("hyperpod-") for n in doomed]
        for doomed_name in doomed:
            doomed_node = self.sim.get(NODES, "", doomed_name)
            if doomed_node is not None:
                self.sim.event(doomed_node, "DisruptionTerminating", "Disrupting Node: Empty", source="karpenter")
        self._submit(
            "batch_delete_cluster_nodes",
            cluster_name,
            ",".join(ids),
            lambda c: c.batch_delete_cluster_nodes(ClusterName=cluster_name, NodeIds=ids),
        )

    # -- AWS calls -----------------------------------------------------------------------------------
    def _submit(self, what: str, cluster_name: str, target: str, call: Callable[[Any], Any]) -> None:
        factory = self.sim.extra.get("boto3_client")
        if factory is None:
            log.warning("karpenter: no SageMaker client; cannot %s for %s", what, target)
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="twin-karpenter")

        known: Obj = self.sim.extra.get("hyperpod_cluster") or {}
        role, arn = known.get("ClusterRole"), known.get("ClusterArn")

        def run() -> None:
            try:
                action = SCALING_ACTIONS.get(what)
                if action and role and arn:
                    as_cluster_role(factory, str(role), str(arn), action)
                call(factory("sagemaker"))
                log.info("karpenter: %s %s on %s", what, target, cluster_name)
            except Exception as exc:
                log.warning("karpenter: %s %s failed: %s", what, target, exc)
                self.sim.run(lambda: self._forget(target))

        self._executor.submit(run)

    def _forget(self, target: str) -> None:
        self._requested.pop(target, None)
        for instance_id in target.split(","):
            self._deleting.discard(f"hyperpod-{instance_id}")
        self.sim.enqueue(self, ALL)
