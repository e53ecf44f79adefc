"""A create whose reply a crash lost: the resource is in the account, tagged as ours, but not in the ledger. The
resumed stage finds it by its tags and adopts it; the ledger must then hold it (the chaos soak found route tables
left out of the ledger after kill -9: tests/support/soak.py)."""

from __future__ import annotations

from typing import Any

from instantstart.services.cluster.ledger_reconcile import reconcile_ledger
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import aws_tags, resources_of
from instantstart.twin_process import TwinProcess
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal


def test_a_resource_whose_create_reply_was_lost_is_ledgered_when_adopted(cp: Running, twin: TwinProcess) -> None:
    tag = "lostreply"
    db = cp.context.db
    ec2: Any = twin_client(twin, "ec2")
    # What CreateVpc left behind when the control plane died before its reply came: our tags, no ledger row.
    tags = aws_tags(tag, "op-killed", f"instantstart-{tag}", "vpc", installation_id(db))
    vpc = ec2.create_vpc(CidrBlock="10.77.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": tags}])
    vpc_id = vpc["Vpc"]["VpcId"]
    # And a route table of ours in it, also unrecorded.
    table_tags = aws_tags(tag, "op-killed", f"instantstart-{tag}-rt-public", "rt-public", installation_id(db))
    table = ec2.create_route_table(VpcId=vpc_id, TagSpecifications=[{"ResourceType": "route-table",
                                                                        "Tags": table_tags}])
    table_id = table["RouteTable"]["RouteTableId"]
    with cp.client() as client:
        ref = client.post("/api/v1/clusters/eks", json={"clusterTag": tag})
        assert ref.status_code == 202, ref.text
        view = wait_terminal(client, ref.json()["operationId"], timeout=180)
    assert view["status"] == "SUCCEEDED", view["error"]
    ledgered = {(r.resource_type, r.resource_id) for r in resources_of(db, tag)}
    assert ("ec2:vpc", vpc_id) in ledgered, "the adopted VPC is in the ledger"
    assert ("ec2:route-table", table_id) in ledgered, "the adopted route table is in the ledger"
    attributes = ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute="enableDnsHostnames")
    assert attributes["EnableDnsHostnames"]["Value"], "DNS is set on the adopted VPC too"
    report = reconcile_ledger(cp.context)
    assert report["orphans"] == [] and report["phantoms"] == [], report
