"""Kill -9 the control plane during each advanced-feature stage: restarted, the operation resumes and ends
SUCCEEDED, the stage that succeeded before the kill is not rerun, and every role, pod identity association,
add-on and AMP workspace was created exactly once (the twin's write counts equal what exists now)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from instantstart.services.features.specs import ORDER
from instantstart.twin_process import TwinProcess
from tests.support.crash import ControlPlane, on_fresh_twin, twin_writes
from tests.support.flows import add_group, make_hyperpod
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

TAG = "afk"
CREATES = {"CreateRole": "roles", "CreatePodIdentityAssociation": "associations", "CreateAddon": "addons",
           "CreateWorkspace": "workspaces"}


@pytest.fixture(scope="module")
def plane(twin_process: TwinProcess) -> Iterator[ControlPlane]:
    """One control-plane process (restarted by every test) and one HyperPod cluster with its dependencies."""
    cp = on_fresh_twin(twin_process, "advfeat-crash-")
    with cp.start().client() as client:
        make_hyperpod(client, TAG)
        deps = client.post("/api/v1/clusters/dependencies", json={})
        assert wait_terminal(client, deps.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
    try:
        yield cp
    finally:
        cp.stop()


def inventory(twin: TwinProcess) -> dict[str, list[str]]:
    """What exists for the cluster: feature roles, pod identity associations, add-ons, AMP workspaces."""
    iam: Any = twin_client(twin, "iam")
    eks: Any = twin_client(twin, "eks")
    roles = [r["RoleName"] for r in iam.list_roles()["Roles"] if r["RoleName"].startswith(f"instantstart-{TAG}-")]
    cluster = f"eks-cluster-{TAG}"
    associations = [f"{a['namespace']}/{a['serviceAccount']}"
                    for a in eks.list_pod_identity_associations(clusterName=cluster)["associations"]]
    workspaces = [w["workspaceId"] for w in twin_client(twin, "amp").list_workspaces()["workspaces"]]
    return {"roles": sorted(roles), "associations": sorted(associations),
            "addons": sorted(eks.list_addons(clusterName=cluster)["addons"]), "workspaces": sorted(workspaces)}


KEYS = (*ORDER, "karpenter")


@pytest.mark.parametrize("key", KEYS)
def test_kill_9_during_each_feature_stage_resumes_without_repeating_a_write(
    key: str, plane: ControlPlane, twin_process: TwinProcess
) -> None:
    twin = twin_process
    # A feature already on comes first in the same request: its stage succeeds before the kill.
    before_key = KEYS[KEYS.index(key) - 1] if KEYS.index(key) else None
    body = {k: {"enabled": True} for k in (before_key, key) if k}
    running = plane.ensure_running()
    if key == "karpenter":  # Karpenter autoscales a group that starts at count 0
        with running.client() as client:
            assert add_group(client, instanceGroupName="auto-k", instanceType="ml.g6.12xlarge", instanceCount=0,
                             availabilityZone="us-west-2c")["status"] == "SUCCEEDED"
    before = inventory(twin)
    httpx.delete(twin.endpoint_url + "/_twin/writes").raise_for_status()
    with running.client() as client:
        ref = client.post("/api/v1/capacity/advanced-features", json=body)
        assert ref.status_code == 202, ref.text
        operation_id = ref.json()["operationId"]

        base: dict[str, int] | None = None if before_key else {}

        def moment() -> str | None:
            # Mid-stage: the feature's stage runs and has written something to AWS or Kubernetes (counted from
            # the moment the stage before it ended, so that stage's own writes do not count).
            # Once the base is taken every write is the stage's own, so one fast call to the twin decides.
            nonlocal base
            if base is not None:
                mine = {k: n - base.get(k, 0) for k, n in twin_writes(twin).items() if n > base.get(k, 0)}
                if mine:
                    return f"{key} running after {sorted(mine)}"
            view = client.get(f"/api/v1/operations/{operation_id}").json()
            stages = {s["name"]: s["status"] for s in view["stages"]}
            if base is None and stages[str(before_key)] == "SUCCEEDED":
                base = twin_writes(twin)
            return f"{key} already ended ({view['status']})" if view["status"] not in ("PENDING", "RUNNING") else None

        killed = plane.kill_when(moment)
    with plane.start().client() as client:
        view = wait_terminal(client, operation_id, timeout=300)
    print(f"kill -9 during {key}: {killed}")
    assert view["status"] == "SUCCEEDED", (killed, view)
    stages = {s["name"]: s for s in view["stages"]}
    assert stages[key]["attempts"] >= 2, f"{key} did not run again after the restart ({killed})"
    if before_key:
        assert stages[before_key]["attempts"] == 1, "a stage that succeeded before the kill ran again"
    after = inventory(twin)
    writes = twin_writes(twin)
    for call, kind in CREATES.items():
        made = [x for x in after[kind] if x not in before[kind]]
        count = sum(n for name, n in writes.items() if name.startswith("aws:") and name.endswith("." + call))
        assert count == len(made), f"{call}: {count} calls for {made} ({killed})"
    assert len(after["workspaces"]) <= 1 and len(set(after["associations"])) == len(after["associations"])
