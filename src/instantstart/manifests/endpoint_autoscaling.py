"""An InferenceEndpointConfig's autoScalingSpec (the operator's KEDA scaling): a checked subset, rendered."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# The CRD's prometheusTrigger.serverAddress pattern: an Amazon Managed Prometheus workspace, or empty (the
# operator's own default).
AMP_WORKSPACE_URL = re.compile(r"^https://aps-workspaces\.[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*\.amazonaws\.com"
                               r"/workspaces/ws-[a-zA-Z0-9-]+$")
CLOUDWATCH_STATS = ("Average", "Sum", "Minimum", "Maximum", "SampleCount")
METRIC_TYPES = ("Average", "Value")


@dataclass(frozen=True)
class PrometheusTrigger:
    """Scale on a PromQL query's value (prometheusTrigger)."""

    query: str
    target_value: float
    server_address: str | None = None
    metric_type: str = "Average"
    name: str | None = None


@dataclass(frozen=True)
class CloudWatchTrigger:
    """Scale on a CloudWatch metric (cloudWatchTrigger)."""

    namespace: str
    metric_name: str
    target_value: float
    dimensions: tuple[tuple[str, str], ...] = ()
    metric_stat: str = "Average"
    metric_type: str = "Average"
    metric_collection_period: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class Autoscaling:
    """min/max replicas, timings, and the triggers (at least one)."""

    min_replicas: int
    max_replicas: int
    polling_interval: int | None = None
    cooldown_period: int | None = None
    prometheus: PrometheusTrigger | None = None
    cloudwatch: CloudWatchTrigger | None = None


def problems(scaling: Autoscaling, replicas: int) -> list[tuple[str, str, str, str]]:
    """(field, message, fix, severity) for each rule the spec breaks."""
    out: list[tuple[str, str, str, str]] = []
    if scaling.min_replicas > scaling.max_replicas:
        out.append(("autoscaling.minReplicas", f"minReplicas {scaling.min_replicas} is above maxReplicas "
                    f"{scaling.max_replicas}", "Set minReplicas <= maxReplicas.", "error"))
    if scaling.prometheus is None and scaling.cloudwatch is None:
        out.append(("autoscaling", "no trigger: give prometheus or cloudwatch", "Add a prometheus trigger (a PromQL "
                    "query and targetValue) or a cloudwatch one (namespace, metricName, targetValue).", "error"))
    prom = scaling.prometheus
    if prom is not None and prom.server_address and not AMP_WORKSPACE_URL.match(prom.server_address):
        out.append(("autoscaling.prometheus.serverAddress", f"{prom.server_address[:120]!r} is not an Amazon "
                    "Managed Prometheus workspace URL (the operator's CRD accepts no other)",
                    "Use https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-<id>, or leave it out.", "error"))
    if not scaling.min_replicas <= replicas <= scaling.max_replicas:
        out.append(("replicas", f"replicas {replicas} is outside minReplicas..maxReplicas "
                    f"({scaling.min_replicas}..{scaling.max_replicas}); the scaler moves it into the range",
                    "Set replicas within the autoscaling range.", "warning"))
    return out


def _prometheus(t: PrometheusTrigger) -> dict[str, Any]:
    out: dict[str, Any] = {"query": t.query, "targetValue": t.target_value, "metricType": t.metric_type}
    if t.server_address:
        out["serverAddress"] = t.server_address
    if t.name:
        out["name"] = t.name
    return out


def _cloudwatch(t: CloudWatchTrigger) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": t.namespace, "metricName": t.metric_name, "targetValue": t.target_value,
                           "metricStat": t.metric_stat, "metricType": t.metric_type}
    if t.dimensions:
        out["dimensions"] = [{"name": n, "value": v} for n, v in t.dimensions]
    if t.metric_collection_period is not None:
        out["metricCollectionPeriod"] = t.metric_collection_period
    if t.name:
        out["name"] = t.name
    return out


def render(scaling: Autoscaling) -> dict[str, Any]:
    """The spec.autoScalingSpec object (CRD field names; the operator's defaults fill what is left out)."""
    out: dict[str, Any] = {"minReplicaCount": scaling.min_replicas, "maxReplicaCount": scaling.max_replicas}
    if scaling.polling_interval is not None:
        out["pollingInterval"] = scaling.polling_interval
    if scaling.cooldown_period is not None:
        out["cooldownPeriod"] = scaling.cooldown_period
    if scaling.prometheus is not None:
        out["prometheusTrigger"] = _prometheus(scaling.prometheus)
    if scaling.cloudwatch is not None:
        out["cloudWatchTrigger"] = _cloudwatch(scaling.cloudwatch)
    return out
