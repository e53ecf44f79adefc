"""The explicit diff of advanced features: one operation per request, one stage per feature in dependency order."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, StageContext
from instantstart.errors import Conflict, DependencyFailed, ErrorCode, InstantStartError, InvalidInput
from instantstart.operations.kinds import KINDS, OperationKind, StageFn, StageSpec
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import facts_of
from instantstart.services.base.registry import get_cluster, record_facts
from instantstart.services.capacity.karpenter.state import WAIT
from instantstart.services.dependencies.catalog import load_catalog
from instantstart.services.features.karpenter import KEY as KARPENTER
from instantstart.services.features.specs import FEATURES, ORDER, dependents, needs
from instantstart.services.features.tiered import DNS_LABEL, NAMESPACE, SERVICE_ACCOUNT
from instantstart.services.features.toggles import installed_names, run_feature
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow

KIND = "advanced_features_update"


class Toggle(WireModel):
    """A feature on or off."""

    enabled: bool


class InferenceToggle(Toggle):
    """The inference operator; the TLS certificate location defaults to the project bucket."""

    tls_certificate_bucket: str | None = Field(
        default=None, pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$",
        description="s3://bucket[/prefix] for the operator's TLS certificates (default: the project bucket's "
        "hyperpod-inference/tls prefix).",
    )


class ObservabilityToggle(Toggle):
    """HyperPod observability: metrics to the cluster's AMP workspace; container logs to CloudWatch if asked."""

    logging: bool = Field(default=False, description="Also send container and pod logs to CloudWatch Logs "
                          "(log groups /aws/sagemaker/Clusters/*).")
    grafana_workspace_id: str | None = Field(
        default=None, pattern=r"^g-[0-9a-f]{10}$",
        description="Adopt this existing Amazon Managed Grafana workspace (g-…, ACTIVE, in the cluster's Region) "
        "as the place to look at the metrics; it is linked, never modified or deleted.",
    )
    grafana: bool | None = Field(
        default=None, description="true: create an Amazon Managed Grafana workspace for the cluster (IAM Identity "
        "Center sign-in, a role that reads the AMP workspace; found again by the cluster tag); false: delete the "
        "one InstantStart created. Absent: the Grafana workspace stays as it is.",
    )

    @model_validator(mode="after")
    def _grafana(self) -> ObservabilityToggle:
        if self.grafana_workspace_id and self.grafana is not None:
            raise ValueError("send either grafanaWorkspaceId (adopt an existing workspace) or grafana "
                             "(true: create one, false: delete ours), not both")
        if not self.enabled and (self.grafana_workspace_id or self.grafana):
            raise ValueError("grafanaWorkspaceId and grafana: true need enabled: true (disabling observability "
                             "deletes the Grafana workspace InstantStart created)")
        return self


class TieredToggle(Toggle):
    """Managed tiered checkpointing: the share of instance memory HyperPod sets aside."""

    config_mode: Literal["default", "custom"] = "default"
    percentage: int | None = Field(default=None, ge=20, le=100, description="custom mode only: 20..100")
    namespace: str | None = Field(default=None, max_length=63, pattern=DNS_LABEL,
                                  description=f"Namespace of the checkpointing pods' service account, a DNS label "
                                  f"that must exist (default: the one last enabled, else {NAMESPACE}).")
    service_account: str | None = Field(default=None, max_length=63, pattern=DNS_LABEL,
                                        description="The service account checkpointing pods run as, a DNS label "
                                        f"(default: the one last enabled, else {SERVICE_ACCOUNT}); the role trusts "
                                        "exactly system:serviceaccount:<namespace>:<serviceAccount>.")

    @model_validator(mode="after")
    def _percentage(self) -> TieredToggle:
        if self.enabled and self.config_mode == "custom" and self.percentage is None:
            raise ValueError("percentage (20..100) is required when configMode is custom")
        if self.config_mode == "default" and self.percentage is not None:
            raise ValueError("percentage is only allowed with configMode custom")
        return self


class FeaturesParams(ParamsModel):
    """Stored params: the cluster and each requested key's settings (absent keys are not touched)."""

    cluster_tag: str
    region: str
    features: dict[str, dict[str, Any]]


def save_result(db: Database, tag: str, key: str, result: dict[str, Any]) -> None:
    """Remember a feature's last result on the cluster row (shown by hyperpod_get_advanced_features)."""
    row = get_cluster(db, tag)
    results = dict(facts_of(row).feature_results)
    results[key] = result
    record_facts(db, tag, feature_results=results)


