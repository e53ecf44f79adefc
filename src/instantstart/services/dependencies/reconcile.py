"""Reconciling catalog dependencies on a cluster in dependency order: add-ons, manifests and helm releases."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from instantstart.context import AppContext
from instantstart.errors import DependencyFailed
from instantstart.kube.helm import Helm
from instantstart.operations.waiting import blocking
from instantstart.services.dependencies import manifests as dependency_manifests
from instantstart.services.dependencies.addons import AddonSteps, desired_config, parse_config, version_key
from instantstart.services.dependencies.catalog import Dependency, DependencyCatalog, load_catalog
from instantstart.services.dependencies.helm_steps import HelmSteps
from instantstart.services.dependencies.readiness import workload_states
from instantstart.services.dependencies.results import (
    DepResult,
    Progress,
    Target,
    failure_of,
)

__all__ = [
    "DepResult",
    "Reconciler",
    "Target",
    "desired_config",
    "parse_config",
    "version_key",
    "workload_states",
]


class Reconciler:
    """Installs or adopts catalog dependencies on one cluster, in dependency order, each checked for readiness.

    Reusable by any operation stage (cluster creation, feature toggles): give it the names to
    reconcile; what they depend on comes along. Re-running with nothing changed makes no mutating call.
    """

    def __init__(
        self,
        app: AppContext,
        target: Target,
        progress: Progress,
        catalog: DependencyCatalog | None = None,
        values: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.app = app
        self.target = target
        self.progress = progress
        self.catalog = catalog or load_catalog()
        self.addons = AddonSteps(app, target, progress, values)
        self.helm_steps = HelmSteps(app, target, progress)

    async def reconcile(self, names: list[str] | tuple[str, ...]) -> list[DepResult]:
        """Reconcile `names` (and what they depend on); every dependency reported, failures included.

        Independent entries run concurrently (EKS creates add-ons in parallel, so their waits overlap); an
        entry starts once everything it depends on has settled. Helm releases run one at a time (they share
        the helm cache directory). Results come back in dependency order."""
        ordered = self.catalog.order(names)
        results: dict[str, DepResult] = {}
        tasks: dict[str, asyncio.Task[DepResult]] = {}
        helm_lock = asyncio.Lock()

        async def run(dep: Dependency) -> DepResult:
            if dep.depends_on and dep.source == "addon":
                self.addons.prepare(dep)  # its version and identity while its prerequisites settle
            for parent in dep.depends_on:
                await asyncio.shield(tasks[parent])
            if dep.source == "helm":
                async with helm_lock:
                    return await self._reconcile_one(dep, results)
            return await self._reconcile_one(dep, results)

        try:
            for dep in ordered:
                tasks[dep.name] = asyncio.ensure_future(run(dep))
            await asyncio.gather(*tasks.values())
        finally:
            for task in tasks.values():
                task.cancel()
            self.addons.cancel_prepared()
        return [results[dep.name] for dep in ordered]

    async def _reconcile_one(self, dep: Dependency, results: dict[str, DepResult]) -> DepResult:
        """One entry, its prerequisites settled (recorded in `results`): BLOCKED when one is not ready."""
        blocked = [p for p in dep.depends_on if results[p].status not in ("ACTIVE", "DEGRADED")]
        result = DepResult(name=dep.name, source=dep.source, desired=self._desired(dep))
        if blocked:
            result.status, result.action = "BLOCKED", "skipped"
            result.message = f"not reconciled: it depends on {', '.join(blocked)}, which did not become ready"
            result.hint = f"Fix {', '.join(blocked)} first; this one follows on the next run."
        else:
            await self.progress(f"{dep.name}: reconciling ({dep.source})")
            try:
                if dep.source == "addon":
                    await self.addons.ensure(dep, result)
                elif dep.source == "manifests":
                    await self._manifests(dep, result)
                else:
                    await self.helm_steps.ensure(dep, result)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = failure_of(exc)
                result.status, result.message, result.hint = "FAILED", failure.message, failure.hint
                if failure.retryable:
                    result.action = "retryable"
            await self.progress(f"{dep.name}: {result.status} ({result.action}) {result.message}".rstrip())
        result.updated_at = datetime.now(UTC).isoformat()
        results[dep.name] = result
        return result

    async def remove(self, names: list[str] | tuple[str, ...]) -> list[DepResult]:
        """Uninstall `names` (add-on: DeleteAddon, waited until gone; helm: uninstall), dependents first.

        An entry that an installed dependency outside `names` still needs is not removed (FAILED with a
        hint). What is already gone is success. Roles and Pod Identity associations stay (the ledger
        deletes them with the cluster)."""
        wanted = set(names)
        ordered = [d for d in reversed(self.catalog.order(names)) if d.name in wanted]
        installed = {d.name for d in self.catalog.dependencies if await self.installed(d)}
        results = []
        for dep in ordered:
            result = DepResult(name=dep.name, source=dep.source, desired={"installed": False})
            needed_by = [
                d.name
                for d in self.catalog.dependencies
                if dep.name in d.depends_on and d.name in installed and d.name not in wanted
            ]
            try:
                if needed_by:
                    raise DependencyFailed(
                        f"{dep.name} is still needed by {', '.join(needed_by)}.",
                        hint=f"Disable {', '.join(needed_by)} first, or together with {dep.name}.",
                    )
                await self.progress(f"{dep.name}: removing ({dep.source})")
                result.action = await self._remove_one(dep, present=dep.name in installed)
                result.status, result.message = "NOT_INSTALLED", f"{dep.name} is not installed"
                installed.discard(dep.name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = failure_of(exc)
                result.status, result.message, result.hint = "FAILED", failure.message, failure.hint
            result.updated_at = datetime.now(UTC).isoformat()
            results.append(result)
        return results

    async def _remove_one(self, dep: Dependency, *, present: bool) -> str:
        if not present:
            return "absent"
        if dep.source == "manifests":
            assert dep.manifests is not None
            await blocking(dependency_manifests.remove, self.kube_api(), dep.manifests)
        elif dep.source == "addon":
            assert dep.addon is not None
            await self.addons.remove(dep.addon)
        else:
            await self.helm_steps.remove(dep)
        return "removed"

    async def installed(self, dep: Dependency) -> bool:
        """Whether the cluster has the dependency at all (add-on present, or helm release present)."""
        if dep.source == "addon":
            assert dep.addon is not None
            return await blocking(self.describe_addon, dep.addon) is not None
        if dep.source == "manifests":
            assert dep.manifests is not None
            present, _ = await blocking(dependency_manifests.present, self.kube_api(), dep.manifests)
            return present > 0
        return await self.helm_steps.installed(dep)

    def kube_api(self) -> Any:
        """The cluster's Kubernetes API client (blocking to build; cached by KubeClients)."""
        return self.app.kube.api_client(self.target.eks_cluster_name, self.target.region)

    def describe_addon(self, name: str) -> dict[str, Any] | None:
        """The add-on, or None when it is not installed (blocking)."""
        return self.addons.describe(name)

    async def helm(self) -> Helm:
        """A helm runner on this cluster with a fresh token."""
        return await self.helm_steps.helm()

    async def _manifests(self, dep: Dependency, result: DepResult) -> None:
        assert dep.manifests is not None
        api = await blocking(self.kube_api)
        action, actual = await blocking(dependency_manifests.ensure, api, dep.manifests)
        result.action, result.actual = action, actual
        result.status, result.message = "ACTIVE", f"{actual['objects']} objects applied"

    def _desired(self, dep: Dependency) -> dict[str, Any]:
        if dep.source == "manifests":
            objects = dependency_manifests.load_documents(dep.manifests or "")
            return {"manifests": dep.manifests, "objects": len(objects)}
        if dep.source == "addon":
            return {"addon": dep.addon, "version": dep.version or "default", "values": self.addons.values_of(dep)}
        return {
            "chart": dep.chart,
            "release": dep.release,
            "namespace": dep.namespace,
            "version": dep.version,
            "values": dep.values,
        }
