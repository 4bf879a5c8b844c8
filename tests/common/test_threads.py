"""torch's thread count, set through `placement_gym.common.threads`, stays set through the cost
model's first batch simulation (whose numba thread pool shares torch's OpenMP runtime)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from paths import ROOT

torch = pytest.importorskip("torch")

from placement_gym.common.threads import intra_op_threads, set_torch_threads  # noqa: E402

# A fresh process: torch has run a parallel operation, then its count is set to 1, then the cost model
# simulates a batch for the first time (numba's pool starts).
_FIRST_BATCH = """
import numpy as np, torch
from placement_gym.common.threads import set_torch_threads
from placement_gym.cost_model import simulate_batch
from placement_gym.task.named import get_task
task = get_task("cifar10_cnn", "k80x4")
x = torch.randn(512, 512)
(x @ x).sum()
set_torch_threads(1)
simulate_batch(task, np.zeros((4, task.n_forward), dtype=np.int64))
print(torch.get_num_threads())
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: every count is 1")
def test_a_count_set_before_the_first_batch_simulation_stays_set():
    done = subprocess.run([sys.executable, "-c", _FIRST_BATCH], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "1"


def _real_mode_threads(threads):
    from placement_gym.real.devices import intra_op_threads as real_mode

    return real_mode(threads)


@pytest.mark.parametrize("intra_op_threads", [intra_op_threads, _real_mode_threads],
                         ids=["common", "real-mode"])
def test_intra_op_threads_sets_and_always_restores_the_count(intra_op_threads):
    before = torch.get_num_threads()
    with intra_op_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), intra_op_threads(1):
        raise RuntimeError("a failing block")
    assert torch.get_num_threads() == before
    with intra_op_threads(None):
        assert torch.get_num_threads() == before


def test_a_count_below_one_is_refused():
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match="threads must be >= 1"):
        set_torch_threads(0)
    assert torch.get_num_threads() == before
