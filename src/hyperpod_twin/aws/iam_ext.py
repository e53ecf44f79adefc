"""IAM service-linked roles under their real names (moto derives other names from the service principal)."""

from __future__ import annotations

import json
from urllib.parse import quote
from xml.sax.saxutils import escape

from .context import AwsContext
from .protocol import AwsError, AwsRequest, PassThrough, RawResponse, xml_response

# Service principal -> the role name AWS gives its service-linked role.
SERVICE_LINKED_ROLES = {
    "hyperpod.sagemaker.amazonaws.com": "AWSServiceRoleForSageMakerHyperPod",
    "sagemaker.amazonaws.com": "AWSServiceRoleForAmazonSageMakerNotebooks",
    "eks.amazonaws.com": "AWSServiceRoleForAmazonEKS",
    "eks-nodegroup.amazonaws.com": "AWSServiceRoleForAmazonEKSNodegroup",
    "eks-fargate.amazonaws.com": "AWSServiceRoleForAmazonEKSForFargate",
    "fsx.amazonaws.com": "AWSServiceRoleForAmazonFSx",
    "s3.data-source.lustre.fsx.amazonaws.com": "AWSServiceRoleForFSxS3Access_fsx",
    "elasticloadbalancing.amazonaws.com": "AWSServiceRoleForElasticLoadBalancing",
    "autoscaling.amazonaws.com": "AWSServiceRoleForAutoScaling",
}


def register(ctx: AwsContext) -> None:
    """Answer CreateServiceLinkedRole for the services above; moto answers the rest."""

    @ctx.route("iam", "CreateServiceLinkedRole")
    def create_slr(req: AwsRequest) -> RawResponse:
        service = str(req.params.get("AWSServiceName") or "")
        name = SERVICE_LINKED_ROLES.get(service)
        if name is None:
            raise PassThrough()
        suffix = req.params.get("CustomSuffix")
        if suffix:
            name = f"{name}_{suffix}"
        iam = ctx.iam()
        with ctx.locked():
            if any(r.name == name for r in iam.roles.values()):
                raise AwsError(
                    "InvalidInput",
                    f"Service role name {name} has been taken in this account, please try a different suffix.",
                )
            trust = {
                "Version": "2012-10-17",
                "Statement": [{"Action": ["sts:AssumeRole"], "Effect": "Allow", "Principal": {"Service": [service]}}],
            }
            role = iam.create_role(
                name,
                json.dumps(trust),
                f"/aws-service-role/{service}/",
                permissions_boundary=None,
                description=str(req.params.get("Description") or ""),
                tags=[],
                max_session_duration="3600",
                linked_service=service,
            )
        created = role.create_date.strftime("%Y-%m-%dT%H:%M:%SZ")
        return xml_response(
            req,
            f"<Role><Path>{escape(role.path)}</Path><RoleName>{escape(role.name)}</RoleName>"
            f"<RoleId>{role.id}</RoleId><Arn>{escape(role.arn)}</Arn><CreateDate>{created}</CreateDate>"
            f"<AssumeRolePolicyDocument>{quote(json.dumps(trust))}</AssumeRolePolicyDocument></Role>",
        )
