"""`usage_report`: GPU-hours, Neuron-device-hours and node-hours per team and per user over a period, from the
accelerator holds the pods watches recorded in the timeline (usage_feed), with a CSV of the rows.

A pod's hold counts from its start to its end (a pod still running: to now), clipped to the period. GPU-hours: the
GPUs it requested times those hours. Node-hours: for each team (user, row), the hours during which it had at least
one holding pod on a node, summed over nodes (two pods of a team on one node at once count that node once). The
team is the namespace's (usage_feed.team_of); the user is who submitted the workload through InstantStart.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from anyio import to_thread
from pydantic import Field

from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext
from instantstart.errors import InvalidInput
from instantstart.services.base.registry import get_cluster, resolve_tag
from instantstart.services.base.watch.state import informer_key
from instantstart.services.base.watch.timeline import writer
from instantstart.services.monitoring.usage_feed import team_of
from instantstart.store import usage as store
from instantstart.store.models import utcnow
from instantstart.store.teams import teams_of
from instantstart.validation import ClusterTag

DEFAULT_DAYS = 7
MAX_DAYS = 3650
NAMESPACE = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
CSV_HEADER = ("team", "namespace", "user", "gpu_hours", "neuron_device_hours", "node_hours", "pods")


class UsageRequest(WireModel):
    """Which cluster, which period, and optionally one team or user."""

    cluster_tag: ClusterTag | None = Field(default=None, description="Default: the active cluster.")
    since: datetime | None = Field(default=None, description=f"Start of the period (default: {DEFAULT_DAYS} days "
                                   "before `until`), ISO 8601 with a zone.")
    until: datetime | None = Field(default=None, description="End of the period (default: now), ISO 8601 with a zone.")
    team: str | None = Field(default=None, pattern=NAMESPACE, description="Only this team's usage.")
    user: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9._-]{0,62}$", description="Only this user's usage.")


class UsageGroup(WireModel):
    """The usage of one team, one user, or one (team, namespace, user) row."""

    team: str | None = Field(default=None, description="The team (hyperpod-ns-<team> namespaces); empty: no team.")
    namespace: str | None = None
    user: str | None = Field(default=None, description="Who submitted through InstantStart; empty: someone else.")
    gpu_hours: float
    neuron_device_hours: float
    node_hours: float
    pods: int


class UsageReport(WireModel):
    """Usage over the period: per team, per user, per (team, namespace, user) row, and those rows as CSV."""

    cluster_tag: str
    since: datetime
    until: datetime
    scope: str = Field(description="all: everyone's usage; own: a member sees their own.")
    by_team: list[UsageGroup]
    by_user: list[UsageGroup]
    rows: list[UsageGroup]
    total: UsageGroup
    csv: str = Field(description="The rows as CSV (" + ",".join(CSV_HEADER) + ").")
    sample_seconds: float = Field(description="The sampling interval: a pod that ended unseen counts to its last "
                                  "sample, so the report is right to within this.")
    truncated: bool = Field(description="True when the period held more pods than one report reads.")
    unavailable: list[str] = Field(default_factory=list, description="Why recent holds may be missing.")


@dataclass(frozen=True)
class Span:
    """One pod's hold within the period."""

    team: str
    namespace: str
    user: str
    node: str
    gpu: int
    neuron: int
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        """Its length."""
        return (self.end - self.start).total_seconds()


def spans(rows: Iterable[store.HoldRow], since: datetime, until: datetime, now: datetime) -> list[Span]:
    """The holds clipped to [since, until); a hold still running lasts until now."""
    found = []
    for row in rows:
        end = max(row.end, now) if row.open else row.end
        start, end = max(row.start, since), min(end, until)
        if end > start:
            found.append(Span(team_of(row.namespace), row.namespace, row.hold.user, row.hold.node, row.hold.gpu,
                              row.hold.neuron, start, end))
    return found


def node_seconds(found: Iterable[Span]) -> float:
    """Seconds during which at least one of the spans held each node, summed over nodes (overlaps counted once)."""
    by_node: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for s in found:
        by_node[s.node].append((s.start, s.end))
    total = 0.0
    for intervals in by_node.values():
        intervals.sort()
        start, end = intervals[0]
        for a, b in intervals[1:]:
            if a > end:
                total += (end - start).total_seconds()
                start, end = a, b
            else:
                end = max(end, b)
        total += (end - start).total_seconds()
    return total


