"""What capacity management creates is in the ledger: cluster_delete after added groups (with a dedicated
subnet) and Karpenter enabled leaves nothing tagged in the twin."""

from __future__ import annotations

from typing import Any

from instantstart.twin_process import TwinProcess
from tests.support.flows import add_group, make_hyperpod, tagged_leftovers
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal


def test_delete_after_capacity_changes_leaves_nothing_tagged(cp: Running, twin: TwinProcess) -> None:
    ec2: Any = twin_client(twin, "ec2")
    with cp.client() as client:
        make_hyperpod(client, "cdel")
        dedicated = add_group(client, instanceGroupName="ded", instanceType="ml.g6.4xlarge", instanceCount=1,
                              availabilityZone="us-west-2b", newSubnet=True)
        assert dedicated["status"] == "SUCCEEDED", dedicated
        subnet = dedicated["stages"][0]["outputs"]["subnetId"]
        auto = add_group(client, instanceGroupName="auto", instanceType="ml.g6.12xlarge", instanceCount=0,
                         availabilityZone="us-west-2c")
        assert auto["status"] == "SUCCEEDED", auto
        on = client.post("/api/v1/capacity/karpenter", json={"instanceGroups": ["auto"]})
        assert on.status_code == 202, on.text
        assert wait_terminal(client, on.json()["operationId"], timeout=120)["status"] == "SUCCEEDED"
        before = tagged_leftovers(twin, "cdel")
        assert subnet in before["subnets"] and "instantstart-cdel-hp-autoscaling" in before["roles"]
        plan = client.get("/api/v1/clusters/cdel/deletion-plan").json()
        planned = {(r["resourceType"], r["resourceId"]) for r in plan["resources"]}
        assert ("ec2:subnet", subnet) in planned and ("iam:role", "instantstart-cdel-hp-autoscaling") in planned
        go = client.post("/api/v1/clusters/cdel/delete", json={"planDigest": plan["planDigest"]})
        assert go.status_code == 202, go.text
        view = wait_terminal(client, go.json()["operationId"], timeout=180)
        assert view["status"] == "SUCCEEDED", view
    leftovers = tagged_leftovers(twin, "cdel")
    assert all(not v for v in leftovers.values()), leftovers
    assert not ec2.describe_subnets(Filters=[{"Name": "subnet-id", "Values": [subnet]}])["Subnets"]
