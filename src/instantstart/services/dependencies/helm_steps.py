"""Reconciling helm-chart dependencies: install, upgrade or keep the release, recover stuck ones, wait ready."""

from __future__ import annotations

from typing import Any

from instantstart.context import AppContext
from instantstart.errors import DependencyFailed
from instantstart.kube.helm import Connection, Helm, list_entry
from instantstart.kube.helm_binary import resolve_helm
from instantstart.operations.waiting import blocking
from instantstart.services.dependencies.catalog import Dependency
from instantstart.services.dependencies.readiness import wait_ready
from instantstart.services.dependencies.results import DepResult, Progress, Target

HELM_TIMEOUT = 10 * 60


class HelmSteps:
    """The helm half of a reconcile on one cluster."""

    def __init__(self, app: AppContext, target: Target, progress: Progress) -> None:
        self.app = app
        self.target = target
        self.progress = progress

    async def helm(self) -> Helm:
        """A helm runner on this cluster with a fresh token (the same source as the Kubernetes client)."""
        endpoint, token, ca_path = await blocking(
            self.app.kube.connection, self.target.eks_cluster_name, self.target.region
        )
        settings = self.app.settings
        binary = await blocking(resolve_helm, settings.helm_path, settings.data_dir)
        return Helm(binary, settings.data_dir / "helm", Connection(endpoint, token, ca_path))

    async def ensure(self, dep: Dependency, result: DepResult) -> None:
        """upgrade --install the release unless it is deployed with the same chart and values; wait ready."""
        assert dep.chart and dep.release
        repo = self.app.settings.helm_repository_url or dep.repository
        if not repo:
            raise DependencyFailed(
                f"No chart repository is configured for {dep.chart}.",
                hint="Set INSTANTSTART_HELM_REPOSITORY_URL to a repository serving the chart (serve --twin sets it).",
            )
        result.desired["repository"] = repo
        helm = await self.helm()
        current = await self._recovered(helm, dep)
        wanted_chart = f"{dep.chart}-{dep.version}"
        same = False
        if current is not None and current.get("status") == "deployed" and current.get("chart") == wanted_chart:
            values = await blocking(helm.user_values, dep.release, dep.namespace)
            same = values == dict(dep.values)
        if same:
            result.action = "unchanged"
        else:
            await self.progress(f"{dep.name}: helm upgrade --install {dep.release} {wanted_chart}")
            installed = await blocking(
                helm.upgrade_install,
                release=dep.release,
                chart=dep.chart,
                namespace=dep.namespace,
                version=dep.version,
                repo=repo,
                values=dict(dep.values),
                timeout_seconds=HELM_TIMEOUT,
                wait=False,
            )
            result.action = "installed" if current is None else "upgraded"
            # The release helm just printed (one helm run less on the dependencies stage's critical path).
            current = list_entry(installed) or await blocking(helm.release, dep.release, dep.namespace)
        if current is None or current.get("status") != "deployed":
            raise DependencyFailed(
                f"helm release {dep.release} is {current.get('status') if current else 'missing'}.",
                hint="Run cluster_configure_dependencies again; if it persists, uninstall the release.",
            )
        result.actual.update(
            {"chart": current.get("chart"), "revision": int(current.get("revision") or 0), "status": "deployed"}
        )
        result.status, result.message = "ACTIVE", f"release {dep.release} ({current.get('chart')}) deployed"
        await wait_ready(self.app, self.target, dep, result)

    async def _recovered(self, helm: Helm, dep: Dependency) -> dict[str, Any] | None:
        """The release, after undoing a helm run interrupted mid-way (None when there is none)."""
        assert dep.release is not None
        current = await blocking(helm.release, dep.release, dep.namespace)
        status = (current or {}).get("status", "")
        if status == "pending-install":
            # A helm run interrupted before its first install finished (e.g. the server was killed): start over.
            await self.progress(f"{dep.name}: release {dep.release} stuck in pending-install; reinstalling")
            await blocking(helm.uninstall, dep.release, dep.namespace)
            return None
        if status in ("pending-upgrade", "pending-rollback"):
            await self.progress(f"{dep.name}: release {dep.release} stuck in {status}; rolling back")
            await blocking(helm.rollback, dep.release, dep.namespace)
            return await blocking(helm.release, dep.release, dep.namespace)
        return current

    async def installed(self, dep: Dependency) -> bool:
        """Whether the release exists."""
        assert dep.release is not None
        helm = await self.helm()
        return await blocking(helm.release, dep.release, dep.namespace) is not None

    async def remove(self, dep: Dependency) -> None:
        """helm uninstall the release."""
        assert dep.release is not None
        helm = await self.helm()
        await blocking(helm.uninstall, dep.release, dep.namespace)
