"""Teams' wire models: a team's compute quota as the caller gives it, and a team as the catalog shows it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from instantstart.catalog.base import WireModel
from instantstart.operations.params import ParamsModel
from instantstart.services.teams.queueing import QueueUsage
from instantstart.validation import ClusterTag

TEAM_NAME = r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$"  # ComputeQuotaTargetTeamName: 1-40, a DNS label
USER_NAME = r"^[a-z][a-z0-9._-]{0,62}$"
Sharing = Literal["Lend", "DontLend", "LendAndBorrow"]


class PriorityClass(WireModel):
    """A task priority of the cluster's scheduler config: jobs name `<name>-priority` (higher weight first)."""

    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$", description="Priority class name.")
    weight: int = Field(ge=0, le=100, description="0-100; higher is admitted (and preempts) first.")


class Quota(WireModel):
    """A team's compute quota on one instance type of the cluster."""

    instance_type: str = Field(pattern=r"^ml\.[a-z0-9]+\.[a-z0-9]+$", description="An instance type of the "
                               "cluster's instance groups, e.g. ml.g5.12xlarge.")
    accelerators: int | None = Field(default=None, ge=0, le=100000, description="GPUs (Neuron devices on trn) of "
                                     "the quota; vCPU and memory follow in proportion. Give this or instanceCount.")
    instance_count: int | None = Field(default=None, ge=0, le=100000, description="Whole instances of the quota.")
    sharing: Sharing = Field(default="LendAndBorrow", description="Lend: idle quota is lent, nothing borrowed; "
                             "DontLend: neither; LendAndBorrow: both (default).")
    borrow_limit_percent: int = Field(default=50, ge=1, le=500, description="LendAndBorrow: how much idle capacity "
                                      "the team may borrow, in percent of its own quota (1-500, default 50).")
    fair_share_weight: int = Field(default=0, ge=0, le=100, description="Share of idle compute when fair share is "
                                   "on (0-100).")
    preempt_team_tasks: Literal["Never", "LowerPriority"] = Field(
        default="LowerPriority", description="Whether the team's higher-priority tasks preempt its own lower ones.")

    @model_validator(mode="after")
    def _one_size(self) -> Quota:
        if (self.accelerators is None) == (self.instance_count is None):
            raise ValueError("give exactly one of accelerators (GPUs) or instanceCount (whole instances)")
        return self

    def request(self, team: str) -> dict[str, Any]:
        """The ComputeQuotaConfig and ComputeQuotaTarget of CreateComputeQuota/UpdateComputeQuota."""
        resource: dict[str, Any] = {"InstanceType": self.instance_type}
        if self.accelerators is not None:
            resource["Accelerators"] = self.accelerators
        else:
            resource["Count"] = self.instance_count
        sharing: dict[str, Any] = {"Strategy": self.sharing}
        if self.sharing == "LendAndBorrow":
            sharing["BorrowLimit"] = self.borrow_limit_percent
        return {"ComputeQuotaConfig": {"ComputeQuotaResources": [resource], "ResourceSharingConfig": sharing,
                                       "PreemptTeamTasks": self.preempt_team_tasks},
                "ComputeQuotaTarget": {"TeamName": team, "FairShareWeight": self.fair_share_weight}}


class SchedulerSettings(WireModel):
    """The cluster's scheduler config (one per cluster, shared by its teams)."""

    priority_classes: list[PriorityClass] = Field(default_factory=list, max_length=16)
    fair_share: bool = Field(default=True, description="Idle compute goes by fairShareWeight (else first come).")

    def request(self) -> dict[str, Any]:
        """SchedulerConfig of Create/UpdateClusterSchedulerConfig."""
        return {"PriorityClasses": [{"Name": p.name, "Weight": p.weight} for p in self.priority_classes],
                "FairShare": "Enabled" if self.fair_share else "Disabled"}


class TeamCreateRequest(WireModel):
    """A team on a cluster: its quota, its members, and optionally the cluster's scheduler config."""

    name: str = Field(pattern=TEAM_NAME, description="Team name (1-40, a DNS label): namespace hyperpod-ns-<name>.")
    quota: Quota
    members: list[str] = Field(default_factory=list, max_length=256, description="User names of its members.")
    scheduler: SchedulerSettings | None = Field(default=None, description="Sets the cluster's scheduler config "
                                                "(created with fair share on and no priority classes if absent).")
    cluster_tag: ClusterTag | None = None


class TeamUpdateRequest(WireModel):
    """What changes of a team (fields left out keep their value)."""

    name: str = Field(pattern=TEAM_NAME)
    quota: Quota | None = None
    members: list[str] | None = Field(default=None, max_length=256, description="The complete new member list.")
    scheduler: SchedulerSettings | None = None
    cluster_tag: ClusterTag | None = None


class TeamRef(WireModel):
    """One team of a cluster."""

    name: str = Field(pattern=TEAM_NAME)
    cluster_tag: ClusterTag | None = None


class TeamsRequest(WireModel):
    """Which cluster's teams (every cluster's when absent)."""

    cluster_tag: ClusterTag | None = None


class TeamView(WireModel):
    """A team as stored, with its quota as SageMaker describes it now."""

    name: str
    cluster_tag: str
    namespace: str = Field(description="Where its members' jobs go by default.")
    queue: str = Field(description="Its Kueue LocalQueue (jobs' queueName by default).")
    members: list[str]
    quota: dict[str, Any] = Field(description="The quota as given (instanceType, accelerators|instanceCount, ...).")
    quota_id: str
    quota_status: str | None = Field(description="SageMaker's status of the compute quota (None: it is gone).")
    usage: QueueUsage | None = Field(default=None, description="Its Kueue queue now (None until the task governance "
                                     "add-on has created it).")
    created_by: str


class TeamList(WireModel):
    """Teams by name then cluster."""

    teams: list[TeamView]


class TeamParams(ParamsModel):
    """What team_create/team_update/team_delete record."""

    cluster_tag: str
    region: str
    cluster_arn: str
    name: str
    quota: dict[str, Any] | None = None
    members: list[str] | None = None
    scheduler: dict[str, Any] | None = None
    by: str = ""
