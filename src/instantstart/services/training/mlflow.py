"""mlflow_configure: a SageMaker managed MLflow tracking server for the cluster (created or attached), and the
IAM path training pods write runs through (a role allowed only on that server, bound to their service account)."""

from __future__ import annotations

from contextlib import suppress
from typing import Any, Literal

from anyio import to_thread
from pydantic import Field

from instantstart.aws import identity as sts_api
from instantstart.aws import mlflow as mlflow_api
from instantstart.aws.clients import AwsClients
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import CallContext, StageContext
from instantstart.errors import Conflict, DependencyFailed, PreconditionFailed
from instantstart.kube.apply import apply_object
from instantstart.kube.calls import kube_api, kube_call
from instantstart.manifests import iam_feature_policies as feature_pol
from instantstart.manifests import iam_policies as pol
from instantstart.manifests.labels import MANAGED_LABELS
from instantstart.operations.kinds import KINDS, OperationKind, StageSpec
from instantstart.operations.models import OperationRef
from instantstart.operations.params import ParamsModel
from instantstart.operations.waiting import blocking, wait_until
from instantstart.services.base.registry import get_cluster, resolve_tag, submit_for_cluster
from instantstart.services.base.workload_identity import Identity, Where, ensure_association, ensure_role
from instantstart.services.core.installation import installation_id, refuse_foreign
from instantstart.services.core.ledger import TAG_CLUSTER, TAG_INSTALLATION, aws_tags, record
from instantstart.services.core.stages import project_bucket
from instantstart.store.db import Database
from instantstart.store.state import read_state, write_state
from instantstart.validation import ClusterTag, KubeName

KIND = "mlflow_configure"
SERVICE_ACCOUNT = "instantstart-training"
SERVER_ROLE = "mlflow-server"  # instantstart-<tag>-mlflow-server: the tracking server's artifact-store role
WRITER_ROLE = "mlflow-writer"  # instantstart-<tag>-mlflow-writer: the training pods' role
CREATE_LIMIT = 3600.0  # a managed tracking server takes about 20-25 minutes to create


def config_key(tag: str) -> str:
    """The state row holding a cluster's MLflow configuration."""
    return f"mlflow:{tag}"


def mlflow_config(db: Database, tag: str) -> dict[str, Any] | None:
    """The cluster's MLflow configuration (trackingServerArn, trackingServerName, trackingServerUrl, namespace,
    serviceAccount, roleArn), or None when mlflow_configure has not finished for it."""
    value = read_state(db, config_key(tag))
    return dict(value) if value else None


def _save_config(db: Database, tag: str, value: dict[str, Any]) -> None:
    write_state(db, config_key(tag), value)


class MlflowRequest(WireModel):
    """Which tracking server the cluster's training jobs log to, and who may write to it."""

    tracking_server_name: str | None = Field(
        default=None, min_length=1, max_length=256, pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$",
        description="An existing tracking server to attach, or the name of the one to create "
        "(default instantstart-<clusterTag>).")
    size: Literal["Small", "Medium", "Large"] = Field(default="Small", description="TrackingServerSize of a new "
                                                      "server.")
    namespace: KubeName = Field(default="default", description="The namespace of the training pods.")
    adopt: bool = Field(default=False, description="Attach an existing tracking server that this installation did "
                        "not create (no instantstart:installation tag). Without it such a server is refused "
                        "(Conflict), so a name typo never wires the cluster's jobs to someone else's server.")
    cluster_tag: ClusterTag | None = None


class MlflowParams(ParamsModel):
    """What the configuration records."""

    cluster_tag: str
    region: str
    eks_cluster: str
    name: str
    size: str
    namespace: str
    adopt: bool = False


def _where(stage: StageContext, p: MlflowParams) -> Where:
    return Where(db=stage.app.db, aws=stage.app.aws, tag=p.cluster_tag, region=p.region,
                 eks_cluster=p.eks_cluster, operation_id=stage.operation_id)


