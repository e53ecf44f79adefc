"""SageMaker HyperPod cluster API (EKS orchestration) answered by the twin instead of moto's partial model."""

from __future__ import annotations

import copy
from typing import Any

from .context import AwsContext, alnum_id
from .hyperpod_lifecycle import Lifecycle
from .hyperpod_model import (
    LEAVING,
    Cluster,
    InstanceGroup,
    cluster_details,
    node_details,
    node_summary,
)
from .hyperpod_validate import (
    EKS_ARN_RE,
    check_name,
    immutable_changes,
    immutable_error,
    normalize_group,
    trusts,
)
from .protocol import AwsError, AwsRequest, RawResponse, json_response, validation
from .quotas import PER_CLUSTER_HYPERPOD, TOTAL_HYPERPOD, Quotas, cluster_usage_name
from .training_plans import TrainingPlans

SM = "sagemaker"


class HyperPod:
    """The HyperPod API over a `Lifecycle`, with quota and training plan checks."""

    def __init__(self, ctx: AwsContext, life: Lifecycle, quotas: Quotas, plans: TrainingPlans) -> None:
        self.ctx = ctx
        self.life = life
        self.quotas = quotas
        self.plans = plans
        plans.in_use = self.plan_in_use

    def reset(self) -> None:
        """Forget every cluster."""
        self.life.clusters.clear()

    def plan_in_use(self, plan_arn: str, exclude: tuple[str, str] | None = None) -> int:
        """Instances of a training plan reserved by instance groups (optionally not counting one)."""
        total = 0
        for cluster in self.life.clusters.values():
            if cluster.status == "Deleting":
                continue
            for group in cluster.groups.values():
                if group.spec.get("TrainingPlanArn") == plan_arn and (cluster.name, group.name) != exclude:
                    total += group.target
        return total

    def get(self, region: str, name_or_arn: Any) -> Cluster:
        """A cluster by name or ARN, or ResourceNotFound."""
        key = str(name_or_arn or "")
        for cluster in self.life.clusters.values():
            if cluster.region == region and key in (cluster.name, cluster.arn):
                return cluster
        raise AwsError("ResourceNotFound", f"Cluster {key} not found.")

    # checks -------------------------------------------------------------------------------------
    def check_eks(self, region: str, orchestrator: Any) -> dict[str, Any]:
        """The EKS orchestrator must name an ACTIVE EKS cluster with API access-entry authentication."""
        if not isinstance(orchestrator, dict) or len(orchestrator) != 1:
            raise validation("Orchestrator must specify exactly one of Eks or Slurm.")
        if "Slurm" in orchestrator:
            return orchestrator
        arn = str((orchestrator.get("Eks") or {}).get("ClusterArn", ""))
        match = EKS_ARN_RE.match(arn)
        if not match:
            raise validation(f"Orchestrator.Eks.ClusterArn '{arn}' is not a valid EKS cluster ARN.")
        eks_region, account, name = match.groups()
        if eks_region != region:
            raise validation(f"EKS cluster {arn} must be in the cluster's Region {region}.")
        eks = self.ctx.eks(eks_region).clusters.get(name) if account == self.ctx.account_id else None
        if eks is None:
            raise validation(f"EKS cluster {arn} does not exist.")
        if eks.status != "ACTIVE":
            raise validation(f"EKS cluster {name} is in {eks.status} state. It must be ACTIVE.")
        mode = (getattr(eks, "access_config", None) or {}).get("authenticationMode", "CONFIG_MAP")
        if mode not in ("API", "API_AND_CONFIG_MAP"):
            raise validation(
                f"EKS cluster {name} uses authentication mode {mode}. SageMaker HyperPod requires API or "
                "API_AND_CONFIG_MAP."
            )
        return orchestrator

    def check_execution_role(self, spec: dict[str, Any]) -> None:
        """The group's ExecutionRole must exist and trust sagemaker.amazonaws.com (HyperPod assumes it)."""
        arn = str(spec["ExecutionRole"])
        name = arn.rsplit("/", 1)[-1]
        account = arn.split(":")[4]
        role = None
        if account == self.ctx.account_id:
            role = next((r for r in self.ctx.iam().roles.values() if r.name == name), None)
        if role is None:
            raise validation(f"The execution role {arn} of instance group {spec['InstanceGroupName']} does not exist.")
        if not trusts(role.assume_role_policy_document, "sagemaker.amazonaws.com"):
            raise validation(
                f"The execution role {arn} cannot be assumed by sagemaker.amazonaws.com: its trust policy does not "
                "allow sts:AssumeRole for that service principal."
            )

    def zones(self, region: str, subnets: list[str]) -> list[tuple[str, str, str]]:
        """(subnet, AZ name, AZ id) for subnets that must exist."""
        out = []
        for s in subnets:
            az, az_id, _vpc = self.ctx.subnet_az(region, s)
            out.append((s, az, az_id))
        return out

    def check_vpc(self, region: str, vpc: Any, eks_vpc: str | None) -> dict[str, Any]:
        """VpcConfig with existing subnets and security groups (in the EKS cluster's VPC)."""
        if not isinstance(vpc, dict) or not vpc.get("Subnets") or not vpc.get("SecurityGroupIds"):
            raise validation("VpcConfig with Subnets and SecurityGroupIds is required for an EKS-orchestrated cluster.")
        ec2 = self.ctx.ec2(region)
        for sg in vpc["SecurityGroupIds"]:
            if ec2.get_security_group_from_id(sg) is None:
                raise validation(f"The security group '{sg}' does not exist")
        for s in vpc["Subnets"]:
            _az, _id, subnet_vpc = self.ctx.subnet_az(region, s)
            if eks_vpc and subnet_vpc != eks_vpc:
                raise validation(f"Subnet {s} is not in the VPC {eks_vpc} of the EKS cluster.")
        return copy.deepcopy(vpc)

    def check_group_placement(self, cluster_like: dict[str, Any], spec: dict[str, Any], region: str) -> None:
        """Role and subnets of a group exist; a training-plan group sits in the plan's AZ with enough capacity."""
        self.check_execution_role(spec)
        override = spec.get("OverrideVpcConfig") or {}
        subnets = override.get("Subnets") or cluster_like["VpcConfig"].get("Subnets") or []
        zones = self.zones(region, [str(s) for s in subnets])
        if spec.get("TrainingPlanArn"):
            self.plans.check_group(
                plan_arn=str(spec["TrainingPlanArn"]),
                group_name=str(spec["InstanceGroupName"]),
                instance_type=spec.get("InstanceType"),
                zones=zones,
                count=int(spec["InstanceCount"]),
                exclude=(str(cluster_like["ClusterName"]), str(spec["InstanceGroupName"])),
            )

    def check_quotas(self, region: str, cluster_name: str, targets: dict[str, tuple[str, int]]) -> None:
        """ResourceLimitExceeded when the account-level "<type> for cluster usage" quota would be passed."""
        usage: dict[str, int] = {}
        total = 0
        for cluster in self.life.clusters.values():
            if cluster.region != region or cluster.name == cluster_name or cluster.status == "Deleting":
                continue
            for g in cluster.groups.values():
                itype = str(g.spec.get("InstanceType") or "")
                usage[itype] = usage.get(itype, 0) + g.target
                total += g.target
        mine: dict[str, int] = {}
        for itype, count in targets.values():
            mine[itype] = mine.get(itype, 0) + count
        for itype, delta in mine.items():
            name = cluster_usage_name(itype)
            limit = self.quotas.value("sagemaker", name)
            if usage.get(itype, 0) + delta > limit:
                raise AwsError(
                    "ResourceLimitExceeded",
                    f"The account-level service limit '{name}' is {int(limit)} Instances, with current "
                    f"utilization of {usage.get(itype, 0)} Instances and a request delta of {delta} Instances. "
                    "Please use AWS Service Quotas to request an increase for this quota.",
                )
        own = sum(mine.values())
        if own > self.quotas.value("sagemaker", PER_CLUSTER_HYPERPOD):
            raise AwsError(
                "ResourceLimitExceeded", f"The account-level service limit '{PER_CLUSTER_HYPERPOD}' is exceeded."
            )
        if total + own > self.quotas.value("sagemaker", TOTAL_HYPERPOD):
            raise AwsError("ResourceLimitExceeded", f"The account-level service limit '{TOTAL_HYPERPOD}' is exceeded.")

    def describe(self, cluster: Cluster) -> dict[str, Any]:
        """DescribeCluster, with each training-plan group's TrainingPlanStatus taken from its plan."""
        out = cluster_details(cluster)
        for g in out["InstanceGroups"]:
            plan = self.plans.plans.get(str(g.get("TrainingPlanArn")))
            if plan is not None:
                g["TrainingPlanStatus"] = plan.status
        return out

    def publish_cluster(self, cluster: Cluster) -> None:
        """`hyperpod.cluster.changed` with the DescribeCluster view."""
        self.ctx.emit("hyperpod.cluster.changed", **self.life.payload(cluster), cluster=self.describe(cluster),
                      sequence=self.life.next_sequence())

    # operations ---------------------------------------------------------------------------------
    def create(self, req: AwsRequest) -> RawResponse:
        """CreateCluster."""
        p = req.params
        name = check_name(p.get("ClusterName"), "clusterName")
        raw_groups = p.get("InstanceGroups") or []
        if p.get("RestrictedInstanceGroups"):
            raise validation("RestrictedInstanceGroups are not supported for EKS-orchestrated clusters.")
        if not 1 <= len(raw_groups) <= 100:
            raise validation("InstanceGroups must contain 1 to 100 instance groups.")
        groups = [normalize_group(g, i + 1) for i, g in enumerate(raw_groups)]
        names = [g["InstanceGroupName"] for g in groups]
        if len(set(names)) != len(names):
            raise validation("Instance group names must be unique within a cluster.")
        with self.ctx.locked():
            if any(c.name == name and c.region == req.region for c in self.life.clusters.values()):
                raise AwsError("ResourceInUse", f"Cluster {name} already exists.")
            orchestrator = self.check_eks(req.region, p.get("Orchestrator"))
            eks_vpc = None
            if "Eks" in orchestrator:
                eks_name = orchestrator["Eks"]["ClusterArn"].rsplit("/", 1)[-1]
                eks = self.ctx.eks(req.region).clusters[eks_name]
                eks_vpc = (eks.resources_vpc_config or {}).get("vpcId")
            vpc = self.check_vpc(req.region, p.get("VpcConfig"), eks_vpc)
            self._check_cluster_options(p)
            for g in groups:
                self.check_group_placement({"ClusterName": name, "VpcConfig": vpc}, g, req.region)
            self.check_quotas(
                req.region,
                name,
                {g["InstanceGroupName"]: (g.get("InstanceType", ""), g["InstanceCount"]) for g in groups},
            )
            arn = self.ctx.arn("sagemaker", req.region, f"cluster/{alnum_id(12)}")
            cluster = Cluster(
                name=name,
                arn=arn,
                region=req.region,
                creation_time=self.ctx.clock.wall(),
                vpc_config=vpc,
                orchestrator=copy.deepcopy(orchestrator),
                node_recovery=str(p.get("NodeRecovery") or "Automatic"),
                provisioning_mode=p.get("NodeProvisioningMode"),
                tiered_storage=copy.deepcopy(p.get("TieredStorageConfig")),
                cluster_role=p.get("ClusterRole"),
                tags=list(p.get("Tags") or []),
            )
            if p.get("AutoScaling"):
                cluster.autoscaling = {**p["AutoScaling"], "Status": "Creating"}
            self.life.clusters[(req.region, name)] = cluster
            cluster.add_event(self.ctx.clock.wall(), "Cluster creation started")
            self.life.creation_started(cluster)
            for g in groups:
                group = InstanceGroup(
                    spec=g, target=int(g["InstanceCount"]), min_count=int(g.get("MinInstanceCount") or 0)
                )
                cluster.groups[group.name] = group
            for group in list(cluster.groups.values()):
                if cluster.status == "Creating":
                    self.life.launch(cluster, group, group.target)
            self._autoscaling_progress(cluster)
            self.publish_cluster(cluster)
        return json_response(req, {"ClusterArn": arn})

    def _check_cluster_options(self, p: dict[str, Any]) -> None:
        recovery = p.get("NodeRecovery")
        if recovery is not None and recovery not in ("Automatic", "None"):
            raise validation("NodeRecovery must be Automatic or None.")
        mode = p.get("NodeProvisioningMode")
        if mode is not None and mode != "Continuous":
            raise validation("NodeProvisioningMode must be Continuous.")
        tiered = p.get("TieredStorageConfig")
        if tiered is not None:
            if tiered.get("Mode") not in ("Enable", "Disable"):
                raise validation("TieredStorageConfig.Mode must be Enable or Disable.")
            pct = tiered.get("InstanceMemoryAllocationPercentage")
            if pct is not None and not 20 <= int(pct) <= 100:
                raise validation("InstanceMemoryAllocationPercentage must be between 20 and 100.")
        auto = p.get("AutoScaling")
        if auto is not None:
            if auto.get("Mode") not in ("Enable", "Disable"):
                raise validation("AutoScaling.Mode must be Enable or Disable.")
            if auto.get("Mode") == "Enable" and not p.get("ClusterRole"):
                raise validation("ClusterRole is required when AutoScaling is enabled.")
            # Managed Karpenter builds on continuous provisioning and automatic node recovery.
            if auto.get("Mode") == "Enable" and p.get("NodeProvisioningMode") != "Continuous":
                raise validation("AutoScaling requires NodeProvisioningMode Continuous.")
            if auto.get("Mode") == "Enable" and (p.get("NodeRecovery") or "Automatic") != "Automatic":
                raise validation("AutoScaling requires NodeRecovery Automatic.")
            if auto.get("AutoScalerType", "Karpenter") != "Karpenter":
                raise validation("AutoScaling.AutoScalerType must be Karpenter.")

    def _autoscaling_progress(self, cluster: Cluster) -> None:
        auto = cluster.autoscaling
        if not auto or auto.get("Status") == "InService":
            return

        def ready() -> None:
            if cluster.autoscaling is auto and self.life.clusters.get((cluster.region, cluster.name)) is cluster:
                auto["Status"] = "InService"
                self.publish_cluster(cluster)
                if auto.get("Mode") == "Enable":
                    self.ctx.emit("hyperpod.autoscaling.active", **self.life.payload(cluster))

        self.ctx.later(120, ready)

    def update(self, req: AwsRequest) -> RawResponse:
        """UpdateCluster: partial upsert of instance groups plus cluster-level settings."""
        p = req.params
        with self.ctx.locked():
            cluster = self.get(req.region, p.get("ClusterName"))
            blocked = ("Deleting", "Failed", "RollingBack", "Creating")
            if cluster.status in blocked or (not cluster.continuous and cluster.status != "InService"):
                raise AwsError(
                    "ConflictException",
                    f"Cluster {cluster.name} is in {cluster.status} status. UpdateCluster requires InService.",
                )
            raw = p.get("InstanceGroups") or []
            specs = [normalize_group(g, i + 1) for i, g in enumerate(raw)]
            to_delete = [str(n) for n in p.get("InstanceGroupsToDelete") or []]
            for n in to_delete:
                if n not in cluster.groups:
                    raise validation(f"Instance group {n} does not exist in cluster {cluster.name}.")
                if any(s["InstanceGroupName"] == n for s in specs):
                    raise validation(f"Instance group {n} cannot be both updated and deleted.")
            for spec in specs:
                existing = cluster.groups.get(spec["InstanceGroupName"])
                if existing is not None:
                    if existing.status == "Deleting":
                        raise AwsError("ConflictException", f"Instance group {existing.name} is being deleted.")
                    changed = immutable_changes(existing.spec, spec)
                    if changed:
                        raise immutable_error(existing.name, changed, existing.spec, spec)
                self.check_group_placement(
                    {"ClusterName": cluster.name, "VpcConfig": cluster.vpc_config}, spec, req.region
                )
            effective = {
                **p,
                "ClusterRole": p.get("ClusterRole") or cluster.cluster_role,
                "NodeProvisioningMode": p.get("NodeProvisioningMode") or cluster.provisioning_mode,
                "NodeRecovery": p.get("NodeRecovery") or cluster.node_recovery,
            }
            self._check_cluster_options(effective)
            targets = {g.name: (str(g.spec.get("InstanceType", "")), g.target) for g in cluster.groups.values()}
            for spec in specs:
                targets[spec["InstanceGroupName"]] = (spec.get("InstanceType", ""), spec["InstanceCount"])
            for n in to_delete:
                targets.pop(n, None)
            self.check_quotas(req.region, cluster.name, targets)
            self._apply_update(cluster, p, specs, to_delete)
        return json_response(req, {"ClusterArn": cluster.arn})

    def _apply_update(
        self, cluster: Cluster, p: dict[str, Any], specs: list[dict[str, Any]], to_delete: list[str]
    ) -> None:
        now = self.ctx.clock.wall()
        cluster.failure_message = None
        if p.get("NodeRecovery"):
            cluster.node_recovery = str(p["NodeRecovery"])
        if p.get("NodeProvisioningMode"):
            cluster.provisioning_mode = str(p["NodeProvisioningMode"])
        if p.get("TieredStorageConfig") is not None:
            cluster.tiered_storage = copy.deepcopy(p["TieredStorageConfig"])
        if p.get("ClusterRole"):
            cluster.cluster_role = str(p["ClusterRole"])
        if p.get("AutoScaling") is not None:
            cluster.autoscaling = {**p["AutoScaling"], "Status": "Creating"}
            self._autoscaling_progress(cluster)
        if not cluster.continuous:
            cluster.status = "Updating"
        cluster.add_event(now, "Cluster update started")
        for spec in specs:
            name = spec["InstanceGroupName"]
            group = cluster.groups.get(name)
            if group is None:
                group = InstanceGroup(
                    spec=spec, target=0, status="Creating", min_count=int(spec.get("MinInstanceCount") or 0)
                )
                cluster.groups[name] = group
                cluster.add_event(now, f"Instance group {name} created", resource_type="InstanceGroup", group=name)
            else:
                group.spec = spec
                group.failure = None
                for node in cluster.group_nodes(name):
                    if node.status not in LEAVING:
                        self.life.publish_node(cluster, node)
            self.life.scale(cluster, group, int(spec["InstanceCount"]))
        for name in to_delete:
            self.life.delete_group(cluster, cluster.groups[name])
        # Settle a metadata-only update after a short while (AWS shows Updating briefly).
        self.ctx.later(30, lambda: self.life.reconcile(cluster))
        self.publish_cluster(cluster)


__all__ = ["HyperPod", "node_details", "node_summary"]
