"""A standalone twin Kubernetes API server for tests: the cluster record, kubeconfig, client and start/stop."""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes

from hyperpod_twin.kube.auth import EksTokenVerifier, Principal, sts_hosts_for
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.server import KubeApiServer, new_cluster_runtime
from tests.support.eks_token import eks_token

REPO_ROOT = Path(__file__).resolve().parents[2]
HELM = REPO_ROOT / ".tools" / "bin" / "helm"
KUBECTL = "/usr/bin/kubectl"
ACCESS_KEY = "AKIAKUBETESTKEY00001"
SECRET_KEY = "kubeTestSecretKeyForTheTwinClusterServer1"
CALLER_ARN = "arn:aws:iam::111122223333:user/kube-tester"
REGION = "us-west-2"
CLUSTER = "contract"


def lookup(access_key: str) -> Principal | None:
    """The test account's one IAM user."""
    return Principal(SECRET_KEY, CALLER_ARN) if access_key == ACCESS_KEY else None


@dataclass
class Cluster:
    """A running standalone API server and everything needed to talk to it."""

    server: KubeApiServer
    runtime: ClusterRuntime
    token: str
    kubeconfig: Path
    ca_file: Path
    env: dict[str, str]
    api: kubernetes.client.ApiClient

    @property
    def url(self) -> str:
        """The https:// endpoint."""
        return self.server.url

    def raw(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: object = None,
        content_type: str = "application/json",
    ) -> Any:
        """A request through the client's own transport (auth, CA); returns the RESTResponse unread."""
        headers = {"Content-Type": content_type, "Accept": "application/json"} if body is not None else {}
        method_, url, headers_, body_, _ = self.api.param_serialize(
            method, path, query_params=query or [], header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        return self.api.call_api(method_, url, header_params=headers_, body=body_)

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the cluster."""
        result = subprocess.run(
            [KUBECTL, *args], env=self.env, capture_output=True, text=True, input=stdin, timeout=60
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run helm against the cluster."""
        result = subprocess.run([str(HELM), *args], env=self.env, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed: {result.stderr}")
        return result


def write_kubeconfig(path: Path, server: str, ca_b64: str, token: str) -> None:
    """A kubeconfig with a static bearer token (no exec plugin)."""
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: {CLUSTER}
  cluster:
    server: {server}
    certificate-authority-data: {ca_b64}
contexts:
- name: {CLUSTER}
  context: {{cluster: {CLUSTER}, user: tester}}
current-context: {CLUSTER}
users:
- name: tester
  user:
    token: {token}
"""
    )


def client_for(server: str, ca_file: Path, token: str) -> kubernetes.client.ApiClient:
    """The official client configured as the control plane configures it: endpoint, CA, bearer token."""
    config = kubernetes.client.Configuration()
    config.host = server
    config.ssl_ca_cert = str(ca_file)
    config.api_key = {"authorization": "Bearer " + token}
    return kubernetes.client.ApiClient(config)




@contextlib.contextmanager
def standalone_cluster(tmp: Path, name: str = CLUSTER) -> Iterator[Cluster]:
    """Start an API server for cluster `name` (state, CA, token, kubeconfig under `tmp`); stop it after."""
    runtime = new_cluster_runtime(name, f"arn:aws:eks:{REGION}:111122223333:cluster/{name}")
    verifier = EksTokenVerifier(name, lookup, sts_hosts_for(REGION))
    server = KubeApiServer(runtime, verifier.verify)
    server.start()
    token = eks_token(name, access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION)
    kubeconfig = tmp / "kubeconfig"
    write_kubeconfig(kubeconfig, server.url, server.ca_data_b64, token)
    ca_file = tmp / "ca.crt"
    ca_file.write_bytes(base64.b64decode(server.ca_data_b64))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "KUBECONFIG": str(kubeconfig),
        "HELM_CACHE_HOME": str(tmp / "helm-cache"),
        "HELM_CONFIG_HOME": str(tmp / "helm-config"),
        "HELM_DATA_HOME": str(tmp / "helm-data"),
        "NO_PROXY": "127.0.0.1,localhost",
    }
    api = client_for(server.url, ca_file, token)
    try:
        yield Cluster(server, runtime, token, kubeconfig, ca_file, env, api)
    finally:
        api.close()
        server.stop()
