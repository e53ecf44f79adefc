"""The cluster record's typed facts: what stages learned, over the stored `details` JSON column (keys unchanged)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from instantstart.errors import PreconditionFailed
from instantstart.store.models import ClusterRow


class ClusterFacts(BaseModel):
    """Facts of one managed cluster, grouped as network, EKS, HyperPod, storage, features and dependencies.

    Read from and written to the cluster row's `details` JSON column under the same camelCase keys the
    stages always wrote (the aliases), so a database written before this model reads unchanged. Keys this
    model does not name yet are kept as they are (extra="allow") and written back untouched."""

    model_config = ConfigDict(populate_by_name=True, extra="allow", validate_assignment=True)

    # network (the EKS stage's VPC, or a reused one)
    vpc_id: str | None = Field(default=None, alias="vpcId")
    security_group_id: str | None = Field(default=None, alias="securityGroupId")
    nat_gateway_id: str | None = Field(default=None, alias="natGatewayId")
    s3_endpoint_id: str | None = Field(default=None, alias="s3EndpointId")
    compute_subnet_id: str | None = Field(default=None, alias="computeSubnetId")
    compute_subnet_cidr: str | None = Field(default=None, alias="computeSubnetCidr")
    compute_subnets: dict[str, str] = Field(default_factory=dict, alias="computeSubnets")
    # EKS
    eks_cluster_name: str | None = Field(default=None, alias="eksClusterName")
    eks_cluster_arn: str | None = Field(default=None, alias="eksClusterArn")
    eks_status: str | None = Field(default=None, alias="eksStatus")
    addons: list[str] = Field(default_factory=list)
    # HyperPod (instanceGroups: a name → spec map for groups we added, a name list for an imported cluster)
    hyperpod_cluster_name: str | None = Field(default=None, alias="hyperpodClusterName")
    hyperpod_cluster_arn: str | None = Field(default=None, alias="hyperpodClusterArn")
    hyperpod_status: str | None = Field(default=None, alias="hyperpodStatus")
    execution_role_arn: str | None = Field(default=None, alias="executionRoleArn")
    instance_groups: dict[str, Any] | list[str] = Field(default_factory=dict, alias="instanceGroups")
    # lifecycle scripts an operator uploaded (hyperpod_update_lifecycle_script): group -> bucket, key, sha256 …
    lifecycle_scripts: dict[str, dict[str, Any]] = Field(default_factory=dict, alias="lifecycleScripts")
    # storage: the project bucket and the recorded claims (claim name → its record)
    bucket: str | None = None
    storage: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # features: last results, owner ledger, per-feature state
    feature_results: dict[str, Any] = Field(default_factory=dict, alias="featureResults")
    feature_owners: dict[str, list[str]] = Field(default_factory=dict, alias="featureOwners")
    checkpointing: dict[str, Any] | None = None
    grafana: dict[str, Any] | None = None
    karpenter: dict[str, Any] = Field(default_factory=dict)
    # an unfinished deletion: its operation, the main resources it removed or is removing, the stages before
    # (services/base/deletion_record.py)
    deletion: dict[str, Any] | None = None
    # dependencies: add-on/chart name → its last recorded status (an older record: a list of entries)
    dependencies: dict[str, Any] | list[Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, data: Any) -> Any:
        """A stored null of a map or list fact reads as absent (older rows wrote null to clear a fact)."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k not in _NOT_NULL}
        return data

    @property
    def any_compute_subnet(self) -> str | None:
        """The HyperPod compute subnet: the recorded one, else the first per-zone one."""
        return self.compute_subnet_id or next(iter(self.compute_subnets.values()), None)

    def need(self, name: str) -> str:
        """A fact a step cannot do without (field name); PreconditionFailed naming it when it is not recorded."""
        value = getattr(self, name)
        if not value:
            key = ClusterFacts.model_fields[name].alias or name
            raise PreconditionFailed(
                f"The cluster has no recorded {key}.",
                hint="Its EKS stage has not finished or it was imported: run cluster_create_eks and wait for it.",
                details={"fact": key},
            )
        return str(value)

    def missing(self, *names: str) -> list[str]:
        """The stored keys of the named facts (field names) that are not recorded."""
        return [ClusterFacts.model_fields[n].alias or n for n in names if not getattr(self, n)]

    def dependency_map(self) -> dict[str, Any]:
        """The recorded dependency statuses as a name → status map (empty when none, or an older list record)."""
        return self.dependencies if isinstance(self.dependencies, dict) else {}

    def group_records(self) -> dict[str, Any]:
        """The instance groups this control plane added (name → subnet record); an imported cluster's name list
        records none."""
        return dict(self.instance_groups) if isinstance(self.instance_groups, dict) else {}

    def stored(self) -> dict[str, Any]:
        """The JSON the details column holds (aliases, unset fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


_NOT_NULL = {"computeSubnets", "addons", "instanceGroups", "storage", "featureResults", "featureOwners", "karpenter",
             "lifecycleScripts"}


def facts_of(row: ClusterRow) -> ClusterFacts:
    """The typed facts of a cluster row (its `details` column)."""
    return ClusterFacts.model_validate(row.details or {})


def stored_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """Fact changes keyed by field name (or stored key) as the details column stores them, their values
    checked against the model's types. A name the model does not declare is stored under that name (the
    stage outputs a status reports as they are: kubernetesVersion, oidcProviderArn, network, ...)."""
    fields = ClusterFacts.model_fields
    by_alias = {f.alias or name: name for name, f in fields.items()}
    out: dict[str, Any] = {}
    for key, value in changes.items():
        name = key if key in fields else by_alias.get(key)
        out[(fields[name].alias or name) if name else key] = value
    # Validate the values against their types before anything is stored.
    ClusterFacts.model_validate(out)
    return out
