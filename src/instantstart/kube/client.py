"""Kubernetes API clients per EKS cluster: endpoint and CA from DescribeCluster, an in-process EKS token."""

from __future__ import annotations

import base64
import os
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import translate
from instantstart.errors import PreconditionFailed
from instantstart.kube import k8s
from instantstart.kube.token import EksToken, eks_token

# The client's API classes the control plane uses: the client imports each module (with its models) on first
# use, which costs seconds of CPU for CoreV1Api; `preload_apis` pays that off any critical path.
API_CLASSES = ("CoreV1Api", "VersionApi", "AppsV1Api", "StorageV1Api", "CustomObjectsApi", "BatchV1Api",
               "ApiextensionsV1Api")
_preloaded = threading.Event()


def preload_apis() -> None:
    """Import the Kubernetes client's API modules the control plane uses (once per process; blocking: run it in
    a thread while something else waits, e.g. while an EKS control plane is being created)."""
    if _preloaded.is_set():
        return
    _preloaded.set()
    for name in API_CLASSES:
        getattr(k8s, name)
    k8s.load("kubernetes.dynamic")


def preload_in_background() -> None:
    """`preload_apis` in a daemon thread (returns at once; nothing when already done)."""
    if not _preloaded.is_set():
        threading.Thread(target=preload_apis, name="kube-preload", daemon=True).start()


@dataclass
class _Entry:
    api: k8s.ApiClient
    token: EksToken
    endpoint: str
    ca_path: str | None = None


class KubeClients:
    """Builds and caches an ApiClient per (region, EKS cluster), refreshing the token before it expires."""

    def __init__(self, aws: AwsClients) -> None:
        self.aws = aws
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()
        self._ca_dir = tempfile.mkdtemp(prefix="instantstart-ca-")

    def api_client(self, cluster_name: str, region: str | None = None) -> k8s.ApiClient:
        """An ApiClient for the cluster (blocking; call from a worker thread)."""
        region = region or self.aws.default_region
        key = (region, cluster_name)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.token.fresh():
                return entry.api
        entry = self._build(cluster_name, region)
        with self._lock:
            old = self._entries.get(key)
            self._entries[key] = entry
        if old is not None and old.api is not entry.api:
            old.api.close()  # type: ignore[no-untyped-call]
        return entry.api

    def connection(self, cluster_name: str, region: str | None = None) -> tuple[str, str, str | None]:
        """(endpoint, fresh EKS token, CA file path or None) for tools that need raw credentials (helm).

        Blocking; the token is the same one the cached ApiClient uses and must never be logged.
        """
        region = region or self.aws.default_region
        self.api_client(cluster_name, region)
        with self._lock:
            entry = self._entries[(region, cluster_name)]
        return entry.endpoint, entry.token.value, entry.ca_path

    def forget(self, cluster_name: str, region: str | None = None) -> None:
        """Drop a cached client (after the cluster is deleted or its endpoint changed)."""
        with self._lock:
            entry = self._entries.pop((region or self.aws.default_region, cluster_name), None)
        if entry is not None:
            entry.api.close()  # type: ignore[no-untyped-call]

    def _build(self, cluster_name: str, region: str) -> _Entry:
        eks = self.aws.client("eks", region)
        try:
            cluster = eks.describe_cluster(name=cluster_name)["cluster"]
        except Exception as exc:
            raise translate(exc, f"describe EKS cluster {cluster_name}") from exc
        endpoint = cluster.get("endpoint")
        if cluster.get("status") != "ACTIVE" or not endpoint:
            raise PreconditionFailed(
                f"EKS cluster {cluster_name} is {cluster.get('status')} and has no API endpoint yet.",
                hint="Wait for the EKS stage to finish (cluster_get_eks_creation_status).",
            )
        try:
            token = eks_token(self.aws.client("sts", region), cluster_name)
        except Exception as exc:
            raise translate(exc, "sign an EKS token") from exc
        config = k8s.Configuration()
        config.host = endpoint
        config.api_key = {"authorization": token.value}
        config.api_key_prefix = {"authorization": "Bearer"}
        ca_data = (cluster.get("certificateAuthority") or {}).get("data")
        if endpoint.startswith("https://") and ca_data:
            path = os.path.join(self._ca_dir, f"{region}-{cluster_name}.crt")
            with open(path, "wb") as handle:
                handle.write(base64.b64decode(ca_data))
            config.ssl_ca_cert = path
        return _Entry(api=k8s.ApiClient(config), token=token, endpoint=endpoint, ca_path=config.ssl_ca_cert)


def describe(api: Any) -> str:
    """The host an ApiClient talks to (for messages)."""
    return str(api.configuration.host)
