"""Reconciling catalog dependencies on a cluster: EKS add-ons, helm releases, Pod Identity roles, readiness."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from instantstart.aws import eks as eks_api
from instantstart.aws.errors import error_code, translate
from instantstart.context import AppContext
from instantstart.errors import InstantStartError
from instantstart.kube.helm import Connection, Helm, HelmError
from instantstart.services.cluster.dependencies import manifests as dependency_manifests
from instantstart.services.cluster.dependencies.catalog import Dependency, DependencyCatalog, WorkloadRef, load_catalog
from instantstart.services.cluster.dependencies.identity import (
    Owner,
    ensure_pod_identity_association,
    ensure_pod_identity_role,
    project_bucket_policy,
)
from instantstart.services.core.ledger import record, tag_map
from instantstart.services.core.stages import blocking, next_poll

ADDON_TIMEOUT = 20 * 60
READY_TIMEOUT = 10 * 60
HELM_TIMEOUT = 10 * 60
ADDON_FAILED = ("CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED")
ADDON_BUSY = ("CREATING", "UPDATING", "DELETING")

Progress = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Target:
    """The cluster a reconcile acts on."""

    tag: str
    region: str
    eks_cluster_name: str
    bucket: str | None
    operation_id: str | None


@dataclass
class DepResult:
    """What one dependency ended as: desired vs actual, status, what was done, and a hint on failure."""

    name: str
    source: str
    desired: dict[str, Any]
    actual: dict[str, Any] = field(default_factory=dict)
    status: str = "PENDING"
    action: str = "none"
    message: str = ""
    hint: str | None = None
    updated_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form persisted in the cluster row (details.dependencies) and shown by the status tool."""
        return {
            "name": self.name,
            "source": self.source,
            "desired": self.desired,
            "actual": self.actual,
            "status": self.status,
            "action": self.action,
            "message": self.message,
            "hint": self.hint,
            "updatedAt": self.updated_at or datetime.now(UTC).isoformat(),
        }


