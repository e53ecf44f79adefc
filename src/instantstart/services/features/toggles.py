"""One feature toggled on or off: dependencies claimed or released, its IAM identity, its own resources."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from instantstart.aws import amp as amp_api
from instantstart.aws import hyperpod as hp_api
from instantstart.context import AppContext, StageContext
from instantstart.errors import DependencyFailed, InstantStartError
from instantstart.kube.calls import kube_api
from instantstart.manifests import iam_feature_policies as feature_pol
from instantstart.manifests import iam_policies as pol
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import facts_of
from instantstart.services.base.observability import alias
from instantstart.services.base.registry import get_cluster, record_facts
from instantstart.services.base.registry import hyperpod_cluster_name as hyperpod_name
from instantstart.services.base.workload_identity import Where, ensure_identity, remove_identity
from instantstart.services.dependencies.catalog import load_catalog
from instantstart.services.dependencies.reconcile import Reconciler, Target
from instantstart.services.dependencies.stage import reconcile_dependencies, remove_dependencies
from instantstart.services.features import governance, grafana, tiered
from instantstart.services.features import observability as obs
from instantstart.services.features.karpenter import KEY as KARPENTER
from instantstart.services.features.karpenter import run_karpenter
from instantstart.services.features.specs import FEATURES, claim, closure, needs, release
from instantstart.services.features.verify import verify_feature
from instantstart.store.models import ClusterRow


@dataclass
class FeatureResult:
    """What one feature ended as: desired, actual, the action taken, and for failures code/message/hint."""

    key: str
    desired: dict[str, Any]
    actual: dict[str, Any] = field(default_factory=dict)
    action: str = "none"
    status: str = "PENDING"
    code: str | None = None
    message: str = ""
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The wire form (operation outputs, cluster row, tool results)."""
        return {"key": self.key, "desired": self.desired, "actual": self.actual, "action": self.action,
                "status": self.status, "code": self.code, "message": self.message, "hint": self.hint,
                "updatedAt": datetime.now(UTC).isoformat()}


def where_of(app: AppContext, row: ClusterRow, operation_id: str) -> Where:
    """The feature target of a cluster row."""
    return Where(app.db, app.aws, row.tag, row.region, row.eks_cluster_name, operation_id)


async def installed_names(app: AppContext, row: ClusterRow, names: list[str]) -> set[str]:
    """Which of the catalog dependencies `names` the cluster has right now."""

    async def quiet(_message: str) -> None:
        return None

    reconciler = Reconciler(app, Target(row.tag, row.region, row.eks_cluster_name, None, None), quiet)
    catalog = load_catalog()
    return {n for n in names if await reconciler.installed(catalog.get(n))}


