"""`placement-gym bench`'s figures for users: the JSON keys, the incremental ceiling (hand-computed on a
chain) and the side-by-side run against another checkout (here: this one, which must agree bit for bit).
No wall-clock figure is asserted, only structure, identity and hand-computed ratios."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import hand_graph

import placement_gym
from placement_gym.benchmarks.moves import cutoff_speedup, incremental_ceiling, move_ceiling
from placement_gym.cli import main
from placement_gym.cluster import load_cluster
from placement_gym.cost_model import simulate
from placement_gym.task.compiled import make_task
from placement_gym.task.named import get_task, parse_task_id

GRAPH = "cifar10_cnn"
TINY = ["bench", "--graphs", GRAPH, "--sizes", "none", "--repeats", "1", "--seconds", "0", "--batch", "2",
        "--json"]
CHECKOUT = Path(placement_gym.__file__).resolve().parents[1]


def bench_json(capsys, *extra: str) -> dict:
    assert main([*TINY, *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def chain_task():
    """Five ops in a chain, nothing else, on k80x2 (a CPU and two identical GPUs), inference only: a
    move of op j from gpu:0 to gpu:1 leaves ops 0..j-1 as they were and delays j+1.. by a transfer."""
    names = ["a", "b", "c", "d", "e"]
    graph = hand_graph([(name, 1e9, 100, 0) for name in names], list(zip(names, names[1:])))
    return make_task(graph, load_cluster("k80x2"), "inference")


def test_json_states_machine_load_and_the_documented_keys(capsys):
    report = bench_json(capsys, "--incremental-moves", "4")
    assert set(report) == {"machine", "load_average_end", "rows"}
    assert report["machine"]["logical_cores"] >= 1 and len(report["machine"]["load_average"]) == 3
    (row,) = report["rows"]
    assert row["graph"] == GRAPH and row["ops"] == get_task(GRAPH, "k80x4").n_ops
    assert row["ns_per_op"] > 0 and row["batch_speedup"] > 0
    assert row["ns_per_op"] == pytest.approx(1e9 / row["fast_evals_per_s"] / row["ops"])
    assert row["batch_speedup"] == pytest.approx(row["batch_evals_per_s"] / row["fast_evals_per_s"])
    assert 1 <= row["incremental_ceiling"] <= row["ops"] and 0 <= row["changed_fraction"] <= 1
    assert (row["incremental_moves"], row["incremental_from"]) == (4, "random")
    assert row["ns_per_op_against"] is None and row["identical_against"] is None


def test_incremental_figures_are_off_by_default_and_only_for_bundled_graphs(capsys):
    (row,) = bench_json(capsys)["rows"]
    assert row["incremental_ceiling"] is None and row["changed_fraction"] is None
    rows = bench_json(capsys, "--graphs", "none", "--sizes", "40", "--incremental-moves", "2")["rows"]
    assert rows[0]["graph"] == "layered40" and rows[0]["incremental_ceiling"] is None


@pytest.mark.parametrize(("moved", "ceiling", "changed"), [
    (4, 5 / 1, 1 / 5),  # the last op: 4 ops before it stay, one is left to simulate
    (2, 5 / 3, 3 / 5),
    (0, 5 / 5, 4 / 5),  # its start stays (no input), its device does not: nothing can be skipped
])
def test_move_ceiling_on_a_chain_by_hand(chain_task, moved, ceiling, changed):
    gpu0, gpu1 = (chain_task.cluster.device_names.index(name) for name in ("gpu:0", "gpu:1"))
    placement = np.full(5, gpu0)
    before = simulate(chain_task, placement, schedule=True).schedule
    placement[moved] = gpu1
    after = simulate(chain_task, placement, schedule=True).schedule
    assert move_ceiling(before, after) == (pytest.approx(ceiling), pytest.approx(changed))


def test_a_move_that_changes_nothing_leaves_one_op_to_simulate(chain_task):
    before = simulate(chain_task, np.ones(5, dtype=np.int64), schedule=True).schedule
    assert move_ceiling(before, before) == (5.0, 0.0)


def test_incremental_ceiling_is_seeded_and_bounded():
    task = get_task(GRAPH, "k80x2")
    start = np.random.default_rng(1).integers(0, task.n_devices, size=task.n_forward)
    first = incremental_ceiling(task, start, 6, seed=3)
    assert first == incremental_ceiling(task, start, 6, seed=3)
    assert 1 <= first[0] <= task.n_ops and 0 <= first[1] <= 1
    with pytest.raises(ValueError, match="moves"):
        incremental_ceiling(task, start, 0)


def test_cutoff_figures_for_every_row_when_asked(capsys):
    (row,) = bench_json(capsys)["rows"]
    assert (row["cutoff_speedup"], row["cut_fraction"], row["cutoff_moves"]) == (None, None, 0)
    rows = bench_json(capsys, "--sizes", "40", "--cutoff-moves", "3")["rows"]
    assert [row["graph"] for row in rows] == [GRAPH, "layered40"]
    for row in rows:
        assert row["cutoff_speedup"] > 0 and 0 <= row["cut_fraction"] <= 1 and row["cutoff_moves"] == 3


def test_every_move_off_a_chain_on_one_gpu_is_cut(chain_task):
    # A chain on one GPU is the fastest placement there is: any op on another device adds a transfer
    # before its finish (or the CPU's longer time), and the finish plus the rest of the chain at its
    # fastest is then above the start's runtime.
    gpu0 = chain_task.cluster.device_names.index("gpu:0")
    speedup, share = cutoff_speedup(chain_task, np.full(5, gpu0), 6, seed=2, repeats=1)
    assert share == 1.0 and speedup > 0


def test_against_this_checkout_is_bit_identical(capsys):
    rows = bench_json(capsys, "--sizes", "30", "--against", str(CHECKOUT))["rows"]
    assert [row["graph"] for row in rows] == [GRAPH, "layered30"]
    for row in rows:
        assert row["identical_against"] is True
        assert row["ns_per_op_against"] > 0 and row["ns_per_op_alternating"] > 0
        ratio = row["ns_per_op_against"] / row["ns_per_op_alternating"]
        assert row["speedup_against"] == pytest.approx(ratio)


def test_against_a_folder_that_is_no_checkout_is_one_error_line(capsys, tmp_path):
    assert main([*TINY, "--against", str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_an_unknown_start_agent_fails_before_any_row(capsys):
    assert main([*TINY, "--incremental-moves", "1", "--incremental-from", "no_such_agent"]) == 2
    captured = capsys.readouterr()
    assert "no_such_agent" in captured.err and GRAPH not in captured.err  # no row started


def test_task_ids_are_rows_of_their_own_tasks(capsys):
    # A pipelined step on another cluster: the row is that task's (its op count), checked against the
    # reference and timed against this checkout like any other row.
    task_id = "cifar10_cnn/k80x2/train+mb3"
    rows = bench_json(capsys, "--graphs", "none", "--tasks", task_id, "--against", str(CHECKOUT))["rows"]
    (row,) = rows
    assert row["graph"] == task_id and row["ops"] == parse_task_id(task_id).n_ops
    assert row["ops"] > 3 * get_task(GRAPH, "k80x2").n_forward  # three micro-batches, forward and backward
    assert row["agree"] is True and row["identical_against"] is True


def test_an_unknown_task_id_fails_before_any_row(capsys):
    assert main([*TINY, "--tasks", "cifar10_cnn/no_such_cluster/train"]) == 2
    captured = capsys.readouterr()
    assert "no_such_cluster" in captured.err and GRAPH not in captured.err


def test_the_library_s_former_module_still_gives_its_names_with_a_warning():
    import placement_gym.benchmarks.moves as moves
    import placement_gym.cli.bench as former

    with pytest.warns(DeprecationWarning, match="placement_gym.benchmarks.moves"):
        assert former.move_ceiling is moves.move_ceiling
    with pytest.raises(AttributeError):
        former.no_such_name  # noqa: B018

