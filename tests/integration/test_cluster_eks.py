"""The EKS stage against the twin: network, IAM, control plane, access, OIDC; bad input refused first."""

from __future__ import annotations

from typing import Any

from instantstart.twin_process import TwinProcess
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

TAG_FILTER = "tag:instantstart:cluster-tag"


def _tagged(twin: TwinProcess, tag: str) -> dict[str, Any]:
    ec2: Any = twin_client(twin, "ec2")
    f = [{"Name": TAG_FILTER, "Values": [tag]}]
    return {
        "vpcs": ec2.describe_vpcs(Filters=f)["Vpcs"],
        "subnets": ec2.describe_subnets(Filters=f)["Subnets"],
        "nats": [n for n in ec2.describe_nat_gateways(Filters=f)["NatGateways"] if n["State"] != "deleted"],
        "route_tables": ec2.describe_route_tables(Filters=f)["RouteTables"],
        "groups": ec2.describe_security_groups(Filters=f)["SecurityGroups"],
    }


def test_cluster_create_eks_builds_everything_once(cp: Running, twin: TwinProcess) -> None:
    with cp.client() as client:
        ref = client.post("/api/v1/clusters/eks", json={"clusterTag": "alpha", "region": "us-west-2"})
        assert ref.status_code == 202, ref.text
        body = ref.json()
        assert body["statusTool"] == "cluster_get_eks_creation_status"
        status = client.get("/api/v1/clusters/eks-status", params={"clusterTag": "alpha"}).json()
        assert status["state"] in ("IN_PROGRESS", "SUCCEEDED") and status["terminal"] in (False, True)
        view = wait_terminal(client, body["operationId"], timeout=120)
        assert view["status"] == "SUCCEEDED", view
        status = client.get("/api/v1/clusters/eks-status", params={"clusterTag": "alpha"}).json()
        assert status["state"] == "SUCCEEDED" and status["terminal"] is True
        assert status["resourceStatus"] == "ACTIVE"
        listing = client.get("/api/v1/clusters").json()
        assert listing["clusters"][0]["clusterTag"] == "alpha"
        assert listing["clusters"][0]["stages"]["eks"] == "SUCCEEDED"
        # Retrying a finished operation is refused; a second create with the same tag is a conflict.
        assert client.post(f"/api/v1/operations/{body['operationId']}/retry").status_code == 409
        again = client.post("/api/v1/clusters/eks", json={"clusterTag": "alpha"})
        assert again.status_code == 409 and "already in use" in again.json()["error"]["message"]
    outputs = view["stages"][0]["outputs"]
    found = _tagged(twin, "alpha")
    assert len(found["vpcs"]) == 1 and found["vpcs"][0]["VpcId"] == outputs["vpcId"]
    roles = sorted(t["Value"] for s in found["subnets"] for t in s["Tags"] if t["Key"] == "instantstart:role")
    assert roles == ["eks-private-1", "eks-private-2", "public-1", "public-2"]
    assert len({s["AvailabilityZone"] for s in found["subnets"]}) == 2
    assert len(found["nats"]) == 1
    group = found["groups"][0]
    assert any(
        p["IpProtocol"] == "-1" and p["UserIdGroupPairs"][0]["GroupId"] == group["GroupId"]
        for p in group["IpPermissions"]
    )
    private_rt = next(t for t in found["route_tables"] if any(x["Value"] == "rt-eks-private" for x in t["Tags"]))
    assert any(r.get("NatGatewayId") == outputs["natGatewayId"] for r in private_rt["Routes"])
    ec2: Any = twin_client(twin, "ec2")
    endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [outputs["vpcId"]]}])["VpcEndpoints"]
    assert [e["ServiceName"] for e in endpoints] == ["com.amazonaws.us-west-2.s3"]
    eks: Any = twin_client(twin, "eks")
    cluster = eks.describe_cluster(name="eks-cluster-alpha")["cluster"]
    assert cluster["status"] == "ACTIVE"
    assert cluster["accessConfig"]["authenticationMode"] == "API_AND_CONFIG_MAP"
    assert cluster["tags"]["instantstart:cluster-tag"] == "alpha"
    assert outputs["controlPlanePrincipal"] in eks.list_access_entries(clusterName="eks-cluster-alpha")["accessEntries"]
    iam: Any = twin_client(twin, "iam")
    assert iam.get_role(RoleName="instantstart-alpha-eks")["Role"]["Arn"] == outputs["eksRoleArn"]
    providers = iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]
    assert [p["Arn"] for p in providers] == [outputs["oidcProviderArn"]]


