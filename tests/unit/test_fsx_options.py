"""FSx for Lustre option rules (FACTS §8): throughput per deployment and storage type, capacity steps, and the
refusal naming the field and the values allowed for the combination."""

from __future__ import annotations

import pytest

from instantstart.errors import InvalidInput
from instantstart.manifests import fsx as fsx_manifests
from instantstart.services.storage.fsx_params import FsxCreateRequest, lustre_options


def options(**given: object) -> tuple[int | None, int]:
    return lustre_options(FsxCreateRequest.model_validate(given))


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, (250, 1200)),
        ({"deploymentType": "PERSISTENT_2", "perUnitStorageThroughput": 1000, "storageCapacity": 4800}, (1000, 4800)),
        ({"deploymentType": "PERSISTENT_1", "perUnitStorageThroughput": 50}, (50, 1200)),
        ({"deploymentType": "PERSISTENT_1", "storageType": "HDD", "perUnitStorageThroughput": 12,
          "storageCapacity": 6000}, (12, 6000)),
        ({"deploymentType": "PERSISTENT_1", "storageType": "HDD", "perUnitStorageThroughput": 40,
          "storageCapacity": 3600}, (40, 3600)),
        ({"deploymentType": "SCRATCH_2", "storageCapacity": 2400}, (None, 2400)),
        ({"deploymentType": "SCRATCH_1", "storageCapacity": 3600}, (None, 3600)),
        ({"storageType": "INTELLIGENT_TIERING", "throughputCapacity": 4000}, (None, 1200)),  # 1200: the PV's
        ({"storageType": "INTELLIGENT_TIERING", "throughputCapacity": 8000, "readCacheSizingMode": "USER_PROVISIONED",
          "readCacheSizeGib": 64, "metadataIops": 12000}, (None, 1200)),
    ],
)
def test_accepted_combinations(given: dict[str, object], expected: tuple[int | None, int]) -> None:
    assert options(**given) == expected


@pytest.mark.parametrize(
    ("given", "field", "text"),
    [
        ({"perUnitStorageThroughput": 300}, "perUnitStorageThroughput", "allowed: 125, 250, 500, 1000"),
        ({"deploymentType": "PERSISTENT_1", "perUnitStorageThroughput": 125}, "perUnitStorageThroughput",
         "allowed: 50, 100, 200"),
        ({"deploymentType": "SCRATCH_2", "perUnitStorageThroughput": 125}, "perUnitStorageThroughput",
         "takes no throughput"),
        ({"storageType": "HDD"}, "storageType", "not available with PERSISTENT_2"),
        ({"storageCapacity": 3000}, "storageCapacity", "1200, 2400, or a multiple of 2400 GiB above 2400"),
        ({"deploymentType": "SCRATCH_1", "storageCapacity": 4800}, "storageCapacity", "multiple of 3600"),
        ({"deploymentType": "PERSISTENT_1", "storageType": "HDD", "perUnitStorageThroughput": 12,
          "storageCapacity": 1800}, "storageCapacity", "a multiple of 6000 GiB"),
        # INTELLIGENT_TIERING: PERSISTENT_2 only, elastic, sized by throughputCapacity (botocore FSx model).
        ({"storageType": "INTELLIGENT_TIERING", "deploymentType": "PERSISTENT_1", "throughputCapacity": 4000},
         "storageType", "not available with PERSISTENT_1"),
        ({"storageType": "INTELLIGENT_TIERING"}, "throughputCapacity",
         "missing for INTELLIGENT_TIERING; allowed: a multiple of 4000 up to 2000000 MBps"),
        ({"storageType": "INTELLIGENT_TIERING", "throughputCapacity": 2000}, "throughputCapacity",
         "2000 MBps is not allowed for INTELLIGENT_TIERING; allowed: a multiple of 4000"),
        ({"storageType": "INTELLIGENT_TIERING", "throughputCapacity": 4000, "storageCapacity": 1200},
         "storageCapacity", "elastic"),
        ({"storageType": "INTELLIGENT_TIERING", "throughputCapacity": 4000, "perUnitStorageThroughput": 250},
         "perUnitStorageThroughput", "not used with INTELLIGENT_TIERING"),
        ({"storageType": "INTELLIGENT_TIERING", "throughputCapacity": 4000, "readCacheSizingMode": "USER_PROVISIONED",
          "readCacheSizeGib": 140000}, "readCacheSizeGib", "allowed: 32 to 131072 GiB"),
        ({"storageType": "INTELLIGENT_TIERING", "throughputCapacity": 4000, "readCacheSizeGib": 64},
         "readCacheSizeGib", "only used with readCacheSizingMode USER_PROVISIONED"),
        ({"storageType": "INTELLIGENT_TIERING", "throughputCapacity": 4000, "metadataIops": 5000}, "metadataIops",
         "allowed: 1500, 3000, 6000, 12000"),
        ({"throughputCapacity": 4000}, "throughputCapacity", "only used with storageType INTELLIGENT_TIERING"),
    ],
)
def test_refusals_name_the_field_and_the_allowed_values(given: dict[str, object], field: str, text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        options(**given)
    assert refused.value.details["fields"][0]["field"] == field
    assert refused.value.message.startswith(f"Invalid input: {field}:") and text in refused.value.message


def test_static_pv_and_claim() -> None:
    pv = fsx_manifests.build_pv(cluster_tag="t", claim="data", file_system_id="fs-0123456789abcdef0",
                    dns_name="fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", mount_name="abcdefgh",
                    capacity_gib=2400)
    pvc = fsx_manifests.build_pvc(cluster_tag="t", claim="data", capacity_gib=2400)
    assert pv["spec"]["csi"] == {"driver": "fsx.csi.aws.com", "volumeHandle": "fs-0123456789abcdef0",
                                 "volumeAttributes": {"dnsname": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
                                                      "mountname": "abcdefgh"}}
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain" and pv["spec"]["mountOptions"] == ["flock"]
    assert pvc["spec"]["volumeName"] == "data-pv" and pvc["spec"]["storageClassName"] == ""
    assert pvc["spec"]["resources"]["requests"]["storage"] == pv["spec"]["capacity"]["storage"] == "2400Gi"
    assert fsx_manifests.pv_differences(pv, pv) == []
    other = fsx_manifests.build_pv(cluster_tag="t", claim="data", file_system_id="fs-0123456789abcdef1", dns_name="x",
                       mount_name="y", capacity_gib=1200)
    assert any("fileSystemId" in p for p in fsx_manifests.pv_differences(other, pv))