def existing_server(aws: AwsClients, db: Database, p: MlflowParams) -> dict[str, Any] | None:
    """Blocking: the tracking server named `p.name` if it exists and may be attached ({trackingServerArn,
    created}); None when there is none. Conflict when another installation or cluster made it, or when it carries
    no installation tag of ours and `p.adopt` is not set."""
    found = mlflow_api.describe_server(aws, p.region, p.name)
    if found is None:
        return None
    arn, installation = str(found["TrackingServerArn"]), installation_id(db)
    tags = mlflow_api.server_tags(aws, p.region, arn)
    refuse_foreign("MLflow tracking server", p.name, tags, p.cluster_tag, installation)
    if tags.get(TAG_INSTALLATION) != installation and not p.adopt:
        raise Conflict(
            f"MLflow tracking server {p.name} exists but this installation did not create it (no"
            f" {TAG_INSTALLATION}={installation} tag); it is not attached without adopt.",
            hint='Send "adopt": true to attach it on purpose, or choose another trackingServerName (or none, for'
            f" instantstart-{p.cluster_tag}).",
            details={"resource": p.name, "field": "adopt", "tags": sorted(tags)},
        )
    return {"trackingServerArn": arn, "created": tags.get(TAG_CLUSTER) == p.cluster_tag}


def _server(stage: StageContext, p: MlflowParams) -> dict[str, Any]:
    where = _where(stage, p)
    aws, installation = stage.app.aws, installation_id(stage.app.db)
    existing = existing_server(aws, stage.app.db, p)
    if existing is not None:
        return existing
    account = sts_api.account_id(aws, p.region)
    arn = f"arn:aws:sagemaker:{p.region}:{account}:mlflow-tracking-server/{p.name}"
    bucket = project_bucket(stage, p.region, p.cluster_tag)
    prefix = feature_pol.mlflow_prefix(p.cluster_tag)
    role_arn, _ = ensure_role(where, where.role_name(SERVER_ROLE),
                              pol.service_trust("sagemaker.amazonaws.com", account, arn), (),
                              feature_pol.mlflow_server_policy(bucket, prefix))
    record(stage.app.db, cluster_tag=p.cluster_tag, operation_id=stage.operation_id,
           resource_type="sagemaker:mlflow-tracking-server", resource_id=p.name, region=p.region)
    with suppress(Conflict):  # created by an earlier attempt whose answer was lost: the ARN is known
        arn = mlflow_api.create_server(
            aws, p.region, name=p.name, artifact_store_uri=f"s3://{bucket}/{prefix}", role_arn=role_arn,
            size=p.size, tags=aws_tags(p.cluster_tag, stage.operation_id, installation=installation))
    return {"trackingServerArn": arn, "created": True}


async def stage_server(stage: StageContext) -> dict[str, Any]:
    """Create the tracking server (its artifact-store role first) or attach an existing one of ours (another made
    outside InstantStart only with adopt)."""
    p = stage.params_as(MlflowParams)
    await stage.progress(f"tracking server {p.name}")
    return await blocking(_server, stage, p)


async def stage_wait(stage: StageContext) -> dict[str, Any]:
    """Wait until the tracking server is Created (its URL known)."""
    p = stage.params_as(MlflowParams)
    seen: dict[str, Any] = {}

    async def check() -> tuple[bool, str]:
        found = await blocking(mlflow_api.describe_server, stage.app.aws, p.region, p.name)
        if found is None:
            raise DependencyFailed(f"MLflow tracking server {p.name} disappeared while being created.",
                                   hint="operation_retry creates it again.", retryable=True)
        status = str(found.get("TrackingServerStatus"))
        if status.endswith("Failed"):
            raise DependencyFailed(f"MLflow tracking server {p.name} is {status}.",
                                   hint="Delete it in SageMaker (or choose another trackingServerName), then "
                                   "operation_retry.")
        seen.update(found)
        return status in ("Created", "Started", "Updated", "MaintenanceComplete"), f"tracking server {status}"

    await wait_until(stage, check, limit_seconds=CREATE_LIMIT, what=f"MLflow tracking server {p.name}")
    return {"trackingServerUrl": seen.get("TrackingServerUrl")}


