"""AWS wire protocols as the twin sees them: which service and operation a request is, and how to answer it."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import parse_qs, unquote
from xml.sax.saxutils import escape

import botocore.session

# Signing name (credential scope) -> botocore service name, for the services the twin extends or
# must recognise for fault injection. Unknown signing names are passed to moto untouched.
SIGNING_TO_SERVICE = {
    "sagemaker": "sagemaker",
    "eks": "eks",
    "fsx": "fsx",
    "servicequotas": "service-quotas",
    "sts": "sts",
    "ec2": "ec2",
    "iam": "iam",
    "s3": "s3",
    "elasticloadbalancing": "elbv2",
    "tagging": "resourcegroupstaggingapi",
    "aps": "amp",
    "grafana": "grafana",
}

_RUNTIME_PATH = re.compile(r"^/endpoints/[^/]+/(invocations|async-invocations|invocations-response-stream)$")
# AMP's Prometheus-compatible query API: not in the botocore model; IAM authorises it as aps:QueryMetrics.
_AMP_QUERY_PATH = re.compile(r"^/workspaces/[^/]+/api/v1/(query|query_range)$")
_CREDENTIAL_RE = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")


class AwsError(Exception):
    """An AWS error response: `code` is the error type botocore surfaces as `Error.Code`."""

    def __init__(self, code: str, message: str, status: int = 400, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.extra = extra


class PassThrough(Exception):
    """Raised by an extension handler to let moto answer the request after all."""


def validation(message: str) -> AwsError:
    """The generic AWS ValidationException (HTTP 400)."""
    return AwsError("ValidationException", message)


@dataclass
class RawResponse:
    """A fully formed HTTP answer (used for XML protocols and non-200 successes)."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class AwsRequest:
    """One AWS API call, identified and parsed far enough for the twin's extensions and fault rules."""

    service: str
    operation: str | None
    region: str
    access_key: str | None
    protocol: str
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    query: dict[str, list[str]]
    uri_params: dict[str, str] = field(default_factory=dict)
    _json: dict[str, Any] | None = None

    @property
    def params(self) -> dict[str, Any]:
        """Input members: the JSON body, merged with URI and query members for rest-json."""
        if self._json is None:
            data: dict[str, Any] = {}
            if self.protocol in ("json", "rest-json") and self.body:
                try:
                    loaded = json.loads(self.body)
                except ValueError as exc:
                    raise AwsError("SerializationException", "Request body is not valid JSON") from exc
                if isinstance(loaded, dict):
                    data = loaded
            elif self.protocol in ("query", "ec2"):
                form = parse_qs(self.body.decode("utf-8", "replace"), keep_blank_values=True)
                merged = {**self.query, **form}
                data = {k: v[0] for k, v in merged.items()}
            if self.protocol == "rest-json":
                data = {**_rest_query_members(self.service, self.operation, self.query), **data}
                data.update(self.uri_params)
            self._json = data
        return self._json


_UNSIGNED_STS = ("AssumeRoleWithWebIdentity", "AssumeRoleWithSAML")


def identify(
    method: str, path: str, raw_query: str, headers: dict[str, str], body: bytes, default_region: str
) -> AwsRequest | None:
    """Work out service, region and operation of a request; None if it is not a recognised AWS call."""
    query = parse_qs(raw_query, keep_blank_values=True)
    lower = {k.lower(): v for k, v in headers.items()}
    match = _CREDENTIAL_RE.search(lower.get("authorization", ""))
    access_key: str | None = None
    if match:
        access_key, region, signing = match.group(1), match.group(2), match.group(3)
    elif "X-Amz-Credential" in query:
        parts = query["X-Amz-Credential"][0].split("/")
        if len(parts) < 5:
            return None
        access_key, region, signing = parts[0], parts[2], parts[3]
    elif _query_param(query, body, "Action") in _UNSIGNED_STS:
        # STS calls that AWS accepts unsigned (the token is the credential): identified by their Action.
        access_key, region, signing = None, default_region, "sts"
    else:
        return None
    service = SIGNING_TO_SERVICE.get(signing)
    if service is None:
        return None
    if service == "sagemaker" and "x-amz-target" not in lower and _RUNTIME_PATH.match(path):
        service = "sagemaker-runtime"  # same signing name; the runtime is REST (/endpoints/{name}/invocations)
    if service == "elbv2":
        version = _query_param(query, body, "Version")
        if version and version != "2015-12-01":
            service = "elb"
    protocol = _protocol(service)
    operation: str | None = None
    uri_params: dict[str, str] = {}
    if protocol in ("json", "smithy-rpc-v2-cbor"):
        target = lower.get("x-amz-target", "")
        operation = target.rsplit(".", 1)[-1] if target else None
        if operation is None and protocol == "smithy-rpc-v2-cbor":
            operation = path.rstrip("/").rsplit("/", 1)[-1] or None
    elif protocol in ("query", "ec2"):
        operation = _query_param(query, body, "Action")
    elif service == "amp" and _AMP_QUERY_PATH.match(path):
        operation = "QueryMetrics"
    elif protocol == "rest-json":
        found = _match_rest(service, method, path)
        if found:
            operation, uri_params = found
            if service == "eks" and "name" in uri_params:
                # EKS calls the cluster-name URI member `name` in some operations and `clusterName` in
                # others; the handlers read `clusterName`.
                uri_params.setdefault("clusterName", uri_params["name"])
    return AwsRequest(
        service=service,
        operation=operation,
        region=region or default_region,
        access_key=access_key,
        protocol=protocol,
        method=method,
        path=path,
        headers=headers,
        body=body,
        query=query,
        uri_params=uri_params,
    )


