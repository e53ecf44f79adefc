"""Helpers shared by the AWS-side twin tests: the control endpoints and a HyperPod-ready account."""

from __future__ import annotations

import contextlib
import json
import urllib.request
from dataclasses import dataclass
from typing import Any

from hyperpod_twin.twin import Twin

ROLE = "arn:aws:iam::111122223333:role/hyperpod-exec"


def control(twin: Twin, path: str, body: dict[str, Any] | None = None, method: str | None = None) -> Any:
    """Call a /_twin endpoint over HTTP and return its JSON."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"{twin.endpoint_url}/_twin/{path}",
        data=data,
        method=method or ("POST" if body is not None else "GET"),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


def advance(twin: Twin, seconds: float) -> None:
    """Move twin time forward through /_twin/clock."""
    control(twin, "clock", {"advance": seconds})


@dataclass
class Net:
    """A VPC laid out as the control plane builds it."""

    vpc: str
    public: list[str]
    eks_private: list[str]
    compute: dict[str, str]  # AZ name -> /20 compute subnet
    sg: str
    private_rt: str
    nat: str


TEST_ROLES = {"eks-cluster": "eks.amazonaws.com", "operator": "ec2.amazonaws.com", "inf": "pods.eks.amazonaws.com"}


def ensure_role(twin: Twin, name: str, service: str) -> str:
    """An IAM role trusting `service` (created once per account); its ARN."""
    iam = twin.boto3_client("iam")
    trust = {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]}
    with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    return f"arn:aws:iam::{twin.account_id}:role/{name}"


def build_network(twin: Twin, cidr_prefix: str = "10.0") -> Net:
    """VPC with public, EKS-private and /20 compute subnets in two AZs, IGW, NAT, routes, S3 endpoint; also
    the IAM roles the tests name (EKS checks that the roles it is given exist)."""
    for role, service in TEST_ROLES.items():
        ensure_role(twin, role, service)
    ec2 = twin.boto3_client("ec2")
    vpc = ec2.create_vpc(CidrBlock=f"{cidr_prefix}.0.0/16")["Vpc"]["VpcId"]
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    zones = ["us-west-2a", "us-west-2b"]
    public = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"{cidr_prefix}.{i}.0/24", AvailabilityZone=az)["Subnet"]["SubnetId"]
        for i, az in enumerate(zones)
    ]
    private = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"{cidr_prefix}.{i + 2}.0/24", AvailabilityZone=az)["Subnet"]["SubnetId"]
        for i, az in enumerate(zones)
    ]
    compute = {
        az: ec2.create_subnet(VpcId=vpc, CidrBlock=f"{cidr_prefix}.{16 * (i + 1)}.0/20", AvailabilityZone=az)["Subnet"][
            "SubnetId"
        ]
        for i, az in enumerate(zones)
    }
    eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=public[0], AllocationId=eip)["NatGateway"]["NatGatewayId"]
    public_rt = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=public_rt, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    private_rt = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=private_rt, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat)
    for s in public:
        ec2.associate_route_table(RouteTableId=public_rt, SubnetId=s)
    for s in private + list(compute.values()):
        ec2.associate_route_table(RouteTableId=private_rt, SubnetId=s)
    ec2.create_vpc_endpoint(
        VpcEndpointType="Gateway",
        VpcId=vpc,
        ServiceName=f"com.amazonaws.{twin.region}.s3",
        RouteTableIds=[private_rt],
    )
    sg = ec2.create_security_group(GroupName=f"hp-{vpc}", Description="HyperPod nodes", VpcId=vpc)["GroupId"]
    return Net(vpc, public, private, compute, sg, private_rt, nat)


def ensure_execution_role(twin: Twin) -> str:
    """The HyperPod execution role `ROLE` (trusting sagemaker.amazonaws.com), created once per account."""
    iam = twin.boto3_client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_role(RoleName=ROLE.rsplit("/", 1)[-1], AssumeRolePolicyDocument=json.dumps(trust))
    # What the twin has a node do with it at boot (fetch its lifecycle script, pull the EKS add-on images), and
    # HyperPod's scaling for Karpenter where a test passes it as the ClusterRole too.
    node = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"},
        {"Effect": "Allow", "Action": ["ecr:GetAuthorizationToken", "ecr:BatchGetImage",
                                       "ecr:GetDownloadUrlForLayer"], "Resource": "*"},
        {"Effect": "Allow", "Action": ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
         "Resource": "*"},
    ]}
    iam.put_role_policy(RoleName=ROLE.rsplit("/", 1)[-1], PolicyName="node", PolicyDocument=json.dumps(node))
    return ROLE


def build_eks(twin: Twin, net: Net, name: str, mode: str = "API_AND_CONFIG_MAP") -> str:
    """An ACTIVE EKS cluster (advances the clock past creation) and the HyperPod execution role; its ARN."""
    ensure_execution_role(twin)
    eks = twin.boto3_client("eks")
    arn: str = eks.create_cluster(
        name=name,
        roleArn="arn:aws:iam::111122223333:role/eks-cluster",
        resourcesVpcConfig={"subnetIds": net.eks_private, "securityGroupIds": [net.sg]},
        accessConfig={"authenticationMode": mode},
    )["cluster"]["arn"]
    advance(twin, 601)
    return arn


def group(name: str, itype: str, count: int, **extra: Any) -> dict[str, Any]:
    """An instance group specification."""
    return {"InstanceGroupName": name, "InstanceType": itype, "InstanceCount": count, "ExecutionRole": ROLE, **extra}


class ProcessTwinView:
    """A twin child process (`TwinProcess`) seen through the few members these helpers use, so
    `build_network`/`build_eks`/`advance` also build AWS-side state under an integration test's control plane."""

    account_id = "111122223333"

    def __init__(self, process: Any) -> None:
        self.process = process
        self.endpoint_url: str = process.endpoint_url
        self.region: str = process.env["AWS_REGION"]

    def boto3_client(self, service: str) -> Any:
        """A boto3 client on the twin process."""
        import boto3

        env = self.process.env
        return boto3.client(service, endpoint_url=self.endpoint_url, region_name=self.region,
                            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
