"""A fleet on one control plane: three twin clusters, cluster_list_all with each one's health, cluster_get_status of
each by clusterTag, and a cluster nobody read for watchIdleSeconds parked (its watches stopped, its last figures
shown) then resumed by a read; the twin's bulk node registration the fleet bench builds with."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from instantstart.manifests.training import POD_JOB_LABEL
from instantstart.services.base.watch.state import STATUS_KINDS, informer_key
from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_eks
from tests.support.servers import Running
from tests.support.twin import control_plane
from tests.support.waits import until

TAGS = ("fla", "flb", "flc")
NODES = {"fla": 3, "flb": 2, "flc": 4}
IDLE = 60.0


def node(tag: str, i: int, health: str = "Schedulable") -> dict[str, Any]:
    """A HyperPod-labelled ml.g6.12xlarge node (4 GPUs) of cluster `tag`."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"hyperpod-i-{tag}{i:05d}", "labels": {
        "node.kubernetes.io/instance-type": "ml.g6.12xlarge",
        "sagemaker.amazonaws.com/instance-group-name": "g6",
        "sagemaker.amazonaws.com/cluster-name": f"hp-cluster-{tag}",
        "sagemaker.amazonaws.com/node-health-status": health}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "allocatable": {"nvidia.com/gpu": "4", "cpu": "48", "pods": "110"}}}


def add_nodes(twin: TwinProcess, tag: str, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The twin's bulk registration: POST /_twin/kube/{cluster}/nodes/create."""
    response = httpx.post(f"{twin.endpoint_url}/_twin/kube/eks-cluster-{tag}/nodes/create", json={"nodes": nodes},
                          timeout=60)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


@pytest.fixture
def fleet_cp(twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    with control_plane(twin, tmp_path, monkeypatch, watch_idle_seconds=IDLE) as running:
        yield running


def health(client: httpx.Client) -> dict[str, dict[str, Any]]:
    listed = client.get("/api/v1/clusters")
    assert listed.status_code == 200, listed.text
    return {c["clusterTag"]: c["health"] for c in listed.json()["clusters"]}


def status(client: httpx.Client, tag: str) -> dict[str, Any]:
    response = client.get("/api/v1/clusters/status", params={"clusterTag": tag})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def running(cp: Running, tag: str) -> bool:
    """Whether the cluster's status watches run in the control plane."""
    return all(cp.context.informers.peek(informer_key("us-west-2", f"eks-cluster-{tag}", kind)) is not None
               for kind in STATUS_KINDS)


def test_the_fleet_lists_health_reads_any_cluster_and_parks_idle_watches(
    fleet_cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    cp = fleet_cp
    assert twin.env["AWS_REGION"] == "us-west-2"
    with cp.client() as client:
        for tag in TAGS:
            make_eks(client, tag)
            sick = "UnschedulablePendingReplacement"
            made = add_nodes(twin, tag, [node(tag, i, sick if tag == "fla" and i == 0 else "Schedulable")
                                         for i in range(NODES[tag])])
            assert made == {"cluster": f"eks-cluster-{tag}", "created": NODES[tag]}
        # A running job on flb holding 2 GPUs of its first node.
        core = kube(twin, tmp_path, "flb")
        core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "trainer-0", "labels": {POD_JOB_LABEL: "llama"}}, "spec": {
            "nodeName": "hyperpod-i-flb00000", "containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}}]}})
        core.patch_namespaced_pod_status("trainer-0", "default", {"status": {"phase": "Running"}})

        # Nobody read a cluster's Kubernetes state yet: no figures, nothing watched by the listing.
        before = health(client)
        assert {t: h["watch"] for t, h in before.items()} == dict.fromkeys(TAGS, "unwatched")
        assert all(h["state"] == "unknown" and h["numbers"] is None for h in before.values())
        assert not any(running(cp, tag) for tag in TAGS)

        # cluster_get_status of each by its tag (the active one is flc, the last made).
        for tag in TAGS:
            got = status(client, tag)
            assert (got["clusterTag"], got["nodeCount"]) == (tag, NODES[tag])
        assert status(client, "fla")["nodesUnhealthy"] == 1
        until(lambda: health(client)["flb"]["numbers"]["runningJobs"] == 1, "flb's running job")
        live = health(client)
        assert {t: h["watch"] for t, h in live.items()} == dict.fromkeys(TAGS, "live")
        assert {t: h["state"] for t, h in live.items()} == {"fla": "degraded", "flb": "healthy", "flc": "healthy"}
        figures = {t: {k: v for k, v in h["numbers"].items() if k != "asOf"} for t, h in live.items()}
        assert figures == {
            "fla": {"nodes": 3, "nodesUsable": 2, "nodesUnhealthy": 1, "gpuTotal": 12, "gpuAllocated": 0,
                    "gpuFree": 8, "runningJobs": 0},
            "flb": {"nodes": 2, "nodesUsable": 2, "nodesUnhealthy": 0, "gpuTotal": 8, "gpuAllocated": 2,
                    "gpuFree": 6, "runningJobs": 1},
            "flc": {"nodes": 4, "nodesUsable": 4, "nodesUnhealthy": 0, "gpuTotal": 16, "gpuAllocated": 0,
                    "gpuFree": 16, "runningJobs": 0},
        }

        # flb is read again part-way; fla and flc are not read for longer than watchIdleSeconds: they park.
        assert cp.clock is not None
        cp.clock.advance(IDLE * 2 / 3)
        status(client, "flb")
        cp.clock.advance(IDLE * 2 / 3)
        parked = client.get("/api/v1/clusters").json()
        assert (parked["watched"], parked["watchIdleSeconds"]) == (1, IDLE)
        by_tag = {c["clusterTag"]: c["health"] for c in parked["clusters"]}
        assert {t: h["watch"] for t, h in by_tag.items()} == {"fla": "parked", "flb": "live", "flc": "parked"}
        assert by_tag["fla"]["state"] == "unknown" and by_tag["fla"]["numbers"]["nodes"] == 3  # its last figures
        assert not running(cp, "fla") and not running(cp, "flc") and running(cp, "flb")

        # A change while fla is parked is not seen until a read resumes its watches, which list again.
        add_nodes(twin, "fla", [node("fla", 9)])
        assert health(client)["fla"]["numbers"]["nodes"] == 3
        assert status(client, "fla")["nodeCount"] == 4
        assert running(cp, "fla")
        resumed = health(client)["fla"]
        assert (resumed["watch"], resumed["numbers"]["nodes"]) == ("live", 4)

        # A tag no cluster has: NOT_FOUND naming the known ones.
        unknown = client.get("/api/v1/clusters/status", params={"clusterTag": "nope"})
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["error"]["details"]["knownTags"] == list(TAGS)


def test_bulk_node_registration_names_what_is_wrong(twin: TwinProcess, cp: Running) -> None:
    with cp.client() as client:
        make_eks(client, "flx")
    empty = httpx.post(f"{twin.endpoint_url}/_twin/kube/eks-cluster-flx/nodes/create", json={"nodes": []})
    assert empty.status_code == 400 and "'nodes'" in empty.json()["error"]
    nameless = add_nodes_raw(twin, [node("flx", 0), {"metadata": {}}])
    assert nameless.status_code == 400 and "nodes[1].metadata.name" in nameless.json()["error"]
    again = add_nodes_raw(twin, [node("flx", 0)])
    assert again.status_code == 400 and "already exists" in again.json()["error"]


def add_nodes_raw(twin: TwinProcess, nodes: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{twin.endpoint_url}/_twin/kube/eks-cluster-flx/nodes/create", json={"nodes": nodes},
                      timeout=60)
