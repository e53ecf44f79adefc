"""Decoding a write request: its body, DeleteOptions and fieldValidation mode; the reply's Warning header."""

from __future__ import annotations

import json

from hyperpod_twin.kube import protobuf
from hyperpod_twin.kube.http import Request, Response
from hyperpod_twin.kube.resource_checks import WriteOptions
from hyperpod_twin.kube.status import ApiError
from hyperpod_twin.kube.store import Obj


def field_validation(request: Request) -> str:
    """The write's `fieldValidation` mode (Strict, Warn or Ignore; Warn when absent)."""
    value = request.param("fieldValidation") or "Warn"
    for mode in ("Strict", "Warn", "Ignore"):
        if value.lower() == mode.lower():
            return mode
    raise ApiError(400, f"fieldValidation must be one of Ignore, Warn, Strict; got {value!r}", "BadRequest")


def with_warnings(response: Response, opts: WriteOptions) -> Response:
    """`response` with the write's warnings as one Warning header."""
    if opts.warnings:
        # One Warning header, comma-separated values (RFC 9111 §5.5 form, which client-go parses).
        response.headers["Warning"] = ", ".join(
            '299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"' for w in opts.warnings
        )
    return response


def decode_body(request: Request) -> Obj:
    """The request body as an object, from JSON, YAML or Kubernetes protobuf."""
    if request.content_type == "application/vnd.kubernetes.protobuf":
        try:
            return protobuf.decode(request.body)
        except protobuf.ProtobufError as err:
            raise ApiError(415, str(err), "UnsupportedMediaType") from err
    try:
        if request.content_type in ("application/yaml", "application/apply-patch+yaml"):
            import yaml

            body = yaml.safe_load(request.body)
        else:
            body = json.loads(request.body or b"null")
    except ValueError as err:
        raise ApiError(400, f"couldn't decode the request body: {err}", "BadRequest") from err
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be an object", "BadRequest")
    return body


def delete_options(request: Request) -> Obj:
    """DeleteOptions from the body (JSON or protobuf) merged with the query parameters."""
    options: Obj = {}
    if request.body.strip():
        try:
            if request.content_type == "application/vnd.kubernetes.protobuf":
                parsed = protobuf.decode(request.body)
            else:
                parsed = json.loads(request.body)
        except ValueError as err:
            raise ApiError(400, f"couldn't decode DeleteOptions: {err}", "BadRequest") from err
        if isinstance(parsed, dict):
            options = parsed
    if request.param("propagationPolicy"):
        options["propagationPolicy"] = request.param("propagationPolicy")
    if request.param("orphanDependents"):
        options["orphanDependents"] = request.flag("orphanDependents")
    grace = request.param("gracePeriodSeconds")
    if grace:
        try:
            options["gracePeriodSeconds"] = int(grace)
        except ValueError as err:
            raise ApiError(400, f"gracePeriodSeconds must be an integer, got {grace!r}", "BadRequest") from err
    return options
