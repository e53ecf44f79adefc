"""HyperPod task governance on the AWS side: cluster scheduler configs (the cluster policy) and compute quotas
(one per team), as SageMaker's Create/Update/Describe/List/DeleteClusterSchedulerConfig and …ComputeQuota answer
them. The request shapes are checked against botocore's model before a handler runs (`model_check.py`); the
rules here are the service's own: one scheduler config per cluster, one quota per team and cluster, updates
naming the current version (TargetVersion), the cluster must exist. Every change publishes
`hyperpod.governance.changed` with the cluster's whole governance, which the task governance add-on (in the
simulator, `sim/governance_sync.py`) turns into Kueue objects."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Any

from .context import AwsContext, alnum_id
from .protocol import AwsError, AwsRequest, RawResponse, json_response, page
from .sagemaker_hyperpod import SM, HyperPod

_KINDS = {"quota": ("ComputeQuota", "compute-quota"), "config": ("ClusterSchedulerConfig", "cluster-scheduler-config")}


@dataclass
class Entity:
    """One compute quota or scheduler config, with every version's body kept (Describe… by version)."""

    kind: str  # "quota" | "config"
    id: str
    arn: str
    name: str
    region: str
    cluster_arn: str
    creation_time: float
    body: dict[str, Any]
    version: int = 1
    status: str = "Created"
    modified: float = 0.0
    history: dict[int, dict[str, Any]] = field(default_factory=dict)

    def view(self, version: int | None = None) -> dict[str, Any]:
        """The Describe… answer (of `version`, default the latest)."""
        kind = _KINDS[self.kind][0]
        body = self.history[version] if version is not None else self.body
        return {f"{kind}Arn": self.arn, f"{kind}Id": self.id, "Name": self.name, f"{kind}Version": version or
                self.version, "Status": self.status, "ClusterArn": self.cluster_arn, **copy.deepcopy(body),
                "CreationTime": self.creation_time, "LastModifiedTime": self.modified or self.creation_time}