async def feature_values(app: AppContext, row: ClusterRow, key: str, settings: dict[str, Any],
                         arns: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Computed add-on configuration: the inference operator's execution role, TLS bucket and cluster ARN; the
    observability add-on's AMP workspace, metrics levels and logging."""
    if key == "observability":
        workspace = await blocking(amp_api.find_workspace, app.aws, row.region, alias(row.tag))
        if workspace is None or not workspace.get("prometheusEndpoint"):
            raise DependencyFailed(f"observability: the AMP workspace {alias(row.tag)} is missing.",
                                   hint="operation_retry creates it again.", retryable=True)
        return {FEATURES[key].primary or "": obs.addon_values(workspace, bool(settings.get("logging")))}
    if key != "inferenceOperator":
        return {}
    bucket = facts_of(row).bucket
    tls = settings.get("tlsCertificateBucket") or (f"s3://{bucket}/hyperpod-inference/tls" if bucket else None)
    if not tls:
        raise DependencyFailed("inferenceOperator needs a TLS certificate bucket and the project bucket is unknown.",
                               hint="Pass inferenceOperator.tlsCertificateBucket (s3://bucket[/prefix]).")
    cluster = await blocking(hp_api.describe_cluster, app.aws, row.region, hyperpod_name(row))
    if cluster is None:
        raise DependencyFailed(f"inferenceOperator needs the HyperPod cluster {hyperpod_name(row)}, which does not "
                               "exist.", hint="Create the HyperPod cluster first (hyperpod_create).")
    return {FEATURES[key].primary or "": {"executionRoleArn": arns["inferenceOperator"],
                                          "tlsCertificateS3Bucket": tls,
                                          "hyperpodClusterArn": cluster["ClusterArn"]}}


async def identities(
    app: AppContext, stage: StageContext, row: ClusterRow, key: str
) -> tuple[dict[str, str], list[str]]:
    """The IAM identities `key` and the features it needs use; role ARNs by feature and what was written."""
    where = where_of(app, row, stage.operation_id)
    arns: dict[str, str] = {}
    wrote: list[str] = []
    for other in [*needs(key), key]:
        ident = FEATURES[other].identity
        if ident is None:
            continue
        inline = pol.lifecycle_guard_policy()  # a role with only managed policies still denies lifecycle/ writes
        oidc = None
        if other == "observability":
            workspace, created = await blocking(obs.ensure_workspace, where, app.settings.poll_seconds)
            wrote += ["workspace"] if created else []
            inline = feature_pol.remote_write_policy(str(workspace["arn"]))
        elif other == "fsxCsiDriver":
            inline = feature_pol.fsx_csi_policy()
        if ident.irsa:
            issuer = await blocking(tiered.issuer_of, where)
            provider, created = await blocking(tiered.ensure_provider, where, issuer)
            wrote += ["oidcProvider"] if created else []
            oidc = (provider, issuer)
        await stage.progress(f"{other}: IAM role {where.role_name(ident.role)}")
        arn, written = await blocking(ensure_identity, where, ident, inline, oidc)
        arns[other] = arn
        wrote += [f"{other}.{w}" for w in written]
    return arns, wrote


async def enable(app: AppContext, stage: StageContext, row: ClusterRow, key: str,
                 settings: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Turn `key` on; (action, actual)."""
    where = where_of(app, row, stage.operation_id)
    if key == "tieredStorage":
        bucket = tiered.require_bucket(facts_of(row).bucket)
        cluster = await blocking(hp_api.describe_cluster, app.aws, row.region, hyperpod_name(row))
        if cluster is None:
            raise DependencyFailed(f"tieredStorage needs the HyperPod cluster {hyperpod_name(row)}.",
                                   hint="Create the HyperPod cluster first (hyperpod_create).")
        config = tiered.desired_config(True, settings.get("configMode", "default"), settings.get("percentage"))
        before = tiered.subject_of(facts_of(row).checkpointing)
        who = tiered.Subject(settings.get("namespace") or before.namespace,
                             settings.get("serviceAccount") or before.service_account)
        api = await blocking(kube_api, app.kube, row.eks_cluster_name, row.region)
        wrote = await blocking(tiered.enable, where, api, cluster, bucket, config, who, before)
        await blocking(record_facts, app.db, row.tag, checkpointing=who.to_dict())
        await stage.progress(f"tieredStorage: wrote {', '.join(wrote) or 'nothing'}")
        actual = await blocking(tiered.chain, where, api,
                                await blocking(hp_api.describe_cluster, app.aws, row.region, hyperpod_name(row)),
                                bucket, who)
        return ("updated" if wrote else "unchanged"), {**actual, "repaired": wrote}
    names = closure(key)
    have = await installed_names(app, row, names)
    await blocking(claim, app.db, row.tag, key, have)
    arns, wrote = await identities(app, stage, row, key)
    if key == "trainingOperator":
        wrote += await blocking(tag_for_training, app, row)
    values = await feature_values(app, row, key, settings, arns)
    primary = FEATURES[key].primary or ""
    results = await reconcile_dependencies(app, stage, row.tag, [primary], values)
    by_name = {r.name: r for r in results}
    mine = by_name[primary]
    if mine.status == "DEGRADED":
        raise DependencyFailed(
            f"{key}: the add-on {primary} is DEGRADED: {mine.message}",
            hint=mine.hint or "Check that its prerequisite add-ons are ACTIVE and that the cluster has schedulable "
            "nodes, then operation_retry.",
            details={"dependencies": {r.name: r.status for r in results}},
            retryable=True,
        )
    actual = await verify_feature(app, row, key)
    if key == "taskGovernance":
        actual["kueue"], written = await blocking(governance.apply_governance, app, row, settings)
        wrote += written
    if key == "observability":
        actual["grafana"], written = await observability_grafana(app, stage, row, settings)
        wrote += written
    changed = [r.name for r in results if r.action not in ("unchanged", "none")]
    action = "unchanged" if not changed and not wrote else ("enabled" if primary not in have else "updated")
    return action, {**actual, "roles": arns, "changed": changed + wrote}


async def observability_grafana(app: AppContext, stage: StageContext, row: ClusterRow,
                                settings: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """The observability feature's Grafana workspace as `settings` ask (adopted, created, removed or kept)."""
    workspace = await blocking(amp_api.find_workspace, app.aws, row.region, alias(row.tag))
    if workspace is None:
        raise DependencyFailed(f"observability: the AMP workspace {alias(row.tag)} is missing.",
                               hint="operation_retry creates it again.", retryable=True)
    fresh = await blocking(get_cluster, app.db, row.tag)
    return await grafana.reconcile(stage, where_of(app, row, stage.operation_id), settings, str(workspace["arn"]),
                                   facts_of(fresh).grafana)


def tag_for_training(app: AppContext, row: ClusterRow) -> list[str]:
    """The training operator's policy expects the HyperPod cluster tagged SageMaker=true (FACTS §4.2)."""
    cluster = hp_api.describe_cluster(app.aws, row.region, hyperpod_name(row))
    if cluster is None:
        return []
    arn = str(cluster["ClusterArn"])
    if hp_api.cluster_tags(app.aws, row.region, arn).get("SageMaker") == "true":
        return []
    hp_api.tag_cluster(app.aws, row.region, arn, {"SageMaker": "true"})
    return ["clusterTag"]


async def disable(app: AppContext, stage: StageContext, row: ClusterRow, key: str) -> tuple[str, dict[str, Any]]:
    """Turn `key` off: only what it installed for itself and nobody else uses goes; (action, actual)."""
    where = where_of(app, row, stage.operation_id)
    if key == "tieredStorage":
        cluster = await blocking(hp_api.describe_cluster, app.aws, row.region, hyperpod_name(row)) or {}
        api = await blocking(kube_api, app.kube, row.eks_cluster_name, row.region)
        subject = tiered.subject_of(facts_of(row).checkpointing)
        gone = await blocking(tiered.disable, where, api, cluster, subject) if cluster else []
        return ("disabled" if gone else "unchanged"), {"removed": gone}
    orphaned = await blocking(release, app.db, row.tag, key)
    present = await installed_names(app, row, orphaned)
    removed: list[str] = []
    if present:
        results = await remove_dependencies(app, stage, row.tag, [n for n in orphaned if n in present])
        removed += [r.name for r in results if r.action == "removed"]
    for other, spec in FEATURES.items():
        if spec.primary in orphaned and spec.identity is not None:
            removed += [f"{other}.{x}" for x in await blocking(remove_identity, where, spec.identity)]
            if other == "observability":
                removed += await blocking(grafana.remove_created, where)
                await blocking(record_facts, app.db, row.tag, grafana=None)
            if other == "observability" and await blocking(obs.remove_workspace, where):
                removed.append("observability.workspace")
    kept = [n for n in closure(key) if n not in orphaned]
    return ("disabled" if removed else "unchanged"), {"removed": removed, "keptForOthers": kept}


async def run_feature(app: AppContext, stage: StageContext, tag: str, key: str,
                      settings: dict[str, Any]) -> FeatureResult:
    """Reconcile one feature; a failure is a typed error carrying the FeatureResult in its details."""
    row = await blocking(get_cluster, app.db, tag)
    result = FeatureResult(key=key, desired=dict(settings))
    try:
        if key == KARPENTER:
            result.action, result.actual = await run_karpenter(app, stage, row, settings)
        elif settings.get("enabled"):
            result.action, result.actual = await enable(app, stage, row, key, settings)
        else:
            result.action, result.actual = await disable(app, stage, row, key)
    except InstantStartError as exc:
        result.status, result.action = "FAILED", "failed"
        result.code, result.message, result.hint = exc.code.value, exc.message, exc.hint
        exc.details = {**exc.details, "feature": result.to_dict()}
        raise
    result.status = "SUCCEEDED"
    result.message = f"{FEATURES[key].title if key in FEATURES else 'HyperPod-managed Karpenter'}: {result.action}"
    return result
