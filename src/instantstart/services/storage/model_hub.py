"""Before a download Job: ask the configured hub whether the model, its revision and the token will do."""

from __future__ import annotations

import difflib
import re

from instantstart import hub
from instantstart.context import AppContext
from instantstart.errors import InvalidInput
from instantstart.operations.waiting import blocking
from instantstart.services.storage.model_params import DEFAULT_HUB, MODEL_ID_PATTERN, ModelDownloadRequest

MAX_SUGGESTIONS = 5
_ID = re.compile(MODEL_ID_PATTERN)  # hub answers are data: only well-formed ids are ever echoed


def closest_ids(endpoint: str, token: str | None, model_id: str) -> list[str]:
    """The hub's ids nearest `model_id`: searched by name and by owner, else its plain listing (blocking)."""
    owner, _, name = model_id.rpartition("/")
    found = set(hub.model_ids(endpoint, token, search=name))
    if owner:
        found |= set(hub.model_ids(endpoint, token, author=owner))
    if not found:
        found = set(hub.model_ids(endpoint, token))
    ids = sorted(i for i in found if _ID.match(i) and i != model_id)
    near = difflib.get_close_matches(model_id, ids, n=MAX_SUGGESTIONS, cutoff=0.5)
    return near or ids[:MAX_SUGGESTIONS]


async def check_on_hub(app: AppContext, req: ModelDownloadRequest) -> None:
    """Refuse at once what the hub already refuses (no Job is submitted): an unknown modelId (naming the closest
    ids the hub has), an unknown revision, a token the hub rejects, a gated model without hfToken. A hub the
    control plane cannot reach, or a hub error, is left to the Job, which runs on the cluster's network."""
    endpoint = app.settings.hf_endpoint or DEFAULT_HUB
    token = req.hf_token.get_secret_value() if req.hf_token is not None else None
    if token is not None and not (token.isascii() and token.isprintable() and " " not in token):
        # It travels in an HTTP header (ASCII only); never echoed.
        raise InvalidInput("Invalid input: hfToken: a Hugging Face token is printable ASCII with no spaces (hf_…)",
                           hint="Copy the token from huggingface.co/settings/tokens.",
                           details={"fields": [{"field": "hfToken", "message": "not a token"}]})
    found = await blocking(hub.lookup_model, endpoint, req.model_id, req.revision, token)
    if found.error_code == "RepoNotFound" or (found.status == 404 and found.error_code is None):
        near = await blocking(closest_ids, endpoint, token, req.model_id)
        has = f"; it has {', '.join(near)}" if near else ""
        raise InvalidInput(
            f"Invalid input: modelId: {req.model_id} is not on the hub {endpoint}{has}",
            hint="Use one of the hub's model ids (owner/name, as its model page shows); a private repo needs hfToken.",
            details={"fields": [{"field": "modelId"}], "hub": endpoint, "closest": near},
        )
    if found.error_code == "RevisionNotFound":
        raise InvalidInput(
            f"Invalid input: revision: {req.model_id} has no revision {req.revision} on the hub {endpoint}",
            hint="Use a branch, tag or commit of the model (main by default).",
            details={"fields": [{"field": "revision"}], "hub": endpoint},
        )
    if found.status in (401, 403):
        raise InvalidInput(
            f"Invalid input: hfToken: the hub {endpoint} refused the token for {req.model_id} (HTTP {found.status})",
            hint="Pass a valid Hugging Face access token (read scope) that has been granted access to this model.",
            details={"fields": [{"field": "hfToken"}], "hub": endpoint},
        )
    if found.status == 200 and found.gated and token is None:
        raise InvalidInput(
            f"Invalid input: hfToken: {req.model_id} is gated on the hub {endpoint}: a token is required",
            hint="Accept the model's licence on its hub page, then pass hfToken (a read token of that account).",
            details={"fields": [{"field": "hfToken"}], "hub": endpoint},
        )
