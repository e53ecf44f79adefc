"""Watch-fed state against the twin: a watch that loses its connection or gets 410 resumes without missing or
duplicating a change; a status read during a watch outage says the data is stale and how old; node_list pages
and filters; the status summary stays small however many nodes there are."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from instantstart.kube.informers import Informer, InformerOptions
from instantstart.twin_process import TwinProcess
from tests.support.flows import changes_per_key, kube, make_eks
from tests.support.servers import Running
from tests.support.waits import until

TAG = "ws1"
EKS = f"eks-cluster-{TAG}"


def twin_kube(twin: TwinProcess, action: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST /_twin/kube/{cluster}/{action}."""
    response = httpx.post(f"{twin.endpoint_url}/_twin/kube/{EKS}/{action}", json=body or {}, timeout=30)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_a_watch_resumes_after_a_cut_and_relists_after_410_without_missing_or_duplicating(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    with cp.client() as client:
        make_eks(client, TAG)
    core = kube(twin, tmp_path, TAG)
    changes: list[tuple[str, str, str | None]] = []
    lock = threading.Lock()

    def record(kind: str, key: str, _old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        with lock:
            changes.append((kind, key, None if new is None else new["rv"]))

    def project(obj: dict[str, Any]) -> dict[str, Any]:
        md = obj["metadata"]
        return {"rv": md["resourceVersion"], "labels": md.get("labels") or {}}

    informer = Informer("pods", "/api/v1/namespaces/default/pods", lambda: core.api_client, project, (record,),
                        InformerOptions(backoff_min=0.05, backoff_max=0.5)).start()

    def server_state() -> dict[str, str]:
        items = core.list_namespaced_pod("default").items
        return {f"default/{p.metadata.name}": p.metadata.resource_version for p in items}

    def in_sync() -> bool:
        return {k: v["rv"] for k, v in informer.snapshot()[1].items()} == server_state()

    try:
        assert informer.synced.wait(60)
        for name in ("p1", "p2", "p3"):
            core.create_namespaced_pod("default", pod(name))
        until(in_sync, "the three pods")
        # 1. The connection drops; changes made meanwhile arrive once the watch resumes from its version.
        twin_kube(twin, "watches/cut")
        core.create_namespaced_pod("default", pod("p4"))
        core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"v": "2"}}})
        core.delete_namespaced_pod("p2", "default")
        until(lambda: informer.health.reconnects >= 1 and in_sync(), "the resumed watch")
        assert informer.health.relists == 0
        # 2. An outage long enough for the history to be compacted: the watch gets 410 and relists.
        twin_kube(twin, "watches/block", {"blocked": True})
        until(lambda: not informer.health.connected, "the outage to be noticed")
        core.create_namespaced_pod("default", pod("p5"))
        core.patch_namespaced_pod("p4", "default", {"metadata": {"labels": {"v": "2"}}})
        core.delete_namespaced_pod("p3", "default")
        twin_kube(twin, "history/compact")
        twin_kube(twin, "watches/block", {"blocked": False})
        until(lambda: informer.health.relists >= 1 and in_sync(), "the relist after 410")
        assert informer.health.connected and informer.health.state == "synced"
    finally:
        informer.stop()
    with lock:
        seen = list(changes)
    # Every change exactly once, in order per object; nothing for objects that did not change.
    assert changes_per_key(seen) == {
        "default/p1": ["ADDED", "MODIFIED"],
        "default/p2": ["ADDED", "DELETED"],
        "default/p3": ["ADDED", "DELETED"],
        "default/p4": ["ADDED", "MODIFIED"],
        "default/p5": ["ADDED"],
    }, seen


