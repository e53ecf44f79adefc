"""Unit tests of the API server's pure parts: patches, selectors, apply bookkeeping, protobuf, tables."""

from __future__ import annotations

import pytest

from hyperpod_twin.kube import protobuf
from hyperpod_twin.kube.apply import field_paths, from_fields_v1, server_side_apply, to_fields_v1
from hyperpod_twin.kube.patch import json_patch, merge_patch, strategic_merge
from hyperpod_twin.kube.selectors import match_label_selector, parse_field_selector, parse_label_selector
from hyperpod_twin.kube.status import ApiError
from hyperpod_twin.kube.table import human_duration, jsonpath


def test_strategic_merge_lists_by_key_and_directives() -> None:
    live = {"spec": {
        "containers": [{"name": "a", "image": "x:1", "env": [{"name": "K", "value": "1"}]},
                       {"name": "b", "image": "y"}],
        "tolerations": [{"key": "k1", "effect": "NoSchedule"}],
        "volumes": [{"name": "v1"}, {"name": "v2"}],
        "ports": [{"containerPort": 80}],
    }, "metadata": {"finalizers": ["f1"], "labels": {"keep": "1", "drop": "1"}}}
    patch = {
        "metadata": {"labels": {"drop": None}, "finalizers": ["f2"]},
        "spec": {
            "containers": [{"name": "a", "env": [{"name": "L", "value": "2"}]}],
            "tolerations": [{"key": "k2", "operator": "Exists"}],
            "volumes": [{"name": "v1", "$patch": "delete"}],
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "ports": [{"containerPort": 8080}],
        },
    }
    out = strategic_merge(live, patch)
    assert out["metadata"] == {"finalizers": ["f1", "f2"], "labels": {"keep": "1"}}
    assert [c["name"] for c in out["spec"]["containers"]] == ["b", "a"]
    container_a = out["spec"]["containers"][1]
    assert container_a["image"] == "x:1" and [e["name"] for e in container_a["env"]] == ["K", "L"]
    assert [t["key"] for t in out["spec"]["tolerations"]] == ["k1", "k2"]
    assert out["spec"]["volumes"] == [{"name": "v2"}]
    assert out["spec"]["ports"] == [{"containerPort": 80}, {"containerPort": 8080}]
    replaced = strategic_merge(live, {"spec": {"containers": [{"$patch": "replace"}, {"name": "c", "image": "z"}]}})
    assert replaced["spec"]["containers"] == [{"name": "c", "image": "z"}]
    removed = strategic_merge(live, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]}})
    assert removed["metadata"]["finalizers"] == []
    retained = strategic_merge({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
                               {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}})
    assert retained == {"strategy": {"type": "Recreate"}}
    service = strategic_merge({"spec": {"ports": [{"port": 80, "name": "http"}]}},
                              {"spec": {"ports": [{"port": 80, "targetPort": 8080}]}})
    assert service["spec"]["ports"] == [{"port": 80, "name": "http", "targetPort": 8080}]


def test_merge_and_json_patch() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3}, "l": [2]}
    doc = {"a": [1, 2, 3], "b": {"c": "x"}}
    out = json_patch(doc, [
        {"op": "add", "path": "/a/-", "value": 4},
        {"op": "remove", "path": "/a/0"},
        {"op": "copy", "from": "/b/c", "path": "/d"},
        {"op": "move", "from": "/b", "path": "/e"},
        {"op": "replace", "path": "/e/c", "value": "y"},
        {"op": "test", "path": "/d", "value": "x"},
        {"op": "add", "path": "/f~1g", "value": True},
    ])
    assert out == {"a": [2, 3, 4], "d": "x", "e": {"c": "y"}, "f/g": True}
    assert doc == {"a": [1, 2, 3], "b": {"c": "x"}}
    with pytest.raises(ApiError) as err:
        json_patch(doc, [{"op": "replace", "path": "/missing", "value": 1}])
    assert err.value.code == 422


def test_label_and_field_selectors() -> None:
    def obj(**labels: str) -> dict[str, object]:
        return {"metadata": {"name": "n", "labels": labels}, "status": {"phase": "Running"}}

    sel = parse_label_selector("app=web,tier in (a, b),!legacy,env!=prod")
    assert sel is not None
    assert sel(obj(app="web", tier="a", env="dev"))
    assert not sel(obj(app="web", tier="c"))
    assert not sel(obj(app="web", tier="a", legacy="y"))
    assert not sel(obj(app="web", tier="b", env="prod"))
    with pytest.raises(ApiError):
        parse_label_selector("a in b")
    fields = parse_field_selector("status.phase=Running,metadata.name!=other")
    assert fields is not None and fields(obj())
    assert parse_label_selector("") is None
    assert match_label_selector({"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}, {"k": "v"})
    assert not match_label_selector({"matchExpressions": [{"key": "k", "operator": "DoesNotExist"}]}, {"k": "v"})


def test_apply_field_ownership() -> None:
    applied = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1"}},
               "data": {"x": "1"}, "spec": {"containers": [{"name": "m", "image": "i"}]}}
    paths = field_paths(applied)
    assert ("f:metadata", "f:labels", "f:a") in paths and ("f:data", "f:x") in paths
    assert ("f:spec", "f:containers", 'k:{"name":"m"}', "f:image") in paths
    assert from_fields_v1(to_fields_v1(paths)) == paths
    created = server_side_apply(None, applied, "one", False, "v1")
    live = created | {"data": {"x": "1", "y": "other"}}
    with pytest.raises(ApiError) as conflict:
        server_side_apply(live, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                 "data": {"x": "2"}}, "two", False, "v1")
    assert conflict.value.code == 409 and ".data.x" in conflict.value.message
    shrunk = server_side_apply(live, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                      "data": {"x": "1"}}, "one", False, "v1")
    assert "labels" not in shrunk["metadata"]
    assert shrunk["data"] == {"x": "1", "y": "other"} and "spec" not in shrunk


