"""Twin plugin: one Kubernetes API server per EKS cluster, started when the cluster becomes ACTIVE.

Registry on the twin (set by `attach`):
- ``twin.kube_runtimes``: cluster name → ClusterRuntime (store, logs, pod HTTP) of a running server
- ``twin.kube_servers``: cluster name → KubeApiServer
- ``twin.kube_endpoint(name)`` → ``https://127.0.0.1:PORT`` of that cluster's API server
- ``twin.chart_repo_url``: base URL of the local Helm chart repository
Endpoints are HTTPS with a per-cluster CA (returned as the EKS certificateAuthority.data), because
kubectl and helm never send bearer tokens over plain HTTP.
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import urlsplit

from hyperpod_twin.aws.context import canonical_principal
from hyperpod_twin.kube import chaos
from hyperpod_twin.kube.auth import AuthError, EksTokenVerifier, Identity, Principal, sts_hosts_for
from hyperpod_twin.kube.authz import Grant
from hyperpod_twin.kube.charts import ChartRepository
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.server import KubeApiServer, new_cluster_runtime

log = logging.getLogger(__name__)


class AccessEntries:
    """The EKS access entries of each cluster, as the AWS side publishes them.

    Before the first publication for a cluster every verified identity is let in; afterwards an IAM
    principal needs an access entry (EKS answers 401 otherwise), whose username, Kubernetes groups
    and access policies (kube/authz.py) become the identity's."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def update(self, cluster_name: str, entries: list[dict[str, Any]]) -> None:
        """Replace a cluster's entries."""
        with self._lock:
            self._entries[cluster_name] = {str(e.get("principalArn")): e for e in entries}

    def forget(self, cluster_name: str) -> None:
        """Drop a cluster's entries."""
        with self._lock:
            self._entries.pop(cluster_name, None)

    def map(self, cluster_name: str, identity: Identity) -> Identity:
        """The Kubernetes identity of a verified IAM identity; AuthError without an access entry."""
        with self._lock:
            entries = self._entries.get(cluster_name)
            if entries is None:
                return identity
            entry = entries.get(identity.username)
        if entry is None:
            raise AuthError(f"no access entry for {identity.username} in cluster {cluster_name}")
        groups = tuple(dict.fromkeys([*(entry.get("kubernetesGroups") or []), *identity.groups]))
        grants = tuple(
            Grant(
                policy=str(p.get("policyArn", "")).rsplit("/", 1)[-1],
                namespaces=tuple((p.get("accessScope") or {}).get("namespaces") or ())
                if (p.get("accessScope") or {}).get("type") == "namespace" else (),
            )
            for p in entry.get("accessPolicies") or []
        )
        return Identity(
            username=str(entry.get("username") or identity.username),
            uid=identity.uid,
            groups=groups,
            extra=identity.extra,
            grants=grants,
        )