def group(found: list[Span], key: Callable[[Span], tuple[str, ...]], fields: tuple[str, ...]) -> list[UsageGroup]:
    """The spans summed per `key` (whose parts name `fields` of UsageGroup), most GPU-hours first."""
    parts: dict[tuple[str, ...], list[Span]] = defaultdict(list)
    for s in found:
        parts[key(s)].append(s)
    groups = [
        UsageGroup(
            **dict(zip(fields, k, strict=True)),
            gpu_hours=round(sum(s.gpu * s.seconds for s in members) / 3600, 4),
            neuron_device_hours=round(sum(s.neuron * s.seconds for s in members) / 3600, 4),
            node_hours=round(node_seconds(members) / 3600, 4),
            pods=len(members),
        )
        for k, members in parts.items()
    ]
    return sorted(groups, key=lambda g: (-g.gpu_hours, -g.neuron_device_hours, g.team or "", g.user or ""))


def as_csv(rows: list[UsageGroup]) -> str:
    """The rows as CSV with a header line."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_HEADER)
    for r in rows:
        w.writerow((r.team, r.namespace, r.user, r.gpu_hours, r.neuron_device_hours, r.node_hours, r.pods))
    return out.getvalue()


def period(req: UsageRequest, now: datetime) -> tuple[datetime, datetime]:
    """The period asked for, with its defaults; refused when it is empty or names no zone."""
    for name, value in (("since", req.since), ("until", req.until)):
        if value is not None and value.tzinfo is None:
            raise InvalidInput(f"Invalid input: {name}: has no time zone",
                               hint=f"Give {name} with a zone, e.g. 2026-01-31T00:00:00Z.",
                               details={"fields": [{"field": name, "message": "has no time zone"}]})
    until = req.until or now
    since = req.since or until - timedelta(days=DEFAULT_DAYS)
    if since >= until:
        raise InvalidInput("Invalid input: since: is not before until",
                           hint="Give a since earlier than until (or leave one out: until defaults to now, since to "
                           f"{DEFAULT_DAYS} days before until).",
                           details={"fields": [{"field": "since", "message": "is not before until"}]})
    return since, until


def visible_to_member(span: Span, user: str, teams: set[str]) -> bool:
    """Whether a member may see a hold: their own, and their teams' (members listed on the team, or mapped to it
    from their SSO groups: store/teams.teams_of)."""
    return span.user == user or (bool(span.team) and span.team in teams)


def _unavailable(ctx: CallContext, region: str, eks_cluster: str | None) -> list[str]:
    if not eks_cluster:
        return ["pods: the cluster has no EKS cluster yet, so no pod has been seen"]
    inf = ctx.app.informers.peek(informer_key(region, eks_cluster, "pods"))
    if inf is None:
        return ["pods: the pods watch is not running (it starts when the cluster is registered or its EKS stage "
                "succeeds); holds since it stopped are counted to their last sample"]
    if not inf.synced.is_set() or not inf.health.connected:
        return [f"pods: the pods watch is not current ({inf.health.last_error or 'starting'})"]
    return []


@operation("usage_report", method="GET", path="/usage", example={"team": "ml-research"}, cli=("usage", "report"))
async def usage_report(ctx: CallContext, req: UsageRequest) -> UsageReport:
    """Read-only: GPU-hours, Neuron-device-hours and node-hours of a cluster (default: the active one) per team, per
    user and per (team, namespace, user) over a period (default: the last 7 days), with those rows as CSV. Counted
    from the pods that held accelerators (their start to their end, or now), as the pods watch recorded them; the
    team is the namespace's (hyperpod-ns-<team>), the user who submitted the job or model server through
    InstantStart. A member sees their own usage and their teams'; operators and admins see everyone's."""
    app, now = ctx.app, utcnow()
    since, until = period(req, now)
    tag = await to_thread.run_sync(resolve_tag, app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, app.db, tag)
    await to_thread.run_sync(writer(app).flush)  # what the pods watch queued before this read is in the store
    held, truncated = await to_thread.run_sync(store.holds, app.db, tag, since, until)
    found = spans(held, since, until, now)
    own = ctx.principal is not None and not ctx.principal.at_least("operator")
    if own and ctx.principal is not None:
        user = ctx.principal.user
        teams = {t.name for t in await to_thread.run_sync(teams_of, app.db, user, tag)}
        found = [s for s in found if visible_to_member(s, user, teams)]
    found = [s for s in found if (req.team is None or s.team == req.team) and (req.user is None or s.user == req.user)]
    rows = group(found, lambda s: (s.team, s.namespace, s.user), ("team", "namespace", "user"))
    [total] = group(found, lambda _s: (), ()) or [UsageGroup(gpu_hours=0, neuron_device_hours=0, node_hours=0, pods=0)]
    return UsageReport(
        cluster_tag=tag, since=since, until=until, scope="own" if own else "all",
        by_team=group(found, lambda s: (s.team,), ("team",)), by_user=group(found, lambda s: (s.user,), ("user",)),
        rows=rows, total=total, csv=as_csv(rows), sample_seconds=app.settings.usage_sample_seconds,
        truncated=truncated, unavailable=_unavailable(ctx, row.region, row.eks_cluster_name),
    )
