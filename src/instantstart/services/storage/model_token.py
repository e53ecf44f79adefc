"""The Hugging Face token Secret of a model download: written per call, removed on every way the download ends."""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
from datetime import timedelta
from typing import Any

from pydantic import SecretStr

from instantstart.context import AppContext, StageContext
from instantstart.errors import InstantStartError, PreconditionFailed
from instantstart.kube import core_kinds, wire
from instantstart.kube.apply import apply_object, delete_object, read_object
from instantstart.kube.calls import kube_call
from instantstart.kube.gateway import Api
from instantstart.manifests import model_download as md
from instantstart.operations.models import ACTIVE
from instantstart.operations.waiting import blocking
from instantstart.store.models import utcnow

log = logging.getLogger(__name__)

# A token Secret that no active download names is an orphan once this long has passed since it was written
# (the call that wrote it submits its operation within seconds; a crash in between leaves it behind).
ORPHAN_AFTER = timedelta(minutes=15)


def secret_body(name: str, namespace: str) -> dict[str, Any]:
    """Names a v1 Secret (for reads and deletes)."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}


async def write_secret(api: Api, job: str, namespace: str, token: SecretStr) -> str:
    """Write the token into a fresh Secret for this call (one per call: deleting it when this call fails never
    takes the token of a running download); returns its name."""
    name = f"{job}-token-{secrets.token_hex(3)}"
    value = base64.b64encode(token.get_secret_value().encode()).decode()
    expires = (utcnow() + ORPHAN_AFTER).isoformat()
    await blocking(apply_object, api, md.token_secret(name, namespace, value, expires))
    return name


async def delete_secret(api: Api, name: str, namespace: str) -> None:
    """Delete the token Secret; a cancellation of the caller (a cancel request, a client gone) does not stop
    the delete (shielded: it finishes in its worker thread)."""
    await asyncio.shield(blocking(delete_object, api, secret_body(name, namespace)))


async def ends_with_attempt(stage: StageContext, exc: BaseException, max_attempts: int) -> bool:
    """Whether the download's use of its token ends with this failed attempt: not when the engine tries
    again (a retryable error with attempts left) or hands the operation on (a shutdown or a lost lease
    cancels the stage without a cancel request; the resumed stage still needs the token)."""
    if isinstance(exc, InstantStartError):
        return not exc.retryable or stage.attempt >= max_attempts
    if isinstance(exc, asyncio.CancelledError):
        return bool(await blocking(stage.app.runner.store.cancel_requested, stage.operation_id))
    return True  # a crash fails the operation


def check_still_there(api: Api, name: str, namespace: str) -> None:
    """Refuse to start a Job whose token Secret an earlier ending of this download removed (blocking)."""
    if read_object(api, secret_body(name, namespace)) is None:
        raise PreconditionFailed(
            f"The Hugging Face token Secret {namespace}/{name} of this download was removed when it ended "
            "before (the token is never kept beyond one run), so the Job cannot read hfToken.",
            hint="Call model_download_enhanced again with hfToken.",
        )


def sweep_orphans(app: AppContext, api: Api, namespace: str, kind: str) -> list[str]:
    """Delete token Secrets that no active download names and whose time to be claimed has passed (left by a
    crash between writing one and recording its operation, or a stage that timed out for good); blocking."""
    listed = kube_call(
        "list token Secrets",
        core_kinds.list_secrets,
        api,
        namespace,
        label_selector=f"{md.LABEL_COMPONENT}={md.COMPONENT},{md.LABEL_TOKEN}=true",
    )
    items = wire.items(listed)
    if not items:
        return []
    named = set()
    for status in ACTIVE:
        views, _total = app.runner.store.list_operations(kind=kind, status=status, limit=1000)
        named |= {str(v.params.get("tokenSecretName")) for v in views}
    now = utcnow().isoformat()
    removed = []
    for item in items:
        meta = item["metadata"]
        expires = (meta.get("annotations") or {}).get(md.ANNOTATION_EXPIRES, "")
        if meta["name"] not in named and expires and expires < now:
            delete_object(api, secret_body(meta["name"], namespace))
            removed.append(meta["name"])
    if removed:
        log.info("removed orphaned model download token Secrets", extra={"secrets": removed})
    return removed