class KubePlugin:
    """The Kubernetes side of one Twin."""

    def __init__(self, twin: Any) -> None:
        self.twin = twin
        self.servers: dict[str, KubeApiServer] = {}
        self.runtimes: dict[str, ClusterRuntime] = {}
        self.access = AccessEntries()
        self.chart_repo = ChartRepository(host=str(getattr(twin.config, "host", "127.0.0.1")))
        self._lock = threading.RLock()

    # -- credentials -------------------------------------------------------------------------
    def lookup(self, access_key_id: str) -> Principal | None:
        """The twin's own credentials are the only ones EKS tokens may be signed with."""
        if access_key_id == self.twin.access_key_id:
            # EKS maps a role session to its role (aws-iam-authenticator canonicalisation).
            return Principal(self.twin.secret_access_key, canonical_principal(str(self.twin.caller_arn)))
        return None

    def _allowed_hosts(self, region: str) -> tuple[str, ...]:
        netloc = urlsplit(self.twin.endpoint_url).netloc
        port = netloc.rsplit(":", 1)[1] if ":" in netloc else ""
        hosts = {netloc}
        if port:
            hosts |= {f"127.0.0.1:{port}", f"localhost:{port}"}
        return (*sorted(hosts), *sts_hosts_for(region))

    # -- lifecycle ---------------------------------------------------------------------------
    def on_activating(
        self, name: str, arn: str, region: str, issuer: str | None = None, version: str | None = None, **_: Any
    ) -> tuple[str, str]:
        """Start the cluster's API server; return (endpoint, ca_data_b64) for describe_cluster."""
        with self._lock:
            existing = self.servers.get(name)
            if existing is not None and existing.runtime.arn == arn:
                return existing.url, existing.ca_data_b64
            if existing is not None:
                self._stop(name)
            verifier = EksTokenVerifier(name, self.lookup, self._allowed_hosts(region))

            def authenticate(header: str | None) -> Identity:
                return self.access.map(name, verifier.verify(header))

            runtime = new_cluster_runtime(name, arn)
            runtime.oidc_issuer = issuer
            if version:
                runtime.kubernetes_version = version
            clock = getattr(self.twin, "clock", None)
            if clock is not None:  # grace periods and other computed times run on the twin clock
                runtime.store.clock = clock.wall
            server = KubeApiServer(runtime, authenticate, host=str(getattr(self.twin.config, "host", "127.0.0.1")))
            server.start()
            self.servers[name] = server
            self.runtimes[name] = runtime
        log.info("Kubernetes API server for EKS cluster %s at %s", name, server.url)
        self.twin.bus.publish("kube.cluster.started", runtime=runtime)
        return server.url, server.ca_data_b64

    def on_version_updated(self, name: str, arn: str, version: str, **_: Any) -> None:
        """The EKS cluster moved to Kubernetes `version`: its API server reports it (helm's capabilities follow)."""
        with self._lock:
            runtime = self.runtimes.get(name)
            if runtime is not None and runtime.arn == arn:
                runtime.kubernetes_version = version

    def on_access_entries(self, cluster_name: str, entries: list[dict[str, Any]], **_: Any) -> None:
        """Keep the principal → Kubernetes identity mapping current."""
        self.access.update(cluster_name, entries)

    def on_deleted(self, name: str, **_: Any) -> None:
        """The EKS cluster is gone: stop its API server."""
        if self._stop(name):
            self.twin.bus.publish("kube.cluster.stopped", name=name)

    def stop_all(self, **_: Any) -> None:
        """Stop every API server (twin reset or stop)."""
        for name in list(self.servers):
            self.on_deleted(name)

    def shutdown(self, **_: Any) -> None:
        """The twin stops: API servers and the chart repository."""
        self.stop_all()
        self.chart_repo.stop()

    def endpoint(self, name: str) -> str:
        """The https:// endpoint of a running cluster's API server (KeyError if none)."""
        return self.servers[name].url

    def _stop(self, name: str) -> bool:
        with self._lock:
            server = self.servers.pop(name, None)
            self.runtimes.pop(name, None)
            self.access.forget(name)
        if server is None:
            return False
        server.stop()
        return True


def attach(twin: Any) -> None:
    """Hook the Kubernetes side into a Twin (called by Twin.start)."""
    plugin = KubePlugin(twin)
    plugin.chart_repo.start()
    twin.kube_plugin = plugin
    twin.kube_servers = plugin.servers
    twin.kube_runtimes = plugin.runtimes
    twin.kube_endpoint = plugin.endpoint
    twin.chart_repo_url = plugin.chart_repo.url
    twin.bus.subscribe("eks.cluster.activating", plugin.on_activating)
    twin.bus.subscribe("eks.cluster.version_updated", plugin.on_version_updated)
    twin.bus.subscribe("eks.access_entries.changed", plugin.on_access_entries)
    twin.bus.subscribe("eks.cluster.deleted", plugin.on_deleted)
    twin.bus.subscribe("twin.reset", plugin.stop_all)
    twin.bus.subscribe("twin.stopping", plugin.shutdown)
    chaos.attach(twin)
