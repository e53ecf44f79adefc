"""In-process event bus that ties the twin's AWS side, Kubernetes API servers and simulator together."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Literal, get_args

log = logging.getLogger(__name__)

Handler = Callable[..., Any]
# Every topic the twin publishes or subscribes to (payloads in EventBus's docstring): a misspelt topic is a mypy
# error at the call site, and a runtime ValueError for a topic built at run time.
Topic = Literal[
    "eks.cluster.activating",
    "eks.cluster.deleted",
    "eks.addon.changed",
    "eks.addon.active",
    "eks.addon.deleted",
    "eks.access_entries.changed",
    "eks.cluster.version_updated",
    "eks.pod_identity.changed",
    "hyperpod.node.changed",
    "hyperpod.node.removed",
    "hyperpod.node.health",
    "hyperpod.cluster.changed",
    "hyperpod.autoscaling.active",
    "hyperpod.cluster.deleted",
    "hyperpod.governance.changed",
    "fsx.filesystem.changed",
    "kube.cluster.started",
    "kube.cluster.stopped",
    "kube.node.health_label",
    "twin.node.hardware",
    "twin.kube.control",
    "twin.mlflow.resolve",
    "twin.reset",
    "twin.stopping",
]
TOPICS: frozenset[str] = frozenset(get_args(Topic))


def _known(topic: str) -> None:
    if topic not in TOPICS:
        raise ValueError(f"unknown twin event topic {topic!r}; topics: {', '.join(sorted(TOPICS))} "
                         "(add a new one to hyperpod_twin.events.Topic)")


class EventBus:
    """Synchronous publish/subscribe: `publish` calls every handler in subscription order.

    Topics used across the twin (payload keys are keyword arguments):
    - ``eks.cluster.activating`` name, arn, region → a handler returns ``(endpoint, ca_data_b64)``
      for the cluster's Kubernetes API server; the AWS side stores the first non-None answer.
    - ``eks.cluster.deleted`` name, arn
    - ``eks.addon.changed`` cluster_name, cluster_arn, arn (= cluster_arn), addon_name, addon_version,
      status (CREATING|ACTIVE|DEGRADED|CREATE_FAILED|UPDATING|UPDATE_FAILED|DELETING),
      configuration_values (str|None), namespace
    - ``eks.addon.active`` same payload, once an add-on's resources are installed: it settled ACTIVE or
      DEGRADED after a create or an update (not after CREATE_FAILED/UPDATE_FAILED)
    - ``eks.addon.deleted`` cluster_name, cluster_arn, addon_name, preserve (bool)
    - ``eks.access_entries.changed`` cluster_name, cluster_arn, entries (list of AccessEntry dicts:
      principalArn, kubernetesGroups, username, type, accessPolicies [{policyArn, accessScope}]).
      Published at ACTIVE (the creator's entry when bootstrapClusterCreatorAdminPermissions) and on
      every access entry / policy change; the Kubernetes side maps IAM principals through it.
    - ``eks.cluster.version_updated`` name, arn, version: UpdateClusterVersion finished; the cluster's
      Kubernetes API server reports `version` from then on (``eks.cluster.activating`` carries the first one)
    - ``eks.pod_identity.changed`` cluster_name, cluster_arn, associations (list of
      PodIdentityAssociation dicts)
    - ``hyperpod.node.changed`` cluster_name, cluster_arn, eks_cluster_arn, node (dict exactly as
      DescribeClusterNode.NodeDetails: InstanceId, NodeLogicalId, InstanceGroupName, InstanceType,
      InstanceStatus {Status: Pending|Running|ShuttingDown|SystemUpdating|DeepHealthCheckInProgress|
      Failure, Message}, LaunchTime (epoch float), Placement {AvailabilityZone, AvailabilityZoneId},
      ThreadsPerCore, PrivatePrimaryIp, PrivateDnsHostname, CapacityType, SubnetId, KubernetesConfig
      {CurrentLabels, CurrentTaints, …}, NetworkInterface, InstanceStorageConfigs …), instance_group
      (the group's CreateCluster/UpdateCluster specification dict, or None). Published on every
      status change and when a group's specification (labels, taints) is updated.
      Reboot: Pending ("Rebooting instance") then Running. Replace: the old instance goes
      ShuttingDown then ``hyperpod.node.removed``; a new instance id appears Pending then Running.
      ``sequence`` (int, increasing in emission order): events are published after the AWS side's
      state lock is released, so two threads can deliver them out of order; a consumer drops an
      event older than the last one it applied for the same instance.
    - ``hyperpod.node.removed`` cluster_name, cluster_arn, eks_cluster_arn, instance_id, sequence (as above;
      an instance id never comes back, so a changed event older than the removal is dropped)
    - ``hyperpod.node.health`` cluster_name, cluster_arn, eks_cluster_arn, instance_id,
      health_status (Schedulable|Unschedulable|UnschedulablePendingReplacement|
      UnschedulablePendingReboot), reason, and fault_type / deep_health_check_status when the
      injection gives them. Injected through POST /_twin/nodes/{instanceId}/health;
      with NodeRecovery=Automatic the AWS side replaces (PendingReplacement) or reboots
      (PendingReboot) the node 60 twin seconds later.
    - ``hyperpod.cluster.changed`` cluster_name, cluster_arn, eks_cluster_arn, cluster (the
      DescribeCluster dict) on create and update (tiered storage, autoscaling, node recovery …), sequence (as
      for node events: a view older than the one kept is dropped)
    - ``hyperpod.autoscaling.active`` cluster_name, cluster_arn, eks_cluster_arn: AutoScaling
      (Karpenter) reached InService with Mode Enable
    - ``hyperpod.cluster.deleted`` cluster_name, cluster_arn, eks_cluster_arn
    - ``hyperpod.governance.changed`` eks_cluster_arn, cluster_arn, scheduler (the
      DescribeClusterSchedulerConfig dict or None), quotas (DescribeComputeQuota dicts): the cluster's whole
      task governance after any Create/Update/DeleteComputeQuota or …ClusterSchedulerConfig
    - ``kube.cluster.started`` runtime (hyperpod_twin.kube.runtime.ClusterRuntime): the API server
      of an EKS cluster is up (published by hyperpod_twin.kube.plugin once it listens, before the
      AWS side marks the cluster ACTIVE); the simulator starts its controllers on ``runtime.store``.
    - ``kube.cluster.stopped`` name: the server stopped (cluster deleted, twin reset or stopping).
    - ``kube.node.health_label`` eks_cluster_arn, instance_id, status: a Kubernetes client (kubectl
      label, an agent) set a HyperPod Node's ``sagemaker.amazonaws.com/node-health-status`` label to
      an unhealthy value itself; the simulator already tainted the Node, and the AWS side should
      recover the instance per NodeRecovery as it does for ``hyperpod.node.health``.
    - ``fsx.filesystem.changed`` file_system (the public DescribeFileSystems view), or file_system_id and
      deleted=True
    - ``twin.node.hardware`` instance_id, body (POST /_twin/nodes/{instanceId}/hardware) → the simulator's
      answer dict ({"error": ...} when refused)
    - ``twin.kube.control`` cluster, action, body (POST /_twin/kube/...) → the Kubernetes side's answer dict
    - ``twin.mlflow.resolve`` arn → the MLflow tracking server's URL, None (still creating) or "" (unknown)
    - ``twin.reset`` (no payload): every component returns to a clean state.
    - ``twin.stopping`` (no payload): Twin.stop() is about to stop the clock and the HTTP server.
    """

    def __init__(self) -> None:
        self._handlers: dict[Topic, list[Handler]] = defaultdict(list)
        self._lock = threading.RLock()

    def subscribe(self, topic: Topic, handler: Handler) -> None:
        """Register `handler` for `topic`."""
        _known(topic)
        with self._lock:
            self._handlers[topic].append(handler)

    def publish(self, topic: Topic, **payload: Any) -> list[Any]:
        """Call every handler of `topic`; return their results. A failing handler is logged, not raised."""
        _known(topic)
        with self._lock:
            handlers = list(self._handlers.get(topic, ()))
        results: list[Any] = []
        for handler in handlers:
            try:
                results.append(handler(**payload))
            except Exception:
                log.exception("twin event handler for %s failed", topic)
        return results
