"""A training job's lines after its pods are gone: the observability add-on's CloudWatch streams of its pods."""

from __future__ import annotations

import re
from dataclasses import dataclass

from instantstart.aws import cloudwatch_logs
from instantstart.context import AppContext
from instantstart.services.base.observability import pod_log_group
from instantstart.services.base.pod_logs import LIMIT_BYTES, LINE_CHARS
from instantstart.services.base.registry import hyperpod_cluster_name
from instantstart.store.models import ClusterRow


@dataclass(frozen=True)
class Shipped:
    """What CloudWatch holds of one job: its pods' names, the pod read, its lines."""

    pod: str
    pods: list[str]
    lines: list[str]
    truncated: bool
    group: str


def _index(pod: str) -> tuple[str, int]:
    head, _, tail = pod.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (pod, 0)


def shipped(app: AppContext, row: ClusterRow, job: str, namespace: str, container: str, pod: str | None,
            tail: int) -> Shipped | None:
    """Blocking: the job's pod streams in the cluster's pod-log group (`<pod>_<namespace>_<container>`, one per
    container as the collector names them); None when logging is off or nothing of the job was shipped. Bounded
    like a pod log: the last `tail` lines, at most 64 KiB, lines cut to 2000 characters."""
    group = pod_log_group(app.aws, row.region, row.eks_cluster_name, hyperpod_cluster_name(row))
    if group is None:
        return None
    # A job's pods are `<job>-<replicaSpec>-<index>`; another job whose name extends this one's is filtered out.
    shape = re.compile(rf"^({re.escape(job)}-[a-z0-9]([-a-z0-9]*[a-z0-9])?-[0-9]+)_{re.escape(namespace)}_"
                       rf"{re.escape(container)}$")
    names = [found.group(1) for s in cloudwatch_logs.stream_names(app.aws, row.region, group, f"{job}-")
             if (found := shape.match(s))]
    pods = sorted(set(names), key=_index)
    if not pods or (pod is not None and pod not in pods):
        return None
    chosen = pod or pods[0]
    raw = cloudwatch_logs.tail(app.aws, row.region, group, f"{chosen}_{namespace}_{container}", tail)
    kept: list[str] = []
    size = 0
    for line in reversed(raw):  # newest first, until the byte budget is spent
        size += len(line.encode()) + 1
        if size > LIMIT_BYTES:
            break
        kept.append(line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…")
    kept.reverse()
    return Shipped(pod=chosen, pods=pods, lines=kept, truncated=kept != raw, group=group)
