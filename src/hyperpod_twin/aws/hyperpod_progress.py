"""HyperPod progressions on the twin clock: nodes launching, booting, failing for capacity, going away."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

from .context import AwsContext, hex_id
from .faults import INSUFFICIENT_CAPACITY_MESSAGE
from .hyperpod_checks import free_private_ip, image_pull_problem, lifecycle_script_problem
from .hyperpod_model import (
    LEAVING,
    Cluster,
    InstanceGroup,
    Node,
    node_details,
    spec_for_event,
)
from .hyperpod_timings import (
    CAPACITY_RETRY,
    CLUSTER_SETUP,
    DEEP_HEALTH_CHECK,
    INSTANCE_ASSIGN,
    NODE_BOOT,
    ROLLBACK,
    SHUTDOWN,
)


class Progressions:
    """Drives clusters and nodes through their states (launch, boot, failure, roll back, removal, the cluster
    status that follows); every method runs under `ctx.locked()`."""

    def __init__(self, ctx: AwsContext) -> None:
        self.ctx = ctx
        self.clusters: dict[tuple[str, str], Cluster] = {}
        self.on_release: list[Callable[[Cluster], None]] = []
        # Node events are emitted under the state lock but published after it is released, so threads can
        # deliver them out of order: each carries a sequence number, and consumers drop older ones.
        self._sequence = itertools.count(1)

    def next_sequence(self) -> int:
        """The number of the next node or cluster event (increasing in emission order, under the state lock)."""
        return next(self._sequence)

    # lookups ----------------------------------------------------------------------------------
    def find_node(self, instance_id: str) -> tuple[Cluster, Node] | None:
        """The cluster and node that own an instance id."""
        for cluster in self.clusters.values():
            node = cluster.nodes.get(instance_id)
            if node is not None:
                return cluster, node
        return None

    # events -----------------------------------------------------------------------------------
    def publish_node(self, cluster: Cluster, node: Node) -> None:
        self.ctx.emit(
            "hyperpod.node.changed",
            cluster_name=cluster.name,
            cluster_arn=cluster.arn,
            eks_cluster_arn=cluster.eks_arn,
            node=node_details(cluster, node),
            instance_group=spec_for_event(cluster.groups.get(node.group)),
            sequence=self.next_sequence(),
        )

    def _set(self, cluster: Cluster, node: Node, status: str, message: str = "") -> None:
        node.status = status
        node.message = message
        node.version += 1
        self.publish_node(cluster, node)

    def _at(self, delay: float, cluster: Cluster, node: Node, fn: Callable[[], None]) -> None:
        """Schedule `fn` unless the node changed (or the cluster went away) in the meantime."""
        version, cluster_version = node.version, cluster.version

        def run() -> None:
            if self.clusters.get((cluster.region, cluster.name)) is not cluster:
                return
            if cluster.nodes.get(node.instance_id) is not node or node.version != version:
                return
            if cluster.version != cluster_version and cluster.status == "Deleting":
                return
            fn()

        self.ctx.later(delay, run)

    # launching --------------------------------------------------------------------------------
    def group_subnets(self, cluster: Cluster, group: InstanceGroup) -> list[str]:
        """Subnets a group's nodes go into (its OverrideVpcConfig, else the cluster's)."""
        override = group.spec.get("OverrideVpcConfig") or {}
        subnets = override.get("Subnets") or cluster.vpc_config.get("Subnets") or []
        return [str(s) for s in subnets]

    def launch(self, cluster: Cluster, group: InstanceGroup, count: int) -> int:
        """Start `count` nodes; returns how many could not be placed for lack of capacity.

        Each node goes to the group's least-used subnet that has capacity (so a multi-AZ group
        falls back to another AZ) and, for a flexible group, the first of its types available there.
        """
        subnets = self.group_subnets(cluster, group)
        types = self._instance_types(group)
        short = 0
        for _ in range(count):
            per_subnet = {s: 0 for s in subnets}
            for n in cluster.nodes.values():
                if n.group == group.name and n.subnet_id in per_subnet and n.status not in LEAVING:
                    per_subnet[n.subnet_id] += 1
            placed = False
            for subnet in sorted(subnets, key=lambda s: (per_subnet[s], subnets.index(s))):
                az, az_id, _vpc = self.ctx.subnet_az(cluster.region, subnet)
                if group.spec.get("TrainingPlanArn"):
                    # Reserved capacity of a training plan is not subject to on-demand shortages.
                    chosen: str | None = types[0]
                else:
                    chosen = next((t for t in types if not self.ctx.faults.capacity_short(t, az, az_id)), None)
                if chosen is not None:
                    self._new_node(cluster, group, chosen, subnet, az, az_id)
                    placed = True
                    break
            if not placed:
                short += 1
        if short:
            self._capacity_shortage(cluster, group, short)
        return short

    def _instance_types(self, group: InstanceGroup) -> list[str]:
        if "InstanceType" in group.spec:
            return [str(group.spec["InstanceType"])]
        return [str(t) for t in group.spec.get("InstanceRequirements", {}).get("InstanceTypes", [])]

    def _new_node(
        self, cluster: Cluster, group: InstanceGroup, instance_type: str, subnet: str, az: str, az_id: str
    ) -> Node:
        node = Node(
            instance_id="i-" + hex_id(17),
            logical_id=str(uuid.uuid4()),
            group=group.name,
            instance_type=instance_type,
            availability_zone=az,
            availability_zone_id=az_id,
            subnet_id=subnet,
            private_ip=self._private_ip(cluster.region, subnet),
            launch_time=self.ctx.clock.wall(),
            threads_per_core=int(group.spec.get("ThreadsPerCore", 1)),
            capacity_type="Spot" if "Spot" in (group.spec.get("CapacityRequirements") or {}) else "OnDemand",
            image_release=group.image_release,
        )
        if cluster.continuous:
            node.instance_assigned_at = node.launch_time + INSTANCE_ASSIGN
        cluster.nodes[node.instance_id] = node
        cluster.add_event(
            self.ctx.clock.wall(),
            f"Launching instance {node.instance_id} ({instance_type}) in {az}",
            resource_type="Instance",
            group=group.name,
            instance_id=node.instance_id,
        )
        self.publish_node(cluster, node)
        self._boot(cluster, node)
        return node

    def _private_ip(self, region: str, subnet_id: str) -> str:
        used = {n.private_ip for c in self.clusters.values() for n in c.nodes.values()}
        return free_private_ip(self.ctx, region, subnet_id, used)

    def _boot(self, cluster: Cluster, node: Node, delay: float = NODE_BOOT) -> None:
        group = cluster.groups.get(node.group)
        checks = (group.spec.get("OnStartDeepHealthChecks") if group else None) or []

        def booted() -> None:
            problem = None
            if group is not None:
                problem = self.lifecycle_script_problem(group) or image_pull_problem(self.ctx, cluster.region, group)
            if problem is not None:
                self._node_failed(cluster, node, problem)
                return
            lcc = (group.spec.get("LifeCycleConfig") if group else None) or {}
            if lcc.get("SourceS3Uri"):  # the group's OnCreate script as of this launch
                cluster.add_event(self.ctx.clock.wall(), f"Lifecycle script {str(lcc['SourceS3Uri']).rstrip('/')}/"
                                  f"{lcc.get('OnCreate')} ran on {node.instance_id}", resource_type="Instance",
                                  group=node.group, instance_id=node.instance_id)
            if checks:
                self._set(cluster, node, "DeepHealthCheckInProgress", "Running deep health checks")
                self._at(DEEP_HEALTH_CHECK, cluster, node, lambda: self._checked(cluster, node, checks))
            else:
                self._running(cluster, node)

        self._at(delay, cluster, node, booted)

    def _checked(self, cluster: Cluster, node: Node, checks: list[str]) -> None:
        """Deep health checks end: Running, or the node fails them (a scripted deep_health_check_failure)."""
        fault = self.ctx.faults.lifecycle("deep_health_check_failure", instance_type=node.instance_type)
        if fault is None:
            self._running(cluster, node)
            return
        check = checks[0] if checks else "InstanceStress"
        self._node_failed(cluster, node, fault.message or f"Deep health check {check} failed on {node.instance_id}")

    def _running(self, cluster: Cluster, node: Node) -> None:
        self._set(cluster, node, "Running")
        self.reconcile(cluster)

    # capacity ---------------------------------------------------------------------------------
    def _capacity_shortage(self, cluster: Cluster, group: InstanceGroup, short: int) -> None:
        now = self.ctx.clock.wall()
        msg = INSUFFICIENT_CAPACITY_MESSAGE
        group.failure = msg
        cluster.failure_message = msg
        cluster.add_event(
            now,
            f"InsufficientCapacity: {short} instance(s) for instance group {group.name} could not be launched. {msg}",
            level="Error",
            resource_type="InstanceGroup",
            group=group.name,
        )
        self._group_failed(cluster, group)

    def _group_failed(self, cluster: Cluster, group: InstanceGroup) -> None:
        """A group cannot reach its target: Continuous retries later, classic mode rolls back."""
        if cluster.continuous:
            # Continuous provisioning keeps retrying until the target is reached.
            version = cluster.version

            def retry() -> None:
                if self.clusters.get((cluster.region, cluster.name)) is not cluster:
                    return
                if cluster.version != version or cluster.groups.get(group.name) is not group:
                    return
                missing = group.target - cluster.live_count(group.name)
                if missing > 0:
                    group.failure = None
                    if self.launch(cluster, group, missing) == 0:
                        cluster.failure_message = None
                self.reconcile(cluster)

            self.ctx.later(CAPACITY_RETRY, retry)
            return
        if group.min_count and cluster.live_count(group.name) >= group.min_count:
            return  # MinInstanceCount can be met: no roll-back for the instances that could not launch
        if cluster.status == "Creating":
            self._roll_back_creation(cluster)
        elif cluster.status not in ("RollingBack", "Failed", "Deleting"):
            self._roll_back_group(cluster, group)

    def lifecycle_script_problem(self, group: InstanceGroup) -> str | None:
        """Why the group's OnCreate script cannot be fetched from S3 (None when it can, or none is set)."""
        return lifecycle_script_problem(self.ctx, group)

    def _node_failed(self, cluster: Cluster, node: Node, message: str) -> None:
        group = cluster.groups.get(node.group)
        self._set(cluster, node, "Failure", message)
        cluster.failure_message = message
        cluster.add_event(
            self.ctx.clock.wall(),
            f"Instance {node.instance_id} failed provisioning: {message}",
            level="Error",
            resource_type="Instance",
            group=node.group,
            instance_id=node.instance_id,
        )
        if cluster.continuous or cluster.status not in ("Creating",):
            self.remove_node(cluster, node, message)
        if group is not None and group.failure is None:
            group.failure = message
            self._group_failed(cluster, group)

    def _roll_back_creation(self, cluster: Cluster) -> None:
        cluster.status = "RollingBack"
        cluster.version += 1
        for node in list(cluster.nodes.values()):
            self.remove_node(cluster, node, "Cluster creation is rolling back")
        for group in cluster.groups.values():
            group.status = "Failed"

        def failed() -> None:
            if self.clusters.get((cluster.region, cluster.name)) is cluster:
                cluster.status = "Failed"
                cluster.add_event(self.ctx.clock.wall(), "Cluster creation failed", level="Error")

        self.ctx.later(ROLLBACK, failed)

    def _roll_back_group(self, cluster: Cluster, group: InstanceGroup) -> None:
        """A classic-mode update that cannot reach its target: the cluster is RollingBack while the group
        returns to its previous count, then InService again (ROLLBACK twin seconds)."""
        group.target = group.previous_target
        excess = cluster.live_count(group.name) - group.target
        if excess > 0:
            for node in self.pick_for_removal(cluster, group.name, excess):
                self.remove_node(cluster, node, "Scaling rolled back")
        cluster.status = "RollingBack"
        cluster.add_event(self.ctx.clock.wall(), f"Update of instance group {group.name} failed; rolling back to "
                          f"{group.target} instance(s)", level="Error", resource_type="InstanceGroup", group=group.name)

        def rolled_back() -> None:
            if self.clusters.get((cluster.region, cluster.name)) is not cluster or cluster.status != "RollingBack":
                return
            group.status = "InService"
            group.scaling = False
            cluster.status = "Updating"
            self.reconcile(cluster)

        self.ctx.later(ROLLBACK, rolled_back)

    # removal ----------------------------------------------------------------------------------
    def pick_for_removal(self, cluster: Cluster, group: str, count: int) -> list[Node]:
        """Nodes to take away when scaling in: not-yet-running first, then the newest."""
        candidates = [n for n in cluster.group_nodes(group) if n.status not in LEAVING]
        candidates.sort(key=lambda n: (n.status == "Running", -n.launch_time))
        return candidates[:count]

    def remove_node(self, cluster: Cluster, node: Node, message: str = "Terminating") -> None:
        """ShuttingDown now, gone after SHUTDOWN twin seconds."""
        self._set(cluster, node, "ShuttingDown", message)

        def gone() -> None:
            self._drop(cluster, node)
            self.reconcile(cluster)

        self._at(SHUTDOWN, cluster, node, gone)

    def _drop(self, cluster: Cluster, node: Node) -> None:
        """The instance is gone: forget it and publish `hyperpod.node.removed`."""
        cluster.nodes.pop(node.instance_id, None)
        self.ctx.emit(
            "hyperpod.node.removed",
            **self.payload(cluster),
            instance_id=node.instance_id,
            sequence=self.next_sequence(),
        )

    # convergence ------------------------------------------------------------------------------
    def reconcile(self, cluster: Cluster) -> None:
        """Recompute group and cluster statuses from the nodes."""
        if cluster.status in ("Deleting", "Failed", "RollingBack"):
            return
        settled = True
        for group in cluster.groups.values():
            if group.status == "Deleting":
                settled = False
                continue
            nodes = [n for n in cluster.group_nodes(group.name) if n.status not in LEAVING]
            pending = any(n.status not in ("Running",) for n in nodes)
            current = cluster.current_count(group.name)
            running = sum(1 for n in nodes if n.status == "Running")
            if current >= group.target and not pending:
                group.scaling = False
                if group.status in ("Creating", "Updating", "Degraded"):
                    group.status = "InService"
            elif group.min_count and group.status == "Creating" and running >= group.min_count:
                # MinInstanceCount: the group is InService once the minimum runs; the rest keep launching.
                group.status = "InService"
            elif group.min_count and group.status == "InService" and cluster.status == "Creating":
                continue  # reached its minimum: the cluster does not wait for the rest
            else:
                waiting_for_capacity = group.failure is not None and not pending
                if not (cluster.continuous and waiting_for_capacity):
                    settled = False
                if group.status == "SystemUpdating":
                    settled = False
        # FailureMessage stays until a later operation succeeds (see the API and capacity retry).
        if cluster.status in ("Creating", "Updating") and settled and cluster.setup_done:
            if cluster.status == "Creating":
                cluster.add_event(self.ctx.clock.wall(), "Cluster is InService")
            cluster.status = "InService"

    def creation_started(self, cluster: Cluster) -> None:
        """Mark the cluster in setup until CLUSTER_SETUP twin seconds have passed."""
        cluster.setup_done = False

        def setup() -> None:
            if self.clusters.get((cluster.region, cluster.name)) is cluster:
                cluster.setup_done = True
                self.reconcile(cluster)

        self.ctx.later(CLUSTER_SETUP, setup)

    def payload(self, cluster: Cluster) -> dict[str, Any]:
        """Keys shared by every hyperpod.* event."""
        return {"cluster_name": cluster.name, "cluster_arn": cluster.arn, "eks_cluster_arn": cluster.eks_arn}
