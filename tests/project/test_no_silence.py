"""Nothing silent for more than 3 s (issue 63): numba's first compiles and `evaluate --agent all` report
progress on stderr, and a warm run says nothing about compiling."""

import os
import subprocess
import sys
import threading
import time

import pytest
from paths import ROOT

from placement_gym.cli import main
from placement_gym.cli.first_run import KERNEL_MODULES
from placement_gym.common import progress

PACKAGE = ROOT / "placement_gym"
COMMAND = ["evaluate", "--graph", "cifar10_cnn", "--cluster", "k80x2", "--agent", "anneal", "--budget", "50"]


def test_every_module_with_kernels_is_announced():
    with_kernels = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
                    if "@numba.njit" in path.read_text(encoding="utf-8")}
    assert with_kernels == set(KERNEL_MODULES)


def _stderr_arrivals(env: dict[str, str]) -> tuple[list[tuple[float, str]], float]:
    """Lines of stderr of the CLI running `COMMAND`, each with the time it arrived, and the end time."""
    code = "import sys; from placement_gym.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, *COMMAND], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)
    start, lines = time.monotonic(), []
    reader = threading.Thread(
        target=lambda: lines.extend((time.monotonic() - start, line) for line in proc.stderr))
    reader.start()
    assert proc.wait(timeout=600) == 0
    end = time.monotonic() - start
    reader.join()
    return lines, end


@pytest.mark.slow
def test_a_cold_compile_writes_a_line_every_few_seconds_and_a_warm_run_none(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    lines, end = _stderr_arrivals(env)
    assert "numba" in lines[0][1], lines
    times = [0.0] + [t for t, _ in lines] + [end]
    # the lines come every 3 s; a loaded machine may delay one a little
    assert max(b - a for a, b in zip(times, times[1:])) < 4.5, lines
    warm, _ = _stderr_arrivals(env)
    assert not [line for _, line in warm if "numba" in line or progress.is_progress_line(line)], warm


@pytest.mark.slow
def test_evaluate_all_reports_the_agent_under_way(capsys, monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL_S", 0.0)  # every call writes its line: no waiting in a test
    assert main(["evaluate", "--graph", "cifar10_cnn", "--cluster", "k80x2", "--agent", "all",
                 "--budget", "20"]) == 0
    out, err = capsys.readouterr()
    running = [line for line in err.splitlines()
               if progress.is_progress_line(line) and "running agents" in line]
    assert running and all(f"/{len(running)} (" in line for line in running), err
    assert "[" not in out.splitlines()[0]  # stdout keeps the table
