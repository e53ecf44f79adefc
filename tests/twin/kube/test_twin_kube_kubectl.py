"""Contract tests through kubectl (/usr/bin/kubectl) with a kubeconfig holding a static EKS token."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable, Iterator

import kubernetes
import pytest

from tests.support.twin_kube import KUBECTL, Cluster
from tests.support.waits import until

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{app: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: main
        image: nginx:1.25
        env: [{{name: A, value: "1"}}, {{name: B, value: "2"}}]
        ports: [{{containerPort: 80}}]
      - name: side
        image: busybox:1.36
"""

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, shortNames: [wd]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
"""


@pytest.fixture
def ns(cluster: Cluster) -> Iterator[str]:
    name = "k-" + uuid.uuid4().hex[:8]
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_get_and_discovery(cluster: Cluster) -> None:
    out = cluster.kubectl("get", "namespaces").stdout
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    assert any(line.startswith("kube-system") and "Active" in line for line in out.splitlines())
    resources = cluster.kubectl("api-resources", "--api-group=apps", "-o", "name").stdout.split()
    assert {"deployments.apps", "daemonsets.apps", "replicasets.apps", "statefulsets.apps"} <= set(resources)
    assert "Server Version: v1.32" in cluster.kubectl("version").stdout


def test_unknown_fields_fail_strict_validation(cluster: Cluster, ns: str) -> None:
    typo = DEPLOYMENT.format(replicas=1).replace("image: nginx:1.25", "imagee: nginx:1.25")
    strict = cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=typo, check=False)
    assert strict.returncode != 0
    assert 'strict decoding error: unknown field "spec.template.spec.containers[0].imagee"' in strict.stderr
    warned = cluster.kubectl("apply", "-n", ns, "--validate=warn", "-f", "-", stdin=typo)
    assert 'Warning: unknown field "spec.template.spec.containers[0].imagee"' in warned.stderr
    dep = json.loads(cluster.kubectl("get", "-n", ns, "deployment", "web", "-o", "json").stdout)
    assert "imagee" not in dep["spec"]["template"]["spec"]["containers"][0]


def test_tables_for_events_and_crds(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespaced_event(ns, {
        "metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "trainer-0", "namespace": ns},
        "reason": "FailedScheduling", "type": "Warning", "message": "0/2 nodes are available: 2 Insufficient gpu.",
    })
    rows = cluster.kubectl("get", "events", "-n", ns).stdout.splitlines()
    assert rows[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert rows[1].split()[1:4] == ["Warning", "FailedScheduling", "pod/trainer-0"]
    endpoints = cluster.kubectl("get", "endpoints", "kubernetes", "-n", "default").stdout.splitlines()
    assert endpoints[1].split()[:2] == ["kubernetes", "10.0.0.10:443,10.0.1.10:443"]


def test_apply_label_patch_and_scale(cluster: Cluster, ns: str) -> None:
    assert "created" in cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=DEPLOYMENT.format(replicas=2)).stdout
    assert "unchanged" in cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=DEPLOYMENT.format(replicas=2)).stdout
    changed = cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=DEPLOYMENT.format(replicas=3))
    assert "configured" in changed.stdout and "warning" not in changed.stderr.lower()
    cluster.kubectl("label", "-n", ns, "deployment", "web", "tier=frontend")
    listed = cluster.kubectl("get", "-n", ns, "deployments", "-l", "tier=frontend", "-o", "name").stdout
    assert listed.split() == ["deployment.apps/web"]
    assert cluster.kubectl("get", "-n", ns, "deployments", "-l", "tier=backend", "-o", "name").stdout == ""
    cluster.kubectl("patch", "-n", ns, "deployment", "web", "-p",
                    '{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"nginx:1.26"}]}}}}')
    dep = json.loads(cluster.kubectl("get", "-n", ns, "deployment", "web", "-o", "json").stdout)
    containers = {c["name"]: c for c in dep["spec"]["template"]["spec"]["containers"]}
    assert containers["main"]["image"] == "nginx:1.26" and containers["side"]["image"] == "busybox:1.36"
    assert [e["name"] for e in containers["main"]["env"]] == ["A", "B"]
    assert dep["spec"]["replicas"] == 3 and dep["metadata"]["labels"]["tier"] == "frontend"
    cluster.kubectl("scale", "-n", ns, "deployment", "web", "--replicas=5")
    assert cluster.kubectl("get", "-n", ns, "deployment", "web", "-o", "jsonpath={.spec.replicas}").stdout == "5"
    table = cluster.kubectl("get", "-n", ns, "deployment", "web").stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1].split()[:2] == ["web", "0/5"]


def test_server_side_apply(cluster: Cluster, ns: str) -> None:
    out = cluster.kubectl("apply", "--server-side", "-n", ns, "-f", "-", stdin=DEPLOYMENT.format(replicas=1))
    assert "serverside-applied" in out.stdout
    dep = json.loads(cluster.kubectl("get", "-n", ns, "deployment", "web", "-o", "json",
                                     "--show-managed-fields").stdout)
    assert [m["manager"] for m in dep["metadata"]["managedFields"]] == ["kubectl"]
    rival = cluster.kubectl("apply", "--server-side", "--field-manager=other", "-n", ns, "-f", "-",
                            stdin=DEPLOYMENT.format(replicas=4), check=False)
    assert rival.returncode != 0 and "conflict" in rival.stderr.lower()
    cluster.kubectl("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-n", ns, "-f", "-",
                    stdin=DEPLOYMENT.format(replicas=4))
    assert cluster.kubectl("get", "-n", ns, "deploy", "web", "-o", "jsonpath={.spec.replicas}").stdout == "4"


def watching(cluster: Cluster, before: tuple[object, ...]) -> Callable[[], bool]:
    """Whether a new watch stream has subscribed to the cluster's store (kubectl has listed and is now watching).

    Compared by identity: a watch of an earlier test may unsubscribe meanwhile, so a count could mislead."""
    return lambda: any(listener not in before for listener in cluster.runtime.store.listeners())


def test_status_subresource_wait_and_logs(cluster: Cluster, ns: str) -> None:
    cluster.kubectl("run", "-n", ns, "worker", "--image=busybox", "--restart=Never", "--", "sleep", "3600")
    before = cluster.runtime.store.listeners()
    waiter = subprocess.Popen(
        [KUBECTL, "wait", "-n", ns, "--for=condition=Ready", "pod/worker", "--timeout=60s"],
        env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    until(watching(cluster, before), what="kubectl wait watching pod/worker")
    assert waiter.poll() is None  # the pod is not Ready yet: kubectl waits on its watch
    cluster.kubectl("patch", "-n", ns, "pod", "worker", "--subresource=status", "--type=merge", "-p",
                    '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}')
    out, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert "condition met" in out
    assert cluster.kubectl("get", "-n", ns, "pod", "worker").stdout.splitlines()[1].split()[2] == "Running"
    logs = cluster.runtime.logs
    logs.append(ns, "worker", "worker", "starting")
    follower = subprocess.Popen([KUBECTL, "logs", "-f", "-n", ns, "worker"], env=cluster.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert follower.stdout is not None
    assert follower.stdout.readline() == "starting\n"
    logs.append(ns, "worker", "worker", "step 1")
    assert follower.stdout.readline() == "step 1\n"
    logs.append(ns, "worker", "worker", "done")
    logs.close(ns, "worker", "worker")
    rest, _ = follower.communicate(timeout=60)
    assert rest == "done\n" and follower.returncode == 0


def test_watch_with_kubectl(cluster: Cluster, ns: str) -> None:
    before = cluster.runtime.store.listeners()
    watcher = subprocess.Popen(
        [KUBECTL, "get", "configmaps", "-n", ns, "--watch-only", "-o", "name", "--request-timeout=60s"],
        env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert watcher.stdout is not None
    # --watch-only prints only changes after its list: create the object once the watch is subscribed.
    until(watching(cluster, before), what="kubectl get --watch-only subscribed")
    core = kubernetes.client.CoreV1Api(cluster.api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "seen"}})
    assert watcher.stdout.readline().strip() == "configmap/seen"
    watcher.terminate()
    watcher.wait(10)


def test_crd_and_custom_resource(cluster: Cluster, ns: str) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=CRD)
    cluster.kubectl("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=60s")
    widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: %d}\n"
    assert "created" in cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=widget % 3).stdout
    updated = cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=widget % 5)
    assert "configured" in updated.stdout and "warning" not in updated.stderr.lower()
    table = cluster.kubectl("get", "-n", ns, "wd").stdout.splitlines()
    assert table[0].split() == ["NAME", "SIZE"] and table[1].split() == ["w1", "5"]
    cluster.kubectl("delete", "crd", "widgets.example.com")
    assert cluster.kubectl("get", "crd", "-o", "name").stdout.count("widgets.example.com") == 0


def test_delete_cascades(cluster: Cluster, ns: str) -> None:
    core = kubernetes.client.CoreV1Api(cluster.api)
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "child", "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}]}})
    cluster.kubectl("delete", "-n", ns, "configmap", "owner", "--cascade=foreground")
    assert cluster.kubectl("get", "-n", ns, "configmaps", "-o", "name").stdout.split() == []


def test_typed_create_commands_send_protobuf(cluster: Cluster, ns: str) -> None:
    cluster.kubectl("create", "-n", ns, "configmap", "settings", "--from-literal=mode=fast")
    cluster.kubectl("create", "-n", ns, "secret", "generic", "creds", "--from-literal=token=abc")
    cluster.kubectl("create", "-n", ns, "serviceaccount", "robot")
    cluster.kubectl("create", "-n", ns, "service", "clusterip", "api", "--tcp=80:8080")
    core = kubernetes.client.CoreV1Api(cluster.api)
    assert core.read_namespaced_config_map("settings", ns).data == {"mode": "fast"}
    assert core.read_namespaced_secret("creds", ns).data == {"token": "YWJj"}
    assert core.read_namespaced_service_account("robot", ns).metadata.uid
    svc = core.read_namespaced_service("api", ns)
    assert svc.spec.selector == {"app": "api"} and svc.spec.type == "ClusterIP" and svc.spec.cluster_ip
    assert [(p.port, p.target_port, p.protocol) for p in svc.spec.ports] == [(80, 8080, "TCP")]
    cluster.kubectl("create", "-n", ns, "deployment", "web", "--image=nginx:1.27", "--replicas=0", "--port=80")
    cluster.kubectl("create", "-n", ns, "job", "once", "--image=busybox", "--", "echo", "hi")
    cluster.kubectl("create", "-n", ns, "cronjob", "often", "--image=busybox", "--schedule=*/5 * * * *", "--", "date")
    apps, batch = kubernetes.client.AppsV1Api(cluster.api), kubernetes.client.BatchV1Api(cluster.api)
    dep = apps.read_namespaced_deployment("web", ns)
    assert dep.spec.replicas == 0 and dep.spec.selector.match_labels == {"app": "web"}
    container = dep.spec.template.spec.containers[0]
    assert (container.image, container.ports[0].container_port, container.image_pull_policy) == (
        "nginx:1.27", 80, "IfNotPresent")
    assert dep.spec.strategy.type == "RollingUpdate"
    job = batch.read_namespaced_job("once", ns)
    assert job.spec.template.spec.containers[0].command == ["echo", "hi"]
    assert job.spec.template.spec.restart_policy == "Never"
    cron = batch.read_namespaced_cron_job("often", ns)
    assert cron.spec.schedule == "*/5 * * * *"
    assert cron.spec.job_template.spec.template.spec.restart_policy == "OnFailure"
    unsupported = cluster.kubectl("create", "priorityclass", "urgent", "--value=1000", check=False)
    assert unsupported.returncode != 0 and "send JSON" in unsupported.stderr
