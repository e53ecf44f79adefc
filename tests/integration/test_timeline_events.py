"""cluster_timeline and its compatibility name cluster_events: one code path and one answer; a control plane
that never watched the cluster starts its feeds at start-up (from the registry) and its first read waits for their
first pass; node, source and warning filters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_hyperpod, mcp_calls
from tests.support.servers import Running, thread_server

TAG = "tl1"


def test_events_and_timeline_agree_and_a_first_read_sees_what_the_feeds_recorded(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)
    core = kube(twin, tmp_path, TAG)
    node = core.list_node().items[0]
    name, group = node.metadata.name, node.metadata.labels["sagemaker.amazonaws.com/instance-group-name"]
    instance = name.removeprefix("hyperpod-")
    core.create_namespaced_event("default", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.xid", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": name}, "reason": "GpuXid", "type": "Warning",
        "message": "GPU 0: Xid 79, fell off the bus", "count": 1, "source": {"component": "nvidia-dcgm"},
        "firstTimestamp": "2026-12-03T08:00:00Z", "lastTimestamp": "2026-12-03T08:00:00Z",
    })
    # A second control plane on the same database: its registry starts the cluster's feeds at start-up, and its
    # first read waits (bounded) for their first pass, so the event is there at once (the read itself starts none).
    with thread_server(
        tmp_path / "second", cp.database_url, aws_endpoint_url=twin.endpoint_url,
        aws_region=twin.env["AWS_REGION"], poll_seconds=0.2, status_cache_seconds=1.0,
    ) as second:
        asked = {"nodeId": instance, "warningsOnly": True}
        events, timeline = mcp_calls(second, [("cluster_events", asked), ("cluster_timeline", asked)])
    assert events == timeline, (events, timeline)
    assert events["unavailable"] == [] and events["clusterTag"] == TAG
    [xid] = [e for e in events["entries"] if e["reason"] == "GpuXid"]
    assert xid["source"] == "kubernetes" and xid["objectKind"] == "Node" and xid["type"] == "Warning"
    assert all(e["type"] == "Warning" and e["objectName"] in (name, instance) for e in events["entries"])

    [hyperpod, everything, page] = mcp_calls(cp, [
        ("cluster_timeline", {"nodeId": name, "source": "hyperpod"}),
        ("cluster_events", {"sinceMinutes": 1440}),
        ("cluster_timeline", {"limit": 1}),
    ])
    assert hyperpod["entries"], hyperpod  # the twin's launch events of the node
    assert {(e["source"], e["objectName"], e["namespace"]) for e in hyperpod["entries"]} == {
        ("hyperpod", instance, group)}
    sources: set[Any] = {e["source"] for e in everything["entries"]}
    assert {"kubernetes", "hyperpod", "operation"} <= sources, sources
    assert len(page["entries"]) == 1 and page["nextBefore"] == page["entries"][0]["id"]