def _query_param(query: dict[str, list[str]], body: bytes, name: str) -> str | None:
    if name in query:
        return query[name][0]
    if body and b"=" in body:
        form = parse_qs(body.decode("utf-8", "replace"))
        if name in form:
            return form[name][0]
    return None


@cache
def _session() -> botocore.session.Session:
    """One botocore session (one loader: each service's JSON model parsed once) for the twin's own model reads."""
    return botocore.session.get_session()


@cache
def _service_model(service: str) -> Any:
    return _session().get_service_model(service)


def service_model(service: str) -> Any:
    """The botocore model of `service` (cached; shared by the protocol and the input-shape check)."""
    return _service_model(service)


def _protocol(service: str) -> str:
    return str(_service_model(service).protocol)


@cache
def _rest_routes(service: str) -> list[tuple[str, re.Pattern[str], str, list[str]]]:
    routes = []
    model = _service_model(service)
    for name in model.operation_names:
        http = model.operation_model(name).http
        uri = http["requestUri"].split("?", 1)[0]
        names: list[str] = []

        def repl(m: re.Match[str], names: list[str] = names) -> str:
            label = m.group(1)
            greedy = label.endswith("+")
            label = label.rstrip("+")
            names.append(label)
            return f"(?P<{label}>.+)" if greedy else f"(?P<{label}>[^/]+)"

        pattern = re.compile("^" + re.sub(r"\{([^}]+)\}", repl, uri.rstrip("/") or "/") + "/?$")
        routes.append((http["method"], pattern, name, names))
    # Literal routes before templated ones, longer first, so /clusters/{name}/addons beats /clusters/{name}.
    routes.sort(key=lambda r: (len(r[3]), -len(r[1].pattern)))
    return routes


def _match_rest(service: str, method: str, path: str) -> tuple[str, dict[str, str]] | None:
    model = _service_model(service)
    for http_method, pattern, name, _labels in _rest_routes(service):
        if http_method != method:
            continue
        m = pattern.match(path)
        if m:
            op = model.operation_model(name)
            params = {}
            members = op.input_shape.members if op.input_shape else {}
            by_location = {
                shape.serialization.get("name", member): member
                for member, shape in members.items()
                if shape.serialization.get("location") == "uri"
            }
            for label, value in m.groupdict().items():
                params[by_location.get(label, label)] = unquote(value)
            return name, params
    return None


def _rest_query_members(service: str, operation: str | None, query: dict[str, list[str]]) -> dict[str, Any]:
    if operation is None:
        return {}
    op = _service_model(service).operation_model(operation)
    out: dict[str, Any] = {}
    if op.input_shape is None:
        return out
    for member, shape in op.input_shape.members.items():
        if shape.serialization.get("location") != "querystring":
            continue
        key = shape.serialization.get("name", member)
        if key not in query:
            continue
        values = query[key]
        if shape.type_name == "list":
            out[member] = values
        elif shape.type_name == "integer":
            out[member] = int(values[0])
        elif shape.type_name == "boolean":
            out[member] = values[0].lower() == "true"
        else:
            out[member] = values[0]
    return out


