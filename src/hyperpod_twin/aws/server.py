"""One HTTP port for the twin's AWS side: `/_twin/…` control, scripted faults, extensions, then moto."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import botocore.session
from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

from hyperpod_twin import writes

from . import calllog, mlflow_servers
from .context import AwsContext
from .model_check import check_request
from .protocol import AwsError, AwsRequest, PassThrough, RawResponse, error_response, identify, service_model

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
ControlHandler = Callable[[Request], Response]


class TwinAwsApp:
    """The WSGI application: routes each request to control, a fault, an extension, or moto."""

    def __init__(self, ctx: AwsContext, control: ControlHandler) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        self.ctx = ctx
        self.control = control
        self.moto: WsgiApp = DomainDispatcherApplication(create_backend_app)
        self.mlflow: mlflow_servers.MlflowServers | None = None  # set by the AWS side

    def warm(self, backends: tuple[str, ...]) -> None:
        """Build moto's per-service applications for `backends` now (moto builds each on the first request for
        its service, under its dispatcher lock, instantiating a throw-away backend: seconds of CPU for IAM's
        managed policies). Safe beside requests: it takes the same lock."""
        dispatcher: Any = self.moto
        with dispatcher.lock:
            for backend in backends:
                if backend not in dispatcher.app_instances:
                    dispatcher.app_instances[backend] = dispatcher.create_app(backend)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "") or "/"
        request = Request(environ)
        if path.startswith("/_twin/") or path == "/_twin":
            response = self.control(request)
            return response(environ, start_response)
        body = request.get_data(cache=True)
        if path.startswith(mlflow_servers.PROXY_PREFIX) and self.mlflow is not None:
            return self._mlflow(environ, start_response, request, path, body)
        # moto reads the body again from wsgi.input.
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ["HTTP_X_MOTO_ACCOUNT_ID"] = self.ctx.account_id
        headers = {k: v for k, v in request.headers.items()}
        # Match REST routes on the raw (still percent-encoded) path: an EKS principalArn in the path
        # carries an encoded "/" that PATH_INFO has already decoded.
        raw_path = str(environ.get("RAW_URI") or environ.get("REQUEST_URI") or path).split("?", 1)[0]
        req = identify(
            request.method,
            raw_path,
            environ.get("QUERY_STRING", ""),
            headers,
            body,
            self.ctx.region,
        )
        if req is not None:
            calllog.record(req, environ.get("QUERY_STRING", ""), headers.get("User-Agent", ""))
        else:
            calllog.record_unparsed(raw_path, headers)
        if req is not None and not known_region(req.region):
            # With an endpoint override AWS receives the call and refuses the credential scope.
            code = "InvalidSignatureException" if req.protocol in ("json", "rest-json") else "SignatureDoesNotMatch"
            scope = AwsError(code, f"Credential should be scoped to a valid region, not '{req.region}'.", 403)
            return _send(error_response(req, scope), environ, start_response)
        if req is not None:
            # An S3 REST request names no operation: name it from its method and path (a listing is no write).
            query = environ.get("QUERY_STRING", "")
            s3_op = calllog.s3_operation(req.method, req.path, query) if req.service == "s3" else ""
            writes.aws(req.service, req.operation or s3_op)
            err = self.ctx.faults.check_request(req)
            if err is None:
                err = _model_refusal(req)
            if err is None:
                err = self.ctx.authorizer(req)
            if err is not None:
                return _send(error_response(req, err), environ, start_response)
            size = self.ctx.faults.page_size(req)
            if size is not None:  # AWS may answer fewer items than MaxResults asks, with a token for more
                key = "maxResults" if req.protocol == "rest-json" else "MaxResults"
                asked = req.params.get(key)
                req.params[key] = min(int(asked), size) if asked else size
            guard = self.ctx.guards.get((req.service, req.operation or ""))
            if guard is not None:
                try:
                    with self.ctx.locked():
                        guard(req)
                except AwsError as exc:
                    return _send(error_response(req, exc), environ, start_response)
            handler = self.ctx.handlers.get((req.service, req.operation or ""))
            if handler is not None:
                try:
                    answer = handler(req)
                except PassThrough:
                    return self._call_moto(req, environ, start_response)
                except AwsError as exc:
                    answer = error_response(req, exc)
                except Exception as exc:
                    # A bug in the twin: loud, but a 4xx so botocore does not retry it for a minute.
                    log.exception("twin extension %s.%s failed", req.service, req.operation)
                    answer = error_response(
                        req,
                        AwsError(
                            "InternalFailure",
                            f"The twin's extension for {req.operation} failed: {type(exc).__name__}: {exc}",
                            400,
                        ),
                    )
                return _send(answer, environ, start_response)
        return self._call_moto(req, environ, start_response)

    def _mlflow(self, environ: dict[str, Any], start_response: StartResponse, request: Request, path: str,
                body: bytes) -> Iterable[bytes]:
        """A tracking server's REST API (see mlflow_servers.forward), logged as its sagemaker-mlflow action."""
        assert self.mlflow is not None
        headers = dict(request.headers.items())
        status, content, ctype, action = mlflow_servers.forward(
            self.mlflow, request.method, path, environ.get("QUERY_STRING", ""), headers, body)
        if action is not None:
            calllog.record_action("sagemaker-mlflow", action, headers.get("User-Agent", ""))
        start_response(f"{status} {'OK' if status < 400 else 'ERROR'}", [("Content-Type", ctype)])
        return [content]

    def _call_moto(
        self, req: AwsRequest | None, environ: dict[str, Any], start_response: StartResponse
    ) -> Iterable[bytes]:
        captured: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[..., Any]:
            captured["status"] = status
            captured["headers"] = headers
            return lambda data: None

        failure: str | None = None
        try:
            chunks = b"".join(self.moto(environ, capture))
        except NotImplementedError as exc:  # moto raises this for AWS calls it lacks
            captured = {"status": "500 INTERNAL SERVER ERROR", "headers": []}
            chunks = str(exc).encode()
        except Exception as exc:
            log.exception("moto failed on %s", req.operation if req else environ.get("PATH_INFO"))
            captured = {"status": "500 INTERNAL SERVER ERROR", "headers": []}
            chunks = b""
            failure = f"{type(exc).__name__}: {exc}"
        code = int(str(captured.get("status", "500")).split()[0])
        content_type = dict((k.lower(), v) for k, v in captured.get("headers", [])).get("content-type", "")
        # A HEAD answer has no body to tell a route miss from a real 404 (S3 HeadBucket/HeadObject on a missing
        # bucket or key): keep moto's 404.
        unrouted = code == 404 and content_type.startswith("text/html") and environ.get("REQUEST_METHOD") != "HEAD"
        if req is not None and (code == 500 or unrouted):
            return _send(error_response(req, _moto_gap(req, chunks, failure)), environ, start_response)
        start_response(str(captured["status"]), list(captured["headers"]))
        return [chunks]


