"""An idle control plane stays light: the Kubernetes client loads on first use, Region names come from data."""

from __future__ import annotations

import subprocess
import sys

import boto3
from kubernetes import client as kubernetes_client

from instantstart.kube import k8s
from instantstart.validation import known_regions

IDLE_IMPORTS = """
import sys
import instantstart.api.app as app
import instantstart.cli.main
import instantstart.server
from instantstart.settings import Settings
app.load_all(Settings().plugins)
print(",".join(sorted(name for name in sys.modules if name.split(".")[0] in ("kubernetes", "google", "oauthlib"))))
"""


def test_serving_imports_no_kubernetes_client_until_a_cluster_is_used() -> None:
    # A fresh interpreter: this test process has long imported the client.
    out = subprocess.run([sys.executable, "-c", IDLE_IMPORTS], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == ""


def test_the_lazy_client_module_is_the_kubernetes_client() -> None:
    assert k8s.CoreV1Api is kubernetes_client.CoreV1Api
    assert k8s.ApiException is kubernetes_client.ApiException
    assert k8s.V1ObjectMeta(name="a").name == "a"


# A resumed operation's concurrent steps: the first reads of the client, its API classes and the dynamic client,
# from several threads at once in a fresh interpreter (the package's modules import each other in a cycle).
CONCURRENT_FIRST_USE = """
import threading
from instantstart.kube import k8s
errors = []
def read(what):
    try:
        what()
    except BaseException as exc:
        errors.append(repr(exc))
def dynamic():
    return k8s.load("kubernetes.dynamic")
reads = [dynamic, lambda: k8s.ApiClient, lambda: k8s.CoreV1Api, dynamic, lambda: k8s.ApiClient]
threads = [threading.Thread(target=read, args=(r,)) for r in reads]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(errors)
"""


def test_the_client_loads_whole_when_threads_first_use_it_at_once() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CONCURRENT_FIRST_USE], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_known_regions_are_the_ones_a_boto3_session_lists_for_ec2() -> None:
    session = boto3.session.Session()
    expected: set[str] = set()
    for partition in ("aws", "aws-cn", "aws-us-gov"):
        expected.update(session.get_available_regions("ec2", partition_name=partition))
    assert known_regions() == frozenset(expected)
    assert "us-west-2" in known_regions() and "cn-north-1" in known_regions()