def page(
    params: dict[str, Any], items: list[Any], key: str, *, default_size: int = 100, camel: bool = False
) -> dict[str, Any]:
    """One page of `items` under `key`, driven by the request's NextToken/MaxResults (nextToken/maxResults
    for lowerCamel APIs such as EKS). The token is the offset of the next item."""
    token_key, size_key = ("nextToken", "maxResults") if camel else ("NextToken", "MaxResults")
    token = str(params.get(token_key) or "0")
    if not token.isdigit():
        # AWS answers a token it did not issue with a 400, never an internal failure.
        code = "InvalidParameterException" if camel else "ValidationException"
        raise AwsError(code, f"The {token_key} provided is invalid: {token}")
    start = int(token)
    size = int(params.get(size_key) or default_size)
    out: dict[str, Any] = {key: items[start : start + size]}
    if start + size < len(items):
        out[token_key] = str(start + size)
    return out


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def json_response(req: AwsRequest, payload: dict[str, Any], status: int = 200) -> RawResponse:
    """Serialise a successful json / rest-json answer."""
    content_type = "application/x-amz-json-1.1" if req.protocol == "json" else "application/json"
    body = json.dumps(payload, default=_json_default).encode()
    return RawResponse(status, body, {"Content-Type": content_type, "x-amzn-RequestId": str(uuid.uuid4())})


def xml_response(req: AwsRequest, result_xml: str) -> RawResponse:
    """Serialise a successful query-protocol answer around `result_xml` (the <XResult> content)."""
    op = req.operation or "Unknown"
    ns = {
        "sts": "https://sts.amazonaws.com/doc/2011-06-15/",
        "iam": "https://iam.amazonaws.com/doc/2010-05-08/",
    }.get(req.service, "")
    rid = str(uuid.uuid4())
    body = (
        f'<{op}Response xmlns="{ns}"><{op}Result>{result_xml}</{op}Result>'
        f"<ResponseMetadata><RequestId>{rid}</RequestId></ResponseMetadata></{op}Response>"
    )
    return RawResponse(200, body.encode(), {"Content-Type": "text/xml", "x-amzn-RequestId": rid})


def error_response(req: AwsRequest | None, err: AwsError) -> RawResponse:
    """Serialise `err` the way the request's protocol carries errors, so botocore parses the code."""
    protocol = req.protocol if req else "json"
    rid = str(uuid.uuid4())
    if protocol in ("json", "rest-json"):
        payload: dict[str, Any] = {"__type": err.code, "message": err.message, **err.extra}
        if protocol == "json":
            payload["Message"] = err.message
        headers = {
            "Content-Type": "application/x-amz-json-1.1" if protocol == "json" else "application/json",
            "x-amzn-ErrorType": err.code,
            "x-amzn-RequestId": rid,
        }
        return RawResponse(err.status, json.dumps(payload).encode(), headers)
    msg = escape(err.message)
    code = escape(err.code)
    if protocol == "ec2":
        body = (
            f"<Response><Errors><Error><Code>{code}</Code><Message>{msg}</Message></Error></Errors>"
            f"<RequestID>{rid}</RequestID></Response>"
        )
    elif protocol == "rest-xml":
        body = f"<Error><Code>{code}</Code><Message>{msg}</Message><RequestId>{rid}</RequestId></Error>"
    elif protocol == "smithy-rpc-v2-cbor":
        # The CBOR protocol's error body is CBOR; an empty body with the error-type header is parsed
        # by botocore as that code.
        return RawResponse(
            err.status, b"", {"x-amzn-ErrorType": err.code, "smithy-protocol": "rpc-v2-cbor", "x-amzn-RequestId": rid}
        )
    else:
        kind = "Receiver" if err.status >= 500 else "Sender"
        body = (
            f"<ErrorResponse><Error><Type>{kind}</Type><Code>{code}</Code><Message>{msg}</Message></Error>"
            f"<RequestId>{rid}</RequestId></ErrorResponse>"
        )
    return RawResponse(err.status, body.encode(), {"Content-Type": "text/xml", "x-amzn-RequestId": rid})


def throttling_code(protocol: str, service: str) -> tuple[str, int]:
    """The throttling error code and status a service really uses (all are retried by botocore)."""
    if service == "ec2":
        return "RequestLimitExceeded", 503
    if service == "s3":
        return "SlowDown", 503
    if protocol == "query":
        return "Throttling", 400
    return "ThrottlingException", 400