class DependencyFailed(Exception):
    """One dependency cannot be reconciled; carries the message and the hint shown for it."""

    def __init__(self, message: str, hint: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.retryable = retryable


def desired_config(values: dict[str, Any]) -> str | None:
    """An add-on's configurationValues as sent: canonical JSON, or None when there are none."""
    return json.dumps(values, sort_keys=True) if values else None


def parse_config(text: str | None) -> dict[str, Any]:
    """An add-on's configurationValues (JSON or YAML) as a dict ({} when empty)."""
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = yaml.safe_load(text)
    return parsed if isinstance(parsed, dict) else {}


def _failure_of(exc: BaseException) -> DependencyFailed:
    if isinstance(exc, DependencyFailed):
        return exc
    if isinstance(exc, HelmError):
        return DependencyFailed(exc.message, exc.hint if exc.hint != exc.default_hint else _helm_hint(exc.stderr))
    if isinstance(exc, InstantStartError):
        return DependencyFailed(exc.message, exc.hint, retryable=exc.retryable)
    if isinstance(exc, ApiException):
        return DependencyFailed(
            f"Kubernetes API: {exc.status} {exc.reason}", "Check the cluster's API server.", retryable=True
        )
    error = translate(exc if isinstance(exc, Exception) else Exception(str(exc)), "reconcile")
    return DependencyFailed(error.message, error.hint, retryable=error.retryable)


def _helm_hint(stderr: str) -> str:
    text = stderr.lower()
    if "repo" in text or "index.yaml" in text or "no such host" in text or "connection refused" in text:
        return (
            "The chart repository could not be read: check INSTANTSTART_HELM_REPOSITORY_URL (or the catalog's "
            "repository) and that the control plane can reach it, then run cluster_configure_dependencies again."
        )
    if "another operation" in text:
        return "A previous helm operation is stuck: `helm rollback` or uninstall the release, then run again."
    return "Read the helm message in the details, fix the cause, then run cluster_configure_dependencies again."


class Reconciler:
    """Installs or adopts catalog dependencies on one cluster, in dependency order, each checked for readiness.

    Reusable by any operation stage (cluster creation, feature toggles): give it the names to
    reconcile; what they depend on comes along. Re-running with nothing changed makes no mutating call.
    """

    def __init__(
        self, app: AppContext, target: Target, progress: Progress, catalog: DependencyCatalog | None = None
    ) -> None:
        self.app = app
        self.target = target
        self.progress = progress
        self.catalog = catalog or load_catalog()
        self.eks = app.aws.eks(target.region)
        self._k8s_version: str | None = None

    # -- the loop --------------------------------------------------------------------------------
    async def reconcile(self, names: list[str] | tuple[str, ...]) -> list[DepResult]:
        """Reconcile `names` (and what they depend on); every dependency reported, failures included."""
        results: dict[str, DepResult] = {}
        for dep in self.catalog.order(names):
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
                        await self._addon(dep, result)
                    elif dep.source == "manifests":
                        await self._manifests(dep, result)
                    else:
                        await self._helm(dep, result)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    failure = _failure_of(exc)
                    result.status, result.message, result.hint = "FAILED", failure.message, failure.hint
                    if failure.retryable:
                        result.action = "retryable"
                await self.progress(f"{dep.name}: {result.status} ({result.action}) {result.message}".rstrip())
            result.updated_at = datetime.now(UTC).isoformat()
            results[dep.name] = result
        return list(results.values())

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
                        f"Disable {', '.join(needed_by)} first, or together with {dep.name}.",
                    )
                await self.progress(f"{dep.name}: removing ({dep.source})")
                if dep.name not in installed:
                    result.action = "absent"
                elif dep.source == "manifests":
                    assert dep.manifests is not None
                    await blocking(dependency_manifests.remove, self.kube_api(), dep.manifests)
                    result.action = "removed"
                elif dep.source == "addon":
                    assert dep.addon is not None
                    try:
                        await blocking(
                            self.eks.delete_addon, clusterName=self.target.eks_cluster_name, addonName=dep.addon
                        )
                    except Exception as exc:
                        if error_code(exc) != "ResourceNotFoundException":
                            raise translate(exc, f"delete add-on {dep.addon}") from exc
                    await self._wait_addon(dep.addon, gone=True)
                    result.action = "removed"
                else:
                    assert dep.release is not None
                    helm = await self.helm()
                    await blocking(helm.uninstall, dep.release, dep.namespace)
                    result.action = "removed"
                result.status, result.message = "NOT_INSTALLED", f"{dep.name} is not installed"
                installed.discard(dep.name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failure = _failure_of(exc)
                result.status, result.message, result.hint = "FAILED", failure.message, failure.hint
            result.updated_at = datetime.now(UTC).isoformat()
            results.append(result)
        return results

    async def installed(self, dep: Dependency) -> bool:
        """Whether the cluster has the dependency at all (add-on present, or helm release present)."""
        if dep.source == "addon":
            assert dep.addon is not None
            return await blocking(self.describe_addon, dep.addon) is not None
        if dep.source == "manifests":
            assert dep.manifests is not None
            present, _ = await blocking(dependency_manifests.present, self.kube_api(), dep.manifests)
            return present > 0
        assert dep.release is not None
        helm = await self.helm()
        return await blocking(helm.release, dep.release, dep.namespace) is not None

    def kube_api(self) -> Any:
        """The cluster's Kubernetes API client (blocking to build; cached by KubeClients)."""
        return self.app.kube.api_client(self.target.eks_cluster_name, self.target.region)

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
            return {"addon": dep.addon, "version": dep.version or "default", "values": dep.values}
        return {
            "chart": dep.chart,
            "release": dep.release,
            "namespace": dep.namespace,
            "version": dep.version,
            "values": dep.values,
        }

    # -- EKS add-ons -----------------------------------------------------------------------------
    async def kubernetes_version(self) -> str:
        """The cluster's Kubernetes version (DescribeCluster, once per reconcile)."""
        if self._k8s_version is None:
            cluster = await blocking(self.eks.describe_cluster, name=self.target.eks_cluster_name)
            self._k8s_version = str(cluster["cluster"]["version"])
        return self._k8s_version

    async def addon_version(self, dep: Dependency) -> str:
        """The catalog's pinned version, else the default version for the cluster's Kubernetes version."""
        if dep.version:
            return dep.version
        k8s_version = await self.kubernetes_version()
        found = await blocking(self.eks.describe_addon_versions, addonName=dep.addon, kubernetesVersion=k8s_version)
        versions = [v for a in found.get("addons", []) for v in a.get("addonVersions", [])]
        for item in versions:
            for compat in item.get("compatibilities", []):
                if compat.get("defaultVersion") and compat.get("clusterVersion") in (k8s_version, None):
                    return str(item["addonVersion"])
        if versions:
            return str(versions[0]["addonVersion"])
        raise DependencyFailed(
            f"EKS offers no version of the add-on {dep.addon} for Kubernetes {k8s_version}.",
            "Pin a version in the dependency catalog or upgrade the cluster's Kubernetes version.",
        )

    def describe_addon(self, name: str) -> dict[str, Any] | None:
        """The add-on, or None when it is not installed (blocking)."""
        return eks_api.describe_addon(self.app.aws, self.target.region, self.target.eks_cluster_name, name)

    async def _addon(self, dep: Dependency, result: DepResult) -> None:
        assert dep.addon is not None
        version = await self.addon_version(dep)
        result.desired["version"] = version
        role_arn = await self._pod_identity(dep) if dep.pod_identity else None
        config = desired_config(dep.values)
        current = await blocking(self.describe_addon, dep.addon)
        if current is not None and current.get("status") == "DELETING":
            await self._wait_addon(dep.addon, gone=True)
            current = None
        elif current is not None and current.get("status") in ADDON_BUSY:
            # Someone (or an interrupted run of ours) is creating or updating it: let that settle, then compare.
            await self.progress(f"{dep.name}: add-on is {current.get('status')}; waiting before comparing")
            current = await self._wait_addon(dep.addon)
        if current is not None and current.get("status") in ("CREATE_FAILED", "DELETE_FAILED"):
            raise self._addon_failure(dep.addon, current)
        if current is None:
            kwargs: dict[str, Any] = {
                "clusterName": self.target.eks_cluster_name,
                "addonName": dep.addon,
                "addonVersion": version,
                "resolveConflicts": "OVERWRITE",
                "tags": tag_map(self.target.tag, self.target.operation_id or "adopted"),
            }
            if config:
                kwargs["configurationValues"] = config
            # Ledgered before the call: a crash right after CreateAddon must not leave an add-on nobody owns
            # (deleting one that never came to exist is success).
            await blocking(
                record,
                self.app.db,
                cluster_tag=self.target.tag,
                operation_id=self.target.operation_id,
                resource_type="eks:addon",
                resource_id=f"{self.target.eks_cluster_name}/{dep.addon}",
                region=self.target.region,
                details={"clusterName": self.target.eks_cluster_name, "addonName": dep.addon},
            )
            try:
                await blocking(self.eks.create_addon, **kwargs)
            except Exception as exc:
                if error_code(exc) != "ResourceInUseException":
                    raise translate(exc, f"create add-on {dep.addon}") from exc
            result.action = "created"
        else:
            differs = current.get("addonVersion") != version or parse_config(
                current.get("configurationValues")
            ) != dict(dep.values)
            if differs:
                kwargs = {
                    "clusterName": self.target.eks_cluster_name,
                    "addonName": dep.addon,
                    "addonVersion": version,
                    "resolveConflicts": "OVERWRITE",
                    "configurationValues": config or "{}",  # an empty object clears earlier values
                }
                try:
                    update = await blocking(self.eks.update_addon, **kwargs)
                except Exception as exc:
                    raise translate(exc, f"update add-on {dep.addon}") from exc
                result.action = "updated"
                result.actual["updateId"] = update.get("update", {}).get("id")
            else:
                result.action = "unchanged"
        addon = await self._wait_addon(dep.addon)
        assert addon is not None
        result.actual.update(
            {"version": addon.get("addonVersion"), "status": addon.get("status"), "arn": addon.get("addonArn")}
        )
        if role_arn:
            result.actual["podIdentityRoleArn"] = role_arn
        issues = [i.get("message") or i.get("code") for i in (addon.get("health") or {}).get("issues") or []]
        if addon.get("status") == "DEGRADED":
            result.status = "DEGRADED"
            result.message = f"installed, degraded: {'; '.join(map(str, issues)) or 'pods not ready'}"
            result.hint = "Expected until nodes join the cluster; otherwise check the add-on's pods."
        else:
            result.status, result.message = "ACTIVE", f"add-on {dep.addon} {addon.get('addonVersion')} ACTIVE"
        await self._ready(dep, result)

    def _addon_failure(self, name: str, addon: dict[str, Any]) -> DependencyFailed:
        issues = [f"{i.get('code')}: {i.get('message')}" for i in (addon.get("health") or {}).get("issues") or []] or [
            "no health issues reported"
        ]
        return DependencyFailed(
            f"add-on {name} is {addon.get('status')}: {'; '.join(issues)}",
            f"Delete the add-on (DeleteAddon {name}) after fixing the cause, then run cluster_configure_dependencies"
            " again; it will be created anew.",
        )

    async def _wait_addon(self, name: str, gone: bool = False) -> dict[str, Any] | None:
        deadline = time.monotonic() + ADDON_TIMEOUT
        while True:
            addon = await blocking(self.describe_addon, name)
            if gone:
                if addon is None:
                    return None
            elif addon is None:
                raise DependencyFailed(
                    f"add-on {name} disappeared while being installed.", "Run cluster_configure_dependencies again."
                )
            elif addon.get("status") in ADDON_FAILED:
                raise self._addon_failure(name, addon)
            elif addon.get("status") not in ADDON_BUSY:
                return addon
            if time.monotonic() > deadline:
                raise DependencyFailed(
                    f"add-on {name} stayed {addon.get('status') if addon else 'DELETING'} for {ADDON_TIMEOUT}s.",
                    "Check the add-on in the EKS console, then run cluster_configure_dependencies again.",
                    retryable=True,
                )
            waited = time.monotonic() - (deadline - ADDON_TIMEOUT)
            await asyncio.sleep(next_poll(waited, self.app.settings.poll_seconds))

    # -- Pod Identity ----------------------------------------------------------------------------
    async def _pod_identity(self, dep: Dependency) -> str:
        spec = dep.pod_identity
        assert spec is not None
        if not self.target.bucket:
            raise DependencyFailed(
                f"{dep.name} needs the project bucket, which the cluster's EKS stage did not record.",
                "Run the EKS stage again (operation_retry) so it records the bucket.",
            )
        owner = Owner(self.app.db, self.target.tag, self.target.operation_id, self.target.region)
        role_name = f"instantstart-{self.target.tag}-{spec.role}"
        iam = self.app.aws.iam(self.target.region)
        policy = project_bucket_policy(self.target.bucket)
        role_arn = await blocking(ensure_pod_identity_role, iam, owner, role_name, policy)
        await blocking(
            ensure_pod_identity_association,
            self.eks,
            owner,
            cluster=self.target.eks_cluster_name,
            namespace=spec.namespace,
            service_account=spec.service_account,
            role_arn=role_arn,
        )
        return role_arn

    # -- helm ------------------------------------------------------------------------------------
    async def helm(self) -> Helm:
        """A helm runner on this cluster with a fresh token (the same source as the Kubernetes client)."""
        endpoint, token, ca_path = await blocking(
            self.app.kube.connection, self.target.eks_cluster_name, self.target.region
        )
        settings = self.app.settings
        return Helm(settings.helm_path, settings.data_dir / "helm", Connection(endpoint, token, ca_path))

    async def _helm(self, dep: Dependency, result: DepResult) -> None:
        assert dep.chart and dep.release
        repo = self.app.settings.helm_repository_url or dep.repository
        if not repo:
            raise DependencyFailed(
                f"No chart repository is configured for {dep.chart}.",
                "Set INSTANTSTART_HELM_REPOSITORY_URL to a repository serving the chart (serve --twin sets it).",
            )
        result.desired["repository"] = repo
        helm = await self.helm()
        current = await blocking(helm.release, dep.release, dep.namespace)
        status = (current or {}).get("status", "")
        if status == "pending-install":
            # A helm run interrupted before its first install finished (e.g. the server was killed): start over.
            await self.progress(f"{dep.name}: release {dep.release} stuck in pending-install; reinstalling")
            await blocking(helm.uninstall, dep.release, dep.namespace)
            current = None
        elif status in ("pending-upgrade", "pending-rollback"):
            await self.progress(f"{dep.name}: release {dep.release} stuck in {status}; rolling back")
            await blocking(helm.rollback, dep.release, dep.namespace)
            current = await blocking(helm.release, dep.release, dep.namespace)
        wanted_chart = f"{dep.chart}-{dep.version}"
        same = False
        if current is not None and current.get("status") == "deployed" and current.get("chart") == wanted_chart:
            values = await blocking(helm.user_values, dep.release, dep.namespace)
            same = values == dict(dep.values)
        if same:
            result.action = "unchanged"
        else:
            await self.progress(f"{dep.name}: helm upgrade --install {dep.release} {wanted_chart}")
            await blocking(
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
        current = await blocking(helm.release, dep.release, dep.namespace)
        if current is None or current.get("status") != "deployed":
            raise DependencyFailed(
                f"helm release {dep.release} is {current.get('status') if current else 'missing'}.",
                "Run cluster_configure_dependencies again; if it persists, uninstall the release.",
            )
        result.actual.update(
            {"chart": current.get("chart"), "revision": int(current.get("revision") or 0), "status": "deployed"}
        )
        result.status, result.message = "ACTIVE", f"release {dep.release} ({current.get('chart')}) deployed"
        await self._ready(dep, result)

    # -- readiness -------------------------------------------------------------------------------
    async def _ready(self, dep: Dependency, result: DepResult) -> None:
        refs = [("DaemonSet", r) for r in dep.readiness.daemon_sets] + [
            ("Deployment", r) for r in dep.readiness.deployments
        ]
        if not refs:
            return
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            states = await blocking(workload_states, self.app, self.target, refs)
            waiting = [s for s in states if not s["ready"]]
            result.actual["workloads"] = states
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise DependencyFailed(
                    f"{dep.name}: not ready: "
                    + "; ".join(f"{s['kind']} {s['namespace']}/{s['name']}: {s['message']}" for s in waiting),
                    "Check the workloads' pods (events, image pulls), then run cluster_configure_dependencies again.",
                    retryable=True,
                )
            waited = time.monotonic() - (deadline - READY_TIMEOUT)
            await asyncio.sleep(next_poll(waited, self.app.settings.poll_seconds))


def workload_states(app: AppContext, target: Target, refs: list[tuple[str, WorkloadRef]]) -> list[dict[str, Any]]:
    """Readiness of DaemonSets and Deployments through the Kubernetes API (blocking)."""
    apps = k8s.AppsV1Api(app.kube.api_client(target.eks_cluster_name, target.region))
    out = []
    for kind, ref in refs:
        state: dict[str, Any] = {"kind": kind, "namespace": ref.namespace, "name": ref.name}
        try:
            if kind == "DaemonSet":
                ds = apps.read_namespaced_daemon_set(ref.name, ref.namespace)
                desired = ds.status.desired_number_scheduled if ds.status else None
                ready = (ds.status.number_ready or 0) if ds.status else 0
            else:
                dep = apps.read_namespaced_deployment(ref.name, ref.namespace)
                desired = dep.spec.replicas if dep.spec.replicas is not None else 1
                ready = (dep.status.ready_replicas or 0) if dep.status else 0
                if dep.status is None or dep.status.observed_generation is None:
                    desired = None
        except ApiException as exc:
            if exc.status != 404:
                raise
            state.update(exists=False, ready=False, desired=None, readyCount=0, message="not found")
            out.append(state)
            continue
        done = desired is not None and ready >= desired
        message = "status not reported yet" if desired is None else f"{ready}/{desired} ready"
        if done and desired == 0:
            message = "0/0 ready (no matching nodes yet)"
        state.update(exists=True, ready=done, desired=desired, readyCount=ready, message=message)
        out.append(state)
    return out
