"""SageMaker managed MLflow tracking servers (moto has none): Create/Describe/List/Delete, a presigned URL and tags,
each server backed by the twin's real `mlflow server` process (its TrackingServerUrl)."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from .context import AwsContext
from .mlflow_process import MlflowProcess
from .protocol import AwsError, AwsRequest, PassThrough, RawResponse, json_response, page, validation

SM = "sagemaker"
NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$")
SIZES = ("Small", "Medium", "Large")
MLFLOW_VERSION = "3.0"
CREATE_SECONDS = 1200.0  # a managed server takes about 20 minutes to create (twin seconds)


@dataclass
class TrackingServer:
    """One tracking server and its lifecycle."""

    name: str
    arn: str
    region: str
    artifact_store_uri: str
    role_arn: str
    size: str
    created: float
    tags: list[dict[str, str]] = field(default_factory=list)
    status: str = "Creating"
    waited: bool = False  # the creation time has passed on the twin clock

    def shape(self, url: str) -> dict[str, Any]:
        """DescribeMlflowTrackingServer's answer."""
        return {"TrackingServerArn": self.arn, "TrackingServerName": self.name,
                "ArtifactStoreUri": self.artifact_store_uri, "TrackingServerSize": self.size,
                "MlflowVersion": MLFLOW_VERSION, "RoleArn": self.role_arn, "TrackingServerStatus": self.status,
                "IsActive": "Active" if self.status == "Created" else "Inactive", "TrackingServerUrl": url,
                "AutomaticModelRegistration": False, "CreationTime": self.created,
                "LastModifiedTime": self.created}


class MlflowServers:
    """The tracking servers of the account and the one shared mlflow process."""

    def __init__(self, ctx: AwsContext) -> None:
        self.ctx = ctx
        self.servers: dict[str, TrackingServer] = {}
        self.process = MlflowProcess()

    def reset(self) -> None:
        """Forget every tracking server (the process keeps running: it is shared and slow to start)."""
        self.servers.clear()

    def find(self, name_or_arn: str) -> TrackingServer:
        """A server by name or ARN, or ResourceNotFound."""
        for server in self.servers.values():
            if name_or_arn in (server.name, server.arn):
                return server
        raise AwsError("ResourceNotFound", f"Tracking server {name_or_arn} not found.")

    def settle(self, server: TrackingServer) -> None:
        """Creating → Created once the twin-clock creation time passed and the process is healthy."""
        if server.status == "Creating" and server.waited:
            if self.process.ready:
                server.status = "Created"
            elif self.process.error:
                server.status = "CreateFailed"

    def url_for(self, name_or_arn: str) -> str | None:
        """The tracking URL of a Created server (what the sagemaker-mlflow plugin resolves an ARN to); None while
        it is being created, "" for no such server (or one that failed)."""
        try:
            server = self.find(name_or_arn)
        except AwsError:
            return ""
        self.settle(server)
        if server.status == "Creating":
            return None
        return self.process.url if server.status == "Created" else ""


class MlflowServerOps:
    """The SageMaker MLflow tracking server operations, one named handler each."""

    def __init__(self, ctx: AwsContext, state: MlflowServers) -> None:
        self.ctx = ctx
        self.state = state
        # AddTags/ListTags of other SageMaker resources go to the handler registered before (HyperPod's), else moto.
        self.before = {op: ctx.handlers.get((SM, op)) for op in ("AddTags", "ListTags")}

    def create(self, req: AwsRequest) -> RawResponse:
        """CreateMlflowTrackingServer."""
        p = req.params
        name = str(p.get("TrackingServerName") or "")
        if not NAME_RE.match(name):
            raise validation(f"Value '{name}' at 'trackingServerName' failed to satisfy constraint: Member must "
                             f"satisfy regular expression pattern: {NAME_RE.pattern}")
        uri = str(p.get("ArtifactStoreUri") or "")
        if not uri.startswith("s3://"):
            raise validation(f"ArtifactStoreUri {uri!r} must be an S3 URI (s3://bucket/prefix).")
        role = str(p.get("RoleArn") or "")
        if not re.match(r"^arn:aws[a-z\-]*:iam::\d{12}:role/", role):
            raise validation(f"RoleArn {role!r} is not an IAM role ARN.")
        size = str(p.get("TrackingServerSize") or "Small")
        if size not in SIZES:
            raise validation(f"TrackingServerSize must be one of {', '.join(SIZES)}.")
        with self.ctx.locked():
            if any(s.name == name for s in self.state.servers.values()):
                raise AwsError("ResourceInUse", f"Tracking server {name} already exists.")
            arn = self.ctx.arn("sagemaker", req.region, f"mlflow-tracking-server/{name}")
            server = TrackingServer(name=name, arn=arn, region=req.region, artifact_store_uri=uri, role_arn=role,
                                    size=size, created=self.ctx.clock.wall(), tags=list(p.get("Tags") or []))
            self.state.servers[arn] = server

            def created() -> None:
                server.waited = True

            self.ctx.later(CREATE_SECONDS, created)
        self.state.process.ensure_started()
        return json_response(req, {"TrackingServerArn": arn})

    def describe(self, req: AwsRequest) -> RawResponse:
        """DescribeMlflowTrackingServer."""
        with self.ctx.locked():
            server = self.state.find(str(req.params.get("TrackingServerName")))
            self.state.settle(server)
            return json_response(req, server.shape(proxy_url(req.headers.get("Host", "127.0.0.1"), server.name)))

    def list_servers(self, req: AwsRequest) -> RawResponse:
        """ListMlflowTrackingServers."""
        p = req.params
        with self.ctx.locked():
            items = []
            for server in self.state.servers.values():
                self.state.settle(server)
                if server.region == req.region and p.get("TrackingServerStatus") in (None, server.status):
                    items.append({k: v for k, v in server.shape("").items() if k in (
                        "TrackingServerArn", "TrackingServerName", "CreationTime", "LastModifiedTime",
                        "TrackingServerStatus", "IsActive", "MlflowVersion")})
        items.sort(key=lambda i: i["CreationTime"], reverse=p.get("SortOrder") != "Ascending")
        return json_response(req, page(p, copy.deepcopy(items), "TrackingServerSummaries"))

    def presigned(self, req: AwsRequest) -> RawResponse:
        """CreatePresignedMlflowTrackingServerUrl."""
        with self.ctx.locked():
            server = self.state.find(str(req.params.get("TrackingServerName")))
            self.state.settle(server)
            if server.status != "Created":
                raise validation(f"Tracking server {server.name} is {server.status}, not Created.")
            return json_response(req, {"AuthorizedUrl": self.state.process.url + "/"})

    def delete(self, req: AwsRequest) -> RawResponse:
        """DeleteMlflowTrackingServer."""
        with self.ctx.locked():
            server = self.state.find(str(req.params.get("TrackingServerName")))
            self.state.servers.pop(server.arn, None)
            return json_response(req, {"TrackingServerArn": server.arn})

    def _tagged(self, req: AwsRequest) -> TrackingServer | None:
        arn = str(req.params.get("ResourceArn"))
        return self.state.find(arn) if ":mlflow-tracking-server/" in arn else None

    def _other(self, req: AwsRequest) -> RawResponse:
        handler = self.before.get(str(req.operation))
        if handler is None:
            raise PassThrough()
        return handler(req)

    def add_tags(self, req: AwsRequest) -> RawResponse:
        """AddTags."""
        with self.ctx.locked():
            server = self._tagged(req)
            if server is None:
                return self._other(req)
            new = {t["Key"]: t["Value"] for t in req.params.get("Tags") or []}
            server.tags = [t for t in server.tags if t["Key"] not in new] + [
                {"Key": k, "Value": v} for k, v in new.items()]
            return json_response(req, {"Tags": list(server.tags)})

    def list_tags(self, req: AwsRequest) -> RawResponse:
        """ListTags."""
        with self.ctx.locked():
            server = self._tagged(req)
            if server is None:
                return self._other(req)
            return json_response(req, page(req.params, list(server.tags), "Tags"))

    def on_resolve(self, arn: str = "", **_: Any) -> str | None:
        """The URL of the tracking server `arn` (the `twin.mlflow.resolve` bus answer)."""
        with self.ctx.locked():
            return self.state.url_for(arn)


