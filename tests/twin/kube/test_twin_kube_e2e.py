"""End to end through the Twin: an EKS cluster created with boto3 gets an API server reached like EKS."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from hyperpod_twin.twin import Twin, TwinConfig
from tests.support.eks_token import eks_token
from tests.support.twin_aws import advance, build_network, ensure_role
from tests.support.twin_kube import client_for, write_kubeconfig


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    """A full Twin (Kubernetes and simulator plugins) whose clock only moves when told."""
    t = Twin(TwinConfig(clock_scale=0.001)).start()
    t.reset()
    try:
        yield t
    finally:
        t.stop()


def _create_active(twin: Twin, name: str, **extra: Any) -> dict[str, Any]:
    net = build_network(twin, cidr_prefix="10.20" if name.endswith("a") else "10.30")
    eks = twin.boto3_client("eks")
    eks.create_cluster(
        name=name, roleArn=ensure_role(twin, "eks-cluster", "eks.amazonaws.com"), version="1.32",
        resourcesVpcConfig={"subnetIds": net.eks_private, "securityGroupIds": [net.sg]}, **extra,
    )
    advance(twin, 601)
    cluster: dict[str, Any] = eks.describe_cluster(name=name)["cluster"]
    return cluster


def _token(twin: Twin, name: str) -> str:
    # Presigned against the twin's own STS, as the control plane does with AWS_ENDPOINT_URL set.
    return eks_token(name, access_key=twin.access_key_id, secret_key=twin.secret_access_key, region=twin.region,
                     endpoint_url=twin.endpoint_url)


def test_eks_cluster_serves_kubernetes(twin: Twin, tmp_path: Path) -> None:
    started: list[str] = []
    twin.bus.subscribe("kube.cluster.started", lambda runtime: started.append(runtime.name))
    cluster = _create_active(twin, "e2e-a", accessConfig={"authenticationMode": "API"})
    assert cluster["status"] == "ACTIVE"
    endpoint, ca_b64 = cluster["endpoint"], cluster["certificateAuthority"]["data"]
    assert endpoint.startswith("https://127.0.0.1:") and endpoint == twin.kube_endpoint("e2e-a")
    assert base64.b64decode(ca_b64).startswith(b"-----BEGIN CERTIFICATE-----")
    assert started == ["e2e-a"] and "e2e-a" in twin.kube_runtimes
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(base64.b64decode(ca_b64))
    api = client_for(endpoint, ca_file, _token(twin, "e2e-a"))
    core = kubernetes.client.CoreV1Api(api)
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= {
        n.metadata.name for n in core.list_namespace().items}
    me = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review({"apiVersion":
                                                                                "authentication.k8s.io/v1",
                                                                                "kind": "SelfSubjectReview"})
    assert me.status.user_info.username == twin.caller_arn
    # A token for another cluster's name does not open this one.
    wrong = client_for(endpoint, ca_file, _token(twin, "some-other-cluster"))
    with pytest.raises(ApiException) as denied:
        kubernetes.client.CoreV1Api(wrong).list_namespace()
    assert denied.value.status == 401
    api.close()
    wrong.close()
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, endpoint, ca_b64, _token(twin, "e2e-a"))
    import subprocess

    out = subprocess.run(["/usr/bin/kubectl", "get", "ns", "kube-system", "-o", "name"],
                         env={"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "namespace/kube-system", out.stderr


def test_access_entries_gate_principals(twin: Twin, tmp_path: Path) -> None:
    cluster = _create_active(twin, "e2e-b", accessConfig={"authenticationMode": "API",
                                                          "bootstrapClusterCreatorAdminPermissions": False})
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(base64.b64decode(cluster["certificateAuthority"]["data"]))
    api = client_for(cluster["endpoint"], ca_file, _token(twin, "e2e-b"))
    with pytest.raises(ApiException) as denied:
        kubernetes.client.CoreV1Api(api).list_namespace()
    assert denied.value.status == 401
    eks = twin.boto3_client("eks")
    core = kubernetes.client.CoreV1Api(api)
    eks.create_access_entry(clusterName="e2e-b", principalArn=twin.caller_arn)
    with pytest.raises(ApiException) as no_policy:
        core.list_namespace()
    assert no_policy.value.status == 403 and "cannot list resource" in no_policy.value.body
    policy = "arn:aws:eks::aws:cluster-access-policy/"
    eks.associate_access_policy(clusterName="e2e-b", principalArn=twin.caller_arn,
                                policyArn=policy + "AmazonEKSViewPolicy", accessScope={"type": "cluster"})
    assert core.list_namespace().items
    with pytest.raises(ApiException) as read_only:
        core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
    assert read_only.value.status == 403
    eks.associate_access_policy(clusterName="e2e-b", principalArn=twin.caller_arn,
                                policyArn=policy + "AmazonEKSEditPolicy",
                                accessScope={"type": "namespace", "namespaces": ["kube-public"]})
    core.create_namespaced_config_map("kube-public", {"metadata": {"name": "x"}})
    review = kubernetes.client.AuthorizationV1Api(api).create_self_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "create", "resource": "configmaps", "namespace": "default"}}})
    assert review.status.allowed is False
    # Kubernetes groups are for RBAC, which the twin stores but trusts rather than evaluates.
    eks.update_access_entry(clusterName="e2e-b", principalArn=twin.caller_arn, kubernetesGroups=["ops"])
    core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
    api.close()


def test_deleting_the_cluster_stops_its_server(twin: Twin) -> None:
    stopped: list[str] = []
    twin.bus.subscribe("kube.cluster.stopped", lambda name: stopped.append(name))
    eks = twin.boto3_client("eks")
    eks.delete_cluster(name="e2e-b")
    advance(twin, 900)
    assert "e2e-b" in stopped and "e2e-b" not in twin.kube_runtimes
    assert twin.chart_repo_url.startswith("http://127.0.0.1:")
