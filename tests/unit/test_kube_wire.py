"""The readers of wire objects (kube.wire): the API server omits empty fields, so every reader answers the empty
value of its type for a field that is absent or null, and the field's value when it is there."""

from __future__ import annotations

from datetime import UTC, datetime

from instantstart.kube import wire

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "w-0", "namespace": "ml", "uid": "u-1", "labels": {"app": "w"},
                 "annotations": {"note": "x"}, "creationTimestamp": "2026-03-01T10:00:00Z",
                 "ownerReferences": [{"kind": "ReplicaSet", "name": "w-1", "uid": "u-0"}]},
    "spec": {"nodeName": "node-a", "containers": [{"name": "main"}]},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
               "containerStatuses": [{"restartCount": 2}, {"restartCount": 1}, {}]},
}
SERVICE = {
    "metadata": {"name": "s"},
    "spec": {"type": "LoadBalancer", "ports": [{"port": 8000}]},
    "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}},
}


def test_fields_read_where_the_api_server_puts_them() -> None:
    assert (wire.name(POD), wire.namespace(POD), wire.uid(POD)) == ("w-0", "ml", "u-1")
    assert wire.labels(POD) == {"app": "w"} and wire.annotations(POD) == {"note": "x"}
    assert wire.owner_references(POD)[0]["uid"] == "u-0"
    assert (wire.phase(POD), wire.node_name(POD), wire.restarts(POD)) == ("Running", "node-a", 3)
    assert wire.conditions(POD) == [{"type": "Ready", "status": "True"}]
    assert wire.created_at(POD) == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert not wire.deleting(POD) and wire.deleting({"metadata": {"deletionTimestamp": "2026-03-01T10:00:00Z"}})
    assert wire.service_type(SERVICE) == "LoadBalancer" and wire.ports(SERVICE) == [{"port": 8000}]
    assert wire.ingress(SERVICE) == [{"hostname": "lb.example.com"}]
    assert wire.replicas({"spec": {"replicas": 0}}, default=1) == 0  # 0 is a value, not an absence
    assert wire.ready_replicas({"status": {"readyReplicas": 2}}) == 2
    assert wire.allocatable({"status": {"allocatable": {"cpu": "4"}}}) == {"cpu": "4"}
    assert wire.items({"kind": "PodList", "items": [POD]}) == [POD]


def test_absent_and_null_fields_read_as_empty() -> None:
    for obj in (None, {}, {"metadata": None, "spec": None, "status": None}):
        assert (wire.name(obj), wire.namespace(obj), wire.uid(obj)) == ("", "", None)
        assert wire.labels(obj) == {} and wire.annotations(obj) == {} and wire.owner_references(obj) == []
        assert (wire.phase(obj), wire.node_name(obj), wire.restarts(obj)) == (None, None, 0)
        assert wire.conditions(obj) == [] and wire.container_statuses(obj) == []
        assert wire.created_at(obj) is None and not wire.deleting(obj)
        assert wire.service_type(obj) is None and wire.ports(obj) == [] and wire.ingress(obj) == []
        assert (wire.replicas(obj), wire.replicas(obj, default=1), wire.ready_replicas(obj)) == (0, 1, 0)
        assert wire.allocatable(obj) == {}
    assert wire.items(None) == [] and wire.items({"items": None}) == []
    assert wire.ingress({"status": {"loadBalancer": None}}) == []
