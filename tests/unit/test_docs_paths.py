"""Every path and module the docs name exists, and the README leads with `make run` and `make test`."""

from __future__ import annotations

import importlib
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Where a relative name may be rooted: the repository, each package, and the services package
# (docs say `base/watch/watched.py` for `services/base/watch/watched.py`).
BASES = (
    ROOT,
    ROOT / "src",
    ROOT / "src" / "instantstart",
    ROOT / "src" / "hyperpod_twin",
    ROOT / "src" / "instantstart" / "services",
)
PACKAGES = ("instantstart", "hyperpod_twin")
FILE_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".json", ".toml", ".sh", ".js", ".css", ".html", ".cfg")
# A placeholder (`<name>`, `{clusterTag}`), a glob or an ellipsis names no one file.
PLACEHOLDER = re.compile(r"[<>{}*…]|\.\.\.")
PATH_WORD = re.compile(r"^[A-Za-z0-9_.\-/]+$")
DOTTED = re.compile(r"^[a-z_][a-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE = re.compile(r"`([^`\n]+)`")
# Files of other projects a doc names by their upstream name.
EXTERNAL = frozenset({"hyperpod_pytorch_job_unified_config.py"})
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def doc_files() -> list[Path]:
    """The documents checked: docs/*.md, README.md and CONTRIBUTING.md."""
    found = sorted((ROOT / "docs").glob("*.md"))
    found += [p for p in (ROOT / "README.md", ROOT / "CONTRIBUTING.md") if p.exists()]
    return found


@cache
def tracked_names() -> frozenset[str]:
    """Base names of every file git tracks (a bare `deletion_scan.py` may live anywhere)."""
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return frozenset(Path(line).name for line in out.splitlines())


@cache
def root_dirs() -> frozenset[str]:
    """First path segments a doc may start a relative path with (directories under a base)."""
    return frozenset(p.name for base in BASES for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))


@cache
def top_modules() -> frozenset[str]:
    """Names a dotted reference may start with: the packages and their top-level modules and packages."""
    names = set(PACKAGES)
    for pkg in PACKAGES:
        for p in (ROOT / "src" / pkg).iterdir():
            if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()):
                names.add(p.stem)
    return frozenset(names)


def spans(text: str) -> list[str]:
    """Inline code spans outside fenced blocks, and relative link targets."""
    prose = FENCE.sub("", text)
    return INLINE.findall(prose) + [t for t in LINK.findall(prose) if "://" not in t and not t.startswith("mailto:")]


def words(span: str) -> list[str]:
    """Candidate names in one span: whitespace-separated, trailing call parentheses and punctuation stripped."""
    out = []
    for raw in span.split():
        word = re.sub(r"\(.*\)$", "", raw).rstrip(".,;")
        if word and not PLACEHOLDER.search(word):
            out.append(word)
    return out


def path_exists(word: str, doc: Path) -> bool | None:
    """True/False for a path-like word, None when the word is not a path."""
    path, _, _attr = word.partition(":")
    if not PATH_WORD.match(path) or path.startswith(("/", ".", "~")):
        return None
    has_suffix = path.endswith(FILE_SUFFIXES)
    if "/" not in path:
        # Bare source and doc names are ours (`deletion_scan.py`); `manifest.json`, `on_create.sh` are artefacts.
        if not path.endswith((".py", ".md")) or path in EXTERNAL:
            return None
        return path in tracked_names() or (doc.parent / path).exists()
    stem, dot, last = path.rpartition(".")
    if not has_suffix and (path.split("/")[0] not in root_dirs() or not (path.endswith("/") or dot)):
        # `app.kubernetes.io/managed-by`, `kube-system/s3-csi-driver-sa`, `pods/log`, `aws/karpenter-provider-aws`
        return None
    candidates = [path]
    if not has_suffix:
        candidates.append(path.rstrip("/") + ".py")
        if dot and "/" not in last:  # `aws/errors.call`: a module and one of its names
            candidates.append(stem + ".py")
    bases = (doc.parent, *BASES)
    return any((base / c).exists() for base in bases for c in candidates)


def dotted_exists(word: str) -> bool | None:
    """True/False for `package.module.name` references, None for other dotted words.

    A word counts as a reference when it starts with a package and a module of it
    (`services.base.registry.default_tag`, `hyperpod_twin.sim.plugin`); label keys, log topics and
    fixture calls (`instantstart.job`, `kube.cluster.started`, `twin.reset`) do not.
    """
    if not DOTTED.match(word):
        return None
    parts = word.split(".")
    prefixes = [parts] if parts[0] in PACKAGES else [[pkg, *parts] for pkg in PACKAGES]
    prefixes = [p for p in prefixes if _is_module(p[:3])]
    if not prefixes:
        return None
    return any(_resolves(p) for p in prefixes)


def _is_module(parts: list[str]) -> bool:
    """Whether `parts` (a package, then at least two names) is a package or module file under src/."""
    if len(parts) < 3:
        return False
    path = ROOT / "src" / Path(*parts)
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _resolves(parts: list[str]) -> bool:
    """Import the longest importable prefix and look the rest up as attributes."""
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return cut > 1 or len(parts) == 1
    return False


def missing_names(doc: Path) -> list[str]:
    """Every backticked path or module reference of `doc` that does not resolve."""
    missing = []
    for span in spans(doc.read_text(encoding="utf-8")):
        for word in words(span):
            found = path_exists(word, doc)
            if found is None:
                found = dotted_exists(word)
            if found is False:
                missing.append(word)
    return sorted(set(missing))


@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_path_exists(doc: Path) -> None:
    """A renamed or removed module named in a doc fails here, naming it."""
    missing = missing_names(doc)
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {', '.join(missing)}"


def test_checker_catches_a_renamed_module(tmp_path: Path) -> None:
    """The check is strict: a moved module, a bare file name and a dotted name all fail; placeholders pass."""
    doc = tmp_path / "X.md"
    doc.write_text(
        "`services/dependency_catalog.py`, `kube/informers.py`, `base/watch/watched.py:from_watches`, "
        "`nosuch_module.py`, `services.base.registry.no_such_function`, `aws/errors.call`, "
        "`services/<domain>/`, `tests/unit/test_*.py`, `app.kubernetes.io/managed-by`, "
        "`catalog.invoke.invoke_spec`, `aws/errors.nosuchmodule_x`\n"
        "```\nservices/in_a_fence.py\n```\n",
        encoding="utf-8",
    )
    assert missing_names(doc) == [
        "nosuch_module.py",
        "services.base.registry.no_such_function",
        "services/dependency_catalog.py",
    ]


def test_readme_leads_with_make_run_and_make_test() -> None:
    """The README's promise: its first block is `make run` then `make test`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = FENCE.search(text)
    assert first_block is not None and text.index(first_block.group(0)) < text.index("\n## ")
    commands = [line.split("#")[0].strip() for line in first_block.group(0).splitlines()[1:3]]
    assert commands == ["make run", "make test"]
