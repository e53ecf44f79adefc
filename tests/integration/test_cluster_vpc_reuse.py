"""cluster_create into the operator's own VPC (vpcId), made here with boto3 as a pre-existing VPC would be: the
cluster runs verified with its storage mounted, what InstantStart adds is tagged and fits beside the operator's
subnets, nothing of the operator's is changed, and cluster_delete removes only what InstantStart created."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import boto3

from instantstart.twin_process import TwinProcess
from tests.support.flows import claim_pod, kube, mcp_calls, mcp_raw, mcp_wait, tagged_leftovers
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import until, wait_terminal

TAG = "instantstart:cluster-tag"
STAGES = ["eks", "activate", "dependencies", "hyperpod", "storage", "verification"]
NODE = {"instanceType": "ml.g6.4xlarge", "instanceCount": 1, "availabilityZone": "us-west-2c"}


def _vpc(ec2: Any, cidr: str, *, hostnames: bool = True) -> str:
    """A VPC as the operator makes one (no InstantStart tag): DNS support on, DNS hostnames as asked."""
    vpc_id = str(ec2.create_vpc(CidrBlock=cidr, TagSpecifications=[
        {"ResourceType": "vpc", "Tags": [{"Key": "Name", "Value": "theirs"}]}])["Vpc"]["VpcId"])
    if hostnames:
        ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsHostnames={"Value": True})
    return vpc_id


def operators_network(ec2: Any) -> dict[str, Any]:
    """A production-like VPC: public and private subnets in two AZs, an internet gateway, a NAT gateway, route
    tables and an S3 gateway endpoint on the private table."""
    vpc_id = _vpc(ec2, "10.60.0.0/16")
    subnets = {name: ec2.create_subnet(VpcId=vpc_id, CidrBlock=cidr, AvailabilityZone=az)["Subnet"]["SubnetId"]
               for name, cidr, az in [("public-a", "10.60.0.0/24", "us-west-2a"),
                                      ("public-b", "10.60.1.0/24", "us-west-2b"),
                                      ("private-a", "10.60.16.0/20", "us-west-2a"),
                                      ("private-b", "10.60.32.0/20", "us-west-2b")]}
    igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc_id)
    public_rt = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=public_rt, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=subnets["public-a"], AllocationId=eip)["NatGateway"]["NatGatewayId"]
    private_rt = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=private_rt, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat)
    for name, subnet in subnets.items():
        ec2.associate_route_table(RouteTableId=public_rt if name.startswith("public") else private_rt,
                                  SubnetId=subnet)
    endpoint = ec2.create_vpc_endpoint(VpcId=vpc_id, ServiceName="com.amazonaws.us-west-2.s3",
                                       VpcEndpointType="Gateway", RouteTableIds=[private_rt])
    return {"vpcId": vpc_id, "subnets": subnets, "igw": igw, "nat": nat, "eip": eip,
            "endpoint": endpoint["VpcEndpoint"]["VpcEndpointId"]}


def in_vpc(ec2: Any, vpc_id: str) -> dict[str, dict[str, Any]]:
    """Everything in the VPC, by id, in a comparable form (NAT gateway state left out: it moves on its own)."""
    f = [{"Name": "vpc-id", "Values": [vpc_id]}]

    def tags(item: dict[str, Any]) -> list[tuple[str, str]]:
        return sorted((t["Key"], t["Value"]) for t in item.get("Tags") or [])

    vpc = ec2.describe_vpcs(VpcIds=[vpc_id])["Vpcs"][0]
    dns = [ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute=a)[a[0].upper() + a[1:]]["Value"]
           for a in ("enableDnsSupport", "enableDnsHostnames")]
    found: dict[str, dict[str, Any]] = {vpc_id: {"cidr": vpc["CidrBlock"], "tags": tags(vpc), "dns": dns}}
    for s in ec2.describe_subnets(Filters=f)["Subnets"]:
        found[s["SubnetId"]] = {"cidr": s["CidrBlock"], "az": s["AvailabilityZone"], "tags": tags(s),
                                "public": s.get("MapPublicIpOnLaunch")}
    for t in ec2.describe_route_tables(Filters=f)["RouteTables"]:
        found[t["RouteTableId"]] = {
            "routes": sorted(str(sorted((k, v) for k, v in r.items() if k != "State")) for r in t["Routes"]),
            "associations": sorted((a.get("SubnetId") or "", bool(a.get("Main"))) for a in t.get("Associations", [])),
            "tags": tags(t)}
    for g in ec2.describe_internet_gateways(Filters=[{"Name": "attachment.vpc-id", "Values": [vpc_id]}])[
            "InternetGateways"]:
        found[g["InternetGatewayId"]] = {"attachments": [a["VpcId"] for a in g["Attachments"]], "tags": tags(g)}
    for n in ec2.describe_nat_gateways(Filters=f)["NatGateways"]:
        if n["State"] not in ("deleting", "deleted"):
            found[n["NatGatewayId"]] = {"subnet": n["SubnetId"], "tags": tags(n)}
    for e in ec2.describe_vpc_endpoints(Filters=f)["VpcEndpoints"]:
        if e["State"].lower() not in ("deleting", "deleted"):
            found[e["VpcEndpointId"]] = {"tables": sorted(e["RouteTableIds"]), "tags": tags(e)}
    for g in ec2.describe_security_groups(Filters=f)["SecurityGroups"]:
        found[g["GroupId"]] = {"rules": str(g["IpPermissions"]), "egress": str(g["IpPermissionsEgress"]),
                               "tags": tags(g)}
    return found


def test_cluster_create_in_the_operators_vpc_and_delete_leaves_it_intact(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    ec2: Any = twin_client(twin, "ec2")
    theirs = operators_network(ec2)
    vpc_id = theirs["vpcId"]
    before = in_vpc(ec2, vpc_id)
    their_cidrs = [v["cidr"] for k, v in before.items() if k.startswith("subnet-")]
    with cp.client() as client:
        ref = client.post("/api/v1/clusters", json={"clusterTag": "byo", "vpcId": vpc_id, **NODE})
        assert ref.status_code == 202, ref.text
        view = wait_terminal(client, ref.json()["operationId"], timeout=300)
        assert view["status"] == "SUCCEEDED", view
        assert [s["name"] for s in view["stages"]] == STAGES
        network = view["stages"][0]["outputs"]
        # The operator's internet gateway is used (a VPC has one); everything else the cluster needs is its own.
        assert network["vpcId"] == vpc_id and network["vpcCreated"] is False
        assert network["internetGatewayId"] == theirs["igw"]
        assert network["natGatewayId"] != theirs["nat"] and network["s3EndpointId"] != theirs["endpoint"]

        # The storage claim made by cluster_create is mounted by a pod on the HyperPod node.
        core = kube(twin, tmp_path, "byo")
        core.create_namespaced_pod("default", claim_pod("reader", "s3-claim", mount_path="/data"))
        until(lambda: core.read_namespaced_pod("reader", "default").status.phase == "Running", "the pod mounts")

        after = in_vpc(ec2, vpc_id)
        # Nothing of the operator's changed; everything new carries the cluster tag.
        assert {k: after.get(k) for k in before} == before
        added = {k: v for k, v in after.items() if k not in before}
        kinds = {k.split("-")[0] for k in added}
        assert {"subnet", "rtb", "nat", "vpce", "sg"} <= kinds and "igw" not in kinds, added
        # (EKS makes the cluster security group itself, with its own tags, and deletes it with the cluster.)
        eks_own = ("aws:eks:cluster-name", "eks-cluster-byo")
        untagged = {k: v for k, v in added.items() if (TAG, "byo") not in v["tags"] and eks_own not in v["tags"]}
        assert not untagged, untagged
        # Its subnets fit beside the operator's, the compute one a /20 in the node's AZ.
        ours = [ipaddress.ip_network(v["cidr"]) for v in added.values() if "cidr" in v]
        assert len(ours) == 5 and not any(o.overlaps(ipaddress.ip_network(c)) for o in ours for c in their_cidrs)
        compute = ec2.describe_subnets(Filters=[{"Name": f"tag:{TAG}", "Values": ["byo"]},
                                                {"Name": "availability-zone", "Values": ["us-west-2c"]}])["Subnets"]
        assert [s["CidrBlock"].endswith("/20") for s in compute] == [True]

        plan = client.get("/api/v1/clusters/byo/deletion-plan").json()
        planned = {r["resourceId"] for r in plan["resources"]}
        assert "ec2:vpc" not in {r["resourceType"] for r in plan["resources"]} and not planned & set(before)
        go = client.post("/api/v1/clusters/byo/delete", json={"planDigest": plan["planDigest"]}).json()
        done = wait_terminal(client, go["operationId"], timeout=300)
        assert done["status"] == "SUCCEEDED", done
    assert all(not v for v in tagged_leftovers(twin, "byo").values())
    assert in_vpc(ec2, vpc_id) == before  # the operator's VPC exactly as it was


def test_a_bare_vpc_over_mcp_gets_what_it_lacks_and_loses_only_that(cp: Running, twin: TwinProcess) -> None:
    """A VPC with nothing in it and DNS hostnames off: refused with the exact command; once turned on, the cluster
    adds its own internet gateway (tagged) and cluster_delete removes it again, leaving the empty VPC."""
    ec2: Any = twin_client(twin, "ec2")
    vpc_id = _vpc(ec2, "10.61.0.0/16", hostnames=False)
    refused = mcp_raw(cp, [("cluster_create", {"clusterTag": "bare", "vpcId": vpc_id, **NODE})])[0]
    assert refused["isError"], refused
    error = refused["payload"]["error"]
    assert error["code"] == "PRECONDITION_FAILED" and error["details"]["blockers"][0]["code"] == "VPC_DNS", error
    assert "enableDnsHostnames" in error["message"] and "enableDnsSupport" not in error["message"]
    command = f"aws ec2 modify-vpc-attribute --region us-west-2 --vpc-id {vpc_id} --enable-dns-hostnames"
    assert command in error["details"]["blockers"][0]["hint"], error
    assert {"field": "vpcId", "message": error["details"]["blockers"][0]["message"]} in error["details"]["fields"]
    assert mcp_calls(cp, [("cluster_list_all", {})])[0]["clusters"] == []

    ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsHostnames={"Value": True})
    before = in_vpc(ec2, vpc_id)
    ref = mcp_calls(cp, [("cluster_create", {"clusterTag": "bare", "vpcId": vpc_id, **NODE})])[0]
    view = mcp_wait(cp, ref["operationId"], limit=300)
    assert view["status"] == "SUCCEEDED", view
    igws = ec2.describe_internet_gateways(Filters=[{"Name": "attachment.vpc-id", "Values": [vpc_id]}])
    assert [(TAG, "bare") in [(t["Key"], t["Value"]) for t in g["Tags"]] for g in igws["InternetGateways"]] == [True]
    plan = mcp_calls(cp, [("cluster_delete_plan", {"clusterTag": "bare"})])[0]
    assert "ec2:internet-gateway" in {r["resourceType"] for r in plan["resources"]}
    go = mcp_calls(cp, [("cluster_delete", {"clusterTag": "bare", "planDigest": plan["planDigest"]})])[0]
    assert mcp_wait(cp, go["operationId"], limit=300)["status"] == "SUCCEEDED"
    assert in_vpc(ec2, vpc_id) == before


def _eks_in(client: Any, tag: str, vpc_id: str) -> dict[str, Any]:
    """The EKS stage of cluster `tag` in the VPC, to SUCCEEDED; its outputs."""
    ref = client.post("/api/v1/clusters/eks", json={"clusterTag": tag, "vpcId": vpc_id})
    assert ref.status_code == 202, ref.text
    view = wait_terminal(client, ref.json()["operationId"], timeout=120)
    assert view["status"] == "SUCCEEDED", view
    return dict(view["stages"][0]["outputs"])


def _delete(client: Any, tag: str) -> None:
    plan = client.get(f"/api/v1/clusters/{tag}/deletion-plan").json()
    go = client.post(f"/api/v1/clusters/{tag}/delete", json={"planDigest": plan["planDigest"]}).json()
    assert wait_terminal(client, go["operationId"], timeout=300)["status"] == "SUCCEEDED"


def test_two_clusters_in_one_vpc_and_the_internet_gateway_they_share(cp: Running, twin: TwinProcess) -> None:
    """The first cluster in a bare VPC attaches its own internet gateway; the second finds it attached and routes
    through it (a VPC has one). Deleting the first keeps the gateway while route tables not its own use it."""
    ec2: Any = twin_client(twin, "ec2")
    vpc_id = _vpc(ec2, "10.66.0.0/16")
    with cp.client() as client:
        first, second = _eks_in(client, "one", vpc_id), _eks_in(client, "two", vpc_id)
        assert first["internetGatewayId"] == second["internetGatewayId"]
        subnets = [ipaddress.ip_network(s["CidrBlock"])
                   for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])["Subnets"]]
        assert len(subnets) == 8 and not any(a.overlaps(b) for i, a in enumerate(subnets) for b in subnets[i + 1:])
        _delete(client, "one")
        igw = ec2.describe_internet_gateways(InternetGatewayIds=[first["internetGatewayId"]])["InternetGateways"][0]
        assert [a["VpcId"] for a in igw["Attachments"]] == [vpc_id]  # the second cluster's routes still work
        assert {k: v for k, v in tagged_leftovers(twin, "one").items() if v} == {"igws": [igw["InternetGatewayId"]]}
        _delete(client, "two")
    assert all(not v for v in tagged_leftovers(twin, "two").values())
    # Nothing routes through the gateway now; it is left tagged with the first cluster for the operator to remove.
    assert ec2.describe_route_tables(Filters=[{"Name": "route.gateway-id",
                                               "Values": [igw["InternetGatewayId"]]}])["RouteTables"] == []


def test_vpc_id_refusals_name_the_vpc_and_the_fix(cp: Running, twin: TwinProcess) -> None:
    ec2: Any = twin_client(twin, "ec2")
    other_region: Any = boto3.client("ec2", endpoint_url=twin.endpoint_url, region_name="us-east-1",
                                     aws_access_key_id=twin.env["AWS_ACCESS_KEY_ID"],
                                     aws_secret_access_key=twin.env["AWS_SECRET_ACCESS_KEY"])
    elsewhere = _vpc(other_region, "10.62.0.0/16")
    # A /20 VPC whose one subnet leaves no /20 for the compute subnet.
    small = _vpc(ec2, "10.63.0.0/20")
    ec2.create_subnet(VpcId=small, CidrBlock="10.63.0.0/24", AvailabilityZone="us-west-2a")
    with cp.client() as client:
        both = client.post("/api/v1/clusters", json={"vpcId": small, "vpcCidr": "10.64.0.0/16", **NODE})
        assert both.status_code == 422 and both.json()["error"]["details"]["fields"][0]["field"] == "vpcCidr"
        for vpc_id, code in [("vpc-0123456789abcdef0", "VPC_NOT_FOUND"), (elsewhere, "VPC_NOT_FOUND"),
                             (small, "VPC_NO_ROOM")]:
            response = client.post("/api/v1/clusters", json={"clusterTag": "nope", "vpcId": vpc_id, **NODE})
            assert response.status_code == 412, response.text
            blocker = response.json()["error"]["details"]["blockers"][0]
            assert blocker["code"] == code and blocker["field"] == "vpcId" and vpc_id in blocker["message"], blocker
        assert "us-west-2" in client.post("/api/v1/clusters/plan", json={"vpcId": elsewhere, **NODE}).json()[
            "blockers"][0]["message"]
        room = client.post("/api/v1/clusters/plan", json={"vpcId": small, **NODE}).json()["blockers"][0]
        assert "10.63.0.0/20" in room["message"] and "10.63.0.0/24" in room["message"], room
        assert f"associate-vpc-cidr-block --vpc-id {small}" in room["hint"], room
        # The step-by-step tool refuses before recording anything, too.
        eks = client.post("/api/v1/clusters/eks", json={"clusterTag": "nope", "vpcId": small})
        assert eks.status_code == 412 and eks.json()["error"]["details"]["code"] == "VPC_NO_ROOM", eks.text
        missing = client.post("/api/v1/clusters/eks", json={"clusterTag": "nope", "vpcId": "vpc-0123456789abcdef0"})
        assert missing.status_code == 404 and "vpcId" in missing.json()["error"]["message"], missing.text
        assert client.get("/api/v1/clusters").json()["count"] == 0
        # A secondary CIDR block is room: the fix the hint names works.
        ec2.associate_vpc_cidr_block(VpcId=small, CidrBlock="10.65.0.0/16")
        assert client.post("/api/v1/clusters/plan", json={"vpcId": small, **NODE}).json()["ok"] is True
