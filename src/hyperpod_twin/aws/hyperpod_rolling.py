"""UpdateClusterSoftware with a DeploymentConfig on the twin clock: batches of nodes, the wait between them,
the CloudWatch alarms checked while a batch updates (every ALARM_CHECK twin seconds, as HyperPod monitors them
during the deployment), when it ends and when the wait ends, and an alarm-triggered roll back of the nodes updated
or updating.

The group's SoftwareUpdateStatus follows the API's documented sequences (Pending -> InProgress -> Succeeded, or
-> RollbackInProgress -> RollbackComplete); a node being updated or rolled back is SystemUpdating (its Kubernetes
Node is cordoned and drained by the simulator) and runs its new release once its batch is done."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .hyperpod_model import Cluster, InstanceGroup
from .hyperpod_timings import ALARM_CHECK, SOFTWARE_UPDATE

if TYPE_CHECKING:
    from .hyperpod_progress import Progressions


def batch_size(config: dict[str, Any] | None, total: int) -> int:
    """Nodes per batch for a CapacitySizeConfig over `total` nodes: INSTANCE_COUNT as given, CAPACITY_PERCENTAGE
    rounded down (never more unavailable than the percentage); at least 1; all at once without a config."""
    if not config or total <= 0:
        return max(total, 1)
    value = int(config["Value"])
    if config["Type"] == "CAPACITY_PERCENTAGE":
        value = math.floor(total * value / 100)
    return max(1, min(value, total))


def alarm_in_alarm(account: str, region: str, names: list[str]) -> str | None:
    """The first of the named CloudWatch alarms (moto's backend) whose state is ALARM."""
    from moto.cloudwatch.models import cloudwatch_backends

    alarms = cloudwatch_backends[account][region].alarms
    for name in names:
        alarm = alarms.get(name)
        if alarm is not None and alarm.state_value == "ALARM":
            return name
    return None


@dataclass
class GroupRollout:
    """One instance group's part of a rolling update."""

    group: InstanceGroup
    target: str
    before_status: str | None
    batches: list[list[str]] = field(default_factory=list)
    done: int = 0
    previous: dict[str, str] = field(default_factory=dict)  # instance id -> release it ran before


class Rollout:
    """A rolling software update of some groups of one cluster, one group after the other."""

    def __init__(
        self, life: Progressions, cluster: Cluster, groups: list[GroupRollout], deployment: dict[str, Any]
    ) -> None:
        self.life = life
        self.ctx = life.ctx
        self.cluster = cluster
        self.groups = groups
        policy = deployment.get("RollingUpdatePolicy") or {}
        self.batch_config: dict[str, Any] | None = policy.get("MaximumBatchSize")
        self.rollback_config: dict[str, Any] | None = policy.get("RollbackMaximumBatchSize")
        self.wait = float(deployment.get("WaitIntervalInSeconds") or 0)
        self.alarms = [str(a["AlarmName"]) for a in deployment.get("AutoRollbackConfiguration") or []]
        self.index = 0

    # bookkeeping ------------------------------------------------------------------------------
    def live(self) -> bool:
        """Whether this rollout is still the cluster's, and the cluster still exists."""
        key = (self.cluster.region, self.cluster.name)
        return self.life.clusters.get(key) is self.cluster and self.cluster.rollout is self

    def later(self, delay: float, fn: Any) -> None:
        def run() -> None:
            if self.live():
                fn()

        if delay <= 0:
            fn()
        else:
            self.ctx.later(delay, run)

    def event(self, text: str, group: str | None = None, level: str = "Info") -> None:
        kind = "InstanceGroup" if group else "Cluster"
        self.cluster.add_event(self.ctx.clock.wall(), text, level=level, resource_type=kind, group=group)

    def alarm(self) -> str | None:
        return alarm_in_alarm(self.ctx.account_id, self.cluster.region, self.alarms) if self.alarms else None

    # the update -------------------------------------------------------------------------------
    def start(self) -> None:
        """Every group Pending, the cluster SystemUpdating; the first group starts."""
        self.cluster.status = "SystemUpdating"
        self.cluster.rollout = self
        for part in self.groups:
            part.group.software_update_status = "Pending"
            part.group.desired_image_release = part.target
        self.next_group()

    def next_group(self) -> None:
        if self.index >= len(self.groups):
            self.finish("Cluster software update completed")
            return
        part = self.groups[self.index]
        group = part.group
        group.status = "SystemUpdating"
        group.software_update_status = "InProgress"
        # Oldest first, LaunchTime to the millisecond (what a client sees of it), then instance id.
        running = [n for n in self.cluster.group_nodes(group.name) if n.status == "Running"]
        nodes = [n.instance_id for n in sorted(running, key=lambda n: (round(n.launch_time, 3), n.instance_id))]
        size = batch_size(self.batch_config, len(nodes))
        part.batches = [nodes[i : i + size] for i in range(0, len(nodes), size)]
        self.event(
            f"Software update of instance group {group.name} to {part.target}: {len(nodes)} node(s) in "
            f"{len(part.batches)} batch(es) of at most {size}",
            group.name,
        )
        if not part.batches:
            self.group_done(part)
            return
        self.start_batch(part)

    def start_batch(self, part: GroupRollout) -> None:
        batch = part.batches[part.done]
        number = f"{part.done + 1}/{len(part.batches)}"
        self.event(f"Software update batch {number} of {part.group.name} started: {', '.join(batch)}", part.group.name)
        for iid in batch:
            node = self.cluster.nodes.get(iid)
            if node is not None and node.status == "Running":
                part.previous[iid] = node.image_release
                self.life._set(self.cluster, node, "SystemUpdating", f"Applying software update {part.target} "
                               f"(batch {number})")
        self.later(SOFTWARE_UPDATE, lambda: self.batch_done(part))
        self.later(ALARM_CHECK, lambda: self.watch_batch(part, part.done))

    def watch_batch(self, part: GroupRollout, index: int) -> None:
        """While batch `index` updates, an alarm in ALARM rolls the group back at once (checked again each
        ALARM_CHECK twin seconds until the batch ends)."""
        if part.done != index or part.group.software_update_status != "InProgress" or not self.alarms:
            return
        name = self.alarm()
        if name is None:
            self.later(ALARM_CHECK, lambda: self.watch_batch(part, index))
            return
        self.roll_back(part, f"alarm {name} is in ALARM during batch {index + 1}/{len(part.batches)}")

    def batch_done(self, part: GroupRollout) -> None:
        if part.group.software_update_status != "InProgress":
            return  # rolled back while it updated
        now = self.ctx.clock.wall()
        batch = part.batches[part.done]
        problem = self.life.lifecycle_script_problem(part.group)  # HyperPod runs the lifecycle again on each node
        if problem is not None:
            self.roll_back(part, f"the lifecycle script failed on batch {part.done + 1}: {problem}")
            return
        lcc = part.group.spec.get("LifeCycleConfig") or {}
        for iid in batch:
            node = self.cluster.nodes.get(iid)
            if node is not None and iid in part.previous:
                node.image_release = part.target
                node.last_software_update = now
                if lcc.get("SourceS3Uri"):
                    self.cluster.add_event(now, f"Lifecycle script {str(lcc['SourceS3Uri']).rstrip('/')}/"
                                           f"{lcc.get('OnCreate')} ran on {iid}", resource_type="Instance",
                                           group=part.group.name, instance_id=iid)
                if node.status == "SystemUpdating":
                    self.life._set(self.cluster, node, "Running")
        part.done += 1
        self.event(f"Software update batch {part.done}/{len(part.batches)} of {part.group.name} completed",
                   part.group.name)
        if self.check_alarms(part):
            return
        if part.done < len(part.batches):
            self.later(self.wait, lambda: self.after_wait(part))
        else:
            self.group_done(part)

    def after_wait(self, part: GroupRollout) -> None:
        """The wait between batches is over: roll back on an alarm, else the next batch."""
        if not self.check_alarms(part):
            self.start_batch(part)

    def check_alarms(self, part: GroupRollout) -> bool:
        """Roll the group back when an alarm is in ALARM; whether it did."""
        name = self.alarm()
        if name is None:
            return False
        self.roll_back(part, f"alarm {name} is in ALARM after batch {part.done}/{len(part.batches)}")
        return True

    def group_done(self, part: GroupRollout) -> None:
        part.group.software_update_status = "Succeeded"
        part.group.image_release = part.target
        part.group.status = "InService"
        self.event(f"Software update of instance group {part.group.name} succeeded", part.group.name)
        self.index += 1
        if self.index < len(self.groups):
            self.later(self.wait, self.next_group)
        else:
            self.next_group()

    # roll back --------------------------------------------------------------------------------
    def roll_back(self, part: GroupRollout, cause: str) -> None:
        """The updated nodes go back to the release they ran, RollbackMaximumBatchSize at a time (all at once
        when absent, as the API documents)."""
        group = part.group
        group.software_update_status = "RollbackInProgress"
        updated = [iid for iid in part.previous if iid in self.cluster.nodes]
        size = batch_size(self.rollback_config, len(self.cluster.group_nodes(group.name)))
        batches = [updated[i : i + size] for i in range(0, len(updated), size)]
        self.event(f"{cause[:1].upper()}{cause[1:]}: rolling back the software update of instance group {group.name} "
                   f"({len(updated)} updated node(s))", group.name, level="Error")
        self.rollback_batch(part, batches, cause)

    def rollback_batch(self, part: GroupRollout, batches: list[list[str]], cause: str) -> None:
        if not batches:
            self.rolled_back(part, cause)
            return
        batch, rest = batches[0], batches[1:]
        for iid in batch:
            node = self.cluster.nodes.get(iid)
            if node is not None and node.status == "Running":
                self.life._set(self.cluster, node, "SystemUpdating", f"Rolling back to {part.previous[iid]}")

        def done() -> None:
            for iid in batch:
                node = self.cluster.nodes.get(iid)
                if node is not None:
                    node.image_release = part.previous[iid]
                    node.last_software_update = self.ctx.clock.wall()
                    if node.status == "SystemUpdating":
                        self.life._set(self.cluster, node, "Running")
            self.rollback_batch(part, rest, cause)

        self.later(SOFTWARE_UPDATE, done)

    def rolled_back(self, part: GroupRollout, cause: str) -> None:
        group = part.group
        group.software_update_status = "RollbackComplete"
        group.desired_image_release = group.image_release
        group.status = "InService"
        for later in self.groups[self.index + 1 :]:  # never started: as they were
            later.group.software_update_status = later.before_status
            later.group.desired_image_release = later.group.image_release
        self.finish(f"Cluster software update rolled back: {cause} during the update of instance group "
                    f"{group.name}", level="Error")

    def finish(self, text: str, level: str = "Info") -> None:
        self.cluster.rollout = None
        self.cluster.status = "Updating"
        self.event(text, level=level)
        self.life.reconcile(self.cluster)


def deployment_problem(deployment: dict[str, Any]) -> str | None:
    """What in a DeploymentConfig breaks the API's constraints (None when nothing)."""
    policy = deployment.get("RollingUpdatePolicy")
    sizes = {"MaximumBatchSize": (policy or {}).get("MaximumBatchSize"),
             "RollbackMaximumBatchSize": (policy or {}).get("RollbackMaximumBatchSize")}
    if policy is not None and sizes["MaximumBatchSize"] is None:
        return "DeploymentConfig.RollingUpdatePolicy.MaximumBatchSize is required."
    for key, size in sizes.items():
        if size is None:
            continue
        if size.get("Type") not in ("INSTANCE_COUNT", "CAPACITY_PERCENTAGE"):
            return f"Value at 'DeploymentConfig.RollingUpdatePolicy.{key}.Type' failed to satisfy constraint: " \
                   "Member must satisfy enum value set: [INSTANCE_COUNT, CAPACITY_PERCENTAGE]"
        if not isinstance(size.get("Value"), int) or size["Value"] < 1:
            return f"Value at 'DeploymentConfig.RollingUpdatePolicy.{key}.Value' must be an integer >= 1."
    wait = deployment.get("WaitIntervalInSeconds", 0)
    if not isinstance(wait, int) or not 0 <= wait <= 3600:
        return "Value at 'DeploymentConfig.WaitIntervalInSeconds' must be between 0 and 3600."
    alarms = deployment.get("AutoRollbackConfiguration")
    if alarms is not None and not (1 <= len(alarms) <= 10 and all(a.get("AlarmName") for a in alarms)):
        return "DeploymentConfig.AutoRollbackConfiguration takes 1 to 10 alarms, each with an AlarmName."
    return None
