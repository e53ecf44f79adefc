"""`instantstart doctor`: is this machine and account ready for a first cluster? Each check says ok/problem/hint."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import botocore.session

from instantstart.aws import account as acct
from instantstart.aws import iam as iam_api
from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import error_code
from instantstart.kube.helm_binary import helm_version, resolve_helm
from instantstart.services.account.policy import control_plane_policy, granted_actions
from instantstart.settings import Settings
from instantstart.store.db import Database

Status = Literal["ok", "info", "problem", "unknown"]
HYPERPOD_SLR = "AWSServiceRoleForSageMakerHyperPod"
VPC_QUOTA = "VPCs per Region"


@dataclass
class Check:
    """One finding: `problem` blocks a first cluster, `unknown` could not be checked (said why), `info` is absent
    but made on first use (nothing to do)."""

    name: str
    status: Status
    message: str
    hint: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return asdict(self)


@dataclass
class Doctor:
    """Runs the checks in order; later checks reuse what earlier ones found (the caller's account)."""

    settings: Settings
    aws: AwsClients
    instance_types: dict[str, int] = field(default_factory=dict)
    identity: acct.Identity | None = None

    @property
    def region(self) -> str:
        """The Region every check runs in."""
        return self.aws.default_region

    def run(self) -> list[Check]:
        """Every check; an unexpected AWS error becomes that check's problem, never the end of the run."""
        checks: list[Check] = []
        steps: list[tuple[str, Callable[[], Check | list[Check]]]] = [
            ("identity", self.check_identity),
            ("region", self.check_region),
            ("service-linked role", self.check_service_linked_role),
            ("permissions boundary", self.check_boundary),
            ("cluster quotas", self.check_instance_quotas),
            ("VPC quota", self.check_vpc_quota),
            ("project bucket", self.check_bucket),
            ("helm", self.check_helm),
            ("database", self.check_database),
            ("permissions", self.check_permissions),
        ]
        for name, step in steps:
            try:
                found = step()
            except Exception as exc:
                code = error_code(exc)
                checks.append(Check(name, "problem", f"{type(exc).__name__}: {exc}", _hint_for(code)))
                continue
            checks.extend(found if isinstance(found, list) else [found])
        return checks

    def check_identity(self) -> Check:
        """Whose credentials the default chain found, and whether they are an assumed role."""
        self.identity = acct.caller_identity(self.aws, self.region)
        role = self.identity.assumed_role
        kind = f"assumed role {role}" if role else "long-term credentials (an IAM user or root)"
        hint = None if role else "Prefer a role (instance profile, SSO or assume-role) over long-term access keys."
        return Check("identity", "ok", f"account {self.identity.account}, {self.identity.arn} ({kind})", hint)

    def check_region(self) -> Check:
        """The Region is one where SageMaker (and so HyperPod) exists."""
        known = botocore.session.get_session().get_available_regions("sagemaker")
        if self.region not in known:
            return Check(
                "region",
                "problem",
                f"{self.region} is not a Region that offers SageMaker.",
                "Set AWS_REGION (or INSTANTSTART_AWS_REGION) to a HyperPod Region, e.g. us-west-2.",
            )
        return Check("region", "ok", f"{self.region}")

    def check_service_linked_role(self) -> Check:
        """HyperPod's service-linked role exists (or the caller may create it on first use)."""
        arn = acct.role_arn(self.aws, self.region, HYPERPOD_SLR)
        manual = ("aws iam create-service-linked-role --aws-service-name hyperpod.sagemaker.amazonaws.com "
                  "(or allow iam:CreateServiceLinkedRole for that service to the control plane).")
        if arn is None and _policy_creates_slr():
            # SageMaker creates the role with the first HyperPod cluster when the caller may create it.
            return Check(
                "service-linked role",
                "info",
                f"{HYPERPOD_SLR} does not exist yet: SageMaker creates it with the first HyperPod cluster (the "
                "control-plane policy allows iam:CreateServiceLinkedRole for it).",
                "Nothing to do; to create it ahead: " + manual,
            )
        if arn is None:
            return Check("service-linked role", "problem", f"{HYPERPOD_SLR} does not exist in this account.", manual)
        return Check("service-linked role", "ok", arn)

    def check_boundary(self) -> Check:
        """The permissions boundary every role the control plane creates must carry exists (the operator makes it:
        the control plane may not)."""
        arn = iam_api.boundary_arn(self.aws, self.region)
        if not iam_api.managed_policy_exists(self.aws, self.region, arn):
            return Check(
                "permissions boundary",
                "problem",
                f"{arn} does not exist: the control plane can create no IAM role (its policy requires this "
                "boundary on every role).",
                "Deploy deploy/management-environment.yaml, or run once per account: aws iam create-policy "
                f"--policy-name {iam_api.BOUNDARY_POLICY} --policy-document file://deploy/iam/permissions-boundary.json",
            )
        return Check("permissions boundary", "ok", arn)

    def check_instance_quotas(self) -> list[Check]:
        """The SageMaker '<type> for cluster usage' quota of every type the user named covers the count."""
        if not self.instance_types:
            return []
        quotas = acct.quota_values(self.aws, self.region, "sagemaker")
        checks = []
        for instance_type, count in sorted(self.instance_types.items()):
            name = f"{instance_type} for cluster usage"
            value = quotas.get(name)
            check_name = f"quota {instance_type}"
            if value is None:
                checks.append(
                    Check(check_name, "problem", f"No quota '{name}' in {self.region}: the type is not offered there.",
                          "Pick an instance type HyperPod offers in this Region (instance_types tool).")
                )
            elif value < count:
                checks.append(
                    Check(
                        check_name,
                        "problem",
                        f"'{name}' is {value:g}; {count} needed.",
                        f"Request an increase of the SageMaker quota '{name}' to at least {count} in Service Quotas "
                        f"({self.region}), or use a training plan.",
                    )
                )
            else:
                checks.append(Check(check_name, "ok", f"'{name}' is {value:g} (need {count})."))
        return checks

    def check_vpc_quota(self) -> Check:
        """Room for the one new VPC a cluster creates (unless an existing VPC is reused)."""
        limit = acct.quota_values(self.aws, self.region, "vpc").get(VPC_QUOTA)
        used = acct.vpc_count(self.aws, self.region)
        if limit is None:
            return Check("VPC quota", "unknown", f"{used} VPCs; Service Quotas did not report '{VPC_QUOTA}'.")
        if used >= limit:
            return Check(
                "VPC quota",
                "problem",
                f"{used} VPCs exist and '{VPC_QUOTA}' is {limit:g}: a new cluster network cannot be made.",
                "Delete an unused VPC, request a higher 'VPCs per Region' quota, or create the cluster in an "
                "existing VPC.",
            )
        return Check("VPC quota", "ok", f"{used} of {limit:g} VPCs in use.")

    def check_bucket(self) -> Check:
        """The project bucket, when it exists, belongs to this account (a name is global: it could be taken)."""
        account = self._account()
        bucket = self.settings.project_bucket or f"instantstart-{account}-{self.region}"
        owned = acct.bucket_owned(self.aws, self.region, bucket, account)
        if owned is None:
            return Check("project bucket", "ok", f"{bucket} does not exist yet; the first cluster creates it.")
        if not owned:
            return Check(
                "project bucket",
                "problem",
                f"{bucket} exists but account {account} does not own it.",
                "Set INSTANTSTART_PROJECT_BUCKET to a bucket this account owns.",
            )
        return Check("project bucket", "ok", f"{bucket} is owned by {account}.")

    def check_helm(self) -> Check:
        """helm resolves (configured or bundled) and runs."""
        binary = resolve_helm(self.settings.helm_path, self.settings.data_dir)
        return Check("helm", "ok", f"{helm_version(binary)} at {binary}")

    def check_database(self) -> Check:
        """The database answers and its schema is at the newest migration."""
        db = Database(self.settings.resolved_database_url)
        try:
            current, head = db.revisions()
        finally:
            db.dispose()
        if current is None:
            return Check(
                "database",
                "info",
                f"{db.engine.url.render_as_string(hide_password=True)} has no schema yet: `instantstart serve` "
                f"creates it (revision {head}) on start.",
            )
        if current != head:
            return Check(
                "database",
                "problem",
                f"schema revision {current or 'none'}, newest is {head}.",
                "Start `instantstart serve` once: it migrates the database on start.",
            )
        return Check("database", "ok", f"{db.engine.url.render_as_string(hide_password=True)} at revision {head}")

    def check_permissions(self) -> Check:
        """The caller has every action of the shipped control-plane policy (IAM policy simulator)."""
        identity = self.identity or acct.caller_identity(self.aws, self.region)
        principal = identity.arn
        role = identity.assumed_role
        if role:
            principal = acct.role_arn(self.aws, self.region, role) or principal
        actions = granted_actions(control_plane_policy())
        try:
            denied = acct.simulate_denied(self.aws, self.region, principal, actions)
        except Exception as exc:
            return Check(
                "permissions",
                "unknown",
                f"not simulated: iam:SimulatePrincipalPolicy failed ({error_code(exc) or type(exc).__name__}).",
                "Allow iam:SimulatePrincipalPolicy on the caller to have doctor check the control-plane policy, or "
                "attach deploy/iam/control-plane-policy.json to it.",
            )
        if denied:
            return Check(
                "permissions",
                "problem",
                f"{len(denied)} of {len(actions)} actions are not allowed: {', '.join(denied[:12])}"
                + (" …" if len(denied) > 12 else ""),
                "Attach deploy/iam/control-plane-policy.json to the control plane's role.",
            )
        return Check("permissions", "ok", f"all {len(actions)} actions of the control-plane policy are allowed.")

    def _account(self) -> str:
        if self.identity is None:
            self.identity = acct.caller_identity(self.aws, self.region)
        return self.identity.account


def _policy_creates_slr() -> bool:
    """Whether the shipped control-plane policy allows iam:CreateServiceLinkedRole on HyperPod's role."""
    for statement in control_plane_policy().get("Statement", []):
        actions = statement.get("Action", [])
        resources = statement.get("Resource", [])
        actions = [actions] if isinstance(actions, str) else actions
        resources = [resources] if isinstance(resources, str) else resources
        if (statement.get("Effect") == "Allow" and "iam:CreateServiceLinkedRole" in actions
                and any(str(r).endswith("/" + HYPERPOD_SLR) for r in resources)):
            return True
    return False


def _hint_for(code: str) -> str:
    if code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
        return "The credentials lack this read permission: attach deploy/iam/control-plane-policy.json."
    if code in ("ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException"):
        return "Refresh the credentials (aws sso login, or new keys) and run doctor again."
    return "Check the credentials and Region (aws sts get-caller-identity) and run doctor again."


def run_doctor(settings: Settings, instance_types: dict[str, int]) -> list[Check]:
    """Every check against the account the default credential chain and Region point at."""
    return Doctor(settings, AwsClients(settings), instance_types).run()
