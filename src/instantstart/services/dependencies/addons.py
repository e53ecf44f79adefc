"""Reconciling EKS add-on dependencies: version, configuration values, Pod Identity role, waited for ACTIVE."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from typing import Any

import yaml

from instantstart.aws import eks as eks_api
from instantstart.aws import identity
from instantstart.context import AppContext
from instantstart.errors import DependencyFailed, NotFound
from instantstart.manifests import iam_policies as pol
from instantstart.operations.waiting import blocking, next_poll
from instantstart.services.base.facts import facts_of
from instantstart.services.base.registry import get_cluster
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import record, tag_map
from instantstart.services.dependencies.catalog import Dependency
from instantstart.services.dependencies.identity import (
    Owner,
    ensure_pod_identity_association,
    ensure_pod_identity_role,
)
from instantstart.services.dependencies.readiness import wait_ready
from instantstart.services.dependencies.results import DepResult, Progress, Target

ADDON_TIMEOUT = 20 * 60
ADDON_FAILED = ("CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED")
ADDON_BUSY = ("CREATING", "UPDATING", "DELETING")


def version_key(version: str) -> tuple[int, ...]:
    """A comparable key of an add-on version such as v1.14.1-eksbuild.2 (numbers only, in order)."""
    return tuple(int(n) for n in re.findall(r"[0-9]+", version))


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


class AddonSteps:
    """The add-on half of a reconcile on one cluster: create, update or adopt, remove, wait."""

    def __init__(
        self, app: AppContext, target: Target, progress: Progress, values: dict[str, dict[str, Any]] | None = None
    ) -> None:
        self.app = app
        self.target = target
        self.progress = progress
        self.overrides = values or {}
        self._k8s_version: str | None = None
        self._k8s_lock = asyncio.Lock()  # add-ons reconcile concurrently: one DescribeCluster between them
        self._prepared: dict[str, asyncio.Task[tuple[str, str | None]]] = {}

    def values_of(self, dep: Dependency) -> dict[str, Any]:
        """The dependency's values: the catalog's, with this reconcile's overrides (a feature's computed
        configuration, e.g. the inference operator's role ARN) on top."""
        return {**dep.values, **self.overrides.get(dep.name, {})}

    async def kubernetes_version(self) -> str:
        """The cluster's Kubernetes version (DescribeCluster, once per reconcile)."""
        async with self._k8s_lock:
            if self._k8s_version is None:
                name = self.target.eks_cluster_name
                cluster = await blocking(eks_api.describe_cluster, self.app.aws, self.target.region, name)
                if cluster is None:
                    raise DependencyFailed(f"EKS cluster {name} does not exist.", hint="Run the EKS stage first.")
                self._k8s_version = str(cluster["version"])
            return self._k8s_version

    async def version(self, dep: Dependency) -> str:
        """The catalog's pinned version, else the default version for the cluster's Kubernetes version."""
        if dep.version:
            return dep.version
        assert dep.addon is not None
        k8s_version = await self.kubernetes_version()
        versions = await blocking(eks_api.addon_versions, self.app.aws, self.target.region, dep.addon, k8s_version)
        chosen = None
        for item in versions:
            for compat in item.get("compatibilities", []):
                if compat.get("defaultVersion") and compat.get("clusterVersion") in (k8s_version, None):
                    chosen = chosen or str(item["addonVersion"])
        if chosen is None and versions:
            chosen = str(versions[0]["addonVersion"])
        if chosen is not None and dep.min_version and version_key(chosen) < version_key(dep.min_version):
            # The default is older than a feature needs: the newest offered version at or above the minimum.
            offered = sorted((str(v["addonVersion"]) for v in versions), key=version_key, reverse=True)
            chosen = next((v for v in offered if version_key(v) >= version_key(dep.min_version)), None)
            if chosen is None:
                raise DependencyFailed(
                    f"EKS offers no version of the add-on {dep.addon} at or above {dep.min_version} for "
                    f"Kubernetes {k8s_version}.",
                    hint="Upgrade the cluster's Kubernetes version, then run the request again.",
                )
        if chosen is not None:
            return chosen
        raise DependencyFailed(
            f"EKS offers no version of the add-on {dep.addon} for Kubernetes {k8s_version}.",
            hint="Pin a version in the dependency catalog or upgrade the cluster's Kubernetes version.",
        )

    def prepare(self, dep: Dependency) -> None:
        """Start what the add-on needs before CreateAddon and what does not depend on the add-ons it waits for:
        its version, and its Pod Identity role and association (EKS accepts an association before the agent
        runs). `ensure` then uses the result instead of doing it after its prerequisites settle."""
        if dep.addon is not None and dep.name not in self._prepared:
            self._prepared[dep.name] = asyncio.ensure_future(self._version_and_role(dep))

    def cancel_prepared(self) -> None:
        """Stop preparations nobody used (a prerequisite failed); a finished one's error is consumed."""
        for task in self._prepared.values():
            if not task.done():
                task.cancel()
            elif not task.cancelled():
                task.exception()
        self._prepared.clear()

    async def _version_and_role(self, dep: Dependency) -> tuple[str, str | None]:
        version = await self.version(dep)
        return version, (await self._pod_identity(dep) if dep.pod_identity else None)

    def describe(self, name: str) -> dict[str, Any] | None:
        """The add-on, or None when it is not installed (blocking)."""
        return eks_api.describe_addon(self.app.aws, self.target.region, self.target.eks_cluster_name, name)

    async def ensure(self, dep: Dependency, result: DepResult) -> None:
        """Create, update or keep the add-on, wait until it settles, then until its workloads are ready."""
        assert dep.addon is not None
        prepared = self._prepared.pop(dep.name, None)
        version, role_arn = await (prepared if prepared is not None else self._version_and_role(dep))
        result.desired["version"] = version
        current = await self._settled_current(dep)
        if current is None:
            await self._create(dep, version)
            result.action = "created"
        elif current.get("addonVersion") != version or parse_config(
            current.get("configurationValues")
        ) != self.values_of(dep):
            request = {
                "clusterName": self.target.eks_cluster_name,
                "addonName": dep.addon,
                "addonVersion": version,
                "resolveConflicts": "OVERWRITE",
                # An empty object clears values set earlier.
                "configurationValues": desired_config(self.values_of(dep)) or "{}",
            }
            update_id = await blocking(eks_api.update_addon, self.app.aws, self.target.region, request)
            result.action, result.actual["updateId"] = "updated", update_id
        else:
            result.action = "unchanged"
        addon = await self.wait(dep.addon)
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
        await wait_ready(self.app, self.target, dep, result)

    async def _settled_current(self, dep: Dependency) -> dict[str, Any] | None:
        """The add-on as it stands once nothing is in flight (None when absent or being deleted)."""
        assert dep.addon is not None
        current = await blocking(self.describe, dep.addon)
        if current is not None and current.get("status") == "DELETING":
            await self.wait(dep.addon, gone=True)
            return None
        if current is not None and current.get("status") in ADDON_BUSY:
            # Someone (or an interrupted run of ours) is creating or updating it: let that settle, then compare.
            await self.progress(f"{dep.name}: add-on is {current.get('status')}; waiting before comparing")
            current = await self.wait(dep.addon)
        if current is not None and current.get("status") in ("CREATE_FAILED", "DELETE_FAILED"):
            raise self._failure(dep.addon, current)
        return current

    async def _create(self, dep: Dependency, version: str) -> None:
        assert dep.addon is not None
        request: dict[str, Any] = {
            "clusterName": self.target.eks_cluster_name,
            "addonName": dep.addon,
            "addonVersion": version,
            "resolveConflicts": "OVERWRITE",
            "tags": tag_map(self.target.tag, self.target.operation_id or "adopted", installation_id(self.app.db)),
        }
        config = desired_config(self.values_of(dep))
        if config:
            request["configurationValues"] = config
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
        await blocking(eks_api.create_addon, self.app.aws, self.target.region, request)

    async def remove(self, name: str) -> None:
        """DeleteAddon (already gone is fine), waited until it is gone."""
        with contextlib.suppress(NotFound):
            await blocking(eks_api.delete_addon, self.app.aws, self.target.region, self.target.eks_cluster_name, name)
        await self.wait(name, gone=True)

    def _failure(self, name: str, addon: dict[str, Any]) -> DependencyFailed:
        issues = [f"{i.get('code')}: {i.get('message')}" for i in (addon.get("health") or {}).get("issues") or []] or [
            "no health issues reported"
        ]
        return DependencyFailed(
            f"add-on {name} is {addon.get('status')}: {'; '.join(issues)}",
            hint=f"Delete the add-on (DeleteAddon {name}) after fixing the cause, then run "
            "cluster_configure_dependencies again; it will be created anew.",
        )

    async def wait(self, name: str, gone: bool = False) -> dict[str, Any] | None:
        """Wait until the add-on is neither creating, updating nor deleting (or, with `gone`, absent)."""
        deadline = time.monotonic() + ADDON_TIMEOUT
        while True:
            addon = await blocking(self.describe, name)
            if gone:
                if addon is None:
                    return None
            elif addon is None:
                raise DependencyFailed(
                    f"add-on {name} disappeared while being installed.",
                    hint="Run cluster_configure_dependencies again.",
                )
            elif addon.get("status") in ADDON_FAILED:
                raise self._failure(name, addon)
            elif addon.get("status") not in ADDON_BUSY:
                return addon
            if time.monotonic() > deadline:
                raise DependencyFailed(
                    f"add-on {name} stayed {addon.get('status') if addon else 'DELETING'} for {ADDON_TIMEOUT}s.",
                    hint="Check the add-on in the EKS console, then run cluster_configure_dependencies again.",
                    retryable=True,
                )
            waited = time.monotonic() - (deadline - ADDON_TIMEOUT)
            await asyncio.sleep(next_poll(waited, self.app.settings.poll_seconds))

    async def _pod_identity(self, dep: Dependency) -> str:
        spec = dep.pod_identity
        assert spec is not None
        if not self.target.bucket:
            raise DependencyFailed(
                f"{dep.name} needs the project bucket, which the cluster's EKS stage did not record.",
                hint="Run the EKS stage again (operation_retry) so it records the bucket.",
            )
        owner = Owner(self.app.db, self.target.tag, self.target.operation_id, self.target.region)
        role_name = f"instantstart-{self.target.tag}-{spec.role}"
        account = await blocking(identity.account_id, self.app.aws, self.target.region)
        scope = pol.Scope(
            account, self.target.region, self.target.tag, self.target.eks_cluster_name, self.target.bucket
        )
        trust = pol.pod_identity_trust(account, self.target.eks_cluster_name, spec.namespace, spec.service_account)
        row = await blocking(get_cluster, self.app.db, self.target.tag)
        policy = pol.csi_data_policy(scope, pol.claim_grants(facts_of(row).bucket, facts_of(row).storage))
        role_arn = await blocking(ensure_pod_identity_role, self.app.aws, owner, role_name, trust, policy)
        await blocking(
            ensure_pod_identity_association,
            self.app.aws,
            owner,
            cluster=self.target.eks_cluster_name,
            namespace=spec.namespace,
            service_account=spec.service_account,
            role_arn=role_arn,
        )
        return role_arn
