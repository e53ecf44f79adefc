"""Calling an operation by name: input validation, the handler, output shaping, one error text for all faces."""

from __future__ import annotations

import logging
import re
from typing import Any

from pydantic import ValidationError

from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.context import CallContext
from instantstart.errors import InstantStartError, InternalError, InvalidInput, NotFound

log = logging.getLogger(__name__)

CLIENT_TOKEN = "clientToken"
_TOKEN = re.compile(r"^[A-Za-z0-9._:\-]{1,200}$")


def validation_error(exc: ValidationError) -> InvalidInput:
    """Turn a pydantic ValidationError into the InvalidInput every face reports, naming each field."""
    fields = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(body)"
        fields.append({"field": loc, "message": err["msg"]})
    message = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
    return InvalidInput(f"Invalid input: {message}", details={"fields": fields})


def split_client_token(raw: dict[str, Any], header_key: str | None) -> tuple[dict[str, Any], str | None]:
    """Take the idempotency key from the `clientToken` argument or the Idempotency-Key header."""
    args = dict(raw)
    token = args.pop(CLIENT_TOKEN, None)
    if token is not None and not isinstance(token, str):
        raise InvalidInput(
            "Invalid input: clientToken: Input should be a valid string",
            details={"fields": [{"field": CLIENT_TOKEN, "message": "Input should be a valid string"}]},
        )
    if token is not None and header_key is not None and token != header_key:
        raise InvalidInput("clientToken and the Idempotency-Key header differ; send one of them.")
    key = header_key if header_key is not None else token
    if key is not None and not _TOKEN.match(key):
        raise InvalidInput(
            "Invalid input: clientToken: 1-200 characters of letters, digits and . _ : -",
            details={"fields": [{"field": CLIENT_TOKEN, "message": "1-200 characters of letters, digits, ._:-"}]},
        )
    return args, key


async def invoke(catalog: Catalog, name: str, raw: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """Validate `raw` against the operation's input model, run it, and return its JSON-ready output."""
    spec = catalog.get(name)
    if spec is None:
        raise NotFound(f"Unknown operation {name!r}.", hint="List the tools to see the valid names.")
    return await invoke_spec(spec, raw, ctx)


async def invoke_spec(spec: OperationSpec, raw: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """As `invoke`, for a spec already looked up."""
    if not isinstance(raw, dict):
        raise InvalidInput("Invalid input: (body): the arguments must be a JSON object")
    args, key = split_client_token(raw, ctx.idempotency_key)
    ctx.idempotency_key = key
    try:
        request = spec.input_model.model_validate(args)
    except ValidationError as exc:
        raise validation_error(exc) from None
    try:
        result = await spec.handler(ctx, request)
    except InstantStartError:
        raise
    except Exception as exc:
        log.exception("operation %s failed unexpectedly", spec.name)
        raise InternalError(f"{spec.name} failed unexpectedly ({type(exc).__name__}).") from exc
    shaped = spec.output_model.model_validate(result) if not isinstance(result, spec.output_model) else result
    out: dict[str, Any] = shaped.model_dump(mode="json", by_alias=True)
    return out