def test_bad_addresses_are_refused_before_anything_is_created(cp: Running, twin: TwinProcess) -> None:
    base = {
        "clusterTag": "beta",
        "region": "us-west-2",
        "vpcCidr": "10.9.0.0/16",
        "publicSubnet1Cidr": "10.9.0.0/24",
        "publicSubnet2Cidr": "10.9.1.0/24",
        "eksPrivateSubnet1Cidr": "10.9.2.0/24",
        "eksPrivateSubnet2Cidr": "10.9.3.0/24",
        "hyperPodPrivateSubnetCidr": "10.9.16.0/20",
    }
    cases = [
        ({"publicSubnet2Cidr": "10.9.0.128/25"}, "publicSubnet2Cidr", "overlaps"),
        ({"hyperPodPrivateSubnetCidr": "10.9.16.0/22"}, "hyperPodPrivateSubnetCidr", "/20"),
        ({"eksPrivateSubnet1Cidr": "10.10.2.0/24"}, "eksPrivateSubnet1Cidr", "not inside"),
        ({"clusterTag": "Bad_Tag"}, "clusterTag", "lowercase"),
        ({"region": "mars-1"}, "region", "Region"),
    ]
    with cp.client() as client:
        for change, field, text in cases:
            response = client.post("/api/v1/clusters/eks-with-cidr", json={**base, **change})
            assert response.status_code == 422, response.text
            error = response.json()["error"]
            assert field in error["message"] and text in error["message"], error
        assert client.get("/api/v1/clusters").json()["count"] == 0
        assert client.get("/api/v1/operations").json()["total"] == 0
    ec2: Any = twin_client(twin, "ec2")
    assert ec2.describe_vpcs(Filters=[{"Name": TAG_FILTER, "Values": ["beta"]}])["Vpcs"] == []


def test_explicit_cidrs_and_idempotent_submission(cp: Running, twin: TwinProcess) -> None:
    body = {
        "clusterTag": "gamma",
        "region": "us-west-2",
        "vpcCidr": "10.9.0.0/16",
        "publicSubnet1Cidr": "10.9.0.0/24",
        "publicSubnet2Cidr": "10.9.1.0/24",
        "eksPrivateSubnet1Cidr": "10.9.2.0/24",
        "eksPrivateSubnet2Cidr": "10.9.3.0/24",
        "hyperPodPrivateSubnetCidr": "10.9.16.0/20",
        "clientToken": "gamma-1",
    }
    with cp.client() as client:
        first = client.post("/api/v1/clusters/eks-with-cidr", json=body).json()
        second = client.post("/api/v1/clusters/eks-with-cidr", json=body).json()
        assert first["operationId"] == second["operationId"]
        assert wait_terminal(client, first["operationId"], timeout=120)["status"] == "SUCCEEDED"
    found = _tagged(twin, "gamma")
    assert found["vpcs"][0]["CidrBlock"] == "10.9.0.0/16"
    assert sorted(s["CidrBlock"] for s in found["subnets"]) == [
        "10.9.0.0/24",
        "10.9.1.0/24",
        "10.9.2.0/24",
        "10.9.3.0/24",
    ]


def test_a_reused_vpc_keeps_the_operators_s3_endpoint(cp: Running, twin: TwinProcess) -> None:
    """A reused VPC with the operator's S3 gateway endpoint (no cluster tag): the control plane may not change it
    (IAM allows ModifyVpcEndpoint only on tagged endpoints, the twin enforces it), so its private route table gets
    an endpoint of its own, tagged and ledgered; the operator's endpoint keeps exactly its route tables."""
    ec2: Any = twin_client(twin, "ec2")
    vpc_id = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsHostnames={"Value": True})  # reuse needs DNS hostnames on
    theirs_table = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
    theirs = ec2.create_vpc_endpoint(VpcId=vpc_id, ServiceName="com.amazonaws.us-west-2.s3", VpcEndpointType="Gateway",
                                     RouteTableIds=[theirs_table])["VpcEndpoint"]["VpcEndpointId"]
    with cp.client() as client:
        ref = client.post("/api/v1/clusters/eks", json={"clusterTag": "reuse", "region": "us-west-2",
                                                        "vpcId": vpc_id})
        assert ref.status_code == 202, ref.text
        view = wait_terminal(client, ref.json()["operationId"], timeout=120)
        assert view["status"] == "SUCCEEDED", view
    outputs = view["stages"][0]["outputs"]
    assert outputs["vpcId"] == vpc_id and outputs["s3EndpointId"] != theirs
    endpoints = {e["VpcEndpointId"]: e for e in
                 ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["VpcEndpoints"]}
    assert endpoints[theirs]["RouteTableIds"] == [theirs_table]
    ours = endpoints[outputs["s3EndpointId"]]
    assert ours["RouteTableIds"] == [outputs["privateRouteTableId"]]
    assert {"Key": "instantstart:cluster-tag", "Value": "reuse"} in ours["Tags"]