def _stage(key: str) -> StageFn:
    async def run(stage: StageContext) -> dict[str, Any]:
        p = stage.params_as(FeaturesParams)
        settings = p.features.get(key)
        if settings is None:
            await stage.progress(f"{key}: not in this request")
            return {}
        await stage.progress(f"{key}: {'enabling' if settings.get('enabled') else 'disabling'}")
        try:
            if settings.get("enabled"):
                refuse_when_blocked(stage, key, settings)
            result = await run_feature(stage.app, stage, p.cluster_tag, key, settings)
        except InstantStartError as exc:
            recorded = exc.details
            failed = recorded.get("feature") or {"key": key, "status": "FAILED", "code": exc.code.value,
                                                    "message": exc.message, "hint": exc.hint}
            failed["operationId"] = stage.operation_id
            await blocking(save_result, stage.app.db, p.cluster_tag, key, failed)
            raise
        out = {**result.to_dict(), "operationId": stage.operation_id}
        await blocking(save_result, stage.app.db, p.cluster_tag, key, out)
        await stage.progress(out["message"])
        return out

    run.__doc__ = f"The {key} stage of an advanced-features request."
    return run


def refuse_when_blocked(stage: StageContext, key: str, settings: dict[str, Any]) -> None:
    """A feature whose prerequisite feature failed earlier in this operation is not attempted: BLOCKED, naming
    the failed feature and its fix (operation_retry reruns the failed feature first, then this one)."""
    failed = [k for k in needs(key) if k in stage.failed] if key in FEATURES else []
    if not failed:
        return
    first = stage.failed[failed[0]]
    fix = first.get("hint") or "fix its cause"
    message = (f"{key} is blocked: it needs {', '.join(failed)}, which failed in this operation "
               f"({first.get('code')}: {first.get('message')}).")
    hint = f"Fix {failed[0]} first: {fix} Then operation_retry reruns {failed[0]}, then {key}."
    blocked = {"key": key, "desired": dict(settings), "actual": {"blockedBy": failed}, "action": "blocked",
               "status": "BLOCKED", "code": ErrorCode.DEPENDENCY_FAILED.value, "message": message, "hint": hint}
    raise DependencyFailed(message, hint=hint, details={"feature": blocked, "blockedBy": failed})


def _result(outputs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every requested feature's result in dependency order; a failed or blocked stage contributes the
    feature result its error carries."""
    features = []
    for key in STAGE_KEYS:
        out = outputs.get(key) or {}
        if "error" in out:
            out = (out["error"].get("details") or {}).get("feature") or {}
        if out.get("key"):
            features.append(out)
    return {"features": features}


STAGE_KEYS = (*ORDER, KARPENTER)
"""One stage per key in dependency order; karpenter needs no other feature and none needs it: it runs last (its
NodePool wait is the longest)."""
STAGES = tuple(
    StageSpec(k, _stage(k), max_attempts=3, timeout_seconds=(2 * WAIT + 600 if k == KARPENTER else 1800),
              backoff_seconds=5)
    for k in STAGE_KEYS
)
KINDS.register(OperationKind(name=KIND, stages=STAGES, params=FeaturesParams, result_from=_result,
                             description="Advanced features as an explicit diff", continue_after_failure=True))


async def enabled_now(app: AppContext, row: ClusterRow, keys: list[str]) -> set[str]:
    """Which of the catalog-backed feature `keys` are installed on the cluster right now."""
    primaries = {k: FEATURES[k].primary for k in keys if FEATURES[k].primary}
    have = await installed_names(app, row, [p for p in primaries.values() if p])
    return {k for k, p in primaries.items() if p in have}


async def refuse_breaking_disables(app: AppContext, row: ClusterRow, wanted: dict[str, dict[str, Any]]) -> None:
    """Conflict when a disable would take away what another enabled feature (not disabled too) needs."""
    off = {k for k, v in wanted.items() if not v.get("enabled")}
    for key in [k for k in ORDER if k in off]:
        candidates = [d for d in dependents(key) if d not in off]
        if not candidates:
            continue
        active = sorted(await enabled_now(app, row, candidates), key=ORDER.index)
        if active:
            raise Conflict(
                f"{key} cannot be disabled: {', '.join(active)} needs it "
                f"({FEATURES[key].primary} is a prerequisite of "
                f"{', '.join(FEATURES[a].primary or a for a in active)}).",
                hint=f"Disable {', '.join(active)} first, or send {key} together with "
                f"{', '.join(f'{a}: {{enabled: false}}' for a in active)}; or leave {key} out of the request.",
                details={"feature": key, "neededBy": active,
                         "fields": [{"field": key, "message": f"needed by {', '.join(active)}"}]},
            )


def validate_keys(features: dict[str, Any]) -> None:
    """At least one key; every key known (catalog entries present for catalog-backed features)."""
    if not features:
        raise InvalidInput(
            f"Invalid input: no feature key given (karpenter, {', '.join(ORDER)}); nothing to reconcile.",
            hint=f"Send any of: karpenter, {', '.join(ORDER)} (each {{enabled: true|false}}).",
            details={"fields": [{"field": "(root)", "message": "at least one feature key is required"}]},
        )
    catalog = load_catalog()
    for key in [k for k in features if k in FEATURES]:
        primary = FEATURES[key].primary
        if primary is not None and primary not in catalog.names:
            raise InvalidInput(f"{key}: the dependency catalog has no entry {primary}.")
