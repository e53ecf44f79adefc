"""Opt-in call log: with HYPERPOD_TWIN_CALL_LOG=<file>, one `service operation agent` line per AWS call."""

from __future__ import annotations

import os
import re
import threading
from urllib.parse import parse_qs

from .protocol import AwsRequest

ENV = "HYPERPOD_TWIN_CALL_LOG"
_lock = threading.Lock()
# Calls of services the twin passes to moto unparsed (CloudWatch): the operation is the X-Amz-Target's (JSON
# protocol) or the path's (Smithy RPC v2 CBOR), the service the credential scope's signing name, as botocore names it.
_RPC_V2_PATH = re.compile(r"^/service/[^/]+/operation/([A-Za-z0-9]+)$")
_SCOPE = re.compile(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/")
_UNPARSED_SERVICES = {"monitoring": "cloudwatch"}


def s3_operation(method: str, path: str, raw_query: str) -> str:
    """The S3 operation of a path-style request (the REST routes differ only by query subresource)."""
    query = parse_qs(raw_query, keep_blank_values=True)
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2:
        return {"GET": "GetObject", "PUT": "PutObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(
            method, method
        )
    if not parts:
        return "ListBuckets"
    if method == "POST" and "delete" in query:
        return "DeleteObjects"
    if method == "HEAD":
        return "HeadBucket"
    if method == "GET" and "list-type" in query:
        return "ListObjectsV2"
    listing = ("list-type", "prefix", "delimiter", "max-keys", "continuation-token")
    sub = next((k for k in query if k not in listing), "")
    verb = {"GET": "Get", "PUT": "Put", "DELETE": "Delete"}.get(method, method)
    if not sub:
        return {"GET": "ListObjects", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}.get(method, method)
    return f"{verb}Bucket{sub[:1].upper()}{sub[1:]}"


def record_action(service: str, operation: str, user_agent: str) -> None:
    """Append a call that is not an AWS API request the twin parses (a tracking server's REST API)."""
    target = os.environ.get(ENV)
    if not target:
        return
    agent = user_agent.split()[-1] if user_agent.split() else "-"
    with _lock, open(target, "a") as handle:
        handle.write(f"{service} {operation} {agent}\n")


def record(req: AwsRequest, raw_query: str, user_agent: str) -> None:
    """Append the call to the log named by HYPERPOD_TWIN_CALL_LOG (nothing when it is unset)."""
    target = os.environ.get(ENV)
    if not target:
        return
    operation = req.operation
    if req.service == "s3" and operation is None:
        operation = s3_operation(req.method, req.path, raw_query)
    agent = user_agent.split()[-1] if user_agent.split() else "-"
    with _lock, open(target, "a") as handle:
        handle.write(f"{req.service} {operation or '?'} {agent}\n")


def record_unparsed(path: str, headers: dict[str, str]) -> None:
    """Log a call of a service the twin does not parse (CloudWatch's DescribeAlarms …), when the log is on."""
    if not os.environ.get(ENV):
        return
    lower = {k.lower(): v for k, v in headers.items()}
    scope = _SCOPE.search(lower.get("authorization", ""))
    service = _UNPARSED_SERVICES.get(scope.group(1)) if scope else None
    target = lower.get("x-amz-target", "")
    path_op = _RPC_V2_PATH.match(path)
    operation = target.rpartition(".")[2] if target else (path_op.group(1) if path_op else "")
    if service and operation:
        record_action(service, operation, lower.get("user-agent", ""))
