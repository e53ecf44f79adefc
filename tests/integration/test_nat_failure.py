"""A NAT gateway that EC2 reports `failed` stops the EKS stage with EC2's FailureCode and FailureMessage and the
fix for that code; once fixed, operation_retry builds a new NAT gateway and the stage completes."""

from __future__ import annotations

from typing import Any

import httpx

from instantstart.twin_process import TwinProcess
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal


def test_failed_nat_gateway_is_a_clear_eks_stage_error(cp: Running, twin: TwinProcess) -> None:
    fault = {"kind": "nat_gateway_failure", "code": "InsufficientFreeAddressesInSubnet"}
    httpx.post(twin.endpoint_url + "/_twin/faults", json=fault).raise_for_status()
    with cp.client() as client:
        ref = client.post("/api/v1/clusters/eks", json={"clusterTag": "natfail"}).json()
        failed = wait_terminal(client, ref["operationId"], timeout=120)
        assert failed["status"] == "FAILED", failed
        error = failed["error"]
        assert "is failed (InsufficientFreeAddressesInSubnet: Subnet has insufficient free addresses to create " \
               "this NAT gateway)" in error["message"], error
        assert error["hint"].startswith("Free addresses in the first public subnet"), error
        assert error["details"]["failureCode"] == "InsufficientFreeAddressesInSubnet"
        eks_stage = next(s for s in failed["stages"] if s["name"] == "eks")
        assert eks_stage["attempts"] == 1, "a failure that needs a fix is not retried by itself"

        httpx.delete(twin.endpoint_url + "/_twin/faults").raise_for_status()
        retried = client.post(f"/api/v1/operations/{ref['operationId']}/retry")
        assert retried.status_code == 202, retried.text
        done = wait_terminal(client, retried.json()["operationId"], timeout=180)
        assert done["status"] == "SUCCEEDED", done.get("error")
    ec2: Any = twin_client(twin, "ec2")
    states = sorted(n["State"] for n in ec2.describe_nat_gateways()["NatGateways"])
    assert states == ["available", "failed"]
