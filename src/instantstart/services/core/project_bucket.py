"""The project bucket, owned and shared safely: a random bucket name remembered per Region,
ownership checked (ExpectedBucketOwner, installation tag) before use, per-cluster prefixes, scoped deletion."""

from __future__ import annotations

import re
import secrets
from typing import Any

from sqlalchemy import select

from instantstart.aws import identity, s3
from instantstart.aws.clients import AwsClients
from instantstart.errors import Conflict
from instantstart.manifests import iam_policies as pol
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import TAG_INSTALLATION, aws_tags, record
from instantstart.settings import Settings
from instantstart.store.db import Database
from instantstart.store.models import ResourceRow
from instantstart.store.state import claim_state, read_state

SHARE = "s3:prefix"  # ledger type: one cluster's prefixes of the project bucket
# instantstart-<account>-<region>[-<hex suffix>]: the names ensure_project_bucket makes (and the legacy one).
PROJECT_NAME = re.compile(r"^instantstart-\d{12}-[a-z]{2}(-[a-z]+)+-\d+(-[0-9a-f]{8})?$")


def _remembered_key(region: str) -> str:
    return f"project-bucket:{region}"


def _remember(db: Database, region: str, name: str) -> str:
    """Remember `name` as the region's project bucket unless one is remembered already; the one remembered (so
    clusters created at once agree on one bucket)."""
    return str(claim_state(db, _remembered_key(region), name))


def remembered_bucket(db: Database, region: str) -> str | None:
    """The project bucket this installation made in `region`, if any."""
    value = read_state(db, _remembered_key(region))
    return str(value) if value else None


def refuse(name: str, why: str, configured: bool) -> Conflict:
    """The error for a bucket we will not use."""
    hint = (
        "Set INSTANTSTART_PROJECT_BUCKET to a bucket of this account, or unset it to let InstantStart create one."
        if configured
        else "Delete the project-bucket entry or let InstantStart create a new bucket (unset the remembered name)."
    )
    return Conflict(f"Refusing the project bucket {name}: {why}.", hint=hint, details={"bucket": name})


def verify_owned(aws: AwsClients, db: Database, region: str, name: str, *, configured: bool) -> bool:
    """Raise Conflict when `name` belongs to another account or (unless configured) to no installation of ours;
    False when it does not exist."""
    account = identity.account_id(aws, region)
    state = s3.bucket_state(aws, region, name, account)
    if state == "foreign":
        raise refuse(name, f"it exists but is not owned by account {account} (bucket squatting?)", configured)
    if state == "absent":
        return False
    if not configured:
        found = s3.bucket_tags(aws, region, name, account).get(TAG_INSTALLATION)
        if found != installation_id(db):
            raise refuse(name, f"it is not tagged {TAG_INSTALLATION}={installation_id(db)} (found {found!r})", False)
    return True


def ensure_project_bucket(
    aws: AwsClients, db: Database, settings: Settings, *, region: str, cluster_tag: str, operation_id: str
) -> str:
    """The project bucket of `region` for `cluster_tag`: configured, or remembered, or created with a random
    suffix (tagged with the installation id); its use by the cluster is recorded (prefix share, kept)."""
    account = identity.account_id(aws, region)
    configured = settings.project_bucket
    name = configured or remembered_bucket(db, region)
    if name is None:
        name = _remember(db, region, f"instantstart-{account}-{region}-{secrets.token_hex(4)}")
    if not verify_owned(aws, db, region, name, configured=bool(configured)):
        tags = aws_tags(cluster_tag, operation_id, installation=installation_id(db))
        s3.create_bucket(aws, region, name, tags, account)
    record(
        db,
        cluster_tag=cluster_tag,
        operation_id=operation_id,
        resource_type=SHARE,
        resource_id=f"{name}/{cluster_tag}",
        region=region,
        details={
            "keep": True,
            "bucket": name,
            "prefixes": [pol.data_prefix(cluster_tag), pol.lifecycle_prefix(cluster_tag)],
        },
    )
    return name


def _other_users(db: Database, bucket: str, tag: str | None) -> list[str]:
    """Clusters other than `tag` (None: every cluster) whose live ledger shares are in `bucket`."""
    with db.session() as session:
        query = select(ResourceRow).where(
            ResourceRow.resource_type == SHARE,
            ResourceRow.resource_id.startswith(f"{bucket}/"),
            ResourceRow.deleted_at.is_(None),
        )
        if tag is not None:
            query = query.where(ResourceRow.cluster_tag != tag)
        return [r.cluster_tag for r in session.scalars(query).all()]


def project_bucket_reason(
    aws: AwsClients, db: Database, settings: Settings, region: str, bucket: str
) -> str | None:
    """Why `bucket` (in `region`, of this account) is a project bucket, of this installation or another, in any
    Region: configured, named like one, shared by a cluster in the ledger, or tagged instantstart:installation.
    None when it is none of these. Project buckets hold lifecycle scripts, so no claim may reach them."""
    if bucket == settings.project_bucket:
        return "it is the configured project bucket (INSTANTSTART_PROJECT_BUCKET)"
    if PROJECT_NAME.match(bucket):
        return "its name is a project bucket's (instantstart-<account>-<region>[-<suffix>])"
    users = _other_users(db, bucket, None)
    if users:
        return f"it is the project bucket of cluster(s) {', '.join(sorted(set(users)))}"
    found = s3.bucket_tags(aws, region, bucket, identity.account_id(aws, region)).get(TAG_INSTALLATION)
    if found is not None:
        return f"it is tagged {TAG_INSTALLATION}={found} (an InstantStart project bucket)"
    return None


def delete_share(aws: AwsClients, db: Database, res: dict[str, Any]) -> bool:
    """Deleter of a cluster's share: its data and lifecycle prefixes; then the bucket itself only when no other
    object remains and this installation made it. Legacy `s3:bucket` rows delete the bucket only when empty."""
    region = res["region"]
    account = identity.account_id(aws, region)
    if res["resourceType"] == SHARE:
        bucket, _, tag = str(res["resourceId"]).rpartition("/")
    else:
        bucket, tag = str(res["resourceId"]), ""
    if s3.bucket_state(aws, region, bucket, account) != "ours":
        return True  # gone, or never ours: nothing of this cluster to delete there
    if tag:
        for prefix in (pol.data_prefix(tag), pol.lifecycle_prefix(tag)):
            s3.delete_prefix(aws, region, bucket, prefix, account)
    mine = s3.bucket_tags(aws, region, bucket, account).get(TAG_INSTALLATION) == installation_id(db)
    if (mine or not tag) and not _other_users(db, bucket, tag) and not s3.has_objects(aws, region, bucket, "", account):
        s3.delete_empty_bucket(aws, region, bucket, account)
    return True