def make_nodes(core: k8s.CoreV1Api, count: int, sick_every: int) -> None:
    """`count` HyperPod-labelled nodes; every `sick_every`-th one pending replacement."""
    for i in range(count):
        health = "UnschedulablePendingReplacement" if i % sick_every == 0 else "Schedulable"
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"hyperpod-i-{i:05d}", "labels": {
            "node.kubernetes.io/instance-type": "ml.g6.4xlarge" if i % 2 else "ml.p5.48xlarge",
            "sagemaker.amazonaws.com/instance-group-name": "g6" if i % 2 else "p5",
            "sagemaker.amazonaws.com/node-health-status": health}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "allocatable": {"nvidia.com/gpu": "1" if i % 2 else "8"}}}
        core.create_node(body)


def test_status_is_a_bounded_summary_node_list_pages_and_an_outage_is_reported_stale(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    with cp.client() as client:
        make_eks(client, TAG)
        core = kube(twin, tmp_path, TAG)
        make_nodes(core, 120, sick_every=10)

        def status() -> dict[str, Any]:
            body: dict[str, Any] = client.get("/api/v1/clusters/status").json()
            return body

        until(lambda: status()["nodeCount"] == 120, "120 nodes in the status")
        raw = client.get("/api/v1/clusters/status").content
        summary = json.loads(raw)
        assert len(raw) <= 8192, len(raw)
        assert len(summary["nodes"]) == 10 and summary["nodesOmitted"] == 110 and summary["nodesUnhealthy"] == 12
        assert all(n["healthStatus"] == "UnschedulablePendingReplacement" for n in summary["nodes"])
        totals = {a["instanceType"]: a for a in summary["accelerators"]}
        assert totals["ml.p5.48xlarge"]["gpuTotal"] == 60 * 8 and totals["ml.g6.4xlarge"]["gpuTotal"] == 60
        assert summary["watch"]["synced"] and not summary["watch"]["stale"]
        assert len(client.get("/api/v1/clusters/status", params={"nodeLimit": 3}).json()["nodes"]) == 3
        # Pollers revalidate: the same state answers 304 to its ETag; another tag gets the body.
        first = client.get("/api/v1/clusters/status")
        etag = first.headers["etag"]
        assert etag.startswith('"') and first.json()["nodeCount"] == 120
        again = client.get("/api/v1/clusters/status", headers={"If-None-Match": etag})
        assert again.status_code in (200, 304) and again.headers["etag"]
        if again.status_code == 200:  # the memo window passed: a new build, a new checkedAt, a new tag
            assert again.headers["etag"] != etag and again.json()["nodeCount"] == 120
        else:
            assert again.content == b"" and again.headers["etag"] == etag
        other = client.get("/api/v1/clusters/status", headers={"If-None-Match": '"not-this-one"'})
        assert other.status_code == 200 and other.json()["nodeCount"] == 120

        # node_list: every node once, page by page, in name order; filters.
        names: list[str] = []
        after: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 25, **({"after": after} if after else {})}
            page = client.get("/api/v1/clusters/nodes", params=params).json()
            assert page["total"] == 120 and len(page["nodes"]) <= 25
            names += [n["name"] for n in page["nodes"]]
            after = page["nextAfter"]
            if after is None:
                break
        assert names == sorted(names) and len(set(names)) == 120
        sick = client.get("/api/v1/clusters/nodes", params={"unhealthyOnly": "true", "instanceGroup": "p5"}).json()
        assert sick["total"] == 12 and {n["instanceGroup"] for n in sick["nodes"]} == {"p5"}

        # A watch outage: the last state is served, marked stale with its age.
        twin_kube(twin, "watches/block", {"blocked": True})
        until(lambda: status()["watch"]["stale"], "the status to say the data is stale")
        # Then the whole API server is down (every request answers 503): a status built now cannot have listed,
        # read or waited for a watch to come back, so its nodes come from the control plane's memory.
        twin_kube(twin, "api/block", {"blocked": True})
        blocked_at = dt.datetime.now(dt.UTC)

        def built_during_the_outage() -> dict[str, Any] | None:
            body = status()
            built = dt.datetime.fromisoformat(body["checkedAt"].replace("Z", "+00:00"))
            # A build from after the block (not one memoised before it) whose served state has aged.
            return body if built > blocked_at and body["watch"]["dataAgeSeconds"] >= 1.0 else None

        stale = until(built_during_the_outage, "a status built during the API outage, its data aged 1 s")
        with pytest.raises(ApiException) as refused:  # the outage held for the whole read
            core.list_node()
        assert refused.value.status == 503
        assert stale["nodeCount"] == 120 and stale["watch"]["stale"]
        assert len(stale["nodes"]) == 10 and stale["nodesUnhealthy"] == 12
        assert any("stale" in p and "ago" in p for p in stale["problems"]), stale["problems"]
        twin_kube(twin, "api/block", {"blocked": False})
        twin_kube(twin, "watches/block", {"blocked": False})
        core.delete_node("hyperpod-i-00001")
        until(lambda: (s := status())["nodeCount"] == 119 and not s["watch"]["stale"], "the watch to recover")


