"""Simulated DCGM metrics and the AMP query API's PromQL subset, at controller level: every GPU of a Ready node
reports DCGM_FI_DEV_GPU_UTIL, a GPU a running pod holds is busy from the pod's start and idle before, and
instant and range queries answer as Prometheus does (vector, matrix, bad_data)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hyperpod_twin.aws.protocol import AwsRequest
from hyperpod_twin.sim import dcgm, kobj, promql
from tests.support.sim import SimCluster, pod_spec

NODE = "hyperpod-i-0aaaaaaaaaaaaaaa1"


def _ready(cluster: SimCluster) -> None:
    cluster.add_node("i-0aaaaaaaaaaaaaaa1", "ml.g5.12xlarge")  # 4 GPUs
    cluster.advance(30)
    [node] = cluster.list("", "nodes")
    assert kobj.is_true(node, "Ready") and node["metadata"]["name"] == NODE


def _busy_pod(cluster: SimCluster, gpus: int) -> dict[str, Any]:
    cluster.create("", "pods", {"metadata": {"name": "trainer", "namespace": "default"}, "spec": pod_spec(gpus)})
    cluster.advance(30)
    pod = cluster.get("", "pods", "trainer")
    assert pod["status"]["phase"] == "Running", pod["status"]
    return pod


def test_held_gpus_are_busy_from_the_pod_start_and_the_others_idle(cluster: SimCluster) -> None:
    _ready(cluster)
    before = cluster.clock.wall()
    assert [v for _, _, v in dcgm.series_at(cluster.sim, before)] == [0.0] * 4
    pod = _busy_pod(cluster, 2)
    now = cluster.clock.wall()
    series = dcgm.series_at(cluster.sim, now)
    busy = [(labels, v) for _, labels, v in series if v > 0]
    assert len(series) == 4 and len(busy) == 2
    assert all(85 <= v <= 99 and labels["pod"] == "trainer" and labels["Hostname"] == NODE for labels, v in busy)
    assert {labels["instance_type"] for _, labels, _ in series} == {"ml.g5.12xlarge"}
    started = kobj.parse_time(pod["status"]["startTime"])
    assert started is not None and started > before
    assert all(v == 0.0 for _, _, v in dcgm.series_at(cluster.sim, started - 1))  # history: idle before the start


def test_aggregations_by_label_and_range_queries(cluster: SimCluster) -> None:
    _ready(cluster)
    _busy_pod(cluster, 4)
    now = cluster.clock.wall()
    [(labels, mean)] = promql.vector("avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)", dcgm.series_at(cluster.sim, now))
    assert labels == {"Hostname": NODE} and 85 <= mean <= 99
    [(_, count)] = promql.vector('count(DCGM_FI_DEV_GPU_UTIL{pod="trainer"})', dcgm.series_at(cluster.sim, now))
    assert count == 4
    assert promql.vector('DCGM_FI_DEV_GPU_UTIL{pod="nobody"}', dcgm.series_at(cluster.sim, now)) == []
    answer = dcgm.answer("query_range", {"query": "avg(DCGM_FI_DEV_GPU_UTIL)", "start": str(now - 600),
                                         "end": str(now), "step": "60"}, [cluster.sim], now)
    assert answer["resultType"] == "matrix"
    [values] = [r["values"] for r in answer["result"]]
    assert len(values) == 11 and float(values[-1][1]) > 80
    instant = dcgm.answer("query", {"query": "max(DCGM_FI_DEV_GPU_UTIL)", "time": str(now)}, [cluster.sim], now)
    assert instant["resultType"] == "vector" and instant["result"][0]["value"][0] == now


@pytest.mark.parametrize(("params", "error"), [
    ({"query": "rate(DCGM_FI_DEV_GPU_UTIL[5m])"}, "the twin evaluates"),
    ({"query": "avg(DCGM_FI_DEV_GPU_UTIL)", "start": "0", "end": "100000", "step": "1"}, "11,000 points"),
    ({"query": "avg(DCGM_FI_DEV_GPU_UTIL)", "start": "10", "end": "5", "step": "1"}, "end timestamp"),
    ({"query": "avg(DCGM_FI_DEV_GPU_UTIL)", "start": "x", "end": "5", "step": "1"}, "cannot parse"),
])
def test_queries_outside_the_subset_are_bad_data(cluster: SimCluster, params: dict[str, str], error: str) -> None:
    kind = "query_range" if "start" in params else "query"
    request = AwsRequest(service="amp", operation="QueryMetrics", region="us-west-2", access_key=None,
                         protocol="rest-json", method="GET", path=f"/workspaces/ws-1/api/v1/{kind}", headers={},
                         body=b"", query={k: [v] for k, v in params.items()})
    answer = dcgm.handle(request, lambda _: [cluster.sim], cluster.clock.wall())
    body = json.loads(answer.body)
    assert answer.status == 400 and body["status"] == "error" and body["errorType"] == "bad_data"
    assert error in body["error"], body


def test_the_workspace_of_an_observability_addon() -> None:
    arn = "arn:aws:aps:us-west-2:111122223333:workspace/ws-0123"
    assert dcgm.workspace_of(json.dumps({"ampWorkspace": {"arn": arn}})) == "ws-0123"
    assert dcgm.workspace_of("not json") is None and dcgm.workspace_of(None) is None
