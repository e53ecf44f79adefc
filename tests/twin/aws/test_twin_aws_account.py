"""The twin account through boto3: identity, bucket, a HyperPod-ready VPC, AZs, offerings, safe errors."""

from __future__ import annotations

import urllib.request

import pytest
from botocore.exceptions import ClientError

from hyperpod_twin.twin import Twin
from tests.support.twin_aws import build_network, control


def test_identity_and_project_bucket(twin: Twin) -> None:
    ident = twin.boto3_client("sts").get_caller_identity()
    assert ident["Account"] == twin.account_id == "111122223333"
    assert ident["Arn"] == f"arn:aws:iam::{twin.account_id}:user/instantstart-twin"
    s3 = twin.boto3_client("s3")
    assert twin.project_bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    s3.put_object(Bucket=twin.project_bucket, Key="models/a.txt", Body=b"hello")
    assert s3.get_object(Bucket=twin.project_bucket, Key="models/a.txt")["Body"].read() == b"hello"
    health = control(twin, "health")
    assert health["status"] == "ok" and health["access_key_id"] == twin.access_key_id


def test_hyperpod_network_layout(twin: Twin) -> None:
    net = build_network(twin, "10.20")
    ec2 = twin.boto3_client("ec2")
    subnets = {
        s["SubnetId"]: s for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [net.vpc]}])["Subnets"]
    }
    assert len(subnets) == 6
    assert {subnets[s]["CidrBlock"].split("/")[1] for s in net.compute.values()} == {"20"}
    assert {subnets[s]["AvailabilityZone"] for s in net.eks_private} == {"us-west-2a", "us-west-2b"}
    tables = ec2.describe_route_tables(RouteTableIds=[net.private_rt])["RouteTables"][0]
    assert any(r.get("NatGatewayId") == net.nat for r in tables["Routes"])
    assert any(r.get("DestinationPrefixListId", "").startswith("pl-") for r in tables["Routes"])
    assert len(tables["Associations"]) == 4
    endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [net.vpc]}])["VpcEndpoints"]
    assert endpoints[0]["ServiceName"] == "com.amazonaws.us-west-2.s3"


def test_zones_and_instance_offerings(twin: Twin) -> None:
    ec2 = twin.boto3_client("ec2")
    zones = ec2.describe_availability_zones()["AvailabilityZones"]
    assert {z["ZoneName"] for z in zones} >= {"us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"}
    assert all(z["ZoneId"].startswith("usw2-az") for z in zones)
    subnet = ec2.create_subnet(
        VpcId=ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"],
        CidrBlock="10.30.0.0/20",
        AvailabilityZoneId="usw2-az1",
    )["Subnet"]
    assert subnet["AvailabilityZoneId"] == "usw2-az1"
    offers = ec2.describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["g5.8xlarge"]}]
    )["InstanceTypeOfferings"]
    assert {o["Location"] for o in offers} and all(o["InstanceType"] == "g5.8xlarge" for o in offers)


def test_iam_roles_policies_oidc_and_service_linked_role(twin: Twin) -> None:
    iam = twin.boto3_client("iam")
    iam.create_role(RoleName="hp-exec", AssumeRolePolicyDocument='{"Version":"2012-10-17","Statement":[]}')
    iam.attach_role_policy(
        RoleName="hp-exec", PolicyArn="arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy"
    )
    attached = iam.list_attached_role_policies(RoleName="hp-exec")["AttachedPolicies"]
    assert attached[0]["PolicyName"] == "AmazonSageMakerClusterInstanceRolePolicy"
    slr = iam.create_service_linked_role(AWSServiceName="hyperpod.sagemaker.amazonaws.com")["Role"]
    assert slr["RoleName"] == "AWSServiceRoleForSageMakerHyperPod"
    assert iam.get_role(RoleName="AWSServiceRoleForSageMakerHyperPod")["Role"]["Path"].startswith("/aws-service-role/")
    with pytest.raises(ClientError) as err:
        iam.create_service_linked_role(AWSServiceName="hyperpod.sagemaker.amazonaws.com")
    assert err.value.response["Error"]["Code"] == "InvalidInput"
    provider = iam.create_open_id_connect_provider(
        Url="https://oidc.eks.us-west-2.amazonaws.com/id/ABC",
        ClientIDList=["sts.amazonaws.com"],
        ThumbprintList=["a" * 40],
    )
    assert provider["OpenIDConnectProviderArn"].endswith("oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC")


def test_deletion_planning_reads_answer(twin: Twin) -> None:
    assert twin.boto3_client("elbv2").describe_load_balancers()["LoadBalancers"] == []
    tagging = twin.boto3_client("resourcegroupstaggingapi")
    assert "ResourceTagMappingList" in tagging.get_resources(TagFilters=[{"Key": "instantstart:cluster-tag"}])


def test_unimplemented_call_is_a_client_error_not_a_500(twin: Twin) -> None:
    # moto 5.2.5 has no SageMaker ListOptimizationJobs (nor has the twin); a bare 500 would be retried for minutes.
    sm = twin.boto3_client("sagemaker")
    with pytest.raises(ClientError) as err:
        sm.list_optimization_jobs()
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert err.value.response["Error"]["Code"] == "UnknownOperationException"
    assert err.value.response["ResponseMetadata"]["RetryAttempts"] == 0


def test_unknown_control_endpoint_is_404(twin: Twin) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        control(twin, "nope")
    assert err.value.code == 404


def test_unrouted_rest_call_is_a_client_error(twin: Twin) -> None:
    eks = twin.boto3_client("eks")
    with pytest.raises(ClientError) as err:
        eks.list_insights(clusterName="any")
    assert err.value.response["Error"]["Code"] == "UnknownOperationException"
    assert err.value.response["ResponseMetadata"]["RetryAttempts"] == 0


def test_unknown_region_is_refused_like_aws(twin: Twin) -> None:
    eks = twin.boto3_client("eks", region_name="eu-gov-krm-3")
    with pytest.raises(ClientError) as err:
        eks.describe_cluster(name="x")
    assert err.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert err.value.response["ResponseMetadata"]["RetryAttempts"] == 0