def test_the_timeline_keeps_a_kubernetes_event_after_the_twin_expired_it(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    with cp.client() as client:
        make_eks(client, TAG)
        core = kube(twin, tmp_path, TAG)
        client.get("/api/v1/clusters/status")  # reading the cluster starts its watches, events among them
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": "trainer-0.oom", "namespace": "default"},
                 "involvedObject": {"kind": "Pod", "name": "trainer-0", "namespace": "default"},
                 "reason": "OOMKilled", "message": "container trainer ran out of memory", "type": "Warning",
                 "count": 1, "firstTimestamp": "2026-12-03T08:00:00Z", "lastTimestamp": "2026-12-03T08:00:00Z",
                 "source": {"component": "kubelet"}}
        core.create_namespaced_event("default", event)

        def oom_entries() -> list[dict[str, Any]]:
            page = client.get("/api/v1/clusters/timeline", params={"objectName": "trainer-0"}).json()
            return [e for e in page["entries"] if e["reason"] == "OOMKilled"]

        until(lambda: len(oom_entries()) == 1, "the event in the timeline")
        # The same event repeated: one entry, its count updated (deduplicated, not appended).
        core.patch_namespaced_event("trainer-0.oom", "default", {"count": 3, "lastTimestamp": "2026-12-03T08:05:00Z"})
        until(lambda: [e["count"] for e in oom_entries()] == [3], "the repeated event's count")
        expired = twin_kube(twin, "events/expire", {"olderThanSeconds": 0})["expired"]
        assert "default/trainer-0.oom" in expired
        assert not [e for e in core.list_namespaced_event("default").items if e.reason == "OOMKilled"]
        # Wait until the control plane has seen the deletion: a watch delivers changes in resourceVersion order
        # (a relist applies them all before it reports any), so once an event created after the expiry is on
        # the timeline, the events watch has applied the deletion before it.
        barrier = {**event, "metadata": {"name": "expiry-barrier.seen", "namespace": "default"},
                   "involvedObject": {"kind": "Pod", "name": "expiry-barrier", "namespace": "default"},
                   "reason": "Scheduled", "message": "created after the expiry", "type": "Normal"}
        core.create_namespaced_event("default", barrier)
        until(lambda: client.get("/api/v1/clusters/timeline", params={"objectName": "expiry-barrier"}).json()[
            "entries"], "the event created after the expiry on the timeline")
        kept = oom_entries()
        assert len(kept) == 1 and kept[0]["type"] == "Warning" and kept[0]["source"] == "kubernetes"
        assert kept[0]["message"] == "container trainer ran out of memory" and kept[0]["objectKind"] == "Pod"
        # The control plane's own operations are on the same timeline; pages do not overlap.
        ops = client.get("/api/v1/clusters/timeline", params={"source": "operation", "limit": 2}).json()
        assert len(ops["entries"]) == 2 and ops["nextBefore"] is not None
        older = client.get("/api/v1/clusters/timeline",
                           params={"source": "operation", "limit": 2, "before": ops["nextBefore"]}).json()
        assert {e["id"] for e in older["entries"]}.isdisjoint({e["id"] for e in ops["entries"]})
        assert any(e["reason"] == "stage SUCCEEDED" for e in ops["entries"] + older["entries"])
