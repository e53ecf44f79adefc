"""What principals do with the credentials of a role in the simulation (a node's execution role fetching its
lifecycle script, Mountpoint signing as the S3 CSI role, ...): each request is decided by the role's identity
policies (iam_eval) and, with HYPERPOD_TWIN_CALL_LOG=<file>, recorded once per process in <file>.roles as
`role action resource decision sids` (the Sids of the statements that allowed it), so a test can check the
policies the control plane writes for its roles in both directions."""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

from hyperpod_twin.iam_eval import Decision, evaluate, listed, statement_applies

log = logging.getLogger(__name__)

ENV = "HYPERPOD_TWIN_CALL_LOG"
SUFFIX = ".roles"
_lock = threading.Lock()
_seen: set[tuple[str, str, str, str, str]] = set()


def log_path() -> str | None:
    """The role-usage log of this session (next to the call log), or None when no call log is named."""
    target = os.environ.get(ENV)
    return f"{target}{SUFFIX}" if target else None


def allowing_sids(documents: list[dict[str, Any]], action: str, resource: str, context: dict[str, Any]) -> list[str]:
    """The Sids (or positions) of the Allow statements that cover the request."""
    found = []
    for document in documents:
        for index, statement in enumerate(listed(document.get("Statement"))):
            if statement.get("Effect") == "Allow" and statement_applies(statement, action, resource, context):
                found.append(str(statement.get("Sid", index)))
    return sorted(set(found))


def record(role_arn: str, action: str, resource: str, decision: str, sids: list[str]) -> None:
    """Append one use of a role to the role-usage log, once per (role, action, resource, decision)."""
    target = log_path()
    if target is None:
        return
    role = role_arn.rsplit("/", 1)[-1]
    key = (target, role, action, resource, decision)
    with _lock:
        if key in _seen:
            return
        _seen.add(key)
        with open(target, "a") as handle:
            handle.write(f"{role} {action} {resource} {decision} {','.join(sids) or '-'}\n")


def use(
    documents: list[dict[str, Any]], role_arn: str, action: str, resource: str, context: dict[str, Any] | None = None
) -> Decision:
    """IAM's decision for a principal acting as `role_arn` (its identity policies `documents`), recorded."""
    context = context or {}
    decision = evaluate(documents, action, resource, context)
    record(role_arn, action, resource, decision, allowing_sids(documents, action, resource, context))
    return decision


def role_documents(iam: Any, role_arn: str) -> list[dict[str, Any]]:
    """The identity policies of a role through an IAM client: inline ones and the managed policies attached."""
    name = role_arn.rsplit("/", 1)[-1]
    documents = [
        iam.get_role_policy(RoleName=name, PolicyName=p)["PolicyDocument"]
        for p in iam.list_role_policies(RoleName=name)["PolicyNames"]
    ]
    for attached in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
        try:
            policy = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]
            version = iam.get_policy_version(PolicyArn=attached["PolicyArn"], VersionId=policy["DefaultVersionId"])
        except Exception as exc:  # a managed policy the twin does not hold grants nothing
            log.info("policy %s of %s not evaluated: %s", attached["PolicyArn"], name, exc)
            continue
        documents.append(version["PolicyVersion"]["Document"])
    return [json.loads(d) if isinstance(d, str) else d for d in documents]


def backend_documents(backend: Any, role_arn: str) -> list[dict[str, Any]] | None:
    """The identity policies of a role read straight from moto's IAM backend (inside the twin's AWS server);
    None when the role does not exist."""
    from urllib.parse import unquote

    name = role_arn.rsplit("/", 1)[-1]
    try:
        role = backend.get_role(name)
    except Exception:
        return None
    raw: list[Any] = list(role.policies.values())
    for policy in role.managed_policies.values():
        try:
            raw.append(next(v.document for v in policy.versions if v.version_id == policy.default_version_id))
        except Exception as exc:  # an AWS managed policy moto does not load grants nothing
            log.info("policy %s of %s not evaluated: %s", policy.arn, name, exc)
    out = []
    for document in raw:
        if isinstance(document, str):
            try:
                document = json.loads(document)
            except ValueError:
                document = json.loads(unquote(document))
        out.append(document)
    return out

