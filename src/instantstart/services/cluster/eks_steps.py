"""The EKS stage's steps: the network, bucket and roles made side by side, the control plane's wait, access and OIDC."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from instantstart.aws import eks as eks_api
from instantstart.aws import identity
from instantstart.context import StageContext
from instantstart.errors import ProviderError
from instantstart.manifests import iam_policies as pol
from instantstart.manifests.network import AddressPlan
from instantstart.operations.waiting import blocking
from instantstart.services.base import iam as iam_svc
from instantstart.services.base import network as net
from instantstart.services.base.params import EksParams
from instantstart.services.base.registry import record_details
from instantstart.services.core.stages import project_bucket


async def ensure_eks_role(stage: StageContext, scope: pol.Scope, common: dict[str, Any]) -> str:
    """The EKS cluster role (trusted by EKS for this cluster only); its ARN."""
    return await blocking(
        iam_svc.ensure_role,
        stage.app.aws,
        stage.app.db,
        name=f"instantstart-{common['cluster_tag']}-eks",
        trust=pol.eks_cluster_trust(scope),
        managed=[iam_svc.EKS_CLUSTER_POLICY],
        description="EKS control plane of an InstantStart cluster",
        **common,
    )


async def ensure_execution_role(stage: StageContext, scope: pol.Scope, common: dict[str, Any]) -> str:
    """The HyperPod execution role (S3 limited to the cluster's prefixes); its ARN."""
    return await blocking(
        iam_svc.ensure_role,
        stage.app.aws,
        stage.app.db,
        name=f"instantstart-{common['cluster_tag']}-hyperpod",
        trust=pol.execution_trust(scope),
        managed=[iam_svc.HYPERPOD_INSTANCE_POLICY],
        inline=pol.execution_inline_policy(scope),
        description="HyperPod instance groups of an InstantStart cluster",
        **common,
    )


def address_plan(p: EksParams) -> AddressPlan | None:
    """The address plan the request (or its preflight) fixed, if any."""
    if not p.plan:
        return None
    return AddressPlan(
        vpc=p.plan.vpc,
        public=(p.plan.public[0], p.plan.public[1]),
        eks_private=(p.plan.eks_private[0], p.plan.eks_private[1]),
        compute=p.plan.compute,
    )


async def foundations(
    stage: StageContext, p: EksParams, n: net.NetCtx, name: str, common: dict[str, Any]
) -> tuple[dict[str, Any], str, str, str]:
    """The network, the project bucket and the EKS cluster role, which do not depend on each other: made side by
    side. (network, bucket, account, EKS role ARN)."""
    tag, region = p.cluster_tag, p.region

    async def network_part() -> dict[str, Any]:
        await stage.progress("network: VPC, subnets, security group")
        built: dict[str, Any] = await blocking(
            net.ensure_eks_network, n, vpc_id=p.vpc_id, plan=address_plan(p), vpc_cidr=p.vpc_cidr
        )
        await record_details(stage, tag, network=built)
        return built

    async def eks_role_part() -> tuple[str, str]:
        account = await blocking(identity.account_id, stage.app.aws, region)
        await stage.progress("IAM: EKS cluster role")
        return account, await ensure_eks_role(stage, pol.Scope(account, region, tag, name, ""), common)

    network, bucket, (account, eks_role) = await asyncio.gather(
        network_part(), blocking(project_bucket, stage, region, tag), eks_role_part()
    )
    return network, bucket, account, eks_role


def active_check(stage: StageContext, region: str, name: str) -> Callable[[], Awaitable[tuple[bool, str]]]:
    """The wait_until check of the EKS control plane: done when ACTIVE; FAILED, DELETING or gone end the stage."""

    async def active() -> tuple[bool, str]:
        cluster = await blocking(eks_api.describe_cluster, stage.app.aws, region, name)
        status = (cluster or {}).get("status", "MISSING")
        if status in ("FAILED", "DELETING", "MISSING"):
            raise ProviderError(
                f"EKS cluster {name} is {status}.",
                hint="Delete the cluster and create it again.",
                retryable=False,
            )
        return status == "ACTIVE", f"EKS control plane {name}: {status}"

    return active


async def access_and_oidc(
    stage: StageContext, region: str, name: str, principal: str, common: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """The control plane's access entry and the cluster's OIDC provider; (the described cluster, the OIDC ARN)."""
    app = stage.app
    cluster = await blocking(eks_api.describe_cluster, app.aws, region, name) or {}
    await stage.progress("access entry for the control plane and the cluster's OIDC provider")
    await blocking(eks_api.ensure_admin_access, app.aws, region, name=name, principal_arn=principal)
    issuer = cluster.get("identity", {}).get("oidc", {}).get("issuer")
    oidc = await blocking(iam_svc.ensure_oidc_provider, app.aws, app.db, issuer=issuer, **common) if issuer else None
    return cluster, oidc
