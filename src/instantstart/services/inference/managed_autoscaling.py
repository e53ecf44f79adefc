"""The autoscaling a managed endpoint may carry (the inference operator's autoScalingSpec), as typed input."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.manifests import endpoint_autoscaling as scaling
from instantstart.validation import KubeName

Stat = Literal["Average", "Sum", "Minimum", "Maximum", "SampleCount"]
MetricType = Literal["Average", "Value"]


class PrometheusScaling(WireModel):
    """Scale on a PromQL query (the operator's prometheusTrigger)."""

    query: str = Field(min_length=1, max_length=2000, description="PromQL, e.g. "
                       "sum(vllm:num_requests_waiting{app=\"qwen\"}).")
    target_value: float = Field(gt=0, le=1e9, description="Per-replica target (metricType Average) or total.")
    server_address: str | None = Field(default=None, max_length=300, description="An Amazon Managed Prometheus "
                                       "workspace URL (https://aps-workspaces.<region>.amazonaws.com/workspaces/"
                                       "ws-<id>); default: the operator's.")
    metric_type: MetricType = "Average"
    name: KubeName | None = None


class Dimension(WireModel):
    """A CloudWatch metric dimension."""

    name: str = Field(min_length=1, max_length=255)
    value: str = Field(min_length=1, max_length=1024)


class CloudWatchScaling(WireModel):
    """Scale on a CloudWatch metric (the operator's cloudWatchTrigger), e.g. AWS/SageMaker Invocations."""

    namespace: str = Field(min_length=1, max_length=255, pattern=r"^[^:]*$", description="e.g. AWS/SageMaker.")
    metric_name: str = Field(min_length=1, max_length=255)
    target_value: float = Field(gt=0, le=1e9)
    dimensions: list[Dimension] = Field(default_factory=list, max_length=30)
    metric_stat: Stat = "Average"
    metric_type: MetricType = "Average"
    metric_collection_period: int | None = Field(default=None, ge=60, le=86400, description="Seconds.")
    name: KubeName | None = None


class ManagedAutoscaling(WireModel):
    """Replica bounds and one or both triggers; rendered as spec.autoScalingSpec (the operator runs KEDA)."""

    min_replicas: int = Field(default=1, ge=0, le=64)
    max_replicas: int = Field(ge=1, le=64)
    polling_interval: int | None = Field(default=None, ge=5, le=3600, description="Seconds between checks "
                                         "(operator default 30).")
    cooldown_period: int | None = Field(default=None, ge=0, le=3600, description="Seconds before scaling in "
                                        "(operator default 300).")
    prometheus: PrometheusScaling | None = None
    cloudwatch: CloudWatchScaling | None = None


def to_spec(req: ManagedAutoscaling | None) -> scaling.Autoscaling | None:
    """The builder input of the request's autoscaling."""
    if req is None:
        return None
    prom, cw = req.prometheus, req.cloudwatch
    return scaling.Autoscaling(
        min_replicas=req.min_replicas, max_replicas=req.max_replicas, polling_interval=req.polling_interval,
        cooldown_period=req.cooldown_period,
        prometheus=scaling.PrometheusTrigger(query=prom.query, target_value=prom.target_value,
                                             server_address=prom.server_address, metric_type=prom.metric_type,
                                             name=prom.name) if prom else None,
        cloudwatch=scaling.CloudWatchTrigger(
            namespace=cw.namespace, metric_name=cw.metric_name, target_value=cw.target_value,
            dimensions=tuple((d.name, d.value) for d in cw.dimensions), metric_stat=cw.metric_stat,
            metric_type=cw.metric_type, metric_collection_period=cw.metric_collection_period,
            name=cw.name) if cw else None)
