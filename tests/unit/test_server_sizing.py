"""The original deploy sizing arguments, the pure parts: Kubernetes quantities, gpuMemory in GiB, instanceTypes as
a list or a comma-separated preference string, and the per-GPU memory of the instance-type table."""

from __future__ import annotations

import pytest

from instantstart.errors import InvalidInput
from instantstart.services.core.instance_types import catalog
from instantstart.services.inference import server_sizing as sz


@pytest.mark.parametrize(("text", "milli"), [("4", 4000), ("500m", 500), ("1.5", 1500), ("0.25", 250), ("2k", 2000000)])
def test_cpu_quantities(text: str, milli: int) -> None:
    assert sz.cpu_milli(text) == milli


@pytest.mark.parametrize(("text", "mib"), [("16Gi", 16384), ("512Mi", 512), ("1G", 954), ("1e9", 954),
                                           ("0.5Ti", 524288)])
def test_memory_quantities(text: str, mib: int) -> None:
    assert sz.memory_mib(text) == mib


@pytest.mark.parametrize(("field", "text"), [("cpuRequest", "four"), ("cpuRequest", "-1"), ("cpuRequest", "0"),
                                             ("memoryRequest", "16"), ("memoryRequest", "16GB"),
                                             ("memoryRequest", "1 Gi")])
def test_bad_quantities_name_their_field(field: str, text: str) -> None:
    parse = sz.cpu_milli if field == "cpuRequest" else sz.memory_mib
    with pytest.raises(InvalidInput, match=field):
        parse(text)


@pytest.mark.parametrize(("value", "gib"), [(24, 24.0), ("48", 48.0), ("48Gi", 48.0), ("48GiB", 48.0),
                                            ("80G", 80e9 / 2**30), ("80GB", 80e9 / 2**30), (0.5, 0.5)])
def test_gpu_memory_is_gib(value: float | str, gib: float) -> None:
    assert sz.gpu_memory_gib(value) == pytest.approx(gib)


def test_instance_types_are_a_preference_list_in_either_form() -> None:
    assert sz.preference("ml.g6e.xlarge, ml.g5.xlarge,,ml.g6e.xlarge") == ["ml.g6e.xlarge", "ml.g5.xlarge"]
    assert sz.preference(["ml.g5.xlarge", "ml.g6.xlarge"]) == ["ml.g5.xlarge", "ml.g6.xlarge"]
    assert sz.preference(" , ") is None and sz.preference(None) is None


def test_every_gpu_type_knows_its_gpu_memory() -> None:
    known = catalog()
    assert all(t.gpu_memory_gib > 0 for t in known.values() if t.gpus)
    assert all(t.gpu_memory_gib == 0 for t in known.values() if not t.gpus)
    assert (known["ml.g5.xlarge"].gpu_memory_gib, known["ml.g6e.xlarge"].gpu_memory_gib,
            known["ml.p4d.24xlarge"].gpu_memory_gib, known["ml.p4de.24xlarge"].gpu_memory_gib) == (24, 48, 40, 80)
