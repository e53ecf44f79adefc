"""Resource Groups Tagging API sees the twin's own resources (HyperPod clusters, plans, FSx, EKS add-ons)."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.resource_tagging import TaggableResourcesMixin, TaggedResource

if TYPE_CHECKING:
    from .side import AwsSide

# moto's backends are process-wide, so the twin that owns them is too (one Twin per process).
_CURRENT: weakref.WeakSet[AwsSide] = weakref.WeakSet()


def _dict_tags(tags: Any) -> dict[str, str]:
    if isinstance(tags, dict):
        return {str(k): str(v) for k, v in tags.items()}
    return {str(t["Key"]): str(t["Value"]) for t in tags or []}


class TwinTaggedResources(BaseBackend, TaggableResourcesMixin):
    """A moto backend whose only job is to list and tag the resources the twin's extensions own."""

    SERVICE_NAMESPACE = "twin"

    def _side(self) -> AwsSide | None:
        return next(iter(_CURRENT), None)

    def _owned(self) -> Iterator[tuple[str, str, Any, str]]:
        """(arn, resource type, object, tag style) of every twin-owned resource in this Region."""
        side = self._side()
        if side is None or side.ctx.account_id != self.account_id:
            return
        region = self.region_name
        for cluster in side.life.clusters.values():
            if cluster.region == region:
                yield cluster.arn, "sagemaker:cluster", cluster, "list"
        for plan in side.plans.plans.values():
            if plan.region == region:
                yield plan.arn, "sagemaker:training-plan", plan, "list"
        for fs in side.fsx.file_systems.values():
            if fs["_region"] == region:
                yield fs["ResourceARN"], "fsx:file-system", fs, "dict-list"
        for (reg, _name), extra in side.eks.extras.items():
            if reg != region:
                continue
            for addon in extra.addons.values():
                yield addon["addonArn"], "eks:addon", addon, "dict-map"
            for assoc in extra.pod_identities.values():
                yield assoc["associationArn"], "eks:podidentityassociation", assoc, "dict-map"

    def iter_tagged_resources(self) -> Iterator[TaggedResource]:
        """Every twin-owned resource with its tags."""
        side = self._side()
        if side is None:
            return
        with side.ctx.locked():
            items = [(arn, kind, _dict_tags(_tags_of(obj, style))) for arn, kind, obj, style in self._owned()]
        for arn, kind, tags in items:
            yield TaggedResource(arn=arn, tags=tags, resource_type=kind)

    def owns_arn(self, arn: str) -> bool:
        """Only ARNs of resources the twin's extensions hold."""
        return any(a == arn for a, _, _, _ in self._owned())

    def tag_resource(self, arn: str, tags: dict[str, str]) -> None:
        """TagResources for a twin-owned ARN."""
        self._retag(arn, lambda current: {**current, **tags})

    def untag_resource(self, arn: str, tag_keys: list[str]) -> None:
        """UntagResources for a twin-owned ARN."""
        self._retag(arn, lambda current: {k: v for k, v in current.items() if k not in tag_keys})

    def _retag(self, arn: str, change: Any) -> None:
        side = self._side()
        if side is None:
            return
        with side.ctx.locked():
            for owned_arn, _, obj, style in self._owned():
                if owned_arn == arn:
                    _set_tags(obj, style, change(_dict_tags(_tags_of(obj, style))))


def _tags_of(obj: Any, style: str) -> Any:
    if style == "list":
        return obj.tags
    if style == "dict-list":
        return obj.get("Tags") or []
    return obj.get("tags") or {}


def _set_tags(obj: Any, style: str, tags: dict[str, str]) -> None:
    as_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    if style == "list":
        obj.tags = as_list
    elif style == "dict-list":
        obj["Tags"] = as_list
    else:
        obj["tags"] = tags


twin_tagging_backends = BackendDict(TwinTaggedResources, "resourcegroupstaggingapi")


def register(side: AwsSide) -> None:
    """Make `side` the twin whose resources the tagging API lists (call at start and after reset)."""
    _CURRENT.clear()
    _CURRENT.add(side)
    # Touching the account registers the BackendDict with moto, so the tagging API walks it.
    twin_tagging_backends[side.ctx.account_id]
