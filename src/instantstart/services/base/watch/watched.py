"""Answers built from a cluster's watches, with the status tools' freshness, or read directly when they cannot be.

The rule every watch-fed read follows (cluster_get_status, node_list, job_get_status, inference_list_services):
the first read of a cluster waits (bounded) for the initial lists; after that the answer is built from memory at
once, marked stale with its age while a watch is down (the last state is served, never a wait). Only when a
watch cannot be started (not synced after the first wait) or the object asked for is not in the watches (just
created: the watch may lag by a moment) is the API server read directly, and the answer says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from anyio import to_thread

from instantstart.context import AppContext
from instantstart.kube.informers import Informer
from instantstart.services.base.status_model import WatchFreshness
from instantstart.services.base.watch.state import Freshness, freshness, watched
from instantstart.store.models import ClusterRow

T = TypeVar("T")
SOURCE_HELP = ("watch: built from the cluster's watches (`watch.stale` while one is down: the last state, "
               "`note` says how old); direct: read from the API server because a watch could not be started or "
               "the object is not in the watches yet (`note` says which).")


@dataclass
class Watched(Generic[T]):
    """An answer, where it came from ("watch" or "direct"), the watches' freshness and a note for the reader."""

    value: T
    source: str
    fresh: Freshness
    note: str | None

    @property
    def watch(self) -> WatchFreshness:
        """The freshness in wire form (the same as cluster_get_status and node_list give)."""
        return WatchFreshness.model_validate(self.fresh.as_dict())


async def from_watches(app: AppContext, row: ClusterRow, kinds: tuple[str, ...],
                       build: Callable[[list[Informer]], T | None], direct: Callable[[], T],
                       missing: str = "the watches do not hold it") -> Watched[T]:
    """`build(informers of kinds)` (in memory, non-blocking) once the watches have synced, stale-marked while one
    is down; `direct()` (blocking) when they have not synced, or when `build` returns None (`missing` says why)."""
    infs = await watched(app, row.tag, row.region, row.eks_cluster_name, kinds)
    fresh = freshness(infs)
    if fresh.synced:
        value = build(infs)
        if value is not None:
            return Watched(value, "watch", fresh, fresh.stale_note(row.eks_cluster_name))
        why = missing
    else:
        errors = "; ".join(f"{w['kind']}: {w['lastError']}" for w in fresh.watches if w["lastError"])
        why = f"the watches of {row.eks_cluster_name} have not synced{': ' + errors if errors else ''}"
    value = await to_thread.run_sync(direct)
    return Watched(value, "direct", fresh, f"read directly from the API server: {why}.")


def events_attachable(row: ClusterRow) -> bool:
    """Whether the cluster's Kubernetes API can be watched: imported, or its EKS stage succeeded."""
    return bool(row.eks_cluster_name) and (row.imported or (row.stages or {}).get("eks") == "SUCCEEDED")
