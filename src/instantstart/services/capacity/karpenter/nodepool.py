"""The Karpenter toggle's Kubernetes objects: the HyperpodNodeClass and NodePool, applied and removed."""

from __future__ import annotations

from typing import Any

from instantstart.context import StageContext
from instantstart.kube.calls import kube_api, kube_call
from instantstart.kube.gateway import Api
from instantstart.kube.reads import crds_served, delete_cluster_object, ensure_cluster_object, read_cluster_object
from instantstart.manifests import karpenter as karpenter_manifests
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import ClusterParams, get_cluster
from instantstart.services.capacity.karpenter.state import WAIT, KarpenterEnableParams, record_state, state_of

# (state key, API group, plural) of the objects the toggle makes, in the order they are removed.
OBJECTS = (
    ("nodePool", karpenter_manifests.NODEPOOL_GROUP, karpenter_manifests.NODEPOOL_PLURAL),
    ("nodeClass", karpenter_manifests.NODECLASS_GROUP, karpenter_manifests.NODECLASS_PLURAL),
)
CRDS = (
    f"{karpenter_manifests.NODEPOOL_PLURAL}.{karpenter_manifests.NODEPOOL_GROUP}",
    f"{karpenter_manifests.NODECLASS_PLURAL}.{karpenter_manifests.NODECLASS_GROUP}",
)


def read_object(api: Api, group: str, plural: str, name: str) -> dict[str, Any] | None:
    """A Karpenter object (cluster-scoped, version m.VERSION), or None (blocking, errors translated)."""
    return kube_call(
        f"read {plural} {name}", read_cluster_object, api, group, karpenter_manifests.VERSION, plural, name
    )


def ready(obj: dict[str, Any] | None) -> tuple[bool, str]:
    """A Karpenter object's Ready condition (and its message)."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True", str(c.get("message") or c.get("reason") or "")
    return False, "no Ready condition yet"


async def stage_nodepool(stage: StageContext) -> dict[str, Any]:
    """Once the Karpenter CRDs are served: the HyperpodNodeClass and NodePool, until both are Ready."""
    p = stage.params_as(KarpenterEnableParams)
    tag = p.cluster_tag
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    api = await blocking(kube_api, app.kube, row.eks_cluster_name, row.region)
    s = p.settings.manifest_settings()

    async def crds() -> tuple[bool, str]:
        served = await blocking(kube_call, "read Karpenter CRDs", crds_served, api, CRDS)
        return served, "Karpenter CRDs served" if served else "waiting for the Karpenter CRDs"

    await wait_until(stage, crds, limit_seconds=WAIT, what="the Karpenter CRDs")
    for key, group, plural, body in (
        (
            "nodeClass",
            karpenter_manifests.NODECLASS_GROUP,
            karpenter_manifests.NODECLASS_PLURAL,
            karpenter_manifests.node_class(s),
        ),
        (
            "nodePool",
            karpenter_manifests.NODEPOOL_GROUP,
            karpenter_manifests.NODEPOOL_PLURAL,
            karpenter_manifests.node_pool(s),
        ),
    ):
        await blocking(
            kube_call,
            f"apply {body['kind']}",
            ensure_cluster_object,
            api,
            group,
            karpenter_manifests.VERSION,
            plural,
            body,
        )
        await record_state(app, tag, **{key: s.name})

    async def pool_ready() -> tuple[bool, str]:
        pool = await blocking(
            read_object, api, karpenter_manifests.NODEPOOL_GROUP, karpenter_manifests.NODEPOOL_PLURAL, s.name
        )
        ok, why = ready(pool)
        return ok, f"NodePool {s.name}: {'Ready' if ok else why}"

    await wait_until(stage, pool_ready, limit_seconds=WAIT, what=f"NodePool {s.name}")
    stored = p.settings.model_dump(mode="json", by_alias=True)
    await record_state(app, tag, enabled=True, instanceGroups=list(s.instance_groups), settings=stored)
    return {"nodeClass": s.name, "nodePool": s.name, "instanceGroups": list(s.instance_groups)}


async def stage_remove_nodepool(stage: StageContext) -> dict[str, Any]:
    """Delete the NodePool, then the HyperpodNodeClass, each until gone (only those the toggle made)."""
    tag = stage.params_as(ClusterParams).cluster_tag
    app = stage.app
    row = await blocking(get_cluster, app.db, tag)
    state = state_of(row)
    await record_state(app, tag, enabled=False)
    api = await blocking(kube_api, app.kube, row.eks_cluster_name, row.region)
    removed = []
    for key, group, plural in OBJECTS:
        name = state.get(key)
        if not name:
            continue
        await stage.progress(f"deleting {key} {name}")
        await blocking(
            kube_call,
            f"delete {key} {name}",
            delete_cluster_object,
            api,
            group,
            karpenter_manifests.VERSION,
            plural,
            name,
        )

        async def gone(g: str = group, p: str = plural, n: str = str(name)) -> tuple[bool, str]:
            left = await blocking(read_object, api, g, p, n)
            return left is None, f"waiting for {n} to go"

        await wait_until(stage, gone, limit_seconds=WAIT, what=f"deletion of {name}")
        removed.append(f"{key}/{name}")
        await record_state(app, tag, **{key: None})
    return {"removed": removed}