def register(ctx: AwsContext, state: MlflowServers) -> None:
    """Answer the MLflow tracking server API from `state`; stop the process with the twin."""
    ops = MlflowServerOps(ctx, state)
    for operation, handler in (
        ("CreateMlflowTrackingServer", ops.create),
        ("DescribeMlflowTrackingServer", ops.describe),
        ("ListMlflowTrackingServers", ops.list_servers),
        ("CreatePresignedMlflowTrackingServerUrl", ops.presigned),
        ("DeleteMlflowTrackingServer", ops.delete),
        ("AddTags", ops.add_tags),
        ("ListTags", ops.list_tags),
    ):
        ctx.route(SM, operation)(handler)
    ctx.on_reset(state.reset)
    ctx.bus.subscribe("twin.mlflow.resolve", ops.on_resolve)
    ctx.bus.subscribe("twin.stopping", lambda **_: state.process.stop())


PROXY_PREFIX = "/_mlflow/"  # TrackingServerUrl = <twin endpoint>/_mlflow/<name>: SigV4-checked, then forwarded
REST_ACTIONS = {  # MLflow REST path → the sagemaker-mlflow IAM action it is authorized as
    "experiments/get-by-name": "GetExperimentByName", "experiments/search": "SearchExperiments",
    "experiments/create": "CreateExperiment", "experiments/get": "GetExperiment", "runs/search": "SearchRuns",
    "runs/create": "CreateRun", "runs/get": "GetRun", "runs/update": "UpdateRun", "runs/log-batch": "LogBatch",
    "runs/log-metric": "LogMetric", "metrics/get-history": "GetMetricHistory",
}


def proxy_url(host: str, name: str) -> str:
    """The tracking server's URL on the twin's own endpoint."""
    return f"http://{host}{PROXY_PREFIX}{name}"


def forward(state: MlflowServers, method: str, path: str, query: str, headers: dict[str, str],
            body: bytes) -> tuple[int, bytes, str, str | None]:
    """One request to <twin>/_mlflow/<name>/api/2.0/mlflow/…: refused (403) unless SigV4-signed for
    sagemaker-mlflow, 404 for an unknown or not-Created server, else forwarded to the mlflow process.
    (status, body, content type, the IAM action for the call log)."""
    import httpx

    name, _, rest = path[len(PROXY_PREFIX):].partition("/")
    action = REST_ACTIONS.get(rest.removeprefix("api/2.0/mlflow/"))
    auth = headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 ") or "/sagemaker-mlflow/aws4_request" not in auth:
        return 403, b'{"message": "Missing or invalid SigV4 signature for service sagemaker-mlflow"}', \
            "application/json", action
    with state.ctx.locked():
        url = state.url_for(name)
    if not url:
        return 404, b'{"message": "Tracking server not found or not Created"}', "application/json", action
    response = httpx.request(method, f"{url}/{rest}" + (f"?{query}" if query else ""), content=body or None,
                             headers={"Content-Type": headers.get("Content-Type", "application/json")},
                             timeout=60)
    return response.status_code, response.content, response.headers.get("content-type", "application/json"), action
