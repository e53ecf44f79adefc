"""The observability collector's log pipeline: a pod's container lines go to the cluster's CloudWatch log group."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hyperpod_twin.sim.collector import ADDON, NAMESPACE, refusal
from hyperpod_twin.sim.kinds import PODS
from hyperpod_twin.sim.s3_mounts import S3Writer

# One stream per container, named like the node's container log file (/var/log/containers/<pod>_<ns>_<container>)
# that the collector's filelog receiver tails; the control plane reads a pod's lines by this prefix.
STREAM = "{pod}_{namespace}_{container}"
BATCH = 5000  # PutLogEvents takes at most 10,000 events per call


def log_group(factory: Callable[[str], Any], eks_cluster: str, hyperpod: str | None) -> str | None:
    """The group the collector writes pod logs to: /aws/sagemaker/Clusters/<name>/<id> when the observability add-on
    has logging on and its role may write there; None otherwise (nothing is shipped)."""
    if not hyperpod:
        return None
    try:
        addon = factory("eks").describe_addon(clusterName=eks_cluster, addonName=ADDON)["addon"]
    except Exception:  # not installed
        return None
    config = json.loads(addon.get("configurationValues") or "{}")
    if not (config.get("logging") or {}).get("enabled"):
        return None
    if refusal(factory, eks_cluster, hyperpod) is not None:  # the collector's own 403 line says why
        return None
    arn = str(factory("sagemaker").describe_cluster(ClusterName=hyperpod)["ClusterArn"])
    return f"/aws/sagemaker/Clusters/{hyperpod}/{arn.rsplit('/', 1)[-1]}"


def collector_running(sim: Any) -> bool:
    """Whether a pod of the observability add-on runs in the cluster (its pipeline is up)."""
    return any((p.get("status") or {}).get("phase") == "Running" for p in sim.view(PODS, NAMESPACE))


def capture(sim: Any, namespace: str, pod: str) -> dict[str, list[tuple[int, str]]]:
    """The pod's lines now, per stream, as (milliseconds, text)."""
    logs = sim.runtime.logs
    out: dict[str, list[tuple[int, str]]] = {}
    for container in logs.containers(namespace, pod):
        lines = [(int(line.timestamp * 1000), line.text) for line in logs.read(namespace, pod, container)]
        if lines:
            out[STREAM.format(pod=pod, namespace=namespace, container=container)] = lines
    return out


def put(factory: Callable[[str], Any], group: str, streams: dict[str, list[tuple[int, str]]]) -> None:
    """Create the group and streams when missing, then PutLogEvents in order."""
    logs = factory("logs")
    if not logs.describe_log_groups(logGroupNamePrefix=group).get("logGroups"):
        logs.create_log_group(logGroupName=group)
    for stream, lines in streams.items():
        if not logs.describe_log_streams(logGroupName=group, logStreamNamePrefix=stream).get("logStreams"):
            logs.create_log_stream(logGroupName=group, logStreamName=stream)
        for start in range(0, len(lines), BATCH):
            events = [{"timestamp": ts, "message": text} for ts, text in lines[start:start + BATCH]]
            logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)


class LogShipper:
    """Ships a pod's lines before the kubelet forgets them (the pod is deleted), off the sim's loop; the real
    collector tails continuously, so what matters here holds: the lines outlive the pod."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.sender = S3Writer(sim)

    def stop(self) -> None:
        """Finish queued sends and stop the thread."""
        self.sender.stop()

    def ship(self, namespace: str, pod: str) -> None:
        """Send the pod's lines when the add-on's collector runs (nothing from the add-on's own pods)."""
        factory = self.sim.extra.get("boto3_client")
        if factory is None or namespace == NAMESPACE or not collector_running(self.sim):
            return
        streams = capture(self.sim, namespace, pod)
        if not streams:
            return
        eks_cluster, hyperpod = self.sim.runtime.name, self.sim.extra.get("hyperpod_cluster_name")

        def send(_s3: Any) -> None:
            group = log_group(factory, eks_cluster, hyperpod)
            if group is not None:
                put(factory, group, streams)

        self.sender.submit(send)
