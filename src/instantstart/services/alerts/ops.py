"""Alert operations: alert_list (read), alert_rules_get (read), alert_rules_update and alert_channels_update
(mutations through the operations engine; the webhook secret is kept by the handler in its 0600 file only)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from anyio import to_thread
from pydantic import Field

from instantstart.aws import sns
from instantstart.catalog import operation
from instantstart.catalog.base import NoInput, WireModel
from instantstart.catalog.secret import Secret
from instantstart.context import CallContext, StageContext
from instantstart.errors import InvalidInput
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.services.alerts import notify
from instantstart.services.alerts.evaluator import RULES_KEY
from instantstart.services.alerts.rules import RULES, thresholds
from instantstart.store import alerts as store
from instantstart.store.state import read_state, write_state
from instantstart.validation import ClusterTag

RuleName = Literal["node_replaced", "xid_recurring", "capacity_stuck", "pod_crash_looping", "gpu_idle",
                   "lifecycle_script_changed", "watch_stale"]
WEBHOOK_URL = r"^https?://[A-Za-z0-9.\[\]:-]+(:[0-9]{1,5})?(/[^\s]*)?$"
TARGET = "state:alerts"


class AlertListRequest(WireModel):
    """Which alerts: state, cluster, rule."""

    state: Literal["open", "resolved"] | None = Field(default=None, description="open or resolved (default both).")
    cluster_tag: ClusterTag | None = Field(default=None, description="Only this cluster's alerts.")
    rule: RuleName | None = Field(default=None, description="Only this rule's alerts (see alert_rules_get).")
    limit: int = Field(default=100, ge=1, le=500, description="At most this many, newest first.")


class Delivery(WireModel):
    """One notification attempt series to one channel."""

    channel: str
    event: str
    ok: bool
    attempts: int | None = None
    error: str | None = None
    at: str | None = None


class Alert(WireModel):
    """One alert episode."""

    id: int
    rule: str
    cluster_tag: str
    subject: str = Field(description="What it is about: group/<name>, pod/<ns>/<name>, node/<id>, watch/<kind>…")
    state: str
    message: str
    opened_at: datetime
    resolved_at: datetime | None
    deliveries: list[Delivery]


class AlertListResult(WireModel):
    """Alerts newest first, and how many are open in all."""

    alerts: list[Alert]
    open_count: int


class RuleSetting(WireModel):
    """A rule's threshold as the operator sets it (fields left out keep their value)."""

    value: float | None = Field(default=None, ge=0, le=1_000_000, description="Count or percent (see unit).")
    minutes: int | None = Field(default=None, ge=0, le=10080, description="How long the condition must hold.")
    enabled: bool | None = None


class RuleView(WireModel):
    """A rule, its default and its current setting."""

    name: str
    description: str
    unit: str
    value: float | None
    minutes: int
    enabled: bool
    default_value: float | None
    default_minutes: int


class ChannelsView(WireModel):
    """Where notifications go (the webhook secret is never shown, only whether one is set)."""

    sns_topic_arn: str | None
    webhook_url: str | None
    webhook_secret_set: bool


class AlertRulesResult(WireModel):
    """Every rule with its thresholds, and the notification channels."""

    rules: list[RuleView]
    channels: ChannelsView
    not_built: list[str] = Field(description="Rules asked for that cannot be evaluated yet, with why.")


NOT_BUILT: list[str] = []  # every rule issue 29 asks for is evaluated (job_pending_quota reads Kueue Workloads)


def rules_view(ctx: CallContext) -> AlertRulesResult:
    """Rules and channels as stored (blocking)."""
    app = ctx.app
    current = thresholds(read_state(app.db, RULES_KEY))
    channels = notify.load_channels(app)
    return AlertRulesResult(
        rules=[RuleView(name=n, description=r.description, unit=r.unit, value=current[n].value,
                        minutes=current[n].minutes, enabled=current[n].enabled, default_value=r.default.value,
                        default_minutes=r.default.minutes) for n, r in RULES.items()],
        channels=ChannelsView(sns_topic_arn=channels.sns_topic_arn, webhook_url=channels.webhook_url,
                              webhook_secret_set=channels.webhook_secret is not None),
        not_built=NOT_BUILT,
    )


