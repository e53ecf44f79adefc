"""Calling an operation by name: input validation, the handler, output shaping, one error text for all faces."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

from anyio import to_thread
from pydantic import BaseModel, ValidationError

from instantstart.catalog.audit import audit
from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.catalog.roles import check_owner, check_role, rule_for
from instantstart.catalog.secret import secret_values
from instantstart.context import CallContext
from instantstart.errors import Forbidden, InstantStartError, InternalError, InvalidInput, NotFound
from instantstart.logs import carry_secrets, release_secrets
from instantstart.principal import Principal
from instantstart.readonly import read_only_call

log = logging.getLogger(__name__)

CLIENT_TOKEN = "clientToken"
_TOKEN = re.compile(r"^[A-Za-z0-9._:\-]{1,200}$")
MAX_DEPTH = 32  # no operation argument nests deeper than a few levels
MAX_INT = (1 << 63) - 1  # what every database column and AWS API accepts
MAX_ECHO = 200  # characters of a caller's value an error message may repeat


def clip(text: str, limit: int = MAX_ECHO) -> str:
    """`text`, shortened to `limit` characters with a note of how much was cut."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def _bad(code: str, field: str, message: str) -> InvalidInput:
    fields = [{"field": field, "message": message}]
    return InvalidInput(f"Invalid input: {field}: {message}", details={"fields": fields, "reason": code})


def check_bounds(value: Any, where: str = "(body)", depth: int = 0) -> None:
    """Refuse input no operation needs and that breaks things further down: nesting deeper than
    MAX_DEPTH, integers beyond 64 bits (databases overflow), NUL characters (PostgreSQL refuses them)."""
    if depth > MAX_DEPTH:
        raise _bad("TOO_DEEP", where, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                raise _bad("NUL_CHARACTER", where, "a key contains a NUL character")
            check_bounds(item, f"{where}.{clip(str(key), 64)}" if depth else clip(str(key), 64), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_bounds(item, f"{where}.{index}", depth + 1)
    elif isinstance(value, str):
        if "\x00" in value:
            raise _bad("NUL_CHARACTER", where, "contains a NUL character, which no field accepts")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise _bad("INTEGER_TOO_LARGE", where, f"integer beyond ±{MAX_INT}")


def parse_json(raw: bytes) -> Any:
    """A request body as JSON, with 422s naming the problem for malformed, too deep or too large input."""
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"Invalid input: (body): not valid JSON ({clip(str(exc))})") from None
    except RecursionError:
        raise _bad("TOO_DEEP", "(body)", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's 4,300-digit conversion limit
        raise _bad("INTEGER_TOO_LARGE", "(body)", clip(str(exc))) from None
    check_bounds(value)
    return value


def request_digest(spec: OperationSpec, request: Any) -> str:
    """A digest of the validated arguments (Secret fields excluded: they dump masked)."""
    canonical = json.dumps(request.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{spec.name}\n{canonical}".encode()).hexdigest()


def validation_error(exc: ValidationError) -> InvalidInput:
    """Turn a pydantic ValidationError into the InvalidInput every face reports, naming each field."""
    fields = []
    for err in exc.errors(include_url=False, include_input=False)[:20]:
        loc = clip(".".join(str(part) for part in err["loc"]) or "(body)", 120)
        fields.append({"field": loc, "message": clip(err["msg"])})
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
    out: dict[str, Any] = (await invoke_model(spec, raw, ctx)).model_dump(mode="json", by_alias=True)
    return out


async def invoke_model(spec: OperationSpec, raw: dict[str, Any], ctx: CallContext) -> BaseModel:
    """As `invoke_spec`, returning the output model itself (a face that caches encodings keys them on it:
    a service that serves one result object to many callers is encoded once).

    The caller's role is checked here, for every face, before the input is read (FORBIDDEN); each refused call
    and each call that is not read-only is recorded in the audit trail."""
    principal = ctx.principal
    if principal is None:
        return await _run(spec, raw, ctx)
    try:
        check_role(spec, principal)
        result = await _run(spec, raw, ctx, principal)
    except InstantStartError as exc:
        if isinstance(exc, Forbidden):
            await audit(ctx, principal, spec, raw, "denied", exc.code.value)
        elif not spec.read_only:
            await audit(ctx, principal, spec, raw, "error", exc.code.value)
        raise
    if not spec.read_only:
        operation_id = str(getattr(result, "operation_id", "") or "")
        await audit(ctx, principal, spec, raw, "ok", operation_id=operation_id)
    return result


async def _run(
    spec: OperationSpec, raw: dict[str, Any], ctx: CallContext, principal: Principal | None = None
) -> BaseModel:
    if not isinstance(raw, dict):
        raise InvalidInput("Invalid input: (body): the arguments must be a JSON object")
    check_bounds(raw)
    args, key = split_client_token(raw, ctx.idempotency_key)
    ctx.idempotency_key = key
    try:
        request = spec.input_model.model_validate(args)
    except ValidationError as exc:
        raise validation_error(exc) from None
    own_field = rule_for(spec).own_field
    if principal is not None and own_field is not None:
        check_owner(spec, principal, getattr(request, own_field, None))
    bound = False
    if key is not None and spec.mutating:
        store = ctx.app.runner.store
        bound = await to_thread.run_sync(store.bind_idempotency_key, spec.name, key, request_digest(spec, request))
    guard = read_only_call.set(spec.name) if spec.read_only else None  # the store and feeds refuse its writes
    # Redacted from every log line from now on; kept out of what this call records (never out of other calls').
    carried = carry_secrets(secret_values(request))
    try:
        result = await spec.handler(ctx, request)
    except InstantStartError as exc:
        if bound and key is not None:  # nothing was recorded: the key may be used again with corrected arguments
            await to_thread.run_sync(ctx.app.runner.store.unbind_idempotency_key, spec.name, key)
        exc.message = clip(exc.message, 1000)
        raise
    except Exception as exc:
        log.exception("operation %s failed unexpectedly", spec.name)
        raise InternalError(f"{spec.name} failed unexpectedly ({type(exc).__name__}).") from exc
    finally:
        if guard is not None:
            read_only_call.reset(guard)
        release_secrets(carried)
    shaped: BaseModel = (
        result if isinstance(result, spec.output_model) else spec.output_model.model_validate(result)
    )
    return shaped
