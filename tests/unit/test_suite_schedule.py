"""The suite's own scheduling: files ordered longest first, and the durations summary that records them."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.schedule import order_longest_first, recorded_seconds

REPO = Path(__file__).resolve().parents[2]

LOG = """\
[gw0] [ 10%] PASSED tests/unit/test_a.py::test_one
[gw1] [ 20%] PASSED tests/integration/test_slow.py::test_only
[gw0] [ 30%] PASSED tests/unit/test_b.py::test_two[x]
============================= slowest durations ==============================
90.50s call     tests/integration/test_slow.py::test_only
3.00s setup    tests/integration/test_slow.py::test_only
2.25s call     tests/unit/test_b.py::test_two[x]
1.00s teardown tests/unit/test_a.py::test_one
0.50s call     tests/unit/test_a.py::test_one
(12 durations < 0.005s hidden.  Use -vv to show these durations.)
"""


@dataclass
class _Item:
    nodeid: str


def test_files_go_longest_first_and_keep_their_tests_in_order() -> None:
    items: list[Any] = [_Item(n) for n in (
        "tests/a.py::t1", "tests/b.py::t1", "tests/a.py::t2", "tests/c.py::t1", "tests/b.py::t2", "tests/d.py::t1",
    )]
    order_longest_first(items, {"tests/c.py": 50.0, "tests/b.py": 10.0})
    assert [i.nodeid for i in items] == [
        "tests/c.py::t1", "tests/b.py::t1", "tests/b.py::t2", "tests/a.py::t1", "tests/a.py::t2", "tests/d.py::t1",
    ]


def test_without_a_record_the_collection_order_stays() -> None:
    items: list[Any] = [_Item("tests/b.py::t"), _Item("tests/a.py::t")]
    order_longest_first(items, {})
    assert [i.nodeid for i in items] == ["tests/b.py::t", "tests/a.py::t"]


def test_the_summary_sums_per_file_and_worker_and_writes_the_record(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(LOG)
    record = tmp_path / "durations.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "suite_durations.py"), str(log), "--write", str(record)],
        capture_output=True, text=True, check=True, cwd=REPO,
    )
    assert "3 files, 97.2 s" in result.stdout
    assert "per worker: gw0 4 s, gw1 94 s" in result.stdout
    assert "2 workers: at least 94 s; longest-first by file 94 s" in result.stdout
    files = json.loads(record.read_text())["files"]
    assert files == {"tests/integration/test_slow.py": 93.5, "tests/unit/test_b.py": 2.2, "tests/unit/test_a.py": 1.5}
    assert recorded_seconds(record) == files