@operation("alert_list", method="GET", path="/alerts", example={"state": "open"})
async def alert_list(ctx: CallContext, req: AlertListRequest) -> AlertListResult:
    """Read-only, bounded (at most `limit` ≤500, newest first): alerts the evaluator opened and resolved, with
    their notification deliveries; filter by state (open, resolved), clusterTag and rule."""
    app = ctx.app

    def read() -> AlertListResult:
        rows = store.query(app.db, state=req.state, cluster_tag=req.cluster_tag, rule=req.rule, limit=req.limit)
        return AlertListResult(alerts=[Alert(
            id=r.id, rule=r.rule, cluster_tag=r.cluster_tag, subject=r.subject, state=r.state, message=r.message,
            opened_at=r.opened_at, resolved_at=r.resolved_at,
            deliveries=[Delivery.model_validate({k: d.get(k) for k in ("channel", "event", "ok", "attempts",
                                                                       "error", "at")}) for d in r.deliveries or []],
        ) for r in rows], open_count=len(store.open_alerts(app.db)))

    return await to_thread.run_sync(read)


@operation("alert_rules_get", method="GET", path="/alerts/rules")
async def alert_rules_get(ctx: CallContext, req: NoInput) -> AlertRulesResult:
    """Every alert rule with its description, unit, default and current threshold (value, minutes it must hold,
    enabled), and the notification channels (SNS topic, webhook URL; whether a webhook secret is set)."""
    return await to_thread.run_sync(rules_view, ctx)


class RulesUpdateRequest(WireModel):
    """The rules to change: {ruleName: {value?, minutes?, enabled?}}."""

    rules: dict[RuleName, RuleSetting] = Field(min_length=1, description="Only the rules and fields given change.")


class RulesParams(ParamsModel):
    """What alert_rules_update records."""

    rules: dict[str, dict[str, Any]]


async def stage_rules_store(stage: StageContext) -> dict[str, Any]:
    """alert_rules_update: merge the changed fields into the stored thresholds."""
    params = stage.params_as(RulesParams)
    db = stage.app.db

    def merge() -> dict[str, Any]:
        stored = dict(read_state(db, RULES_KEY) or {})
        for name, change in params.rules.items():
            stored[name] = {**(stored.get(name) or {}), **change}
        write_state(db, RULES_KEY, stored)
        return stored

    return {"rules": await to_thread.run_sync(merge)}


KINDS.register(OperationKind(name="alert_rules_update", params=RulesParams,
                             stages=(StageSpec("store", stage_rules_store, max_attempts=3),)))


@operation("alert_rules_update", destructive=False, idempotent=True, method="POST", path="/alerts/rules",
           completion="alert_rules_get", example={"rules": {"pod_crash_looping": {"minutes": 30}}})
async def alert_rules_update(ctx: CallContext, req: RulesUpdateRequest) -> OperationRef:
    """Change alert rule thresholds: for each named rule only the fields given (value, minutes, enabled) change;
    the others keep their value. Rules: see alert_rules_get. The evaluator uses them from its next pass."""
    changes: dict[str, dict[str, Any]] = {n: s.model_dump(exclude_none=True) for n, s in req.rules.items()}
    for name, change in changes.items():
        if "value" in change and RULES[name].default.value is None:
            raise InvalidInput(f"Invalid input: rules.{name}.value: the rule {name} has no value, only minutes",
                               hint="Set `minutes` (how long the condition must hold) or `enabled`.")
    return await ctx.app.runner.submit("alert_rules_update", RulesParams(rules=changes), target=TARGET,
                                       idempotency_key=ctx.idempotency_key, status_tool="alert_rules_get",
                                       poll_after_seconds=1)