@lru_cache(maxsize=1)
def _regions() -> frozenset[str]:
    session = botocore.session.get_session()
    names: set[str] = set()
    for partition in session.get_available_partitions():
        names.update(session.get_available_regions("ec2", partition_name=partition))
    return frozenset(names)


# The services a cluster creation calls first: their models are parsed in the background when the twin starts
# (a few seconds of CPU, EC2's model alone ~1.5 s) instead of inside the first request that names them.
PRELOADED_SERVICES = ("ec2", "sts", "iam", "s3", "eks", "sagemaker", "service-quotas")


def preload(app: TwinAwsApp, services: tuple[str, ...] = PRELOADED_SERVICES) -> None:
    """Parse the Region list and the botocore models (the twin's and moto's copies) of `services` and build
    moto's applications for them (blocking; each piece is cached or built under moto's lock, so a request
    that needs one meanwhile at worst waits for it or parses it too)."""
    from moto.core.utils import get_service_model as moto_model

    _regions()
    for service in services:
        service_model(service)
        moto_model(service)
    app.warm(tuple(s.replace("-", "") for s in services))


def known_region(region: str) -> bool:
    """Whether `region` is a real AWS Region (IAM and other global services sign with us-east-1)."""
    return region in _regions() or region in ("aws-global", "us-east-1")


def _model_refusal(req: AwsRequest) -> AwsError | None:
    """What AWS's front door answers for a request that breaks its botocore input shape."""
    try:
        return check_request(req)
    except AwsError as exc:  # a body that is not JSON
        return exc


def _moto_gap(req: AwsRequest, body: bytes, failure: str | None) -> AwsError:
    """The AWS error to give where moto has no answer.

    moto answers calls it does not implement with a bare 500 (or a routing 404 page), which botocore
    retries for a long time. AWS answers an operation it does not know with a 4xx that is not
    retried; a moto failure on valid input becomes a 400 validation error naming the cause.
    """
    op = f"{req.service}.{req.operation or '?'}"
    if failure is None:
        log.warning("moto does not answer %s: %s", op, body[:300])
        code = "InvalidAction" if req.protocol in ("query", "ec2") else "UnknownOperationException"
        text = body[:200].decode("utf-8", "replace") if not body.lstrip().startswith(b"<") else "no route"
        return AwsError(code, f"The digital twin (moto 5.2.5 + extensions) does not implement {op}: {text}", 400)
    code = "InvalidParameterValue" if req.protocol in ("query", "ec2") else "ValidationException"
    return AwsError(code, f"The digital twin (moto 5.2.5) could not process {op}: {failure}", 400)


def _send(answer: RawResponse, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    response = Response(answer.body, status=answer.status, headers=answer.headers)
    return response(environ, start_response)


def _quiet_handler() -> type:
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class QuietHandler(MotoRequestHandler):
        """moto's request handler without a log line per request."""

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            return None

    return QuietHandler


class TwinHttpServer:
    """A threaded werkzeug server running `app` on host:port (port 0 picks a free one)."""

    def __init__(self, app: WsgiApp, host: str, port: int) -> None:
        self._server: BaseWSGIServer = make_server(host, port, app, threaded=True, request_handler=_quiet_handler())
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="twin-aws-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
