"""cluster_events: Kubernetes events and HyperPod cluster/node events, filtered and bounded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from anyio import to_thread
from kubernetes import client as k8s
from pydantic import Field

from instantstart.aws.clients import AwsClients
from instantstart.aws.hyperpod import query_events
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.errors import InstantStartError
from instantstart.kube.calls import as_dict, kube_api, kube_call
from instantstart.services.core.registry import get_cluster, hyperpod_cluster_name, resolve_tag
from instantstart.services.core.stages import blocking
from instantstart.store.models import ClusterRow
from instantstart.validation import ClusterTag

MESSAGE_CHARS = 300
DNS_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"


class EventsRequest(WireModel):
    """Which events: source, object, time window, type; at most `limit` per source."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Default: see cluster_list_all (active).")
    source: Literal["all", "kubernetes", "hyperpod"] = Field(default="all", description="Which event streams.")
    object_kind: str | None = Field(
        default=None, pattern=r"^[A-Z][A-Za-z]{1,62}$", description="Kubernetes involvedObject kind, e.g. Node, Pod."
    )
    object_name: str | None = Field(default=None, pattern=DNS_NAME, description="Kubernetes object name.")
    namespace: str | None = Field(default=None, pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    node_id: str | None = Field(
        default=None, pattern=r"^(hyperpod-)?i-[0-9a-f]{8}([0-9a-f]{9})?$", description="HyperPod events of a node."
    )
    instance_group_name: str | None = Field(default=None, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
    since_minutes: int = Field(default=60, ge=1, le=1440, description="Only events newer than this (1-1440).")
    warnings_only: bool = Field(default=False, description="Kubernetes Warning / HyperPod Error and Warn only.")
    limit: int = Field(default=50, ge=1, le=200, description="At most this many events per source, newest first.")


class EventsResult(WireModel):
    """Events newest first, each compact; `truncated` says a source had more than `limit`."""

    cluster_tag: str
    since_minutes: int
    kubernetes: list[dict[str, Any]]
    hyperpod: list[dict[str, Any]]
    truncated: bool
    unavailable: list[str] = Field(description="Sources that could not be read, with the reason.")


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, tz=UTC)
    return None


def _short(text: Any) -> str:
    value = str(text or "")
    return value if len(value) <= MESSAGE_CHARS else value[: MESSAGE_CHARS - 1] + "…"


def kubernetes_events(row: ClusterRow, api: k8s.ApiClient, req: EventsRequest, since: datetime) -> list[dict[str, Any]]:
    """core/v1 Events matching the filters (blocking)."""
    selectors = []
    if req.object_kind:
        selectors.append(f"involvedObject.kind={req.object_kind}")
    name = req.object_name or (f"hyperpod-{req.node_id.removeprefix('hyperpod-')}" if req.node_id else None)
    if name:
        selectors.append(f"involvedObject.name={name}")
    core = k8s.CoreV1Api(api)
    kwargs: dict[str, Any] = {"field_selector": ",".join(selectors)} if selectors else {}
    if req.namespace:
        listed = kube_call("list events", core.list_namespaced_event, req.namespace, **kwargs)
    else:
        listed = kube_call("list events", core.list_event_for_all_namespaces, **kwargs)
    items = []
    for event in (as_dict(api, e) for e in listed.items):
        when = _when(event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp"))
        if when is not None and when < since:
            continue
        if req.warnings_only and event.get("type") != "Warning":
            continue
        obj = event.get("involvedObject") or {}
        items.append(
            {
                "time": when.isoformat() if when else None,
                "type": event.get("type"),
                "reason": event.get("reason"),
                "object": "/".join(p for p in (obj.get("kind"), obj.get("namespace"), obj.get("name")) if p),
                "message": _short(event.get("message")),
                "count": event.get("count") or 1,
                "source": (event.get("source") or {}).get("component") or event.get("reportingComponent"),
            }
        )
    items.sort(key=lambda e: e["time"] or "", reverse=True)
    return items


def hyperpod_events(
    aws: AwsClients, region: str, cluster: str, req: EventsRequest, since: datetime
) -> list[dict[str, Any]]:
    """SageMaker ListClusterEvents matching the filters, newest first (blocking)."""
    kwargs: dict[str, Any] = {
        "ClusterName": cluster,
        "EventTimeAfter": since,
        "SortOrder": "Descending",
        "MaxResults": min(100, req.limit + 1),
    }
    if req.node_id:
        kwargs["NodeId"] = req.node_id.removeprefix("hyperpod-")
    if req.instance_group_name:
        kwargs["InstanceGroupName"] = req.instance_group_name
    events = query_events(aws, region, kwargs)
    items = []
    for e in events:
        level = e.get("EventLevel")
        if req.warnings_only and level not in ("Error", "Warn", "Warning"):
            continue
        when = _when(e.get("EventTime"))
        items.append(
            {
                "time": when.isoformat() if when else None,
                "level": level,
                "resourceType": e.get("ResourceType"),
                "instanceGroup": e.get("InstanceGroupName"),
                "nodeId": e.get("InstanceId"),
                "message": _short(e.get("Description")),
            }
        )
    return items


@operation("cluster_events", method="GET", path="/diagnostics/events", example={"sinceMinutes": 30})
async def cluster_events(ctx: CallContext, req: EventsRequest) -> EventsResult:
    """Read-only, bounded: at most `limit` (≤200) events per source from the last `sinceMinutes` (≤1440),
    messages cut to 300 characters. Kubernetes events (filter by objectKind, objectName, namespace) and
    HyperPod cluster/node events from SageMaker (filter by nodeId, instanceGroupName) of a cluster, newest
    first; warningsOnly keeps Warning/Error. A source that cannot be read is listed in `unavailable`."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    since = datetime.now(UTC) - timedelta(minutes=req.since_minutes)
    kube: list[dict[str, Any]] = []
    hyperpod: list[dict[str, Any]] = []
    unavailable: list[str] = []
    if req.source in ("all", "kubernetes"):
        try:
            api = await blocking(kube_api, ctx.app.kube, row.eks_cluster_name, row.region)
            kube = await blocking(kubernetes_events, row, api, req, since)
        except InstantStartError as exc:
            unavailable.append(f"kubernetes: {exc.message}")
    if req.source in ("all", "hyperpod"):
        if row.hyperpod_cluster_name or (row.stages or {}).get("hyperpod"):
            try:
                hyperpod = await blocking(
                    hyperpod_events, ctx.app.aws, row.region, hyperpod_cluster_name(row), req, since
                )
            except InstantStartError as exc:
                unavailable.append(f"hyperpod: {exc.message}")
        else:
            unavailable.append("hyperpod: the cluster has no HyperPod cluster yet")
    truncated = len(kube) > req.limit or len(hyperpod) > req.limit
    return EventsResult(
        cluster_tag=tag,
        since_minutes=req.since_minutes,
        kubernetes=kube[: req.limit],
        hyperpod=hyperpod[: req.limit],
        truncated=truncated,
        unavailable=unavailable,
    )
