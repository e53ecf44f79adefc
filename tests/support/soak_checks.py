"""The chaos soak's invariants: after every step (operations, idempotency keys, secrets) and at quiet points once
every operation ended (the ledger against the twin's account, cluster status against the twin, deletions
complete)."""

from __future__ import annotations

import json
import time
from typing import Any

from instantstart.api.app import build_context
from instantstart.services.cluster.ledger_reconcile import reconcile_ledger
from instantstart.settings import Settings
from tests.support.flows import tagged_leftovers
from tests.support.soak_harness import ACTIVE, STATS, Harness
from tests.support.twin import twin_client


def check_step(h: Harness) -> None:
    """After every step: no operation lost, unknown (a phantom) or stuck past its deadline; every failed one
    carries a code and a hint; one operation per idempotency key; no secret in any answer or log line."""
    STATS.checks += 1
    views = h.operations()
    now = time.monotonic()
    seen = {v["operationId"] for v in views}
    for view in views:
        operation_id, status = view["operationId"], view["status"]
        if operation_id not in h.submitted:
            h.fail(f"operation {operation_id} ({view['kind']}) exists that no call started")
        error = view.get("error") or {}
        if status == "FAILED" and (not error.get("code") or not error.get("hint")):
            h.fail(f"{operation_id} ({view['kind']}) FAILED without a code and a hint: {error}")
        if status in ACTIVE and now - h.submitted[operation_id].at > h.profile.op_deadline:
            h.fail(f"{operation_id} ({view['kind']}) still {status} {h.profile.op_deadline:.0f} s after it "
                   f"started (stage {view.get('currentStage')})")
    lost = sorted(set(h.submitted) - seen)
    if lost:
        h.fail(f"operations the control plane answered with are gone: {lost}")
    for key, ids in h.keys.items():
        if len(ids) > 1:
            h.fail(f"idempotency key {key} started {len(ids)} operations: {sorted(ids)}")
    texts = [*h.unscanned, json.dumps(views), h.new_log_text()]
    h.unscanned.clear()
    for secret in h.secrets:
        for text in texts:
            if secret in text:
                h.fail(f"a secret ({secret[:3]}…) appeared in an answer or a log: …{_around(text, secret)}…")


def _around(text: str, secret: str) -> str:
    at = text.index(secret)
    return text[max(0, at - 80):at].replace(secret, "<secret>") + "<secret>"


def wait_quiet(h: Harness) -> None:
    """Until every operation has ended; a violation names those still active past their deadline."""
    while True:
        views = h.operations()
        active = [v for v in views if v["status"] in ACTIVE]
        if not active:
            return
        now = time.monotonic()
        unknown = [v["operationId"] for v in active if v["operationId"] not in h.submitted]
        if unknown:
            h.fail(f"operations exist that no call started: {unknown}")
        late = [v for v in active if now - h.submitted[v["operationId"]].at > h.profile.op_deadline]
        if late:
            h.fail("operations stuck past their deadline: "
                   + ", ".join(f"{v['operationId']} {v['kind']} at {v.get('currentStage')}" for v in late))
        time.sleep(0.2)


def ledger_report(h: Harness) -> dict[str, Any]:
    """The control plane's own ledger reconcile, run beside it on its database (AWS credentials from the
    environment, which the caller points at the twin)."""
    settings = Settings(data_dir=h.dir / "data", database_url=h.database_url,
                        aws_endpoint_url=h.twin.endpoint_url, aws_region=h.twin.env["AWS_REGION"])
    app = build_context(settings)
    try:
        return reconcile_ledger(app)
    finally:
        app.db.dispose()


def check_quiet(h: Harness) -> None:
    """Once every operation ended: the ledger equals what the twin holds (no orphan, no phantom), every EKS
    cluster in the twin is one the control plane lists, each listed cluster whose EKS stage succeeded is ACTIVE
    in the twin, and a cluster whose deletion succeeded is neither listed nor leaves a tagged resource."""
    STATS.checks += 1
    report = ledger_report(h)
    # A deletion cancelled or failed after its delete call (a HyperPod cluster still Deleting) leaves the row of what
    # AWS then finished deleting, and the row names that deletion (deletionStartedBy): operation_retry of it marks
    # the row (gone is success). Only those rows, and only when the deletion they name ended FAILED or CANCELLED.
    def interrupted(op: str | None) -> bool:
        view = h.view(op) if op else {}
        return view.get("kind") == "cluster_delete" and view.get("status") in ("FAILED", "CANCELLED")

    report["phantoms"] = [p for p in report["phantoms"] if not interrupted(p.get("deletionStartedBy"))]
    if report["orphans"] or report["phantoms"] or report["unchecked"]:
        h.fail(f"ledger differs from the twin: {json.dumps(report)[:1500]}")
    _, listing = h.rest("GET", "/clusters")
    listed = {c["clusterTag"]: c for c in listing["clusters"]}
    eks: Any = twin_client(h.twin, "eks")
    in_twin = set(eks.list_clusters()["clusters"])
    names = {c["eksClusterName"] for c in listed.values()}
    if in_twin - names:
        h.fail(f"EKS clusters in the twin that the control plane does not list: {sorted(in_twin - names)}")
    for tag, record in h.clusters.items():
        deleted = record.get("delete") and h.view(str(record["delete"]))["status"] == "SUCCEEDED"
        if deleted:
            left = {kind: ids for kind, ids in tagged_leftovers(h.twin, tag).items() if ids}
            if tag in listed or left:
                h.fail(f"cluster {tag} deleted, yet listed={tag in listed}, left in the twin: {left}")
            continue
        summary = listed.get(tag)
        if summary is None:
            continue
        stage = summary["stages"].get("eks")
        if stage == "SUCCEEDED":
            name = summary["eksClusterName"]
            state = eks.describe_cluster(name=name)["cluster"]["status"] if name in in_twin else "absent"
            if state != "ACTIVE":
                h.fail(f"cluster {tag}: the control plane says its EKS stage succeeded, the twin says {state}")