class Governance:
    """The account's scheduler configs and compute quotas."""

    def __init__(self, ctx: AwsContext, hp: HyperPod) -> None:
        self.ctx, self.hp = ctx, hp
        self.items: dict[str, Entity] = {}

    def reset(self) -> None:
        self.items.clear()

    def _get(self, kind: str, entity_id: Any) -> Entity:
        found = self.items.get(str(entity_id))
        if found is None or found.kind != kind:
            raise AwsError("ResourceNotFound", f"{_KINDS[kind][0]} {entity_id} does not exist.")
        return found

    def _publish(self, region: str, cluster_arn: str) -> None:
        cluster = self.hp.get(region, cluster_arn)
        mine = [e for e in self.items.values() if e.cluster_arn == cluster_arn]
        configs = [e.view() for e in mine if e.kind == "config"]
        self.ctx.emit("hyperpod.governance.changed", eks_cluster_arn=cluster.eks_arn, cluster_arn=cluster_arn,
                      scheduler=configs[0] if configs else None,
                      quotas=[e.view() for e in mine if e.kind == "quota"])

    def _check_unique(self, kind: str, cluster_arn: str, body: dict[str, Any], skip: str = "") -> None:
        for other in self.items.values():
            if other.kind != kind or other.cluster_arn != cluster_arn or other.id == skip:
                continue
            if kind == "config":
                raise AwsError("ConflictException", f"Cluster {cluster_arn} already has cluster scheduler config "
                               f"{other.id}; a cluster has one (update it instead).")
            team = body["ComputeQuotaTarget"]["TeamName"]
            if other.body["ComputeQuotaTarget"]["TeamName"] == team:
                raise AwsError("ConflictException", f"Team {team} already has compute quota {other.id} on cluster "
                               f"{cluster_arn}.")

    def create(self, kind: str, req: AwsRequest) -> RawResponse:
        """CreateComputeQuota / CreateClusterSchedulerConfig."""
        p = req.params
        body = _body(kind, p)
        if kind == "quota":
            body.setdefault("ActivationState", "Enabled")
        with self.ctx.locked():
            cluster = self.hp.get(req.region, p["ClusterArn"])
            self._check_unique(kind, cluster.arn, body)
            entity_id = alnum_id(12)
            now = self.ctx.clock.wall()
            entity = Entity(kind, entity_id, self.ctx.arn("sagemaker", req.region, f"{_KINDS[kind][1]}/{entity_id}"),
                            str(p["Name"]), req.region, cluster.arn, now, body)
            entity.history[1] = copy.deepcopy(body)
            self.items[entity_id] = entity
            self._publish(req.region, cluster.arn)
        name = _KINDS[kind][0]
        return json_response(req, {f"{name}Arn": entity.arn, f"{name}Id": entity.id})

    def update(self, kind: str, req: AwsRequest) -> RawResponse:
        """UpdateComputeQuota / UpdateClusterSchedulerConfig: TargetVersion must be the current version."""
        p, name = req.params, _KINDS[kind][0]
        with self.ctx.locked():
            entity = self._get(kind, p[f"{name}Id"])
            if int(p["TargetVersion"]) != entity.version:
                raise AwsError("ConflictException", f"TargetVersion {p['TargetVersion']} is not the current version "
                               f"{entity.version} of {name} {entity.id}; describe it and retry with that version.")
            body = {**copy.deepcopy(entity.body), **_body(kind, p)}
            self._check_unique(kind, entity.cluster_arn, body, skip=entity.id)
            entity.body, entity.version, entity.status = body, entity.version + 1, "Updated"
            entity.modified = self.ctx.clock.wall()
            entity.history[entity.version] = copy.deepcopy(body)
            self._publish(entity.region, entity.cluster_arn)
        return json_response(req, {f"{name}Arn": entity.arn, f"{name}Version": entity.version})

    def describe(self, kind: str, req: AwsRequest) -> RawResponse:
        """DescribeComputeQuota / DescribeClusterSchedulerConfig (optionally one version)."""
        p, name = req.params, _KINDS[kind][0]
        with self.ctx.locked():
            entity = self._get(kind, p[f"{name}Id"])
            version = p.get(f"{name}Version")
            if version is not None and int(version) not in entity.history:
                raise AwsError("ResourceNotFound", f"{name} {entity.id} has no version {version}.")
            return json_response(req, entity.view(int(version) if version is not None else None))

    def delete(self, kind: str, req: AwsRequest) -> RawResponse:
        """DeleteComputeQuota / DeleteClusterSchedulerConfig."""
        with self.ctx.locked():
            entity = self._get(kind, req.params[f"{_KINDS[kind][0]}Id"])
            del self.items[entity.id]
            self._publish(entity.region, entity.cluster_arn)
        return json_response(req, {})

    def list(self, kind: str, req: AwsRequest) -> RawResponse:
        """ListComputeQuotas / ListClusterSchedulerConfigs with their filters and sort orders."""
        p = req.params
        with self.ctx.locked():
            items = [e for e in self.items.values() if e.kind == kind and e.region == req.region]
        for key, test in (("ClusterArn", lambda e, v: e.cluster_arn == v), ("NameContains", lambda e, v: v in e.name),
                          ("Status", lambda e, v: e.status == v),
                          ("CreatedAfter", lambda e, v: e.creation_time > float(v)),
                          ("CreatedBefore", lambda e, v: e.creation_time < float(v))):
            if p.get(key) is not None:
                items = [e for e in items if test(e, p[key])]
        order = {"Name": lambda e: e.name, "Status": lambda e: e.status, "ClusterArn": lambda e: e.cluster_arn}
        items.sort(key=order.get(str(p.get("SortBy")), lambda e: e.creation_time),
                   reverse=p.get("SortOrder") == "Descending")
        summaries = []
        for e in items:
            view = e.view()
            if kind == "config":
                view.pop("SchedulerConfig", None)
                view.pop("Description", None)
            else:
                view.pop("Description", None)
            summaries.append(view)
        key = "ComputeQuotaSummaries" if kind == "quota" else "ClusterSchedulerConfigSummaries"
        return json_response(req, page(p, summaries, key))


def _body(kind: str, p: dict[str, Any]) -> dict[str, Any]:
    members = (("ComputeQuotaConfig", "ComputeQuotaTarget", "ActivationState", "Description") if kind == "quota"
               else ("SchedulerConfig", "Description"))
    return {m: copy.deepcopy(p[m]) for m in members if p.get(m) is not None}


def register(ctx: AwsContext, hp: HyperPod) -> Governance:
    """Answer the ten task governance operations."""
    gov = Governance(ctx, hp)
    for kind, (name, _) in _KINDS.items():
        plural = "ComputeQuotas" if kind == "quota" else "ClusterSchedulerConfigs"
        for verb, handler in (("Create", gov.create), ("Update", gov.update), ("Describe", gov.describe),
                              ("Delete", gov.delete)):
            ctx.route(SM, f"{verb}{name}")(functools.partial(handler, kind))
        ctx.route(SM, f"List{plural}")(functools.partial(gov.list, kind))
    ctx.on_reset(gov.reset)
    return gov
