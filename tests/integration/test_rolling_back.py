"""A classic-mode HyperPod cluster (made outside the control plane, then imported) whose scale-up fails rolls back;
the control plane's scale operation fails with the capacity error and cluster_get_status shows RollingBack with
its hint until HyperPod is InService again at the previous count."""

from __future__ import annotations

from typing import Any

from instantstart.twin_process import TwinProcess
from tests.support.servers import Running
from tests.support.twin import TWIN_CLOCK_SCALE
from tests.support.twin_aws import ProcessTwinView, advance, build_eks, build_network, control, group
from tests.support.waits import until, wait_terminal


def test_failed_scale_up_of_a_classic_cluster_shows_rolling_back_with_its_hint(cp: Running, twin: TwinProcess) -> None:
    view: Any = ProcessTwinView(twin)
    net = build_network(view, "10.60")
    eks_arn = build_eks(view, net, "classic-eks")
    sm = view.boto3_client("sagemaker")
    sm.create_cluster(  # no NodeProvisioningMode: classic mode, which rolls failed changes back
        ClusterName="classic-hp",
        Orchestrator={"Eks": {"ClusterArn": eks_arn}},
        VpcConfig={"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]},
        InstanceGroups=[group("cpu", "ml.m5.xlarge", 1)],
    )
    advance(view, 1200)
    assert sm.describe_cluster(ClusterName="classic-hp")["ClusterStatus"] == "InService"
    with cp.client() as client:
        ref = client.post("/api/v1/clusters/import", json={"eksClusterName": "classic-eks", "clusterTag": "classic"})
        assert wait_terminal(client, ref.json()["operationId"], timeout=60)["status"] == "SUCCEEDED"
        switch = client.post("/api/v1/clusters/classic/switch").json()
        assert wait_terminal(client, switch["operationId"], timeout=60)["status"] == "SUCCEEDED"
        # Hold the clock (two twin minutes take ~33 hours at this scale) so RollingBack lasts until advance() ends
        # it: at scale 1 it lasted 120 s of wall time, a window a loaded machine can use up before the reads.
        control(view, "clock", {"scale": 0.001})
        try:
            control(view, "faults", {"kind": "insufficient_capacity", "instance_type": "ml.m5.xlarge",
                                     "availability_zone": "*"})
            ref = client.post("/api/v1/capacity/instance-groups/scale",
                              json={"clusterTag": "classic", "name": "cpu", "targetCount": 3})
            assert ref.status_code == 202, ref.text
            failed = wait_terminal(client, ref.json()["operationId"], timeout=60)
            assert failed["status"] == "FAILED", failed
            assert failed["error"]["code"] == "CAPACITY_UNAVAILABLE", failed["error"]
            assert sm.describe_cluster(ClusterName="classic-hp")["ClusterStatus"] == "RollingBack"
            status = client.get("/api/v1/clusters/status").json()
            assert status["hyperpodStatus"] == "RollingBack", status
            [problem] = [p for p in status["problems"] if "RollingBack" in p]
            assert problem.startswith("HyperPod cluster classic-hp is RollingBack: We currently do not have "
                                      "sufficient capacity")
            assert "returns to InService at the previous counts" in problem and "cluster_events" in problem
        finally:
            control(view, "faults", method="DELETE")
            control(view, "clock", {"scale": TWIN_CLOCK_SCALE})
        advance(view, 121)
        back = sm.describe_cluster(ClusterName="classic-hp")
        assert back["ClusterStatus"] == "InService"
        assert (back["InstanceGroups"][0]["CurrentCount"], back["InstanceGroups"][0]["TargetCount"]) == (1, 1)

        def recovered() -> bool:
            status = client.get("/api/v1/clusters/status").json()
            return status["hyperpodStatus"] == "InService" and not [p for p in status["problems"] if "RollingBack" in p]

        until(recovered, "cluster_get_status no longer RollingBack")
