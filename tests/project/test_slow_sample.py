"""Plain ``pytest`` runs every test not marked slow and one bucket of the slow ones (tests/conftest.py):
the buckets split the slow tests between them, none is lost, and naming a test runs it whatever its
bucket."""

from __future__ import annotations

import pytest
from conftest import SLOW_BUCKETS
from paths import TESTS

pytest_plugins = ["pytester"]

CONFTEST = (TESTS / "conftest.py").read_text(encoding="utf-8")
TESTS = "\n".join(
    ["import pytest", "", "def test_quick():", "    pass", ""]
    + [f"@pytest.mark.slow\ndef test_slow_{i}():\n    pass\n" for i in range(30)]
)


def _selected(pytester, *args: str) -> set[str]:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n    cuda: cuda\n")
    pytester.makepyfile(test_many=TESTS)
    result = pytester.runpytest("--collect-only", "-q", *args)
    return {line.split("::")[-1] for line in result.outlines if "::" in line}


def test_the_buckets_split_the_slow_tests_and_lose_none(pytester):
    slow = {f"test_slow_{i}" for i in range(30)}
    buckets = [_selected(pytester, f"--slow={k}/{SLOW_BUCKETS}") for k in range(SLOW_BUCKETS)]
    for chosen in buckets:
        assert "test_quick" in chosen and 0 < len(chosen & slow) < 30
    assert set.union(*buckets) - {"test_quick"} == slow
    assert sum(len(chosen & slow) for chosen in buckets) == 30  # disjoint
    assert _selected(pytester, "--slow=all") == slow | {"test_quick"}
    assert _selected(pytester, "--slow=none") == {"test_quick"}
    assert _selected(pytester) in buckets  # the day's bucket
    # a test named on the command line runs whatever its bucket
    assert _selected(pytester, "test_many.py::test_slow_7", "--slow=sample") == {"test_slow_7"}


def test_a_bad_choice_is_a_one_line_usage_error(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest("--slow=3/3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--slow takes sample, all, none or K/N with 0 <= K < N, got '3/3'*"])
