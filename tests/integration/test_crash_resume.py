"""Kill -9 the control plane during each stage of cluster_create; on restart the operation finishes and the
twin holds exactly one VPC, one EKS cluster and one HyperPod cluster for the tag."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from instantstart.twin_process import TwinProcess
from tests.support.crash import running_stage
from tests.support.servers import Running, process_server
from tests.support.twin import control_plane_env, twin_client
from tests.support.waits import wait_terminal

STAGES = ["eks", "activate", "dependencies", "hyperpod", "storage", "verification"]


def kill_during(running: Running, proc: Any, operation_id: str, stage: str) -> str:
    """Wait until `stage` (or, if it was too quick to catch, a later one) runs, then kill -9."""
    deadline = time.monotonic() + 120
    with running.client() as client:
        while time.monotonic() < deadline:
            current = running_stage(client, operation_id)
            if current is not None and STAGES.index(current) >= STAGES.index(stage):
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
                return current
            time.sleep(0.005)
    raise AssertionError(f"stage {stage} never ran")


def count_for(twin: TwinProcess, tag: str) -> tuple[int, int, int]:
    ec2: Any = twin_client(twin, "ec2")
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "tag:instantstart:cluster-tag", "Values": [tag]}])["Vpcs"]
    eks: Any = twin_client(twin, "eks")
    sm: Any = twin_client(twin, "sagemaker")
    clusters = [c for c in eks.list_clusters()["clusters"] if c == f"eks-cluster-{tag}"]
    hyperpods = [c for c in sm.list_clusters()["ClusterSummaries"] if c["ClusterName"] == f"hp-cluster-{tag}"]
    return len(vpcs), len(clusters), len(hyperpods)


@pytest.mark.parametrize("stage", STAGES)
def test_kill_9_during_each_stage(stage: str, twin: TwinProcess, tmp_path: Path) -> None:
    tag = f"crash-{stage}"
    data, db = tmp_path / "data", f"sqlite:///{tmp_path / 'state.db'}"
    env = control_plane_env(twin)
    with process_server(data, db, extra_env=env) as (running, proc):
        with running.client() as client:
            ref = client.post(
                "/api/v1/clusters",
                json={
                    "clusterTag": tag,
                    "instanceType": "ml.g6.4xlarge",
                    "instanceCount": 1,
                    "availabilityZone": "us-west-2c",
                },
            )
            assert ref.status_code == 202, ref.text
        operation_id = ref.json()["operationId"]
        killed_in = kill_during(running, proc, operation_id, stage)
    with process_server(data, db, extra_env=env) as (restarted, _proc), restarted.client() as client:
        view = wait_terminal(client, operation_id, timeout=300)
    print(f"crash test: aimed at {stage}, killed during {killed_in}")
    unfinished = [(s["name"], s["status"], s["message"]) for s in view["stages"] if s["status"] != "SUCCEEDED"]
    assert view["status"] == "SUCCEEDED", (killed_in, unfinished)
    assert [s["status"] for s in view["stages"]] == ["SUCCEEDED"] * 6
    interrupted = next(s for s in view["stages"] if s["name"] == killed_in)
    assert interrupted["attempts"] >= 2, f"{killed_in} was re-run after the crash"
    assert count_for(twin, tag) == (1, 1, 1)
