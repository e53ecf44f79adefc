"""The ledger against the account after a restore: orphans (made after the backup) and phantoms (gone since)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select

from instantstart.context import AppContext
from instantstart.services.cluster.deleters import still_there
from instantstart.services.cluster.deletion_scan import tag_scan
from instantstart.services.core.ledger import DELETION_STARTED_BY, resources_of
from instantstart.store.models import ClusterRow

log = logging.getLogger(__name__)

# Kinds whose existence the tag scan answers (absent from the scan: gone) ...
SCANNED = ("ec2:vpc", "ec2:subnet", "ec2:nat-gateway", "ec2:route-table", "ec2:internet-gateway",
           "ec2:security-group", "ec2:elastic-ip", "ec2:vpc-endpoint", "fsx:file-system")
# ... and kinds asked one by one.
DESCRIBED = ("eks:cluster", "sagemaker:cluster")


def reconcile_ledger(app: AppContext) -> dict[str, Any]:
    """Compare every managed cluster's ledger with what the account holds and report, never delete:
    `orphans` carry this installation's tags but are not in the ledger (created after the backup was taken:
    adopt or delete them by hand), `phantoms` are ledger rows whose resource is gone (deleted after the backup;
    `deletionStartedBy` names a cluster_delete that made its delete call and ended before AWS finished),
    `unchecked` names the clusters whose account could not be asked, with the error."""
    with app.db.read_session() as session:
        clusters = list(session.scalars(select(ClusterRow).order_by(ClusterRow.tag)).all())
        for row in clusters:
            session.expunge(row)
    report: dict[str, Any] = {"clusters": len(clusters), "orphans": [], "phantoms": [], "unchecked": []}
    for row in clusters:
        try:
            orphans, phantoms = _compare(app, row)
        except Exception as exc:  # one unreachable Region must not hide the other clusters' findings
            log.warning("ledger reconcile: %s not checked", row.tag, extra={"error": str(exc)})
            report["unchecked"].append({"clusterTag": row.tag, "region": row.region, "error": str(exc)[:300]})
            continue
        report["orphans"] += orphans
        report["phantoms"] += phantoms
    return report


def _compare(app: AppContext, row: ClusterRow) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    scanned = tag_scan(app, row)
    found = {(kind, rid) for kind, rid, _ in scanned}
    ledger = resources_of(app.db, row.tag)
    ledgered = {(r.resource_type, r.resource_id) for r in ledger}

    def entry(kind: str, rid: str, region: str) -> dict[str, str]:
        return {"clusterTag": row.tag, "resourceType": kind, "resourceId": rid, "region": region}

    orphans = [entry(kind, rid, row.region) for kind, rid, mine in scanned if mine and (kind, rid) not in ledgered]
    phantoms: list[dict[str, str]] = []
    for res in ledger:
        key = (res.resource_type, res.resource_id)
        if res.resource_type in SCANNED and res.region == row.region:
            gone = key not in found
        elif res.resource_type in DESCRIBED:
            gone = not still_there(app, {"resourceType": key[0], "resourceId": key[1], "region": res.region})
        else:
            continue  # no cheap existence check for this kind: neither orphan nor phantom is claimed
        if gone:  # a deletion that ended before AWS finished names itself (operation_retry of it marks the row)
            started = (res.details or {}).get(DELETION_STARTED_BY)
            phantoms.append({**entry(*key, res.region), **({"deletionStartedBy": started} if started else {})})
    return orphans, phantoms
