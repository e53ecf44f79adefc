"""Contract tests through helm (.tools/bin/helm): install, upgrade, history, uninstall from the twin's repo."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path

import kubernetes
import yaml

from hyperpod_twin.kube.charts import ChartRepository, package_all
from tests.support.twin_kube import Cluster


def test_repository_index_and_packages(chart_repo: ChartRepository) -> None:
    names = {c.name: c for c in package_all()}
    assert {"hyperpod-dependencies", "kuberay-operator", "keda"} <= set(names)
    deps = names["hyperpod-dependencies"]
    with tarfile.open(fileobj=io.BytesIO(deps.data), mode="r:gz") as tar:
        members = set(tar.getnames())
    assert {"hyperpod-dependencies/Chart.yaml", "hyperpod-dependencies/values.yaml"} <= members
    assert package_all()[0].digest == package_all()[0].digest  # byte-stable packaging


def test_helm_install_upgrade_history_uninstall(
    cluster: Cluster, chart_repo: ChartRepository, helm_binary: Path
) -> None:
    repo = chart_repo.url
    cluster.helm("repo", "add", "twin", repo)
    search = json.loads(cluster.helm("search", "repo", "twin/", "-o", "json").stdout)
    assert {"twin/hyperpod-dependencies", "twin/kuberay-operator", "twin/keda"} <= {c["name"] for c in search}

    cluster.helm("install", "dependencies", "twin/hyperpod-dependencies", "--namespace", "kube-system")
    apps = kubernetes.client.AppsV1Api(cluster.api)
    hma = apps.read_namespaced_daemon_set("health-monitoring-agent", "aws-hyperpod")
    tolerations = {(t.key, t.operator) for t in hma.spec.template.spec.tolerations}
    assert (None, "Exists") in tolerations
    device_plugins = {d.metadata.name for d in apps.list_namespaced_daemon_set("kube-system").items}
    assert {"dependencies-nvidia-device-plugin", "dependencies-aws-efa-k8s-device-plugin"} <= device_plugins
    nvidia = apps.read_namespaced_daemon_set("dependencies-nvidia-device-plugin", "kube-system")
    assert any(t.key == "sagemaker.amazonaws.com/node-health-status" for t in nvidia.spec.template.spec.tolerations)
    # helm stores the release as a protobuf-encoded Secret; the server decoded its labels.
    secrets = kubernetes.client.CoreV1Api(cluster.api).list_namespaced_secret(
        "kube-system", label_selector="owner=helm,name=dependencies")
    assert [s.type for s in secrets.items] == ["helm.sh/release.v1"]

    cluster.helm("upgrade", "dependencies", "twin/hyperpod-dependencies", "--namespace", "kube-system",
                 "--reuse-values", "--set", "aws-efa-k8s-device-plugin.enabled=false")
    device_plugins = {d.metadata.name for d in apps.list_namespaced_daemon_set("kube-system").items}
    assert "dependencies-aws-efa-k8s-device-plugin" not in device_plugins
    assert "dependencies-nvidia-device-plugin" in device_plugins
    history = json.loads(cluster.helm("history", "dependencies", "-n", "kube-system", "-o", "json").stdout)
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "deployed")]
    values = yaml.safe_load(cluster.helm("get", "values", "dependencies", "-n", "kube-system", "-o", "yaml").stdout)
    assert values["aws-efa-k8s-device-plugin"]["enabled"] is False

    cluster.helm("install", "kuberay-operator", "kuberay-operator", "--repo", repo, "--version", "1.4.2",
                 "--namespace", "ray-system", "--create-namespace")
    ext = kubernetes.client.ApiextensionsV1Api(cluster.api)
    crds = {c.metadata.name for c in ext.list_custom_resource_definition().items}
    assert {"rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io", "pytorchjobs.kubeflow.org"} <= crds
    assert apps.read_namespaced_deployment("kuberay-operator", "ray-system").spec.replicas == 1
    cluster.helm("install", "keda", "keda", "--repo", repo, "--namespace", "keda", "--create-namespace")
    assert "scaledobjects.keda.sh" in {c.metadata.name for c in ext.list_custom_resource_definition().items}
    releases = json.loads(cluster.helm("list", "-A", "-o", "json").stdout)
    assert {(r["name"], r["namespace"], r["status"]) for r in releases} >= {
        ("dependencies", "kube-system", "deployed"), ("kuberay-operator", "ray-system", "deployed"),
        ("keda", "keda", "deployed")}

    # The same releases through helm's connection flags, with no kubeconfig (how a caller may run it).
    flags = ["--kube-apiserver", cluster.url, "--kube-token", cluster.token, "--kube-ca-file", str(cluster.ca_file)]
    empty = cluster.kubeconfig.with_name("empty-kubeconfig")
    empty.write_text("apiVersion: v1\nkind: Config\n")
    listed = subprocess.run([str(helm_binary), "list", "-A", "-o", "json", *flags],
                            env={**cluster.env, "KUBECONFIG": str(empty)}, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 3

    for release, namespace in (("dependencies", "kube-system"), ("kuberay-operator", "ray-system"),
                               ("keda", "keda")):
        cluster.helm("uninstall", release, "-n", namespace)
    assert json.loads(cluster.helm("list", "-A", "-o", "json").stdout) == []
    assert not apps.list_namespaced_daemon_set("aws-hyperpod").items
    assert not apps.list_namespaced_deployment("ray-system").items
    # helm keeps CRDs from crds/ on uninstall, as it does on a real cluster.
    assert "rayjobs.ray.io" in {c.metadata.name for c in ext.list_custom_resource_definition().items}
