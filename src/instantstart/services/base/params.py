"""Typed params of the cluster domain's operation kinds, in their stored camelCase form.

Stages shared between kinds read a base model; each kind registers the subclass describing exactly what
its service submits, so `stage.params_as(Base)` holds for every kind that runs the stage.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from instantstart.operations.params import ParamsModel
from instantstart.services.base.registry import ClusterParams as ClusterParams  # the base, re-exported


class AddressPlanParams(ParamsModel):
    """Explicit network addresses (cluster_create_eks_with_cidr); stored under the builder's own keys."""

    vpc: str
    public: list[str]
    eks_private: list[str] = Field(alias="eks_private")
    compute: str


class EksParams(ClusterParams):
    """The EKS stage: a new VPC (CIDR chosen or given, or explicit addresses) or a reused one."""

    vpc_cidr: str | None = None
    vpc_id: str | None = None
    kubernetes_version: str | None = None
    endpoint_public_access_cidrs: list[str] | None = None
    plan: AddressPlanParams | None = None


class HyperPodGroupParams(ParamsModel):
    """The first accelerated instance group, as decided on submit."""

    group_name: str
    instance_type: str
    count: int
    availability_zone: str
    ebs_gb: int
    training_plan_arn: str | None = None
    subnet_id: str | None = None
    capacity_type: str = "OnDemand"
    threads_per_core: int
    deep_health_checks: list[str] = Field(default_factory=list)
    notes: list[str] | None = Field(default=None, description="Placement decisions (training-plan AZ).")


class HyperPodParams(ClusterParams):
    """The HyperPod stage."""

    hyperpod: HyperPodGroupParams


class StorageSpecParams(ParamsModel):
    """A claim on a bucket: only the name (cluster_create), or the validated spec (s3_storage_create)."""

    name: str
    bucket_name: str | None = None
    region: str | None = None
    prefix: str | None = None


class StorageParams(ClusterParams):
    """The storage stage (the project bucket and the default claim name when `storage` is absent)."""

    storage: StorageSpecParams | None = None


class VerificationParams(StorageParams):
    """The verification stage; `verifyWaitSeconds` bounds the wait (default 20 minutes)."""

    verify_wait_seconds: float | None = None


class CreateParams(EksParams, HyperPodParams, VerificationParams):
    """cluster_create: every stage's params in one."""


class ImportParams(ClusterParams):
    """cluster_import: the EKS cluster registered under clusterTag."""

    eks_cluster_name: str


class PlannedStep(ParamsModel):
    """One resource of the deletion plan, as shown by cluster_delete_plan."""

    order: int
    resource_type: str
    resource_id: str
    region: str
    source: str
    keep: bool = False
    details: dict[str, Any] = Field(default_factory=dict)


class DeleteParams(ParamsModel):
    """cluster_delete: the plan whose digest the caller confirmed."""

    cluster_tag: str
    delete_bucket: bool = False
    plan: list[PlannedStep]


def stored(params: ParamsModel) -> dict[str, Any]:
    """The params as submitted and stored: JSON, camelCase keys."""
    return params.model_dump(mode="json", by_alias=True)
