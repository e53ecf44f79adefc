"""The twin's Kubernetes API server for one EKS cluster: authentication, routing, content negotiation."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from hyperpod_twin import writes
from hyperpod_twin.kube import discovery, serviceaccounts
from hyperpod_twin.kube.api import ResourceApi
from hyperpod_twin.kube.auth import AuthError, Identity
from hyperpod_twin.kube.authz import Attributes, allowed, forbidden_message
from hyperpod_twin.kube.certs import ClusterCertificates, make_certificates
from hyperpod_twin.kube.controllers import ControlPlane
from hyperpod_twin.kube.http import HttpServer, Request, Response
from hyperpod_twin.kube.proxy import ServiceProxy
from hyperpod_twin.kube.request_body import decode_body, delete_options, field_validation, with_warnings
from hyperpod_twin.kube.resource_checks import Target, WriteOptions
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.selectors import combine, parse_field_selector, parse_label_selector
from hyperpod_twin.kube.status import ApiError, status_body
from hyperpod_twin.kube.store import ObjectStore, ResourceType
from hyperpod_twin.kube.store_errors import NotFoundError
from hyperpod_twin.kube.streams import BOOKMARK_EVERY, log_stream, pick_container, watch_stream
from hyperpod_twin.kube.table import to_table
from hyperpod_twin.kube.types import REVIEW_TYPES, bootstrap, core

log = logging.getLogger(__name__)
Obj = dict[str, Any]
Authenticator = Callable[[str | None], Identity]
ANONYMOUS_PATHS = {"/version", "/version/", "/healthz", "/livez", "/readyz"}
DEFAULT_WATCH_TIMEOUT = 1800.0
HOLD_LIMIT = 300.0  # seconds a held write reply waits at most (writes/hold)


def new_cluster_runtime(name: str, arn: str) -> ClusterRuntime:
    """A runtime whose store serves the built-in types and holds what a new EKS cluster has."""
    return ClusterRuntime(name=name, arn=arn, store=ObjectStore())


class KubeApiServer:
    """One cluster's API server over HTTP on loopback (start/stop; `url` once started)."""

    def __init__(
        self,
        runtime: ClusterRuntime,
        authenticate: Authenticator,
        host: str = "127.0.0.1",
        port: int = 0,
        certificates: ClusterCertificates | None = None,
    ) -> None:
        self.runtime = runtime
        self.certificates = certificates or make_certificates(runtime.name, (host, "localhost"))
        self.authenticate = authenticate
        self.control = ControlPlane(runtime.store)
        if ("", "namespaces") not in runtime.store.types:
            bootstrap(runtime.store)
        self.api = ResourceApi(runtime.store, self.control)
        self.proxy = ServiceProxy(runtime)
        self.bookmark_interval = BOOKMARK_EVERY  # seconds between watch bookmarks (real servers: ~1 min)
        self._http = HttpServer(
            self.handle, host, port, name=f"kube-api-{runtime.name}", tls=self.certificates.server_context()
        )

    @property
    def url(self) -> str:
        """https://host:port of the server (the EKS cluster endpoint)."""
        return f"{self._http.scheme}://{self._http.host}:{self._http.port}"

    @property
    def ca_data_b64(self) -> str:
        """The cluster CA as eks.describe_cluster returns it."""
        return self.certificates.ca_data_b64

    def start(self) -> None:
        """Listen."""
        self._http.start()

    def stop(self) -> None:
        """Stop listening, end streams and detach the controllers."""
        self._http.stop()
        self.control.close()

    # -- entry ---------------------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        """Serve one request (the HTTP layer's app)."""
        try:
            if request.path not in ANONYMOUS_PATHS or "authorization" in request.headers:
                try:
                    request.identity = self.authenticate(request.headers.get("authorization"))
                except AuthError as err:
                    log.info("rejected request to %s: %s", request.path, err)
                    raise ApiError(401, "Unauthorized", "Unauthorized") from err
            writes.kube(self.runtime.name, request.method, request.path)
            response = self._route(request)
        except ApiError as err:
            response = Response.json(err.code, err.body())
        self._hold(request)
        return response

    def _hold(self, request: Request) -> None:
        """A write to a held resource has landed; its reply waits until the hold is released (or the server
        stops, or HOLD_LIMIT seconds pass), as a reply lost in flight leaves the client waiting."""
        store = self.runtime.store
        if request.method in ("POST", "PUT", "PATCH") and any(
                f"/{plural}" in request.path for plural in set(store.held_writes)):
            deadline = time.monotonic() + HOLD_LIMIT
            while not store.writes_released.wait(0.5) and not self._http.stopping.is_set():
                if time.monotonic() > deadline:
                    break

    def _route(self, request: Request) -> Response:
        path = request.path.rstrip("/") or "/"
        store = self.runtime.store
        gv = discovery.group_versions(list(store.types.values()), self.control.crds)
        if path == "/version" or request.path == "/version/":
            return Response.json(200, discovery.version_info(self.runtime.kubernetes_version))
        if path in ("/healthz", "/livez", "/readyz"):
            return Response(200, b"ok", "text/plain; charset=utf-8")
        if path == "/api":
            return Response.json(200, discovery.api_versions())
        if path == "/apis":
            return Response.json(200, discovery.api_group_list(gv))
        if path == "/openapi/v2":
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if path == "/openapi/v3":
            return Response.json(200, discovery.openapi_v3_index(gv))
        if path.startswith("/openapi/v3/"):
            parts = path[len("/openapi/v3/"):].split("/")
            group, version = ("", parts[1]) if parts[0] == "api" and len(parts) == 2 else (
                (parts[1], parts[2]) if parts[0] == "apis" and len(parts) == 3 else ("?", "?"))
            types = gv.get(group, {}).get(version)
            if types is None:
                raise ApiError(404, "the server could not find the requested resource", "NotFound")
            return Response.json(200, discovery.openapi_v3_document(group, version, types, self.control.crds))
        segments = [s for s in path.split("/") if s]
        if segments[0] == "api" and len(segments) >= 2:
            group, version, rest = "", segments[1], segments[2:]
        elif segments[0] == "apis" and len(segments) >= 2:
            if len(segments) == 2:
                versions = gv.get(segments[1])
                if not versions:
                    raise ApiError(404, "the server could not find the requested resource", "NotFound")
                return Response.json(200, {"kind": "APIGroup", "apiVersion": "v1",
                                           **discovery.api_group(segments[1], sorted(versions))})
            if len(segments) < 3:
                raise ApiError(404, "the server could not find the requested resource", "NotFound")
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if rest and self.runtime.store.api_blocked:  # the outage reaches collections it does not serve too
            raise ApiError(503, "API server unavailable (blocked through /_twin)", "ServiceUnavailable")
        types = gv.get(group, {}).get(version)
        if types is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if not rest:
            return Response.json(200, discovery.resource_list(group, version, types, self.control.crds))
        return self._resource(request, group, version, rest, types)

    # -- resources -----------------------------------------------------------------------------
    def _resource(self, request: Request, group: str, version: str, rest: list[str],
                  types: list[ResourceType]) -> Response:
        if self.runtime.store.api_blocked:
            raise ApiError(503, "API server unavailable (blocked through /_twin)", "ServiceUnavailable")
        watch = request.flag("watch")
        if rest[0] == "watch":
            watch, rest = True, rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        by_plural = {t.plural: t for t in types}
        rtype = by_plural.get(rest[0])
        if rtype is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if namespace is not None and not rtype.namespaced:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        target = Target(rtype, version, namespace, name, sub, "/".join(rest[3:]))
        if rtype in REVIEW_TYPES:
            return self._review(request, rtype)
        self._authorize(request, Attributes(
            verb=_verb(request.method, name, watch), group=group, resource=rtype.plural, subresource=sub or "",
            namespace=namespace or "", name=name or ""))
        if sub == "proxy":
            return self._proxy(request, target)
        if sub == "log":
            return self._logs(request, target)
        if sub == "token" and rtype.plural == "serviceaccounts" and not group and request.method == "POST":
            answer = serviceaccounts.token_request(self.runtime, namespace or "default", name or "",
                                                   decode_body(request))
            return Response.json(201, answer)
        if sub is not None and sub not in rtype.subresources:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        method = request.method
        opts = WriteOptions(
            dry_run=request.param("dryRun") == "All",
            # Apply requires an explicit fieldManager (422 otherwise); other writes default to the agent.
            field_manager=request.param("fieldManager")
            or ("" if request.content_type == "application/apply-patch+yaml" else _manager_from_agent(request)),
            force=request.flag("force"),
            validation=field_validation(request),
        )
        if name is None:
            if method == "GET" and watch:
                return self._watch(request, target)
            if method == "GET":
                return self._list(request, target)
            if method == "POST":
                body = decode_body(request)
                if rtype.plural == "pods" and not group and not opts.dry_run:
                    serviceaccounts.inject_web_identity(self.runtime, namespace or "default", body)
                obj = self.api.create(target, body, opts)
                return with_warnings(self._object(request, target, obj, 201), opts)
            if method == "DELETE":
                options = delete_options(request)
                params = {k: request.param(k) for k in ("labelSelector", "fieldSelector")}
                return Response.json(200, self.api.delete_collection(target, params, options, opts))
            raise ApiError(405, f"{method} is not supported on a collection", "MethodNotAllowed")
        if method == "GET" and watch:
            target.namespace = namespace
            request.query["fieldSelector"] = [f"metadata.name={name}"]
            return self._watch(request, Target(rtype, version, namespace))
        if method == "GET":
            obj = self.api.get_scale(target) if sub == "scale" else self.api.get(target)
            return self._object(request, target, obj)
        if method == "PUT":
            obj = self.api.update(target, decode_body(request), opts)
            return with_warnings(self._object(request, target, obj), opts)
        if method == "PATCH":
            code, obj = self.api.patch(target, request.body, request.content_type, opts)
            return with_warnings(self._object(request, target, obj, code), opts)
        if method == "DELETE":
            code, obj = self.api.delete(target, delete_options(request), opts)
            return Response.json(code, obj)
        raise ApiError(405, f"{method} is not supported", "MethodNotAllowed")


    @staticmethod
    def _authorize(request: Request, attrs: Attributes) -> None:
        identity: Identity | None = request.identity
        if identity is not None and not allowed(identity.groups, identity.grants, attrs):
            details: Obj = {"kind": attrs.resource}
            if attrs.name:
                details["name"] = attrs.name
            if attrs.group:
                details["group"] = attrs.group
            raise ApiError(403, forbidden_message(identity.username, attrs), "Forbidden", details)

    def _wants_table(self, request: Request) -> bool:
        return "as=Table" in request.headers.get("accept", "").replace(" ", "")

    def _check_accept(self, request: Request) -> None:
        accept = request.headers.get("accept", "")
        if accept and "json" not in accept and "*/*" not in accept:
            raise ApiError(406, "only application/json responses are served", "NotAcceptable")

    def _object(self, request: Request, target: Target, obj: Obj, code: int = 200) -> Response:
        self._check_accept(request)
        if self._wants_table(request) and request.method == "GET" and target.subresource is None:
            info = self.control.crds.get(target.rtype.key)
            table = to_table(target.rtype, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")},
                             request.param("includeObject", "Metadata"),
                             info.printer_columns.get(target.version) if info else None)
            return Response.json(200, table)
        return Response.json(code, obj)

    def _list(self, request: Request, target: Target) -> Response:
        self._check_accept(request)
        params = {k: request.param(k) for k in ("labelSelector", "fieldSelector", "limit", "continue")}
        items, meta = self.api.list(target, params)
        if self._wants_table(request):
            info = self.control.crds.get(target.rtype.key)
            return Response.json(200, to_table(target.rtype, items, meta, request.param("includeObject", "Metadata"),
                                               info.printer_columns.get(target.version) if info else None))
        return Response.json(200, {"kind": target.rtype.list_kind, "apiVersion": target.api_version,
                                    "metadata": meta, "items": items})

    def _watch(self, request: Request, target: Target) -> Response:
        if self.runtime.store.watches_blocked:
            raise ApiError(503, "watch unavailable (blocked through /_twin)", "ServiceUnavailable")
        predicate = combine(parse_label_selector(request.param("labelSelector")),
                            parse_field_selector(request.param("fieldSelector"), target.rtype.key))
        timeout = float(request.param("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        table = self._wants_table(request)
        info = self.control.crds.get(target.rtype.key)
        columns = info.printer_columns.get(target.version) if info else None
        include = request.param("includeObject", "Metadata")

        def render(obj: Obj) -> Obj:
            obj = self.api.present(target, obj)
            if table:
                return to_table(target.rtype, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion")},
                                include, columns)
            return obj

        initial = request.flag("sendInitialEvents")
        if initial and not (request.flag("allowWatchBookmarks")
                            and request.param("resourceVersionMatch") == "NotOlderThan"):
            raise ApiError(422, "sendInitialEvents requires allowWatchBookmarks=true and "
                           "resourceVersionMatch=NotOlderThan", "Invalid")
        stream = watch_stream(
            self.runtime.store, target.rtype, target.namespace, predicate, request.param("resourceVersion"),
            timeout, request.flag("allowWatchBookmarks"), self._http.stopping, render, self.bookmark_interval,
            initial,
        )
        return Response(200, stream=stream, content_type="application/json")

    def _logs(self, request: Request, target: Target) -> Response:
        if target.rtype.key != ("", "pods") or request.method != "GET" or target.name is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        pod = self.api.get(target)
        container = pick_container(pod, request.param("container"))
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        logs = self.runtime.logs
        if (pod.get("status") or {}).get("phase", "Pending") == "Pending" and not logs.read(ns, name, container):
            raise ApiError(400, f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
                           "BadRequest")

        def pod_exists() -> bool:
            try:
                current = self.runtime.store.get(core("pods"), ns, name)
            except NotFoundError:
                return False
            return bool(current["metadata"].get("uid") == pod["metadata"].get("uid"))

        def number(key: str) -> int | None:
            value = request.param(key)
            return int(value) if value.lstrip("-").isdigit() else None

        stream = log_stream(logs, ns, name, container, request.flag("follow"), number("tailLines"),
                            number("sinceSeconds"), request.flag("timestamps"), number("limitBytes"),
                            self._http.stopping, pod_exists)
        if request.flag("follow"):
            return Response(200, stream=stream, content_type="text/plain")
        return Response(200, b"".join(stream), "text/plain")

    def _proxy(self, request: Request, target: Target) -> Response:
        if target.name is None or target.namespace is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if target.rtype.key == ("", "services"):
            return self.proxy.service(target.namespace, target.name, target.rest, request)
        if target.rtype.key == ("", "pods"):
            return self.proxy.pod(target.namespace, target.name, target.rest, request)
        raise ApiError(404, "the server could not find the requested resource", "NotFound")

    def _review(self, request: Request, rtype: ResourceType) -> Response:
        if request.method != "POST":
            raise ApiError(405, "only create is supported", "MethodNotAllowed")
        # Review requests carry nothing the answer depends on (kubectl sends them as protobuf).
        body = {} if request.content_type == "application/vnd.kubernetes.protobuf" else decode_body(request)
        identity: Identity = request.identity
        if rtype.kind == "SelfSubjectReview":
            body["status"] = {"userInfo": {"username": identity.username, "uid": identity.uid,
                                           "groups": list(identity.groups), "extra": identity.extra}}
        else:
            spec = (body.get("spec") or {}).get("resourceAttributes") or {}
            attrs = Attributes(
                verb=str(spec.get("verb", "")), group=str(spec.get("group", "")),
                resource=str(spec.get("resource", "")), subresource=str(spec.get("subresource", "")),
                namespace=str(spec.get("namespace", "")), name=str(spec.get("name", "")),
            )
            if not spec and (body.get("spec") or {}).get("nonResourceAttributes"):
                body["status"] = {"allowed": True, "reason": "non-resource URLs are open to authenticated users"}
            elif allowed(identity.groups, identity.grants, attrs):
                body["status"] = {"allowed": True, "reason": "allowed by the principal's EKS access policies"}
            else:
                body["status"] = {"allowed": False, "reason": forbidden_message(identity.username, attrs)}
        body["apiVersion"], body["kind"] = rtype.api_version, rtype.kind
        body.setdefault("metadata", {})["creationTimestamp"] = None
        return Response.json(201, body)


def _verb(method: str, name: str | None, watch: bool) -> str:
    """The authorization verb of a resource request."""
    if method == "GET":
        return "watch" if watch else ("get" if name else "list")
    if method == "DELETE":
        return "delete" if name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def _manager_from_agent(request: Request) -> str:
    """kube-apiserver's default field manager: the user agent's program name."""
    agent = request.headers.get("user-agent", "")
    return agent.split("/")[0] if agent else ""


def status_response(code: int, message: str) -> Response:
    """A bare Status response."""
    return Response.json(code, status_body(code, message))
