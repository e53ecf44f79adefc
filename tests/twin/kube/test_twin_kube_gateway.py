"""The kube gateway (core_kinds, gateway) against the twin's API server: the requests it sends, its errors, and its
answers as plain wire dicts."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import kubernetes
import pytest

from instantstart.errors import NotFound
from instantstart.kube import core_kinds, wire
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
        here = [wire.name(p) for p in wire.items(core_kinds.list_pods(cluster.api, ns))]
        everywhere = [wire.name(p) for p in wire.items(core_kinds.list_pods(cluster.api, None, label_selector="app"))]
        assert here == ["one"]
        assert {"one", "elsewhere-" + ns} <= set(everywhere)
        picked = wire.items(core_kinds.list_pods(cluster.api, ns, label_selector="app=other"))
        assert picked == []
        core_kinds.delete_pods(cluster.api, ns, label_selector="app=one")
        assert wire.items(core_kinds.list_pods(cluster.api, ns)) == []
    finally:
        core_kinds.delete_pod(cluster.api, "elsewhere-" + ns, "default")
    assert all(wire.namespace(s) == ns for s in wire.items(core_kinds.list_services(cluster.api, ns)))
    assert wire.items(core_kinds.list_services(cluster.api, None))  # the default namespace's kubernetes Service


def test_answers_are_the_api_servers_json_as_plain_dicts(cluster: Cluster, ns: str) -> None:
    created = core_kinds.create_pod(cluster.api, ns, _pod("plain"))
    listed = core_kinds.list_pods(cluster.api, ns)
    read = wire.items(listed)[0]
    # No client model anywhere: dicts and lists all the way down, keys as the API server spells them.
    assert type(created) is dict and type(listed) is dict and type(read) is dict
    assert listed["kind"] == "PodList" and read["kind"] == "Pod" and read["apiVersion"] == "v1"
    assert read["spec"]["containers"][0]["image"] == "busybox:1.36"
    assert "creationTimestamp" in read["metadata"] and "creation_timestamp" not in read["metadata"]
    assert isinstance(read["metadata"]["creationTimestamp"], str)  # RFC 3339 text, not a datetime
    assert wire.uid(read) == wire.uid(created) and wire.labels(read) == {"app": "plain"}
    patched = core_kinds.patch_pod(cluster.api, "plain", ns, {"metadata": {"labels": {"business": "chat"}}})
    assert wire.labels(patched) == {"app": "plain", "business": "chat"}
    gone = core_kinds.delete_pod(cluster.api, "plain", ns)
    assert type(gone) is dict and wire.name(gone) == "plain"
