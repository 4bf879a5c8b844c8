"""What the fast simulator's speed-ups must not change: a workspace reused from call to call (and one per
thread in `simulate_batch`) gives each placement the reference's result whatever ran before it; the
checks the kernel took over from Python still give the clear errors; the bench reports issue 15's
targets from its rows."""

from __future__ import annotations

import numpy as np
import pytest

from placement_gym.benchmarks.simulators import BenchRow
from placement_gym.benchmarks.targets import bench_targets
from placement_gym.cost_model import fast, reference_simulate, simulate, simulate_batch
from placement_gym.task.named import get_task


@pytest.fixture(scope="module")
def task():
    return get_task("cifar10_cnn", "k80x4", "train_step")


def test_a_reused_workspace_leaves_no_trace_between_placements(task):
    rng = np.random.default_rng(1)
    placements = rng.integers(0, task.n_devices, size=(6, task.n_forward))
    placements[2] = 0  # everything on one device: no transfers, the emptiest workspace use
    expected = [reference_simulate(task, p) for p in placements]
    for _ in range(2):  # twice, in the other order the second time: earlier calls must not matter
        for p, want in zip(placements, expected):
            got = simulate(task, p)
            assert got.runtime == want.runtime and np.array_equal(got.peak_memory, want.peak_memory)
        placements, expected = placements[::-1].copy(), expected[::-1]


@pytest.mark.parametrize("rows", [1, 2, 3, 7, 17])
def test_batches_split_over_threads_give_each_row_its_single_result(task, rows):
    placements = np.random.default_rng(rows).integers(0, task.n_devices, size=(rows, task.n_forward))
    runtimes, feasible, peaks = simulate_batch(task, placements)
    for i, p in enumerate(placements):
        one = simulate(task, p)
        assert runtimes[i] == one.runtime and feasible[i] == one.feasible
        assert np.array_equal(peaks[i], one.peak_memory)


def test_placements_the_kernel_rejects_get_the_clear_errors(task):
    with pytest.raises(ValueError, match="shape"):
        simulate(task, np.zeros(task.n_forward - 1, dtype=np.int64))
    bad = np.zeros(task.n_forward, dtype=np.int64)
    bad[4] = task.n_devices
    with pytest.raises(ValueError, match="op 4"):
        simulate(task, bad)
    with pytest.raises(ValueError, match="op 4"):
        simulate(task, bad.astype(np.int32))  # the converting path


def test_a_workspace_too_small_is_an_error_not_a_wrong_result(task):
    ints, floats, work_i, work_f, n_devices = fast._arrays(task)
    assert (len(work_i), len(work_f)) == fast._work_sizes(ints)
    peak = np.empty(n_devices)
    placement = np.zeros(task.n_forward, dtype=np.int64)
    for record in (False, True):
        bad = fast._BAD_WORKSPACE
        assert fast._run(placement, ints, floats, work_i[:-1], work_f, peak, record, np.inf)[0] == bad
        assert fast._run(placement, ints, floats, work_i, work_f[:-1], peak, record, np.inf)[0] == bad
        assert fast._run(placement, ints, floats, work_i, work_f, peak, record, np.inf)[0] > 0.0


def test_the_schedule_has_the_documented_dtypes_and_matches_the_plain_call(task):
    placement = np.random.default_rng(3).integers(0, task.n_devices, task.n_forward)
    plain, timed = simulate(task, placement), simulate(task, placement, schedule=True)
    assert plain.schedule is None and timed.runtime == plain.runtime
    schedule = timed.schedule
    for name in ("op_device", "transfer_tensor", "transfer_src", "transfer_dst"):
        assert getattr(schedule, name).dtype == np.int32, name
    assert len(schedule.op_start) == task.n_ops and len(schedule.transfer_start) > 0
    assert np.array_equal(schedule.op_device, task.expand(placement))


def test_a_result_is_a_slotted_value(task):
    result = simulate(task, np.zeros(task.n_forward, dtype=np.int64))
    assert not hasattr(result, "__dict__")  # slots: a misspelt attribute is an error
    with pytest.raises(AttributeError):
        result.runtme = 1.0


def _row(graph: str, fast_rate: float, batch_rate: float, reference_rate: float,
         ns_per_op: float) -> BenchRow:
    return BenchRow(graph=graph, task=graph, ops=1, forward_ops=1, agree=True, runtime=1.0,
                    ns_per_op=ns_per_op, batch_speedup=batch_rate / fast_rate,
                    fast_evals_per_s=fast_rate, batch_evals_per_s=batch_rate,
                    reference_evals_per_s=reference_rate, ratio=fast_rate / reference_rate,
                    batch=64, reference_calls=1)


def test_the_bench_targets_are_read_from_the_right_rows():
    rows = [_row("cifar10_cnn", 1000.0, 2000.0, 2.0, 100.0),  # 500x, batch 2x
            _row("resnet50", 1000.0, 1500.0, 5.0, 100.0),  # 200x (the least), batch 1.5x (the least)
            _row("layered1000", 10.0, 30.0, 1.0, 200.0),  # not a bundled graph: its 10x is no ratio target
            _row("layered100000", 1.0, 3.0, 0.1, 300.0)]
    ratio, per_op, gain = bench_targets(rows)
    assert (ratio.measured, ratio.passed, ratio.detail) == (200.0, False, "least: resnet50")
    assert per_op.measured == pytest.approx(1.5) and per_op.passed is False
    assert gain.measured == 1.5 and gain.passed is False and "resnet50" in gain.detail
    ratio, per_op, gain = bench_targets(rows[2:3])
    assert ratio.passed is None and per_op.passed is None and gain.measured == 3.0 and gain.passed


def test_the_bench_times_single_calls_on_the_batch_placements_in_turn(task, monkeypatch):
    """One placement evaluated over and over runs faster than a new one each time (the branch predictor
    learns it), so single calls must go through the batch's placements as the batch does."""
    import placement_gym.benchmarks.simulators as bench

    seen: dict[str, list[bytes]] = {"fast": [], "reference": []}

    def recording(name, call):
        def wrapped(task, placement, *args, **kwargs):
            seen[name].append(np.asarray(placement).tobytes())
            return call(task, placement, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(bench, "simulate", recording("fast", simulate))
    monkeypatch.setattr(bench, "reference_simulate", recording("reference", reference_simulate))
    row = bench.bench_task(task, "cifar10_cnn", repeats=16, seconds=0.05, batch=8)
    batch = np.random.default_rng(0).integers(0, task.n_devices, size=(8, task.n_forward))
    rows = [p.tobytes() for p in batch]
    assert seen["fast"][1:17] == rows + rows  # after the checking call: the 8 rows in turn, twice
    # the checking call on row 0, then rows 1, 2, ... in turn, however many calls the time allowed (the
    # checking call alone takes a few ms, so 0.05 s leaves room for more on any load)
    calls = seen["reference"]
    assert len(calls) > 1 and calls == [rows[i % len(rows)] for i in range(len(calls))]
    assert row.agree
