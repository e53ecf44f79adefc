"""Server-side apply never takes over an object InstantStart did not create: such an object is refused with
Conflict naming its managers and owners (the twin's real API server records managedFields), unless the call site
adopts it explicitly; objects we applied before, or labelled managed-by=instantstart, are applied as usual."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from instantstart.errors import Conflict
from instantstart.kube.apply import apply_object, read_object
from tests.support.twin_kube import Cluster, standalone_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with standalone_cluster(tmp_path_factory.mktemp("kube")) as running:
        yield running


def config_map(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def someone_creates(cluster: Cluster, body: dict[str, Any], manager: str = "kubectl-create") -> None:
    k8s.CoreV1Api(cluster.api).create_namespaced_config_map("default", body, field_manager=manager)


def test_a_foreign_object_is_refused_and_left_unchanged(cluster: Cluster) -> None:
    theirs = config_map("theirs", {"k": "theirs"})
    theirs["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "app",
                                              "uid": "0b1c2d3e-0000-4000-8000-000000000001"}]
    someone_creates(cluster, theirs)
    with pytest.raises(Conflict) as caught:
        apply_object(cluster.api, config_map("theirs", {"k": "ours"}))
    error = caught.value
    assert "ConfigMap default/theirs" in error.message and "did not create it" in error.message
    assert "kubectl-create" in error.message and "Deployment/app" in error.message, error.message
    assert "app.kubernetes.io/managed-by=instantstart" in (error.hint or "")
    assert error.details["managers"] == ["kubectl-create"]
    live = read_object(cluster.api, theirs)
    assert live is not None and live["data"] == {"k": "theirs"}


def test_explicit_adoption_applies(cluster: Cluster) -> None:
    someone_creates(cluster, config_map("adopted", {"k": "theirs"}))
    applied = apply_object(cluster.api, config_map("adopted", {"k": "ours"}), adopt=True)
    assert applied["data"] == {"k": "ours"}
    assert "instantstart" in {e["manager"] for e in applied["metadata"]["managedFields"]}
    # Adopted once, ours from then on: the next plain apply passes on our managedFields entry.
    assert apply_object(cluster.api, config_map("adopted", {"k": "again"}))["data"] == {"k": "again"}


def test_our_objects_apply_again(cluster: Cluster) -> None:
    first = apply_object(cluster.api, config_map("ours", {"k": "1"}))
    assert first["data"] == {"k": "1"}
    assert apply_object(cluster.api, config_map("ours", {"k": "2"}))["data"] == {"k": "2"}
    labelled = config_map("handed-over", {"k": "theirs"}, {"app.kubernetes.io/managed-by": "instantstart"})
    someone_creates(cluster, labelled)  # labelled for us by whoever made it: handed over on purpose
    assert apply_object(cluster.api, config_map("handed-over", {"k": "ours"}))["data"] == {"k": "ours"}
