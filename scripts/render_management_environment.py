"""Renders deploy/management-environment.yaml (CloudFormation) with the control-plane policy embedded.

The template is data built here so the policy it carries is exactly deploy/iam/control-plane-policy.json;
`--check` fails when the committed template differs from a fresh render.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "deploy" / "management-environment.yaml"
POLICY = REPO / "deploy" / "iam" / "control-plane-policy.json"
BOUNDARY = REPO / "deploy" / "iam" / "permissions-boundary.json"
# instantstart.aws.iam.BOUNDARY_POLICY: the control-plane policy allows role writes only with it as the boundary.
BOUNDARY_NAME = "InstantStartPermissionsBoundary"
NEW_BOUNDARY = "CreateBoundary"
PORT = 3099
NEW_NETWORK = "CreateNetwork"
NEW_BUCKET = "CreateBucket"


def ref(name: str) -> dict[str, Any]:
    """{"Ref": name}."""
    return {"Ref": name}


def sub(text: str) -> dict[str, Any]:
    """{"Fn::Sub": text}."""
    return {"Fn::Sub": text}


def when(condition: str, yes: Any, no: Any) -> dict[str, Any]:
    """{"Fn::If": [condition, yes, no]}."""
    return {"Fn::If": [condition, yes, no]}


def tags(name: str) -> list[dict[str, Any]]:
    """Name and management tags."""
    return [{"Key": "Name", "Value": sub(f"${{AWS::StackName}}-{name}")}, {"Key": "instantstart:managed-by",
                                                                         "Value": "management-environment"}]


USER_DATA = f"""#!/bin/bash
# Runs the control plane container on this instance; reached only through SSM port forwarding to {PORT}.
set -euo pipefail
dnf install -y podman
if [[ "${{ContainerImage}}" == *.dkr.ecr.*.amazonaws.com/* ]]; then
  registry=$(echo "${{ContainerImage}}" | cut -d/ -f1)
  aws ecr get-login-password --region ${{AWS::Region}} | podman login --username AWS --password-stdin "$registry"
fi
podman volume create instantstart-data || true
cat > /etc/systemd/system/instantstart.service <<'UNIT'
[Unit]
Description=InstantStart control plane (container)
After=network-online.target
Wants=network-online.target
[Service]
Restart=always
ExecStartPre=-/usr/bin/podman rm -f instantstart
ExecStart=/usr/bin/podman run --name instantstart -p 127.0.0.1:{PORT}:{PORT} -v instantstart-data:/data \\
  -e AWS_REGION=${{AWS::Region}} -e INSTANTSTART_PROJECT_BUCKET=${{BucketName}} ${{ContainerImage}}
ExecStop=/usr/bin/podman stop -t 30 instantstart
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable --now instantstart.service
"""


def template(policy: dict[str, Any]) -> dict[str, Any]:
    """The CloudFormation template."""
    bucket_name = when(NEW_BUCKET, ref("ProjectBucket"), ref("ExistingBucketName"))
    subnet = when(NEW_NETWORK, ref("PrivateSubnet"), ref("ExistingPrivateSubnetId"))
    vpc = when(NEW_NETWORK, ref("Vpc"), ref("ExistingVpcId"))
    net = {"Condition": NEW_NETWORK}
    resources: dict[str, Any] = {
        "Vpc": {**net, "Type": "AWS::EC2::VPC", "Properties": {
            "CidrBlock": ref("VpcCidr"), "EnableDnsHostnames": True, "EnableDnsSupport": True, "Tags": tags("vpc")}},
        "InternetGateway": {**net, "Type": "AWS::EC2::InternetGateway", "Properties": {"Tags": tags("igw")}},
        "GatewayAttachment": {**net, "Type": "AWS::EC2::VPCGatewayAttachment", "Properties": {
            "VpcId": ref("Vpc"), "InternetGatewayId": ref("InternetGateway")}},
        "PublicSubnet": {**net, "Type": "AWS::EC2::Subnet", "Properties": {
            "VpcId": ref("Vpc"), "CidrBlock": ref("PublicSubnetCidr"),
            "AvailabilityZone": {"Fn::Select": [0, {"Fn::GetAZs": ""}]}, "Tags": tags("public")}},
        "PrivateSubnet": {**net, "Type": "AWS::EC2::Subnet", "Properties": {
            "VpcId": ref("Vpc"), "CidrBlock": ref("PrivateSubnetCidr"),
            "AvailabilityZone": {"Fn::Select": [0, {"Fn::GetAZs": ""}]}, "Tags": tags("private")}},
        "NatAddress": {**net, "Type": "AWS::EC2::EIP", "DependsOn": "GatewayAttachment",
                       "Properties": {"Domain": "vpc", "Tags": tags("nat")}},
        "NatGateway": {**net, "Type": "AWS::EC2::NatGateway", "Properties": {
            "AllocationId": {"Fn::GetAtt": ["NatAddress", "AllocationId"]}, "SubnetId": ref("PublicSubnet"),
            "Tags": tags("nat")}},
        "PublicRoutes": {**net, "Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": ref("Vpc"),
                                                                               "Tags": tags("public")}},
        "PublicDefaultRoute": {**net, "Type": "AWS::EC2::Route", "DependsOn": "GatewayAttachment", "Properties": {
            "RouteTableId": ref("PublicRoutes"), "DestinationCidrBlock": "0.0.0.0/0",
            "GatewayId": ref("InternetGateway")}},
        "PublicSubnetRoutes": {**net, "Type": "AWS::EC2::SubnetRouteTableAssociation", "Properties": {
            "SubnetId": ref("PublicSubnet"), "RouteTableId": ref("PublicRoutes")}},
        "PrivateRoutes": {**net, "Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": ref("Vpc"),
                                                                                "Tags": tags("private")}},
        "PrivateDefaultRoute": {**net, "Type": "AWS::EC2::Route", "Properties": {
            "RouteTableId": ref("PrivateRoutes"), "DestinationCidrBlock": "0.0.0.0/0",
            "NatGatewayId": ref("NatGateway")}},
        "PrivateSubnetRoutes": {**net, "Type": "AWS::EC2::SubnetRouteTableAssociation", "Properties": {
            "SubnetId": ref("PrivateSubnet"), "RouteTableId": ref("PrivateRoutes")}},
        "InstanceSecurityGroup": {"Type": "AWS::EC2::SecurityGroup", "Properties": {
            "GroupDescription": "InstantStart management instance: no ingress; egress HTTPS to AWS APIs and images",
            "VpcId": vpc,
            "SecurityGroupEgress": [{"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "0.0.0.0/0",
                                     "Description": "AWS APIs, SSM, image registry"}],
            "Tags": tags("instance")}},
        "ProjectBucket": {"Type": "AWS::S3::Bucket", "Condition": NEW_BUCKET, "DeletionPolicy": "Retain",
                          "UpdateReplacePolicy": "Retain", "Properties": {
            "BucketName": sub("instantstart-${AWS::AccountId}-${AWS::Region}"),
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
            "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                               "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
            "BucketEncryption": {"ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}, "BucketKeyEnabled": True}]},
            "VersioningConfiguration": {"Status": "Enabled"},
            "Tags": tags("bucket")}},
        "ControlPlanePolicy": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {
            "Description": "InstantStart control plane (deploy/iam/control-plane-policy.json)",
            "PolicyDocument": policy}},
        # One per account (IAM is global): a second stack (another Region) sets CreatePermissionsBoundary=false.
        "PermissionsBoundary": {"Type": "AWS::IAM::ManagedPolicy", "Condition": NEW_BOUNDARY, "Properties": {
            "ManagedPolicyName": BOUNDARY_NAME,
            "Description": "InstantStart: the most any role the control plane creates may do "
            "(deploy/iam/permissions-boundary.json)",
            "PolicyDocument": json.loads(BOUNDARY.read_text())}},
        # Named outside instantstart-*, the pattern of roles the control plane may create and change, whatever the
        # stack is called.
        "InstanceRole": {"Type": "AWS::IAM::Role", "Properties": {
            "RoleName": sub("InstantStartControlPlane-${AWS::Region}"),
            "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
            "ManagedPolicyArns": [
                ref("ControlPlanePolicy"),
                sub("arn:${AWS::Partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"),
                sub("arn:${AWS::Partition}:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly"),
            ],
            "Tags": tags("instance")}},
        "InstanceProfile": {"Type": "AWS::IAM::InstanceProfile", "Properties": {"Roles": [ref("InstanceRole")]}},
        # cfn-lint resolves ExistingPrivateSubnetId to its empty default, which Fn::If never passes on.
        "Instance": {"Type": "AWS::EC2::Instance", "Metadata": {"cfn-lint": {"config": {"ignore_checks": ["W1030"]}}},
                     "Properties": {
            "ImageId": ref("ImageId"), "InstanceType": ref("InstanceType"),
            "IamInstanceProfile": ref("InstanceProfile"), "SubnetId": subnet,
            "SecurityGroupIds": [ref("InstanceSecurityGroup")],
            "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2, "HttpEndpoint": "enabled"},
            "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {
                "VolumeSize": 30, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}}],
            "UserData": {"Fn::Base64": {"Fn::Sub": [USER_DATA, {"BucketName": bucket_name}]}},
            "Tags": tags("control-plane")}},
    }
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "InstantStart management environment: network (new or reused), project bucket, instance "
        f"role with the control-plane policy, and an instance running the control plane container. No public "
        f"ingress: reach port {PORT} through SSM Session Manager port forwarding (docs/AWS.md).",
        "Parameters": {
            "ContainerImage": {"Type": "String", "Description": "The InstantStart image (e.g. an ECR repository URI "
                               "with its tag) built from Containerfile.", "MinLength": 1},
            "InstanceType": {"Type": "String", "Default": "t3.medium", "Description": "The management instance."},
            "ImageId": {"Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>",
                        "Default": "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64",
                        "Description": "Amazon Linux 2023 (the SSM agent is preinstalled)."},
            "VpcCidr": {"Type": "String", "Default": "10.250.0.0/24",
                        "AllowedPattern": r"^(\d{1,3}\.){3}\d{1,3}/(1[6-9]|2[0-4])$",
                        "Description": "CIDR of a new VPC (ignored when ExistingVpcId is given)."},
            "PublicSubnetCidr": {"Type": "String", "Default": "10.250.0.0/25", "Description": "The NAT gateway's "
                                 "subnet in a new VPC (inside VpcCidr)."},
            "PrivateSubnetCidr": {"Type": "String", "Default": "10.250.0.128/25", "Description": "The instance's "
                                  "subnet in a new VPC (inside VpcCidr)."},
            "ExistingVpcId": {"Type": "String", "Default": "", "AllowedPattern": r"^(vpc-[0-9a-f]{8,17})?$",
                              "Description": "Reuse this VPC (with "
                              "ExistingPrivateSubnetId); empty: create a VPC with a NAT gateway."},
            "ExistingPrivateSubnetId": {"Type": "String", "Default": "",
                                        "AllowedPattern": r"^(subnet-[0-9a-f]{8,17})?$",
                                        "Description": "A private subnet of ExistingVpcId with a route to the "
                                        "internet or to SSM, S3 and STS endpoints."},
            "ExistingBucketName": {"Type": "String", "Default": "", "Description": "Reuse this project bucket; "
                                   "empty: create instantstart-<account>-<region>."},
            "CreatePermissionsBoundary": {"Type": "String", "Default": "true", "AllowedValues": ["true", "false"],
                                          "Description": f"Create the {BOUNDARY_NAME} policy; false when it exists "
                                          "already in the account (a stack in another Region made it)."},
        },
        "Conditions": {
            NEW_NETWORK: {"Fn::Equals": [ref("ExistingVpcId"), ""]},
            NEW_BUCKET: {"Fn::Equals": [ref("ExistingBucketName"), ""]},
            NEW_BOUNDARY: {"Fn::Equals": [ref("CreatePermissionsBoundary"), "true"]},
        },
        "Rules": {
            "ReusedNetworkIsComplete": {
                "RuleCondition": {"Fn::Not": [{"Fn::Equals": [ref("ExistingVpcId"), ""]}]},
                "Assertions": [{"Assert": {"Fn::Not": [{"Fn::Equals": [ref("ExistingPrivateSubnetId"), ""]}]},
                                "AssertDescription": "ExistingPrivateSubnetId is required with ExistingVpcId."}],
            }
        },
        "Resources": resources,
        "Outputs": {
            "InstanceId": {"Value": ref("Instance"), "Description": "Target of the SSM port-forwarding session."},
            "PortForwardCommand": {"Description": "Run locally, then open http://127.0.0.1:3099", "Value": sub(
                "aws ssm start-session --region ${AWS::Region} --target ${Instance} --document-name "
                f"AWS-StartPortForwardingSession --parameters portNumber={PORT},localPortNumber={PORT}")},
            "ProjectBucketName": {"Value": bucket_name},
            "InstanceRoleArn": {"Value": {"Fn::GetAtt": ["InstanceRole", "Arn"]}},
            "ControlPlanePolicyArn": {"Value": ref("ControlPlanePolicy")},
            "PermissionsBoundaryArn": {"Value": sub(f"arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:policy/"
                                                    f"{BOUNDARY_NAME}")},
        },
    }


class _NoAliases(yaml.SafeDumper):
    """CloudFormation rejects YAML aliases: write repeated values out in full."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def rendered() -> str:
    """The template as committed YAML."""
    policy = json.loads(POLICY.read_text())
    header = "# Generated by scripts/render_management_environment.py from deploy/iam/control-plane-policy.json.\n"
    return header + yaml.dump(template(policy), Dumper=_NoAliases, sort_keys=False, width=110)


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check, compare) the template."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when the committed template is stale")
    args = parser.parse_args(argv)
    text = rendered()
    if args.check:
        if not TEMPLATE.exists() or TEMPLATE.read_text() != text:
            print("deploy/management-environment.yaml is stale: run scripts/render_management_environment.py",
                  file=sys.stderr)
            return 1
        return 0
    TEMPLATE.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