def _identity(stage: StageContext, p: MlflowParams) -> dict[str, Any]:
    where = _where(stage, p)
    arn = str(stage.outputs["server"]["trackingServerArn"])
    ident = Identity(namespace=p.namespace, service_account=SERVICE_ACCOUNT, role=WRITER_ROLE)
    trust = pol.pod_identity_trust(sts_api.account_id(where.aws, where.region), where.eks_cluster, p.namespace,
                                   SERVICE_ACCOUNT)
    role_arn, _ = ensure_role(where, where.role_name(ident.role), trust, (), feature_pol.mlflow_writer_policy(arn))
    ensure_association(where, ident, role_arn)
    api = kube_api(stage.app.kube, p.eks_cluster, p.region)
    kube_call("apply the training service account", apply_object, api, {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": p.namespace,
                     "labels": dict(MANAGED_LABELS)}})
    config = {"trackingServerName": p.name, "trackingServerArn": arn,
              "trackingServerUrl": stage.outputs["wait"].get("trackingServerUrl"), "namespace": p.namespace,
              "serviceAccount": SERVICE_ACCOUNT, "roleArn": role_arn,
              "created": bool(stage.outputs["server"].get("created"))}
    _save_config(stage.app.db, p.cluster_tag, config)
    return config


async def stage_identity(stage: StageContext) -> dict[str, Any]:
    """The writer role (sagemaker-mlflow:* on this server only), its pod identity association and the pods'
    service account; then the configuration is recorded for training_job_submit."""
    p = stage.params_as(MlflowParams)
    await stage.progress(f"role and service account {p.namespace}/{SERVICE_ACCOUNT}")
    return await blocking(_identity, stage, p)


@operation(
    "mlflow_configure",
    destructive=False,
    idempotent=True,
    method="POST",
    path="/training/mlflow",
    completion="operation_get",
    example={},
)
async def mlflow_configure(ctx: CallContext, req: MlflowRequest) -> OperationRef:
    """Create (or attach) the cluster's SageMaker managed MLflow tracking server (default name
    instantstart-<clusterTag>, artifacts under the project bucket's mlflow/ prefix of the cluster), wait until it is
    Created, and wire the training pods' identity: service account instantstart-training in `namespace`, bound by
    EKS Pod Identity to a role allowed only sagemaker-mlflow:* on that server. Jobs then take `mlflow: {experiment}`
    and training_history reads their runs. Everything created is tagged and removed with the cluster. An existing
    server this installation did not create is refused (Conflict) unless `adopt` is true; an adopted server is
    never deleted."""
    tag = await to_thread.run_sync(resolve_tag, ctx.app.db, req.cluster_tag)
    row = await to_thread.run_sync(get_cluster, ctx.app.db, tag)
    if not row.eks_cluster_name:
        raise PreconditionFailed(f"Cluster {tag} has no EKS cluster yet.", hint="Finish cluster_create first.")
    params = MlflowParams(cluster_tag=tag, region=row.region, eks_cluster=row.eks_cluster_name,
                          name=req.tracking_server_name or f"instantstart-{tag}", size=req.size,
                          namespace=req.namespace, adopt=req.adopt)
    await to_thread.run_sync(existing_server, ctx.app.aws, ctx.app.db, params)  # refuse a foreign server now
    return await submit_for_cluster(ctx, KIND, tag, params, status_tool="operation_get", poll_after_seconds=30)


KINDS.register(OperationKind(
    name=KIND, params=MlflowParams,
    stages=(StageSpec("server", stage_server, max_attempts=3), StageSpec("wait", stage_wait, max_attempts=2),
            StageSpec("identity", stage_identity, max_attempts=3)),
    result_from=lambda outputs: outputs.get("identity", {}),
))