class ChannelsUpdateRequest(WireModel):
    """Where alert notifications go; a field left out keeps its value, an empty string removes the channel."""

    sns_topic_arn: str | None = Field(default=None, pattern=sns.TOPIC_ARN + "|^$",
                                      description="arn:aws:sns:<region>:<account>:<topic>, or \"\" to remove.")
    webhook_url: str | None = Field(default=None, max_length=2000, pattern=WEBHOOK_URL + "|^$",
                                    description="http(s) URL the operator controls, or \"\" to remove.")
    webhook_secret: Secret | None = Field(
        default=None, description="HMAC-SHA256 key of the X-InstantStart-Signature header; required with a new "
        "webhookUrl. Kept in a 0600 file in the data dir, never stored in the database or echoed.")


class ChannelsParams(ParamsModel):
    """What alert_channels_update records (never the secret)."""

    sns_topic_arn: str | None
    webhook_url: str | None


async def stage_channels_store(stage: StageContext) -> dict[str, Any]:
    """alert_channels_update: record the channels (the secret was kept by the call itself)."""
    params = stage.params_as(ChannelsParams)
    await to_thread.run_sync(notify.save_channels, stage.app, params.sns_topic_arn, params.webhook_url)
    return {"snsTopicArn": params.sns_topic_arn, "webhookUrl": params.webhook_url}


async def stage_channels_verify(stage: StageContext) -> dict[str, Any]:
    """alert_channels_update: the SNS topic exists and this control plane can read it."""
    topic = stage.params_as(ChannelsParams).sns_topic_arn
    if topic:
        await to_thread.run_sync(sns.topic_attributes, stage.app.aws, topic)
    return {"verified": bool(topic)}


# The topic is checked before anything is recorded: a wrong ARN leaves the channels as they were.
KINDS.register(OperationKind(name="alert_channels_update", params=ChannelsParams, stages=(
    StageSpec("verify", stage_channels_verify, max_attempts=3, backoff_seconds=2),
    StageSpec("store", stage_channels_store, max_attempts=3),
)))


@operation("alert_channels_update", destructive=False, idempotent=True, method="POST", path="/alerts/channels",
           completion="alert_rules_get", example={"snsTopicArn": "arn:aws:sns:us-west-2:123456789012:alerts"})
async def alert_channels_update(ctx: CallContext, req: ChannelsUpdateRequest) -> OperationRef:
    """Set where alert notifications go: an Amazon SNS topic (snsTopicArn) and/or a webhook (webhookUrl with
    webhookSecret, the HMAC key of the `X-InstantStart-Signature: sha256=<hex>` header over the JSON body; a
    `X-InstantStart-Timestamp` header goes beside it). Fields left out keep their value; "" removes a channel. The
    secret is never stored in the database nor echoed. Notifications go only to these operator-given addresses."""
    app = ctx.app
    current = await to_thread.run_sync(notify.load_channels, app)
    given = req.model_fields_set
    topic = (req.sns_topic_arn or None) if "sns_topic_arn" in given else current.sns_topic_arn
    url = (req.webhook_url or None) if "webhook_url" in given else current.webhook_url
    secret = req.webhook_secret.get_secret_value() if req.webhook_secret is not None else None
    if url and url != current.webhook_url and secret is None:
        raise InvalidInput("Invalid input: webhookSecret: required with a new webhookUrl",
                           hint="Pass webhookSecret (8+ characters): receivers check X-InstantStart-Signature.")
    if secret is not None and not url:
        raise InvalidInput("Invalid input: webhookSecret: only with a webhookUrl", hint="Pass webhookUrl too.")
    if secret is not None:
        await to_thread.run_sync(notify.save_secret, app, secret)
    return await app.runner.submit("alert_channels_update", ChannelsParams(sns_topic_arn=topic, webhook_url=url),
                                   target=TARGET, idempotency_key=ctx.idempotency_key, status_tool="alert_rules_get",
                                   poll_after_seconds=1)
