"""The kube gateway (core_kinds, gateway) against the twin's API server: the requests it sends and its errors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import kubernetes
import pytest

from instantstart.errors import NotFound
from instantstart.kube import core_kinds
from instantstart.kube.calls import kube_call
from instantstart.kube.gateway import ApiFailure, api_failure, api_status
from tests.support.twin_kube import Cluster


@pytest.fixture
def ns(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test."""
    name = "gw-" + uuid.uuid4().hex[:8]
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


def _pod(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}


def test_an_api_error_is_read_through_the_gateway_and_translated_by_kube_call(cluster: Cluster) -> None:
    with pytest.raises(Exception) as raised:
        core_kinds.read_namespace(cluster.api, "no-such-namespace")
    assert api_status(raised.value) == 404
    assert api_failure(raised.value) == ApiFailure(404, "Not Found")
    assert api_status(ValueError("not an answer of the API server")) is None
    with pytest.raises(NotFound, match="read namespace x: HTTP 404"):
        kube_call("read namespace x", core_kinds.read_namespace, cluster.api, "no-such-namespace")


def test_pods_and_services_list_one_namespace_or_all(cluster: Cluster, ns: str) -> None:
    core_kinds.create_pod(cluster.api, ns, _pod("one"))
    core_kinds.create_pod(cluster.api, "default", _pod("elsewhere-" + ns))
    try:
        here = [p.metadata.name for p in core_kinds.list_pods(cluster.api, ns).items]
        everywhere = [p.metadata.name for p in core_kinds.list_pods(cluster.api, None, label_selector="app").items]
        assert here == ["one"]
        assert {"one", "elsewhere-" + ns} <= set(everywhere)
        picked = core_kinds.list_pods(cluster.api, ns, label_selector="app=other").items
        assert picked == []
        core_kinds.delete_pods(cluster.api, ns, label_selector="app=one")
        assert core_kinds.list_pods(cluster.api, ns).items == []
    finally:
        core_kinds.delete_pod(cluster.api, "elsewhere-" + ns, "default")
    assert all(s.metadata.namespace == ns for s in core_kinds.list_services(cluster.api, ns).items)
    assert core_kinds.list_services(cluster.api, None).items  # the default namespace's kubernetes Service
