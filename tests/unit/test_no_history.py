"""The product speaks of itself only: no development history in its code, docs or comments.

Dated records of runs live in `bench/results/recorded/` and changes in `CHANGELOG.md`; both are
history by design and not scanned.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [
    *ROOT.glob("README.md"),
    *ROOT.glob("docs/**/*.md"),
    *(
        path
        for package in ("adapter", "topology", "schemas", "spark_streaming", "devstack", "bench")
        for path in (ROOT / package).rglob("*.py")
    ),
    *(path for path in (ROOT / "tests").rglob("*.py") if path.name != "test_no_history.py"),
]
ORDINALS = (
    "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|this|last|previous|next"
)
HISTORY = re.compile(
    rf"\b(?:{ORDINALS}) session\b"  # "the fifth session's run"
    r"|(?<!known )\bissue \d+\b"  # "issue 18's floors" (a "known issue" of the docs is product)
    r"|\bbranch `[\w-]+`"  # "branch `lean6`"
    r"|\b(?:lean6|cpu18|mem5|perf18|workers18|catalog18|mount17|tier16|ext15|ops19|console20)\b"
    r"|\brounds? of work\b",
    re.IGNORECASE,
)


def test_the_scan_finds_something() -> None:
    assert len(SCANNED) > 300
    assert HISTORY.search("as the fifth session measured (branch `lean6`)")
    assert HISTORY.search("issue 18's floors")
    assert not HISTORY.search("known issue 2 in the architecture")


@pytest.mark.parametrize("path", SCANNED, ids=lambda path: str(path.relative_to(ROOT)))
def test_no_development_history(path: Path) -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not found, "\n".join(found)
