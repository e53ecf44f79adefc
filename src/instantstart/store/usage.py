"""Accelerator usage kept in the timeline (source `usage`): who submitted each workload, and each pod's hold on
its node's GPUs or Neuron devices (first_at: it started; last_at: it ended, or was last seen holding them).

One row per workload (`usage:workload:<namespace>/<name>`, message: the submitting user) and one per pod
(`usage:pod:<uid>`, reason HOLDING while it runs or RELEASED once it ended, message: the JSON of `PodHold`).
They share the timeline's table and retention (timeline_retention_days) but not its listing: cluster_timeline
leaves source `usage` out.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import or_, select

from instantstart.store.db import Database
from instantstart.store.timeline import Entry, TimelineRow, record

SOURCE = "usage"
WORKLOAD, POD = "Workload", "Pod"
HOLDING, RELEASED = "Holding", "Released"
MAX_ROWS = 100_000  # a report reads at most this many pod rows (it says when it was cut)


@dataclass(frozen=True)
class PodHold:
    """What one pod held: accelerators on a node, and who submitted it (empty: not through InstantStart)."""

    gpu: int
    neuron: int
    node: str
    user: str

    def dumps(self) -> str:
        """The stored form (the row's message)."""
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def loads(text: str) -> PodHold:
        """Back from the stored form (a malformed row holds nothing)."""
        try:
            data = json.loads(text)
            return PodHold(int(data["gpu"]), int(data["neuron"]), str(data["node"]), str(data["user"]))
        except (ValueError, KeyError, TypeError):
            return PodHold(0, 0, "", "")


@dataclass(frozen=True)
class HoldRow:
    """A pod's hold as read back: its namespace and name, what it held, from when to when, whether it still runs."""

    namespace: str
    name: str
    hold: PodHold
    start: datetime
    end: datetime
    open: bool


def workload_entry(tag: str, namespace: str, name: str, user: str, at: datetime) -> Entry:
    """The entry saying `user` submitted workload `namespace/name` (a resubmission names its new submitter)."""
    return Entry(
        cluster_tag=tag, dedupe_key=f"usage:workload:{namespace}/{name}", source=SOURCE, object_kind=WORKLOAD,
        object_name=name, namespace=namespace, type="Normal", reason="Submitted", message=user, count=1,
        first_at=at, last_at=at,
    )


def record_workload(db: Database, tag: str, namespace: str, name: str, user: str, at: datetime) -> None:
    """Record who submitted a workload (written at once: its pods may appear before a batch is flushed)."""
    record(db, [workload_entry(tag, namespace, name, user, at)])


def pod_entry(tag: str, uid: str, namespace: str, name: str, hold: PodHold, start: datetime, end: datetime,
              *, open_: bool) -> Entry:
    """The entry of a pod's hold (replaces the pod's previous one: the latest observation is the truth)."""
    return Entry(
        cluster_tag=tag, dedupe_key=f"usage:pod:{uid}", source=SOURCE, object_kind=POD, object_name=name,
        namespace=namespace, type="Normal", reason=HOLDING if open_ else RELEASED, message=hold.dumps(), count=1,
        first_at=start, last_at=max(end, start),
    )


def submitter(db: Database, tag: str, namespace: str, pod: str) -> str:
    """Who submitted the workload pod `pod` belongs to: the workload of that namespace whose name is the pod's or
    a `<name>-` prefix of it (the longest such); empty when none was submitted through InstantStart."""
    with db.read_session() as session:
        rows = session.execute(
            select(TimelineRow.object_name, TimelineRow.message).where(
                TimelineRow.cluster_tag == tag, TimelineRow.source == SOURCE, TimelineRow.object_kind == WORKLOAD,
                TimelineRow.namespace == namespace,
            )
        ).all()
    owners = [(name, user) for name, user in rows if pod == name or pod.startswith(name + "-")]
    return max(owners, key=lambda o: len(o[0]))[1] if owners else ""


def holds(db: Database, tag: str, since: datetime, until: datetime) -> tuple[list[HoldRow], bool]:
    """The pod holds of a cluster that overlap [since, until) (a pod still holding counts whatever its last
    sample), at most MAX_ROWS; and whether there were more."""
    with db.read_session() as session:
        rows = session.scalars(
            select(TimelineRow).where(
                TimelineRow.cluster_tag == tag, TimelineRow.source == SOURCE, TimelineRow.object_kind == POD,
                TimelineRow.first_at < until,
                or_(TimelineRow.last_at >= since, TimelineRow.reason == HOLDING),
            ).order_by(TimelineRow.id).limit(MAX_ROWS + 1)
        ).all()
        found = [
            HoldRow(r.namespace, r.object_name, PodHold.loads(r.message), r.first_at, r.last_at, r.reason == HOLDING)
            for r in rows[:MAX_ROWS]
        ]
    return found, len(rows) > MAX_ROWS


def open_holds(db: Database, tag: str) -> list[tuple[str, str, HoldRow]]:
    """(uid, dedupe key, hold) of the cluster's pods recorded as still holding (the sampler closes the ones gone)."""
    with db.read_session() as session:
        rows = session.scalars(
            select(TimelineRow).where(
                TimelineRow.cluster_tag == tag, TimelineRow.source == SOURCE, TimelineRow.object_kind == POD,
                TimelineRow.reason == HOLDING,
            )
        ).all()
        return [
            (r.dedupe_key.removeprefix("usage:pod:"), r.dedupe_key,
             HoldRow(r.namespace, r.object_name, PodHold.loads(r.message), r.first_at, r.last_at, True))
            for r in rows
        ]
