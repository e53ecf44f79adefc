"""In-process event bus that ties the twin's AWS side, Kubernetes API servers and simulator together."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Handler = Callable[..., Any]


class EventBus:
    """Synchronous publish/subscribe: `publish` calls every handler in subscription order.

    Topics used across the twin (payload keys are keyword arguments):
    - ``eks.cluster.activating`` name, arn, region → a handler returns ``(endpoint, ca_data_b64)``
      for the cluster's Kubernetes API server; the AWS side stores the first non-None answer.
    - ``eks.cluster.deleted`` name, arn
    - ``hyperpod.node.changed`` cluster_name, cluster_arn, eks_cluster_arn, node (dict: InstanceId,
      InstanceGroupName, InstanceType, AvailabilityZone, InstanceStatus {Status, Message}, LaunchTime)
    - ``hyperpod.node.removed`` cluster_name, cluster_arn, eks_cluster_arn, instance_id
    - ``hyperpod.cluster.deleted`` cluster_name, cluster_arn, eks_cluster_arn
    - ``kube.cluster.started`` runtime (hyperpod_twin.kube.runtime.ClusterRuntime): the API server
      of an EKS cluster is up; the simulator starts its controllers on ``runtime.store``.
    - ``kube.cluster.stopped`` name
    - ``twin.reset`` (no payload): every component returns to a clean state.
    """

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = defaultdict(list)
        self._lock = threading.RLock()

    def subscribe(self, topic: str, handler: Handler) -> None:
        """Register `handler` for `topic`."""
        with self._lock:
            self._handlers[topic].append(handler)

    def publish(self, topic: str, **payload: Any) -> list[Any]:
        """Call every handler of `topic`; return their results. A failing handler is logged, not raised."""
        with self._lock:
            handlers = list(self._handlers.get(topic, ()))
        results: list[Any] = []
        for handler in handlers:
            try:
                results.append(handler(**payload))
            except Exception:
                log.exception("twin event handler for %s failed", topic)
        return results