def _varint(n: int) -> bytes:
    out = b""
    n &= (1 << 64) - 1
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def _field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def test_protobuf_secret_and_config_map() -> None:
    zero_time = _field(1, -62135596800)
    meta = (_field(1, b"sh.helm.release.v1.r.v1") + _field(3, b"default") + _field(8, zero_time)
            + _field(11, _field(1, b"owner") + _field(2, b"helm")) + _field(14, b"keep"))
    secret = _field(1, meta) + _field(2, _field(1, b"release") + _field(2, b"\x00\x01raw")) + _field(
        3, b"helm.sh/release.v1")
    body = protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"Secret")) + _field(2, secret)
    obj = protobuf.decode(body)
    assert obj["metadata"] == {"name": "sh.helm.release.v1.r.v1", "namespace": "default",
                               "labels": {"owner": "helm"}, "finalizers": ["keep"]}
    assert obj["data"] == {"release": "AAFyYXc="} and obj["type"] == "helm.sh/release.v1"
    cm = _field(1, _field(1, b"cm")) + _field(2, _field(1, b"k") + _field(2, b"v"))
    obj = protobuf.decode(protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"ConfigMap")) + _field(2, cm))
    assert obj == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(protobuf.MAGIC + _field(1, _field(1, b"v1") + _field(2, b"Pod")))
    # Strict: a field the tables do not know is refused rather than dropped.
    spec = _field(1, 3) + _field(99, b"x")
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(protobuf.MAGIC + _field(1, _field(1, b"apps/v1") + _field(2, b"Deployment"))
                        + _field(2, _field(2, spec)))
    replicas_zero = _field(2, _field(1, 0) + _field(5, 0))
    deployment = protobuf.decode(protobuf.MAGIC + _field(1, _field(1, b"apps/v1") + _field(2, b"Deployment"))
                                 + _field(2, _field(1, _field(1, b"d")) + replicas_zero))
    assert deployment["spec"] == {"replicas": 0}  # a pointer field keeps its zero; minReadySeconds 0 is omitted
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(b"{}")


def test_table_helpers() -> None:
    assert [human_duration(s) for s in (5, 150, 700, 4 * 3600 + 60, 3 * 86400, 20 * 86400)] == [
        "5s", "2m30s", "11m", "4h1m", "3d", "20d"]
    obj = {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "Ready", "status": "False"}]}}
    assert jsonpath(obj, ".status.conditions[-1:].type") == "Ready"
    assert jsonpath(obj, '.status.conditions[?(@.type=="A")].status') == "True"
    assert jsonpath(obj, ".status.conditions[*].type") == "A,Ready"
    assert jsonpath(obj, ".spec.missing") is None


def test_unknown_field_pruning_uses_the_right_model() -> None:
    from hyperpod_twin.kube.types import builtin
    from hyperpod_twin.kube.validation import prune_unknown

    core_event = {"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod"}, "message": "m", "regarding": {}}
    pruned, unknown = prune_unknown(builtin("", "events"), core_event, None)
    assert unknown == ["regarding"] and pruned["involvedObject"] == {"kind": "Pod"}
    new_event = {"metadata": {"name": "e"}, "regarding": {"kind": "Pod"}, "note": "n", "involvedObject": {}}
    pruned, unknown = prune_unknown(builtin("events.k8s.io", "events"), new_event, None)
    assert unknown == ["involvedObject"] and pruned["note"] == "n"
    target = {"type": "Utilization", "averageUtilization": 50}
    hpa = {"spec": {"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]}}
    assert prune_unknown(builtin("autoscaling", "horizontalpodautoscalers"), hpa, None) == (hpa, [])


def test_access_policy_decisions() -> None:
    from hyperpod_twin.kube.authz import Attributes, Grant, allowed, forbidden_message

    base = ("system:authenticated",)
    read = Attributes("list", "", "pods", namespace="ml")
    write = Attributes("create", "apps", "deployments", namespace="ml")
    secret = Attributes("get", "", "secrets", namespace="ml", name="s")
    rbac = Attributes("create", "rbac.authorization.k8s.io", "clusterrolebindings")
    assert allowed(base, None, write)  # no grant information: unrestricted
    assert not allowed(base, (), read)  # an entry without policies or groups may do nothing
    view = (Grant("AmazonEKSViewPolicy"),)
    assert allowed(base, view, read) and not allowed(base, view, write) and not allowed(base, view, secret)
    edit_ml = (Grant("AmazonEKSEditPolicy", ("ml",)),)
    assert allowed(base, edit_ml, write) and allowed(base, edit_ml, secret)
    assert not allowed(base, edit_ml, Attributes("create", "apps", "deployments", namespace="other"))
    assert not allowed(base, edit_ml, rbac)
    assert not allowed(base, (Grant("AmazonEKSAdminPolicy"),), rbac)
    assert allowed(base, (Grant("AmazonEKSClusterAdminPolicy"),), rbac)
    assert allowed(("system:masters", *base), (), rbac)
    assert forbidden_message("arn:aws:iam::1:user/u", secret) == (
        'secrets "s" is forbidden: User "arn:aws:iam::1:user/u" cannot get resource "secrets" in API group "" '
        'in the namespace "ml"')
