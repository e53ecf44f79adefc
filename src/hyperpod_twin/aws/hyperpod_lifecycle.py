"""HyperPod lifecycle operations on the twin clock: reboot, replace, delete, scale, software update, repair."""

from __future__ import annotations

from typing import Any

from .hyperpod_model import (
    LATEST_IMAGE_RELEASE,
    LEAVING,
    Cluster,
    InstanceGroup,
    Node,
)
from .hyperpod_progress import Progressions
from .hyperpod_rolling import GroupRollout, Rollout
from .hyperpod_timings import AUTO_REPAIR_DELAY, CLUSTER_DELETE, DEEP_HEALTH_CHECK, REBOOT, SHUTDOWN, SOFTWARE_UPDATE


class Lifecycle(Progressions):
    """The node and cluster operations the HyperPod APIs ask for; every method runs under `ctx.locked()`."""

    def reboot(self, cluster: Cluster, node: Node) -> None:
        """Soft reboot: Pending ("Rebooting") then Running again."""
        self._set(cluster, node, "Pending", "Rebooting instance")
        cluster.add_event(
            self.ctx.clock.wall(),
            f"Rebooting {node.instance_id}",
            resource_type="Instance",
            group=node.group,
            instance_id=node.instance_id,
        )
        self._at(REBOOT, cluster, node, lambda: self._running(cluster, node))

    def replace(self, cluster: Cluster, node: Node) -> Node | None:
        """New hardware: the old instance is terminated, a new instance id launches in the same subnet."""
        group = cluster.groups.get(node.group)
        if group is None:
            return None
        self.remove_node(cluster, node, "Replacing instance")
        fresh = self._new_node(
            cluster, group, node.instance_type, node.subnet_id, node.availability_zone, node.availability_zone_id
        )
        cluster.add_event(
            self.ctx.clock.wall(),
            f"Replacing {node.instance_id} with {fresh.instance_id}",
            resource_type="Instance",
            group=node.group,
            instance_id=node.instance_id,
        )
        return fresh

    def delete_cluster(self, cluster: Cluster) -> None:
        """Deleting: every node shuts down, then the cluster disappears."""
        cluster.status = "Deleting"
        cluster.version += 1
        for group in cluster.groups.values():
            group.status = "Deleting"
        for node in list(cluster.nodes.values()):
            if node.status not in LEAVING:
                self._set(cluster, node, "ShuttingDown", "Cluster is being deleted")

        def gone() -> None:
            if self.clusters.get((cluster.region, cluster.name)) is not cluster:
                return
            for node in list(cluster.nodes.values()):
                self._drop(cluster, node)
            del self.clusters[(cluster.region, cluster.name)]
            for fn in self.on_release:
                fn(cluster)
            self.ctx.emit(
                "hyperpod.cluster.deleted",
                cluster_name=cluster.name,
                cluster_arn=cluster.arn,
                eks_cluster_arn=cluster.eks_arn,
            )

        self.ctx.later(CLUSTER_DELETE, gone)

    # groups -----------------------------------------------------------------------------------
    def scale(self, cluster: Cluster, group: InstanceGroup, target: int) -> None:
        """Move a group to `target` nodes (launch or terminate the difference)."""
        group.previous_target = group.target
        group.target = target
        live = cluster.live_count(group.name)
        if target > live:
            group.scaling = True
            if group.status not in ("Creating",):
                group.status = "Updating"
            self.launch(cluster, group, target - live)
        elif target < live:
            for node in self.pick_for_removal(cluster, group.name, live - target):
                self.remove_node(cluster, node, "Scaling in")
        self.reconcile(cluster)

    def delete_group(self, cluster: Cluster, group: InstanceGroup) -> None:
        """InstanceGroupsToDelete: nodes shut down, then the group is gone."""
        group.status = "Deleting"
        group.target = 0
        nodes = [n for n in cluster.group_nodes(group.name) if n.status not in LEAVING]
        for node in nodes:
            self.remove_node(cluster, node, "Instance group is being deleted")

        def gone() -> None:
            if cluster.groups.get(group.name) is group and cluster.live_count(group.name) == 0:
                del cluster.groups[group.name]
                self.reconcile(cluster)

        self.ctx.later(SHUTDOWN + 1, gone)

    def software_update(
        self,
        cluster: Cluster,
        groups: list[InstanceGroup],
        targets: dict[str, str] | None = None,
        deployment: dict[str, Any] | None = None,
    ) -> None:
        """UpdateClusterSoftware: with a DeploymentConfig, a rolling update (hyperpod_rolling); without one,
        every node of the groups goes SystemUpdating at once, then runs its target release (default latest)."""
        targets = targets or {}
        if deployment is not None:
            parts = [GroupRollout(g, targets.get(g.name, LATEST_IMAGE_RELEASE), g.software_update_status)
                     for g in groups]
            Rollout(self, cluster, parts, deployment).start()
            return
        cluster.status = "SystemUpdating"
        for group in groups:
            group.software_update_status = "InProgress"
            group.desired_image_release = targets.get(group.name, LATEST_IMAGE_RELEASE)
            group.status = "SystemUpdating"
            for node in cluster.group_nodes(group.name):
                if node.status == "Running":
                    self._set(cluster, node, "SystemUpdating", "Applying software update")
        version = cluster.version

        def done() -> None:
            if self.clusters.get((cluster.region, cluster.name)) is not cluster or cluster.version != version:
                return
            now = self.ctx.clock.wall()
            for group in groups:
                group.image_release = group.desired_image_release
                group.software_update_status = "Succeeded"
                group.status = "InService"
                for node in cluster.group_nodes(group.name):
                    node.image_release = group.desired_image_release
                    node.last_software_update = now
                    if node.status == "SystemUpdating":
                        self._set(cluster, node, "Running")
            cluster.status = "Updating"
            cluster.add_event(now, "Cluster software update completed")
            self.reconcile(cluster)

        self.ctx.later(SOFTWARE_UPDATE, done)

    def node_health(self, cluster: Cluster, node: Node, status: str, reason: str, **extra: str) -> None:
        """A health finding (HMA / deep health check / operator label); NodeRecovery=Automatic acts on it.

        `extra` (fault_type, deep_health_check_status) is passed on in the event when given.
        """
        node.health_status = status
        self.ctx.emit(
            "hyperpod.node.health",
            cluster_name=cluster.name,
            cluster_arn=cluster.arn,
            eks_cluster_arn=cluster.eks_arn,
            instance_id=node.instance_id,
            health_status=status,
            reason=reason,
            **extra,
        )
        cluster.add_event(
            self.ctx.clock.wall(),
            f"Node {node.instance_id} health: {status} ({reason})",
            level="Warn" if status != "Schedulable" else "Info",
            resource_type="Instance",
            group=node.group,
            instance_id=node.instance_id,
        )
        self.recover(cluster, node, status)

    def recover(self, cluster: Cluster, node: Node, status: str) -> None:
        """NodeRecovery=Automatic: replace or reboot a node found unhealthy, after AUTO_REPAIR_DELAY."""
        node.health_status = status
        if cluster.node_recovery != "Automatic":
            return
        if status == "UnschedulablePendingReplacement":
            self._at(AUTO_REPAIR_DELAY, cluster, node, lambda: self._auto(cluster, node, replace=True))
        elif status == "UnschedulablePendingReboot":
            self._at(AUTO_REPAIR_DELAY, cluster, node, lambda: self._auto(cluster, node, replace=False))

    def deep_health_check(self, cluster: Cluster, node: Node) -> None:
        """StartClusterHealthCheck on one node: DeepHealthCheckInProgress, then Running."""
        self._set(cluster, node, "DeepHealthCheckInProgress", "Running deep health checks")
        self._at(DEEP_HEALTH_CHECK, cluster, node, lambda: self._running(cluster, node))

    def _auto(self, cluster: Cluster, node: Node, *, replace: bool) -> None:
        if replace:
            self.replace(cluster, node)
        else:
            node.health_status = "Schedulable"
            self.reboot(cluster, node)
