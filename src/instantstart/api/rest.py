"""REST routes generated from the catalog: parse, call the one invocation path, shape the response."""

from __future__ import annotations

import hashlib
from typing import Any

from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from instantstart.catalog.invoke import invoke_model, invoke_spec, parse_json
from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.catalog.routes import API_PREFIX
from instantstart.context import AppContext, CallContext
from instantstart.errors import InvalidInput, NotFound, Unauthorized
from instantstart.logs import request_id_var
from instantstart.principal import Principal


async def parse_json_off_loop(raw: bytes) -> Any:
    """parse_json; bodies over 64 KiB are parsed in a worker thread so the event loop keeps answering."""
    if len(raw) <= 64 * 1024:
        return parse_json(raw)
    return await to_thread.run_sync(parse_json, raw)


async def read_arguments(spec: OperationSpec, request: Request) -> dict[str, Any]:
    """The operation's raw arguments: path params plus the JSON body (or the query string for GET)."""
    args: dict[str, Any] = {}
    if spec.method == "GET":
        for key in request.query_params:
            values = request.query_params.getlist(key)
            args[key] = values[0] if len(values) == 1 else values
    else:
        raw = await request.body()  # bounded by the Gate's streamed body limit
        if raw.strip():
            body = await parse_json_off_loop(raw)
            if not isinstance(body, dict):
                raise InvalidInput("Invalid input: (body): the arguments must be a JSON object")
            args.update(body)
    for name, value in request.path_params.items():
        if name in args and args[name] != value:
            raise InvalidInput(f"Invalid input: {name}: differs between the path and the body")
        args[name] = value
    return args


def add_routes(app: FastAPI, catalog: Catalog, context: AppContext) -> None:
    """One resource route per catalog operation under /api/v1, plus POST /api/v1/tools/{name}."""

    async def call_tool(request: Request) -> Response:
        spec = catalog.get(request.path_params["name"])
        if spec is None:
            raise NotFound(f"Unknown tool {request.path_params['name']!r}.", hint="See /api/v1/openapi.json.")
        raw = await request.body()
        args: Any = await parse_json_off_loop(raw) if raw.strip() else {}
        return await respond(spec, args, request, context)

    app.add_api_route(API_PREFIX + "/tools/{name}", call_tool, methods=["POST"], include_in_schema=False)
    for spec in catalog:
        app.add_api_route(
            API_PREFIX + spec.path,
            _endpoint(spec, context),
            methods=[spec.method],
            include_in_schema=False,
            name=spec.name,
        )


async def respond(spec: OperationSpec, args: Any, request: Request, context: AppContext) -> Response:
    """Invoke the operation for a REST request (as the caller the gate authenticated): 202 for mutations,
    200 for reads."""
    principal = request.scope.get("instantstart.principal")
    if not isinstance(principal, Principal):
        raise Unauthorized("Missing or invalid API token.")
    call = CallContext(
        app=context,
        idempotency_key=request.headers.get("idempotency-key"),
        request_id=request_id_var.get(),
        face=principal.face,
        principal=principal,
    )
    if spec.mutating:
        return JSONResponse(await invoke_spec(spec, args, call), status_code=202)
    body, etag = encoded(spec.name, await invoke_model(spec, args, call))
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if etag in if_none_match(request):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


# The last encoding per read operation, keyed on the result object itself: a service that serves one cached
# result to many pollers (cluster_get_status) costs one JSON encoding and one hash per result, not per read.
_ENCODED: dict[str, tuple[BaseModel, bytes, str]] = {}


def encoded(name: str, model: BaseModel) -> tuple[bytes, str]:
    """The JSON body of a read's result (camelCase, as the schema says) and its strong ETag."""
    hit = _ENCODED.get(name)
    if hit is not None and hit[0] is model:
        return hit[1], hit[2]
    body = model.__pydantic_serializer__.to_json(model, by_alias=True)
    etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
    _ENCODED[name] = (model, body, etag)
    return body, etag


def if_none_match(request: Request) -> set[str]:
    """The entity tags of the request's If-None-Match header (weak ones compared by their opaque part)."""
    header = request.headers.get("if-none-match")
    if not header:
        return set()
    return {tag.strip().removeprefix("W/") for tag in header.split(",")}


def fast_reads(catalog: Catalog, context: AppContext) -> dict[str, Any]:
    """The reads on static paths (no path parameters), by full path: the Gate serves these directly when the
    request needs nothing FastAPI adds (no CORS origin), as the routes above would, errors included."""
    return {
        API_PREFIX + spec.path: _endpoint(spec, context)
        for spec in catalog
        if spec.method == "GET" and not spec.mutating and "{" not in spec.path
    }


def _endpoint(spec: OperationSpec, context: AppContext) -> Any:
    async def endpoint(request: Request) -> Response:
        return await respond(spec, await read_arguments(spec, request), request, context)

    endpoint.__name__ = spec.name
    return endpoint
