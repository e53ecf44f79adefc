"""Lifecycle scripts out of every workload's reach, the pure parts: every identity policy InstantStart writes ends
with an explicit Deny on `*/lifecycle/*` writes that wins over a claim's whole-bucket grant; the policy builders are
all walked; what names a project bucket."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from hyperpod_twin.iam_eval import evaluate
from instantstart.manifests import iam_policies as pol
from instantstart.services.core.project_bucket import PROJECT_NAME
from tests.support.iam_documents import SCOPE, every_generated_document

WRITES = ["s3:PutObject", "s3:DeleteObject", "s3:PutObjectAcl", "s3:DeleteObjectVersion"]


def _is_trust(document: dict[str, Any]) -> bool:
    return any("Principal" in s for s in document["Statement"])


IDENTITY = sorted(name for name, doc in every_generated_document().items() if not _is_trust(doc))


def test_every_policy_builder_is_walked() -> None:
    """A new builder in the policy module must be added to the walk (so it is checked for the Deny too)."""
    builders = {
        name for name, fn in inspect.getmembers(pol, inspect.isfunction)
        if fn.__module__ == pol.__name__ and not name.startswith("_") and name.endswith(("_policy", "_trust"))
    }
    generic = {"service_trust"}  # the trust helper the named trusts are built with
    assert builders - generic - set(every_generated_document()) == set()
    assert len(IDENTITY) >= 10  # every identity policy, trusts aside


@pytest.mark.parametrize("name", IDENTITY)
def test_every_identity_policy_denies_lifecycle_writes_anywhere(name: str) -> None:
    document = every_generated_document()[name]
    assert pol.lifecycle_deny() in document["Statement"], name
    for resource in (
        f"arn:aws:s3:::{SCOPE.bucket}/{pol.lifecycle_prefix(SCOPE.cluster_tag)}on_create.sh",
        f"arn:aws:s3:::{SCOPE.bucket}/{pol.lifecycle_prefix('other')}on_create.sh",
        "arn:aws:s3:::some-other-bucket/lifecycle/x.sh",
        "arn:aws:s3:::some-other-bucket/team/lifecycle/on_create.sh",
    ):
        for action in WRITES:
            assert evaluate([document], action, resource) == "ExplicitDeny", (name, action, resource)
    # Reading stays as granted (the nodes read their own script).
    assert evaluate([document], "s3:GetObject", "arn:aws:s3:::b/lifecycle/x.sh") != "ExplicitDeny"


def test_a_whole_bucket_claim_grant_still_cannot_write_lifecycle() -> None:
    policy = pol.csi_data_policy(SCOPE, [("other-data", "")])  # a claim on another bucket, no prefix: bucket/*
    assert evaluate([policy], "s3:PutObject", "arn:aws:s3:::other-data/results/a.txt") == "Allow"
    assert evaluate([policy], "s3:PutObject", "arn:aws:s3:::other-data/lifecycle/t/on_create.sh") == "ExplicitDeny"
    assert evaluate([policy], "s3:DeleteObject", "arn:aws:s3:::other-data/x/lifecycle/a") == "ExplicitDeny"
    # Nor a managed policy's Allow on everything beside the guard (inference / training operator roles).
    managed = {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    guard = pol.lifecycle_guard_policy()
    assert evaluate([managed, guard], "s3:PutObject", "arn:aws:s3:::any/lifecycle/a") == "ExplicitDeny"
    assert evaluate([managed, guard], "s3:PutObject", "arn:aws:s3:::any/data/a") == "Allow"


@pytest.mark.parametrize(("name", "project"), [
    ("instantstart-123456789012-us-west-2", True),
    ("instantstart-123456789012-us-west-2-0a1b2c3d", True),
    ("instantstart-123456789012-ap-southeast-1-deadbeef", True),
    ("instantstart-datasets", False),
    ("my-instantstart-123456789012-us-west-2", False),
    ("team-data", False),
])
def test_project_bucket_names(name: str, project: bool) -> None:
    assert bool(PROJECT_NAME.match(name)) is project
