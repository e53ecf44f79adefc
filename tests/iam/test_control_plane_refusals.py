"""With the control plane's own policy (deploy/iam/control-plane-policy.json, given to the twin's caller as the
management environment stack gives it to the instance role), the twin refuses what AWS refuses: a role without the
permissions boundary, AdministratorAccess, removing a boundary, deleting an EKS or HyperPod cluster (or its nodes)
that lacks the installation tag. Calls carry the control plane's product token in their User-Agent, as
instantstart's clients do, followed by `policy-probe`: the call log (tests/support/aws_actions.py) counts only
agents that end in the token, so these deliberate refusals are not taken for actions the control plane needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from instantstart.aws import iam as iam_api
from instantstart.aws.clients import AwsClients
from instantstart.aws.iam import BOUNDARY_POLICY
from instantstart.context import AppContext
from instantstart.describe_cache import DescribeCache
from instantstart.errors import InstantStartError, PreconditionFailed
from instantstart.kube.client import KubeClients
from instantstart.operations.kinds import KINDS
from instantstart.operations.runner import Runner
from instantstart.operations.store import OperationStore
from instantstart.services.account.policy import boundary_policy
from instantstart.services.cluster.deleters import DELETERS
from instantstart.services.core.ledger import TAG_INSTALLATION
from instantstart.settings import Settings
from instantstart.store.db import Database
from instantstart.twin_process import TwinProcess
from tests.support.twin_aws import ProcessTwinView, build_eks, build_network, group

TRUST = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
OURS = [{"Key": TAG_INSTALLATION, "Value": "is-test"}]


def client(twin: TwinProcess, service: str, *, control_plane: bool = True) -> Any:
    """A boto3 client on the twin; with `control_plane`, its User-Agent is the control plane's."""
    env = twin.env
    agent = "instantstart/0.0.0 policy-probe" if control_plane else ""
    config = Config(user_agent_extra=agent, retries={"max_attempts": 1})
    return boto3.client(service, endpoint_url=twin.endpoint_url, region_name=env["AWS_REGION"], config=config,
                        aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])


def boundary(twin: TwinProcess) -> str:
    return f"arn:aws:iam::{twin.info['account_id']}:policy/{BOUNDARY_POLICY}"


