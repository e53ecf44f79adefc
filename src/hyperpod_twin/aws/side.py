"""The AWS side assembled: context, every extension module, STS identity, the project bucket, reset."""

from __future__ import annotations

import json
import logging
import os
import uuid
from typing import Any

from hyperpod_twin.clock import TwinClock
from hyperpod_twin.events import EventBus

from . import (
    caller_policy,
    dependencies,
    ec2_fixes,
    eks_access,
    eks_addon_api,
    eks_cluster_api,
    eks_clusters,
    fsx,
    grafana,
    iam_ext,
    jumpstart_hub,
    mlflow_servers,
    nat_gateways,
    quotas,
    s3_owner,
    sagemaker_cluster_api,
    sagemaker_hyperpod,
    sts_web_identity,
    tagging,
    task_governance,
    training_plans,
)
from .context import AwsContext
from .faults import FaultBook
from .hyperpod_lifecycle import Lifecycle
from .protocol import AwsRequest, PassThrough, RawResponse, xml_response
from .server import TwinAwsApp

log = logging.getLogger(__name__)


class AwsSide:
    """moto plus the twin's extensions for one account, served by `app` (a WSGI application)."""

    def __init__(
        self,
        *,
        account_id: str,
        region: str,
        clock: TwinClock,
        bus: EventBus,
        access_key_id: str,
        caller_arn: str,
        project_bucket: str,
        setup: caller_policy.OperatorSetup | None = None,
    ) -> None:
        # AWS-managed IAM policies (AmazonSageMakerClusterInstanceRolePolicy …) attach only when moto
        # loads them; moto reads this when an IAM backend is created.
        os.environ.setdefault("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
        # moto's default AMI catalogue (~1 s of CPU per EC2 backend, i.e. per reset): nothing the twin serves
        # launches EC2 instances from an AMI (HyperPod and Karpenter nodes are simulated).
        os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
        ec2_fixes.install()
        self.faults = FaultBook()
        self.ctx = AwsContext(
            account_id=account_id,
            region=region,
            clock=clock,
            bus=bus,
            faults=self.faults,
            caller_arn=caller_arn,
            access_key_id=access_key_id,
        )
        self.project_bucket = project_bucket
        self.setup = setup or caller_policy.OperatorSetup()
        self.quotas = quotas.Quotas(self.ctx)
        self.plans = training_plans.TrainingPlans(self.ctx)
        self.life = Lifecycle(self.ctx)
        self.hyperpod = sagemaker_hyperpod.HyperPod(self.ctx, self.life, self.quotas, self.plans)
        self.eks = eks_clusters.EksState(self.ctx)
        self.fsx = fsx.FsxState()
        quotas.register(self.ctx, self.quotas)
        training_plans.register(self.ctx, self.plans)
        sagemaker_cluster_api.register(self.ctx, self.hyperpod)
        self.governance = task_governance.register(self.ctx, self.hyperpod)
        self.mlflow = mlflow_servers.MlflowServers(self.ctx)
        mlflow_servers.register(self.ctx, self.mlflow)  # after HyperPod's AddTags/ListTags, which it chains
        eks_cluster_api.register(self.ctx, self.eks)
        eks_access.register(self.ctx, self.eks)
        self.addons = eks_addon_api.register(self.ctx, self.eks)
        fsx.register(self.ctx, self.fsx)
        self.grafana = grafana.GrafanaState()
        grafana.register(self.ctx, self.grafana)
        iam_ext.register(self.ctx)
        jumpstart_hub.register(self.ctx)
        caller_policy.register(self.ctx, self.hyperpod)
        sts_web_identity.register(self.ctx)
        s3_owner.register(self.ctx)
        dependencies.register(self)
        nat_gateways.register(self.ctx)
        self._register_sts()
        bus.subscribe("kube.node.health_label", self._on_health_label)

    def _on_health_label(self, instance_id: str = "", status: str = "", **_: Any) -> None:
        """A Kubernetes client labelled a HyperPod node unhealthy: HyperPod recovers it per NodeRecovery."""
        with self.ctx.locked():
            found = self.life.find_node(instance_id)
            if found is not None:
                cluster, node = found
                cluster.add_event(
                    self.ctx.clock.wall(),
                    f"Node {instance_id} labelled {status} in Kubernetes",
                    level="Warn",
                    resource_type="Instance",
                    group=node.group,
                    instance_id=instance_id,
                )
                self.life.recover(cluster, node, status)

    def _register_sts(self) -> None:
        ctx = self.ctx

        @ctx.route("sts", "GetCallerIdentity")
        def whoami(req: AwsRequest) -> RawResponse:
            # The twin's fixed credentials belong to an IAM user; other keys (moto-issued, assumed
            # roles) are moto's to answer.
            if req.access_key != ctx.access_key_id:
                raise PassThrough()
            user_id = "AIDA" + uuid.uuid5(uuid.NAMESPACE_URL, ctx.caller_arn).hex[:17].upper()
            if ":assumed-role/" in ctx.caller_arn:
                # A role session's UserId is the role's id and the session name.
                role_id = "AROA" + uuid.uuid5(uuid.NAMESPACE_URL, ctx.caller_principal).hex[:17].upper()
                user_id = f"{role_id}:{ctx.caller_arn.rsplit('/', 1)[-1]}"
            return xml_response(
                req,
                f"<UserId>{user_id}</UserId><Account>{ctx.account_id}</Account><Arn>{ctx.caller_arn}</Arn>",
            )

    def _caller_principal(self) -> None:
        iam = self.ctx.iam()
        principal = self.ctx.caller_principal
        name = principal.rsplit("/", 1)[-1]
        try:
            if ":role/" in principal:
                trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                         "Principal": {"AWS": f"arn:aws:iam::{self.ctx.account_id}:root"}}]}
                iam.create_role(name, json.dumps(trust), "/", None, "caller", [], None)
            else:
                iam.create_user(self.ctx.region, name, "/", [])
        except Exception as exc:  # already there (baseline run twice)
            log.debug("caller principal: %s", exc)

    def app(self, control: Any) -> TwinAwsApp:
        """The WSGI application serving moto, the extensions and `control` on one port."""
        app = TwinAwsApp(self.ctx, control)
        app.mlflow = self.mlflow
        return app

    def reset(self) -> None:
        """A clean account: moto's backends, every extension, faults; then the baseline again."""
        from moto.core.base_backend import BackendDict
        from moto.core.model_instances import reset_model_data

        self.faults.clear()
        self.ctx.reset()
        BackendDict.reset()
        reset_model_data()
        self.baseline()

    def baseline(self) -> None:
        """What a fresh twin account has besides moto's defaults: the project bucket, the caller's IAM principal
        (the user, or the role whose session the caller is) and what the operator set up (caller_policy)."""
        from moto.s3.models import s3_backends

        tagging.register(self)
        self._caller_principal()
        caller_policy.apply_setup(self.ctx, self.setup)
        s3 = s3_backends[self.ctx.account_id]["aws"]
        try:
            s3.create_bucket(self.project_bucket, self.ctx.region)
        except Exception as exc:  # the bucket exists already (baseline run twice)
            log.debug("project bucket: %s", exc)
