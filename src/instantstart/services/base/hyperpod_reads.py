"""HyperPod reads shared by the stage and the status tools: DescribeCluster through the cache, capacity events,
node ids."""

from __future__ import annotations

from typing import Any

from instantstart.aws import hyperpod as hp_api
from instantstart.aws.clients import AwsClients
from instantstart.context import AppContext
from instantstart.operations.waiting import blocking

CAPACITY_WORDS = ("insufficient capacity", "sufficient capacity", "insufficientcapacity")
# A HyperPod node id as its APIs take it, or as Kubernetes names the Node (hyperpod-<instance id>).
NODE_ID = r"^(hyperpod-)?i-[0-9a-f]{8}([0-9a-f]{9})?$"


def instance_id(node_id: str) -> str:
    """The EC2 instance id of a node id or Kubernetes Node name."""
    return node_id.removeprefix("hyperpod-")


async def cached_describe(
    app: AppContext, region: str, name: str, ttl: float | None = None
) -> dict[str, Any] | None:
    """DescribeCluster through the status cache: every status tool shares one call per interval (`ttl`
    overrides the interval)."""

    async def fetch() -> dict[str, Any] | None:
        return await blocking(hp_api.describe_cluster, app.aws, region, name)

    value: dict[str, Any] | None = await app.cache.get(f"sagemaker:{region}:{name}:describe", fetch, ttl)
    return value


def capacity_events(aws: AwsClients, region: str, name: str) -> list[dict[str, Any]]:
    """Error events of the cluster that report a capacity shortage."""
    return [
        e
        for e in hp_api.list_events(aws, region, name)
        if e.get("EventLevel") == "Error" and any(w in (e.get("Description") or "").lower() for w in CAPACITY_WORDS)
    ]