def refused(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as err:
        call(**kwargs)
    code = str(err.value.response["Error"]["Code"])
    assert code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"), err.value
    return str(err.value.response["Error"]["Message"])


def test_the_twin_account_holds_the_shipped_boundary(twin: TwinProcess) -> None:
    iam = client(twin, "iam", control_plane=False)
    version = iam.get_policy(PolicyArn=boundary(twin))["Policy"]["DefaultVersionId"]
    document = iam.get_policy_version(PolicyArn=boundary(twin), VersionId=version)["PolicyVersion"]["Document"]
    assert document == boundary_policy()


def test_creating_a_role_without_the_boundary_is_refused(twin: TwinProcess) -> None:
    iam = client(twin, "iam")
    message = refused(iam.create_role, RoleName="instantstart-t-hyperpod", AssumeRolePolicyDocument=TRUST)
    assert "iam:CreateRole" in message
    other = f"arn:aws:iam::{twin.info['account_id']}:policy/SomethingWider"
    refused(iam.create_role, RoleName="instantstart-t-hyperpod", AssumeRolePolicyDocument=TRUST,
            PermissionsBoundary=other)
    role = iam.create_role(RoleName="instantstart-t-hyperpod", AssumeRolePolicyDocument=TRUST,
                           PermissionsBoundary=boundary(twin))["Role"]
    assert role["PermissionsBoundary"]["PermissionsBoundaryArn"] == boundary(twin)


def test_attaching_administrator_access_is_refused(twin: TwinProcess) -> None:
    iam = client(twin, "iam")
    iam.create_role(RoleName="instantstart-t-hyperpod", AssumeRolePolicyDocument=TRUST,
                    PermissionsBoundary=boundary(twin))
    message = refused(iam.attach_role_policy, RoleName="instantstart-t-hyperpod",
                      PolicyArn="arn:aws:iam::aws:policy/AdministratorAccess")
    assert "iam:AttachRolePolicy" in message
    iam.attach_role_policy(RoleName="instantstart-t-hyperpod",
                           PolicyArn="arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy")


def test_a_role_without_the_boundary_gets_no_policy_and_no_boundary_is_removed(twin: TwinProcess) -> None:
    """A same-pattern role someone else made (no boundary) cannot be given permissions; ours keeps its boundary."""
    admin = client(twin, "iam", control_plane=False)
    admin.create_role(RoleName="instantstart-t-other", AssumeRolePolicyDocument=TRUST)
    iam = client(twin, "iam")
    everything = [{"Effect": "Allow", "Action": "*", "Resource": "*"}]
    document = json.dumps({"Version": "2012-10-17", "Statement": everything})
    refused(iam.put_role_policy, RoleName="instantstart-t-other", PolicyName="p", PolicyDocument=document)
    refused(iam.attach_role_policy, RoleName="instantstart-t-other",
            PolicyArn="arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy")
    iam.create_role(RoleName="instantstart-t-hyperpod", AssumeRolePolicyDocument=TRUST,
                    PermissionsBoundary=boundary(twin))
    message = refused(iam.delete_role_permissions_boundary, RoleName="instantstart-t-hyperpod")
    assert "explicit deny" in message
    refused(iam.put_role_permissions_boundary, RoleName="instantstart-t-hyperpod",
            PermissionsBoundary="arn:aws:iam::aws:policy/AdministratorAccess")


def test_deleting_an_eks_cluster_without_the_installation_tag_is_refused(twin: TwinProcess) -> None:
    view = ProcessTwinView(twin)
    net = build_network(view)  # type: ignore[arg-type]
    build_eks(view, net, "theirs")  # type: ignore[arg-type]
    eks = client(twin, "eks")
    assert "eks:DeleteCluster" in refused(eks.delete_cluster, name="theirs")
    assert client(twin, "eks", control_plane=False).describe_cluster(name="theirs")["cluster"]["status"] == "ACTIVE"
    client(twin, "eks", control_plane=False).tag_resource(
        resourceArn=eks.describe_cluster(name="theirs")["cluster"]["arn"], tags={TAG_INSTALLATION: "is-test"})
    eks.delete_cluster(name="theirs")


def test_deleting_a_hyperpod_cluster_or_its_nodes_without_the_installation_tag_is_refused(twin: TwinProcess) -> None:
    view = ProcessTwinView(twin)
    net = build_network(view)  # type: ignore[arg-type]
    eks_arn = build_eks(view, net, "eks-hp")  # type: ignore[arg-type]
    admin = client(twin, "sagemaker", control_plane=False)
    spec = {"Orchestrator": {"Eks": {"ClusterArn": eks_arn}},
            "VpcConfig": {"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
            "InstanceGroups": [group("workers", "ml.t3.medium", 1)]}
    theirs = admin.create_cluster(ClusterName="theirs", **spec)["ClusterArn"]
    ours = admin.create_cluster(ClusterName="ours", Tags=OURS, **spec)["ClusterArn"]
    sm = client(twin, "sagemaker")
    assert "sagemaker:DeleteCluster" in refused(sm.delete_cluster, ClusterName="theirs")
    refused(sm.delete_cluster, ClusterName=theirs)
    refused(sm.batch_delete_cluster_nodes, ClusterName="theirs", NodeIds=["i-0123456789abcdef0"])
    refused(sm.batch_replace_cluster_nodes, ClusterName="theirs", NodeIds=["i-0123456789abcdef0"])
    assert admin.describe_cluster(ClusterName="theirs")["ClusterArn"] == theirs
    sm.delete_cluster(ClusterName=ours)


def test_routes_and_public_addresses_only_on_tagged_network(twin: TwinProcess) -> None:
    ec2 = client(twin, "ec2", control_plane=False)
    vpc = ec2.create_vpc(CidrBlock="10.61.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.61.1.0/24")["Subnet"]["SubnetId"]
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    cp = client(twin, "ec2")
    refused(cp.modify_subnet_attribute, SubnetId=subnet, MapPublicIpOnLaunch={"Value": True})
    refused(cp.create_route, RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    tag = [{"Key": "instantstart:cluster-tag", "Value": "t"}]
    ec2.create_tags(Resources=[subnet, table], Tags=tag)
    cp.modify_subnet_attribute(SubnetId=subnet, MapPublicIpOnLaunch={"Value": True})
    cp.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)


def test_the_control_plane_names_the_fix_for_a_role_without_the_boundary(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A role made before roles carried the boundary (or someone else's) cannot be changed: the adapter's error says
    which boundary to add; once the operator adds it, the same write succeeds. New roles get it on creation."""
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    aws = AwsClients(Settings(data_dir=tmp_path, aws_endpoint_url=twin.endpoint_url, aws_region="us-west-2"))
    admin = client(twin, "iam", control_plane=False)
    admin.create_role(RoleName="instantstart-old-hyperpod", AssumeRolePolicyDocument=TRUST)
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                                                        "Resource": "arn:aws:s3:::instantstart-x/*"}]}
    with pytest.raises(PreconditionFailed) as err:
        iam_api.put_inline_policy(aws, "us-west-2", "instantstart-old-hyperpod", document)
    assert BOUNDARY_POLICY in err.value.message
    assert f"--permissions-boundary {boundary(twin)}" in (err.value.hint or "")
    admin.put_role_permissions_boundary(RoleName="instantstart-old-hyperpod", PermissionsBoundary=boundary(twin))
    iam_api.put_inline_policy(aws, "us-west-2", "instantstart-old-hyperpod", document)
    arn = iam_api.create_role(aws, "us-west-2", name="instantstart-new-hyperpod", trust_policy=TRUST,
                              description="", tags=OURS)
    role = admin.get_role(RoleName=arn.rsplit("/", 1)[-1])["Role"]
    assert role["PermissionsBoundary"]["PermissionsBoundaryArn"] == boundary(twin)


def test_a_refusal_is_blamed_on_what_the_role_lacks_or_else_on_the_control_planes_identity(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trust policy write needs the installation tag (not the boundary): the error names the tag-role fix. A role
    that has what the policy requires, refused anyway, is the control plane's identity lacking the action: the
    error names that action, never the boundary."""
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    aws = AwsClients(Settings(data_dir=tmp_path, aws_endpoint_url=twin.endpoint_url, aws_region="us-west-2"))
    admin = client(twin, "iam", control_plane=False)
    admin.create_role(RoleName="instantstart-untagged-hyperpod", AssumeRolePolicyDocument=TRUST,
                      PermissionsBoundary=boundary(twin))
    trust = json.loads(TRUST)
    with pytest.raises(PreconditionFailed) as err:
        iam_api.update_trust_policy(aws, "us-west-2", "instantstart-untagged-hyperpod", trust)
    assert TAG_INSTALLATION in err.value.message and BOUNDARY_POLICY not in err.value.message
    assert "aws iam tag-role --role-name instantstart-untagged-hyperpod" in (err.value.hint or "")
    admin.tag_role(RoleName="instantstart-untagged-hyperpod", Tags=OURS)
    iam_api.update_trust_policy(aws, "us-west-2", "instantstart-untagged-hyperpod", trust)
    with pytest.raises(InstantStartError) as denied:
        iam_api.attach_policy(aws, "us-west-2", "instantstart-untagged-hyperpod",
                              "arn:aws:iam::aws:policy/AdministratorAccess")
    assert not isinstance(denied.value, PreconditionFailed)
    assert "iam:AttachRolePolicy" in (denied.value.hint or "") and "boundary" not in (denied.value.hint or "")


def test_deleting_a_cluster_that_is_gone_already_is_done_without_a_refused_delete_call(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeleteCluster is allowed only on clusters tagged with the installation, so on a cluster that no longer exists
    (a deletion stage retried after its first DeleteCluster) IAM refuses it rather than answering NotFound: the
    deleters see the cluster gone and call nothing."""
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    settings = Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'state.db'}",
                        aws_endpoint_url=twin.endpoint_url, aws_region="us-west-2")
    db = Database(settings.resolved_database_url)
    db.migrate()
    aws = AwsClients(settings)
    app = AppContext(settings=settings, db=db, runner=Runner(settings, OperationStore(db), KINDS), aws=aws,
                     kube=KubeClients(aws), cache=DescribeCache(1.0))
    assert "sagemaker:DeleteCluster" in refused(client(twin, "sagemaker").delete_cluster, ClusterName="hp-gone")
    assert "eks:DeleteCluster" in refused(client(twin, "eks").delete_cluster, name="eks-gone")
    for kind, name in (("sagemaker:cluster", "hp-gone"), ("eks:cluster", "eks-gone")):
        res = {"resourceType": kind, "resourceId": name, "region": "us-west-2", "clusterTag": "gone", "details": {}}
        assert DELETERS[kind](app, res) is True


def test_ingress_rules_and_endpoint_route_tables_only_on_tagged_network(twin: TwinProcess) -> None:
    """An operator's security group (an adopted FSx file system's) gets no ingress rule, an operator's S3 endpoint
    no route table, from the control plane; with the cluster tag on them (and on the route table), both work."""
    ec2 = client(twin, "ec2", control_plane=False)
    vpc = ec2.create_vpc(CidrBlock="10.62.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="theirs", Description="operator", VpcId=vpc)["GroupId"]
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    endpoint = ec2.create_vpc_endpoint(VpcId=vpc, ServiceName="com.amazonaws.us-west-2.s3",
                                       VpcEndpointType="Gateway")["VpcEndpoint"]["VpcEndpointId"]
    cp = client(twin, "ec2")
    lustre = [{"IpProtocol": "tcp", "FromPort": 988, "ToPort": 988, "UserIdGroupPairs": [{"GroupId": group}]}]
    assert "ec2:AuthorizeSecurityGroupIngress" in refused(
        cp.authorize_security_group_ingress, GroupId=group, IpPermissions=lustre)
    assert f"vpc-endpoint/{endpoint}" in refused(cp.modify_vpc_endpoint, VpcEndpointId=endpoint,
                                                  AddRouteTableIds=[table])
    tag = [{"Key": "instantstart:cluster-tag", "Value": "t"}]
    ec2.create_tags(Resources=[group, endpoint], Tags=tag)
    cp.authorize_security_group_ingress(GroupId=group, IpPermissions=lustre)
    # The endpoint is tagged now, the route table still is not: refused on the route table.
    assert f"route-table/{table}" in refused(cp.modify_vpc_endpoint, VpcEndpointId=endpoint,
                                              AddRouteTableIds=[table])
    ec2.create_tags(Resources=[table], Tags=tag)
    cp.modify_vpc_endpoint(VpcEndpointId=endpoint, AddRouteTableIds=[table])
    assert ec2.describe_vpc_endpoints(VpcEndpointIds=[endpoint])["VpcEndpoints"][0]["RouteTableIds"] == [table]
