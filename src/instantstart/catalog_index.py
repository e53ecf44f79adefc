"""The catalog index shipped as package data, read by the CLI and `instantstart mcp` without importing the catalog.

Importing the catalog means importing every service (boto3, SQLAlchemy, pydantic models: about a second); a
client command only needs names, help texts and tool schemas. `data/catalog_index.json` holds them with a
fingerprint of the sources they come from; when the file is missing, of another format, or its fingerprint is not
that of the installed sources (someone changed an operation), the index is built from the live catalog instead.

Regenerate it after changing the sources: `python -m instantstart.catalog_index --write`
(tests/unit/test_catalog_index.py fails while it is stale and says so).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from instantstart import __version__

PACKAGE = Path(__file__).resolve().parent
INDEX_FILE = PACKAGE / "data" / "catalog_index.json"
REGENERATE = "python -m instantstart.catalog_index --write"
# The faces and this module read the index; nothing in them changes what it holds.
NOT_SOURCES = frozenset({"api", "web", "cli", "mcp", "server.py", "client.py", "client_config.py",
                         "twin_process.py", "catalog_index.py"})
INDEX_FORMAT = 1  # bumped when the shape of catalog/index.py's build_index changes: an old file is then ignored


def _sources(directory: Path, top: bool = False) -> list[Path]:
    """The .py files under `directory`, the faces and non-package folders (data, __pycache__) left out."""
    found: list[Path] = []
    for entry in os.scandir(directory):
        if top and entry.name in NOT_SOURCES:
            continue
        if entry.is_dir() and entry.name not in ("data", "__pycache__"):
            found.extend(_sources(Path(entry.path)))
        elif entry.name.endswith(".py"):
            found.append(Path(entry.path))
    return found


def source_fingerprint(package: Path = PACKAGE) -> str:
    """SHA-256 of the version and every Python source the catalog can be built from (the faces excluded)."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(_sources(package, top=True)):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cached(path: Path = INDEX_FILE) -> dict[str, Any] | None:
    """The shipped index when it matches the installed sources, else None."""
    try:
        index = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(index, dict) or index.get("format") != INDEX_FORMAT:
        return None
    if index.get("fingerprint") != source_fingerprint():
        return None
    return index


def live(plugins: Sequence[str] = ()) -> dict[str, Any]:
    """The index built from the catalog itself (every service imported, then `plugins`)."""
    from instantstart.catalog import CATALOG
    from instantstart.catalog.index import build_index
    from instantstart.services import load_all

    load_all(list(plugins))
    return {**build_index(CATALOG), "format": INDEX_FORMAT, "fingerprint": source_fingerprint()}


def load(plugins: Sequence[str] = ()) -> dict[str, Any]:
    """The index the faces use: the shipped one when fresh and no plugin adds operations, else the live one."""
    if not plugins:
        index = cached()
        if index is not None:
            return index
    return live(plugins)


def render(index: dict[str, Any]) -> str:
    """The file's text: sorted keys, one item a line, so a change reads as a small diff."""
    return json.dumps(index, indent=1, sort_keys=True) + "\n"


def main(argv: Sequence[str] = tuple(sys.argv[1:])) -> int:
    """`--write` rebuilds data/catalog_index.json from the catalog; `--check` exits 1 when it is stale."""
    if list(argv) not in (["--write"], ["--check"]):
        print("usage: python -m instantstart.catalog_index --write | --check", file=sys.stderr)
        return 2
    text = render(live())
    if argv[0] == "--write":
        INDEX_FILE.write_text(text)
        print(f"wrote {INDEX_FILE}")
        return 0
    fresh = INDEX_FILE.exists() and INDEX_FILE.read_text() == text
    print(f"{INDEX_FILE} is {'up to date' if fresh else 'stale: run ' + REGENERATE}")
    return 0 if fresh else 1


if __name__ == "__main__":
    raise SystemExit(main())
