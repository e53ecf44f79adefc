"""deploy/management-environment.yaml: rendered from the policy, cfn-lint clean, and deployed on the twin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from instantstart.twin_process import TwinProcess
from tests.support.twin import twin_client

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "deploy" / "management-environment.yaml"
POLICY = REPO / "deploy" / "iam" / "control-plane-policy.json"
BOUNDARY = REPO / "deploy" / "iam" / "permissions-boundary.json"


def test_template_and_policy_files_are_fresh_renders() -> None:
    for script in ("scripts/policy_source.py", "scripts/render_management_environment.py"):
        done = subprocess.run([sys.executable, script, "--check"], cwd=REPO, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_cfn_lint_is_clean() -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), str(TEMPLATE)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_template_carries_the_shipped_policy_and_no_ingress() -> None:
    body = yaml.safe_load(TEMPLATE.read_text())
    resources = body["Resources"]
    assert resources["ControlPlanePolicy"]["Properties"]["PolicyDocument"] == json.loads(POLICY.read_text())
    group = resources["InstanceSecurityGroup"]["Properties"]
    assert "SecurityGroupIngress" not in group
    assert not [r for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"]
    assert "AssociatePublicIpAddress" not in json.dumps(resources["Instance"])


def test_the_bucket_is_owner_enforced_private_encrypted_versioned() -> None:
    bucket = yaml.safe_load(TEMPLATE.read_text())["Resources"]["ProjectBucket"]
    props = bucket["Properties"]
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert set(props["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(props["PublicAccessBlockConfiguration"]) == 4
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    assert bucket["DeletionPolicy"] == "Retain"


def stack_resources(cfn: Any, stack: str) -> dict[str, dict[str, Any]]:
    listed = cfn.describe_stack_resources(StackName=stack)["StackResources"]
    # moto lists a resource whose Condition is false without a logical id: it was not created.
    return {r["LogicalResourceId"]: r for r in listed if r.get("LogicalResourceId")}


def test_the_stack_deploys_on_the_twin(twin: TwinProcess) -> None:
    account, region = twin.info["account_id"], twin.env["AWS_REGION"]
    # A fresh account: the twin starts with the project bucket and the permissions boundary, which the stack is to
    # create.
    twin_client(twin, "s3").delete_bucket(Bucket=f"instantstart-{account}-{region}")
    boundary_arn = f"arn:aws:iam::{account}:policy/InstantStartPermissionsBoundary"
    twin_client(twin, "iam").delete_policy(PolicyArn=boundary_arn)
    cfn = twin_client(twin, "cloudformation")
    cfn.create_stack(
        StackName="instantstart-mgmt",
        TemplateBody=TEMPLATE.read_text(),
        Parameters=[{"ParameterKey": "ContainerImage", "ParameterValue": "example.invalid/instantstart:0.1.0"}],
        Capabilities=["CAPABILITY_NAMED_IAM"],
    )
    stack = cfn.describe_stacks(StackName="instantstart-mgmt")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    found = stack_resources(cfn, "instantstart-mgmt")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}

    s3 = twin_client(twin, "s3")
    bucket = outputs["ProjectBucketName"]
    assert bucket == found["ProjectBucket"]["PhysicalResourceId"] == f"instantstart-{account}-{region}"
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    # moto 5.2.5's CloudFormation applies only encryption and tags to a bucket; the rest is checked in the
    # template (test_the_bucket_is_owner_enforced_private_encrypted_versioned).

    iam = twin_client(twin, "iam")
    role = found["InstanceRole"]["PhysicalResourceId"]
    # Outside instantstart-*, though the stack's name is inside it: the control plane cannot change its own role.
    assert role == f"InstantStartControlPlane-{region}"
    assert outputs["PermissionsBoundaryArn"] == boundary_arn
    version = iam.get_policy(PolicyArn=boundary_arn)["Policy"]["DefaultVersionId"]
    kept = iam.get_policy_version(PolicyArn=boundary_arn, VersionId=version)["PolicyVersion"]["Document"]
    assert kept == json.loads(BOUNDARY.read_text())
    trust = iam.get_role(RoleName=role)["Role"]["AssumeRolePolicyDocument"]
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    profile = iam.get_instance_profile(InstanceProfileName=found["InstanceProfile"]["PhysicalResourceId"])
    assert [r["RoleName"] for r in profile["InstanceProfile"]["Roles"]] == [role]
    # moto 5.2.5 creates the role but does not attach ManagedPolicyArns; the template is checked for them.
    arns = yaml.safe_load(TEMPLATE.read_text())["Resources"]["InstanceRole"]["Properties"]["ManagedPolicyArns"]
    assert arns[0] == {"Ref": "ControlPlanePolicy"}
    assert {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"} in arns
    version = iam.get_policy(PolicyArn=outputs["ControlPlanePolicyArn"])["Policy"]["DefaultVersionId"]
    document = iam.get_policy_version(PolicyArn=outputs["ControlPlanePolicyArn"], VersionId=version)
    assert document["PolicyVersion"]["Document"] == json.loads(POLICY.read_text())

    ec2 = twin_client(twin, "ec2")
    instance = ec2.describe_instances(InstanceIds=[outputs["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert instance["SubnetId"] == found["PrivateSubnet"]["PhysicalResourceId"]
    assert "PublicIpAddress" not in instance
    groups = ec2.describe_security_groups(GroupIds=[found["InstanceSecurityGroup"]["PhysicalResourceId"]])
    assert groups["SecurityGroups"][0]["IpPermissions"] == []
    routes = ec2.describe_route_tables(RouteTableIds=[found["PrivateRoutes"]["PhysicalResourceId"]])
    default = [r for r in routes["RouteTables"][0]["Routes"] if r.get("DestinationCidrBlock") == "0.0.0.0/0"]
    assert default[0]["NatGatewayId"] == found["NatGateway"]["PhysicalResourceId"]
    assert "AWS-StartPortForwardingSession" in outputs["PortForwardCommand"]
    assert "portNumber=3099" in outputs["PortForwardCommand"]


def test_an_existing_network_and_bucket_are_reused(twin: TwinProcess) -> None:
    ec2 = twin_client(twin, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.1.0/24")["Subnet"]["SubnetId"]
    cfn = twin_client(twin, "cloudformation")
    cfn.create_stack(
        StackName="instantstart-reuse",
        TemplateBody=TEMPLATE.read_text(),
        Parameters=[
            {"ParameterKey": "ContainerImage", "ParameterValue": "example.invalid/instantstart:0.1.0"},
            {"ParameterKey": "ExistingVpcId", "ParameterValue": vpc},
            {"ParameterKey": "ExistingPrivateSubnetId", "ParameterValue": subnet},
            {"ParameterKey": "ExistingBucketName", "ParameterValue": f"instantstart-{twin.info['account_id']}-x"},
            {"ParameterKey": "CreatePermissionsBoundary", "ParameterValue": "false"},
        ],
        Capabilities=["CAPABILITY_NAMED_IAM"],
    )
    stack = cfn.describe_stacks(StackName="instantstart-reuse")["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    found = stack_resources(cfn, "instantstart-reuse")
    assert not {"Vpc", "NatGateway", "PrivateSubnet", "ProjectBucket", "PermissionsBoundary"} & set(found)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    instance = ec2.describe_instances(InstanceIds=[outputs["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert instance["SubnetId"] == subnet
