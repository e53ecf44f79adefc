"""After a restore the ledger is compared with the twin's account: orphans and phantoms reported, nothing deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from instantstart.api.app import build_context
from instantstart.services.cluster.ledger_reconcile import reconcile_ledger
from instantstart.services.core.installation import installation_id
from instantstart.services.core.ledger import TAG_CLUSTER, TAG_INSTALLATION, mark_deleting, record, resources_of
from instantstart.settings import Settings
from instantstart.store.models import ClusterRow
from instantstart.twin_process import TwinProcess


def test_reconcile_reports_orphans_and_phantoms_and_deletes_nothing(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    region = twin.env["AWS_REGION"]
    settings = Settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'state.db'}",
                        aws_endpoint_url=twin.endpoint_url, aws_region=region)
    app = build_context(settings)
    app.db.migrate()
    mine = installation_id(app.db)
    with app.db.session() as session:
        session.add(ClusterRow(tag="bk1", region=region, eks_cluster_name="bk1-eks", hyperpod_cluster_name=None))
    ec2 = app.aws.ec2(region)

    def vpc(cidr: str, installation: str) -> str:
        tags = [{"Key": TAG_CLUSTER, "Value": "bk1"}, {"Key": TAG_INSTALLATION, "Value": installation}]
        made = ec2.create_vpc(CidrBlock=cidr, TagSpecifications=[{"ResourceType": "vpc", "Tags": tags}])
        return str(made["Vpc"]["VpcId"])

    ledgered = vpc("10.1.0.0/16", mine)
    after_backup = vpc("10.2.0.0/16", mine)  # made after the backup: tagged as ours, absent from the ledger
    vpc("10.3.0.0/16", "is-someoneelse")  # another installation's: never claimed as an orphan
    for kind, rid in (("ec2:vpc", ledgered), ("ec2:subnet", "subnet-0123456789abcdef0"), ("eks:cluster", "bk1-eks")):
        record(app.db, cluster_tag="bk1", operation_id=None, resource_type=kind, resource_id=rid, region=region)

    rows = {r.resource_type: r.id for r in resources_of(app.db, "bk1")}
    # A cluster_delete that made its delete calls and ended before AWS finished names itself on the rows it
    # reached; a delete call that failed takes its stamp back (the resource stays).
    mark_deleting(app.db, rows["eks:cluster"], "op-interrupted")
    mark_deleting(app.db, rows["ec2:subnet"], "op-failed-call")
    mark_deleting(app.db, rows["ec2:subnet"], None)

    report = reconcile_ledger(app)

    def entry(kind: str, rid: str) -> dict[str, str]:
        return {"clusterTag": "bk1", "resourceType": kind, "resourceId": rid, "region": region}

    assert report["unchecked"] == [], report
    assert report["orphans"] == [entry("ec2:vpc", after_backup)]
    assert report["phantoms"] == [entry("ec2:subnet", "subnet-0123456789abcdef0"),
                                  {**entry("eks:cluster", "bk1-eks"), "deletionStartedBy": "op-interrupted"}]
    left = {v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"]}
    assert {ledgered, after_backup} <= left, "the reconcile only reports"
    app.db.dispose()
