"""The watch-fed view of a cluster's nodes, pods and claims that status and node reads are built from."""

from __future__ import annotations

from typing import Any

from instantstart.context import AppContext
from instantstart.errors import ProviderError
from instantstart.kube.informers import Informer
from instantstart.services.base.watch.digest import NodeDigest, digest
from instantstart.services.base.watch.state import (
    STATUS_KINDS,
    Allocations,
    Freshness,
    freshness,
    memoised,
    watched,
)
from instantstart.store.models import ClusterRow

Obj = dict[str, Any]


def watched_digest(nodes: Informer, pods: Informer) -> NodeDigest:
    """The node digest of the watched nodes and pods, computed once per change of either (memoised)."""
    alloc: Allocations = pods.derived.allocations

    def compute() -> NodeDigest:
        _, items = nodes.snapshot()
        _, used = alloc.snapshot()
        return digest(items, used)

    found: NodeDigest = memoised(nodes, "digest", (nodes.version, alloc.version), compute)
    return found


async def node_state(app: AppContext, row: ClusterRow) -> tuple[NodeDigest, list[Obj], Freshness]:
    """(node digest, storage claims, freshness) of the cluster from its watches. The first read of a
    cluster waits for the initial lists (bounded); every later read is served from memory at once."""
    infs = await watched(app, row.tag, row.region, row.eks_cluster_name, STATUS_KINDS)
    nodes, pods, pvcs = infs
    fresh = freshness(infs)
    if not fresh.synced:
        errors = "; ".join(f"{w['kind']}: {w['lastError']}" for w in fresh.watches if w["lastError"])
        raise ProviderError(
            f"the watches of {row.eks_cluster_name} have not synced yet{': ' + errors if errors else ''}",
            retryable=True,
        )
    node_digest = watched_digest(nodes, pods)
    claims: list[Obj] = memoised(
        pvcs, "claims", (pvcs.version,),
        lambda: sorted(pvcs.snapshot()[1].values(), key=lambda c: (c["namespace"], c["name"])),
    )
    return node_digest, claims, fresh
