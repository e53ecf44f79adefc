"""Regenerate tests/fixtures/previous_release_0003.sqlite: the previous release's schema with an operation mid-stage.

Run from the repository root: `PYTHONPATH=$PWD/src:$PWD python scripts/previous_release_db.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "src")]

from tests.support.previous_release import FIXTURE, write_previous_release  # noqa: E402


def main() -> None:
    """Write the fixture afresh (the old file is replaced)."""
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.unlink(missing_ok=True)
    write_previous_release(f"sqlite:///{FIXTURE}")
    for companion in (Path(f"{FIXTURE}-wal"), Path(f"{FIXTURE}-shm")):
        companion.unlink(missing_ok=True)
    print(FIXTURE)


if __name__ == "__main__":
    main()
