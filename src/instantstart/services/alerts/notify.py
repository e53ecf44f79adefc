"""Alert notifications: to the operator's Amazon SNS topic and to the operator's webhook (a JSON body signed with
HMAC-SHA256 over the body, retried with exponential backoff). Both destinations are set only by alert_channels_update,
never taken from cluster text; the webhook secret lives in a 0600 file in the data dir and is never logged."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from instantstart.auth import private_dir
from instantstart.aws import sns
from instantstart.context import AppContext
from instantstart.errors import InstantStartError
from instantstart.store.alerts import AlertRow
from instantstart.store.models import utcnow
from instantstart.store.state import read_state, write_state

log = logging.getLogger(__name__)
CHANNELS_KEY = "alerts:channels"
SECRET_FILE = "alert-webhook-secret"
SIGNATURE_HEADER = "X-InstantStart-Signature"
TIMESTAMP_HEADER = "X-InstantStart-Timestamp"
ATTEMPTS = 4
TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Channels:
    """Where notifications go: an SNS topic ARN and/or a webhook URL (with its HMAC secret, in memory only)."""

    sns_topic_arn: str | None = None
    webhook_url: str | None = None
    webhook_secret: str | None = None


def secret_path(app: AppContext) -> Path:
    """Where the webhook's HMAC secret is kept (mode 0600, like the API token)."""
    return app.settings.data_dir / SECRET_FILE


def load_channels(app: AppContext) -> Channels:
    """The configured channels (blocking: a database read and the secret file)."""
    stored = read_state(app.db, CHANNELS_KEY) or {}
    path = secret_path(app)
    secret = path.read_text().strip() if stored.get("webhookUrl") and path.exists() else None
    return Channels(stored.get("snsTopicArn"), stored.get("webhookUrl"), secret or None)


def save_secret(app: AppContext, secret: str) -> None:
    """Keep a new webhook secret beside the current one (mode 0600, never in the database); the channels' store
    stage puts it in force, so a call that fails before it changes nothing (blocking)."""
    private_dir(app.settings.data_dir)
    fd = os.open(secret_path(app).with_suffix(".pending"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret + "\n")


def save_channels(app: AppContext, topic: str | None, url: str | None) -> None:
    """Store the channels and put a new secret in force; a removed webhook takes its secret with it (blocking)."""
    path = secret_path(app)
    pending = path.with_suffix(".pending")
    if url is None:
        path.unlink(missing_ok=True)
        pending.unlink(missing_ok=True)
    elif pending.exists():
        os.replace(pending, path)
    write_state(app.db, CHANNELS_KEY, {"snsTopicArn": topic, "webhookUrl": url})


def payload(alert: AlertRow, event: str) -> dict[str, Any]:
    """The notification body: which alert, which event (open or resolve), when, and what it says."""
    return {
        "event": event,
        "alertId": alert.id,
        "rule": alert.rule,
        "clusterTag": alert.cluster_tag,
        "subject": alert.subject,
        "state": alert.state,
        "message": alert.message,
        "openedAt": alert.opened_at.isoformat(),
        "resolvedAt": alert.resolved_at.isoformat() if alert.resolved_at else None,
    }


def sign(secret: str, body: bytes) -> str:
    """The signature header's value: `sha256=<hex HMAC-SHA256 of the exact body bytes>`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post_webhook(url: str, secret: str | None, body: bytes, *, backoff: float = 0.5,
                 pause: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """POST the body, retrying a connection failure or a 5xx/429 answer up to ATTEMPTS times with exponential
    backoff (blocking). Returns the delivery record."""
    error = ""
    for attempt in range(1, ATTEMPTS + 1):
        stamp = str(int(time.time()))
        headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: stamp}
        if secret:
            headers[SIGNATURE_HEADER] = sign(secret, body)
        try:
            answer = httpx.post(url, content=body, headers=headers, timeout=TIMEOUT_SECONDS, follow_redirects=False)
            if answer.status_code < 300:
                return {"channel": "webhook", "ok": True, "attempts": attempt, "status": answer.status_code}
            error = f"HTTP {answer.status_code}"
            if answer.status_code < 500 and answer.status_code != 429:
                break  # the receiver refused it: repeating the same body will not help
        except httpx.HTTPError as exc:
            error = type(exc).__name__
        if attempt < ATTEMPTS:
            pause(backoff * 2 ** (attempt - 1))
    return {"channel": "webhook", "ok": False, "attempts": attempt, "error": error}


def deliver(app: AppContext, channels: Channels, alert: AlertRow, event: str, *,
            backoff: float = 0.5) -> list[dict[str, Any]]:
    """Send one alert event to every configured channel (blocking; no database session is held). Returns the
    delivery records."""
    data = payload(alert, event)
    body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    now = utcnow().isoformat()
    records = []
    if channels.webhook_url:
        records.append({**post_webhook(channels.webhook_url, channels.webhook_secret, body, backoff=backoff),
                        "event": event, "at": now})
    if channels.sns_topic_arn:
        title = f"InstantStart alert {event}: {alert.rule} on {alert.cluster_tag}"
        try:
            message_id = sns.publish(app.aws, channels.sns_topic_arn, title, body.decode(),
                                     {"event": event, "rule": alert.rule, "clusterTag": alert.cluster_tag})
            records.append({"channel": "sns", "ok": True, "messageId": message_id, "event": event, "at": now})
        except InstantStartError as exc:
            records.append({"channel": "sns", "ok": False, "error": exc.message[:300], "event": event, "at": now})
    for r in records:
        if not r["ok"]:
            log.warning("alert %s %s not delivered to %s: %s", alert.id, event, r["channel"], r.get("error"))
    return records
