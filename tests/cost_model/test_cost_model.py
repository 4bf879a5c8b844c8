"""The cost model's semantics: hand-computed cases, the reference oracle, and invariants."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import (
    MS,
    OBJECTIVES,
    SEEDS,
    assert_simulators_agree,
    hand_cluster,
    hand_graph,
    random_cluster,
    random_task_sizes,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_gym.cluster.cluster import Cluster
from placement_gym.cost_model import lower_bound, reference_simulate, simulate, simulate_batch, single_device
from placement_gym.graph.synthetic import layered_graph, random_graph
from placement_gym.task.compiled import make_task

OVERHEAD = 1e-6
LATENCY = 1e-4


def op_time(gflops):  # hand_cluster: 1e12 FLOP/s
    return gflops * MS + OVERHEAD


def transfer_time(nbytes):  # hand_cluster: 1 GB/s links
    return LATENCY + nbytes / 1e9


def evaluate(graph, placement, cluster=None, schedule=True):
    task = make_task(graph, cluster or hand_cluster(), "inference")
    fast = simulate(task, placement, schedule=schedule)
    slow = reference_simulate(task, placement)
    assert fast.runtime == slow.runtime
    np.testing.assert_array_equal(fast.peak_memory, slow.peak_memory)
    return task, fast


CHAIN = hand_graph([("a", 1e9, 1e6, 0), ("b", 2e9, 1e6, 0), ("c", 3e9, 1e6, 0)], [("a", "b"), ("b", "c")])


def test_chain_on_one_device_is_the_sum_of_op_times():
    _, result = evaluate(CHAIN, [0, 0, 0])
    assert result.runtime == pytest.approx(op_time(1) + op_time(2) + op_time(3), rel=1e-12)
    assert result.schedule.transfer_tensor.size == 0


def test_chain_split_pays_one_transfer_per_cut():
    _, result = evaluate(CHAIN, [0, 1, 1])
    assert result.runtime == pytest.approx(
        op_time(1) + transfer_time(1e6) + op_time(2) + op_time(3), rel=1e-12
    )
    _, result = evaluate(CHAIN, [0, 1, 0])
    assert result.runtime == pytest.approx(
        op_time(1) + op_time(2) + op_time(3) + 2 * transfer_time(1e6), rel=1e-12
    )


FORK_JOIN = hand_graph(
    [("src", 1e9, 1e6, 0), ("x", 10e9, 1e6, 0), ("y", 10e9, 1e6, 0), ("join", 1e9, 1e6, 0)],
    [("src", "x"), ("src", "y"), ("x", "join"), ("y", "join")],
)


def test_fork_join_split_wins_when_branches_are_heavy():
    _, together = evaluate(FORK_JOIN, [0, 0, 0, 0])
    _, split = evaluate(FORK_JOIN, [0, 0, 1, 0])
    assert together.runtime == pytest.approx(op_time(1) * 2 + op_time(10) * 2, rel=1e-12)
    # y waits for src's output on gpu:1, then its output comes back; x runs meanwhile on gpu:0
    branch = max(op_time(10), transfer_time(1e6) + op_time(10) + transfer_time(1e6))
    assert split.runtime == pytest.approx(op_time(1) + branch + op_time(1), rel=1e-12)
    assert split.runtime < together.runtime


def test_chain_split_loses_to_one_device():
    _, together = evaluate(CHAIN, [1, 1, 1])
    _, split = evaluate(CHAIN, [0, 1, 0])
    assert split.runtime > together.runtime


def test_tensor_is_sent_once_per_destination_device():
    graph = hand_graph([("a", 1e9, 5e6, 0), ("b", 1e9, 1e3, 0), ("c", 1e9, 1e3, 0)], [("a", "b"), ("a", "c")])
    _, result = evaluate(graph, [0, 1, 1])
    assert result.schedule.transfer_tensor.size == 1
    # b and c both wait for the one transfer, then run one after the other on gpu:1
    assert result.runtime == pytest.approx(op_time(1) + transfer_time(5e6) + 2 * op_time(1), rel=1e-12)


def test_transfers_on_one_link_are_serialised_in_order():
    # a and b run back to back on gpu:0, both outputs go to gpu:1 over one link: b's output waits
    # for a's transfer (large) to finish.
    graph = hand_graph(
        [("a", 1e9, 1e9, 0), ("b", 1e9, 1e3, 0), ("c", 1e9, 1e3, 0)],
        [("a", "c"), ("b", "c")],
    )
    _, result = evaluate(graph, [0, 0, 1])
    s = result.schedule
    assert s.transfer_tensor.size == 2
    a_arrives = op_time(1) + transfer_time(1e9)
    b_start = max(a_arrives, 2 * op_time(1))
    assert s.transfer_start[1] == pytest.approx(b_start, rel=1e-12)
    assert result.runtime == pytest.approx(b_start + transfer_time(1e3) + op_time(1), rel=1e-12)


def test_device_takes_the_earliest_ready_op_then_the_lowest_index():
    # On gpu:1, "late" (index 1) becomes ready only after a transfer; "early" (index 2) and "tie"
    # (index 3) are ready at time 0. gpu:1 runs early, then tie, then late.
    graph = hand_graph(
        [("head", 1e9, 1e6, 0), ("late", 1e9, 1e3, 0), ("early", 5e9, 1e3, 0), ("tie", 1e9, 1e3, 0)],
        [("head", "late")],
        inputs=[],
    )
    task, result = evaluate(graph, [0, 1, 1, 1])
    start = dict(zip(task.op_names, result.schedule.op_start))
    assert start["early"] == 0.0
    assert start["tie"] == pytest.approx(op_time(5), rel=1e-12)
    assert start["late"] == pytest.approx(op_time(5) + op_time(1), rel=1e-12)


def test_peak_memory_of_a_chain_by_hand():
    # data input X (4 MB) -> a (1 MB out) -> b (2 MB out) -> c (3 MB, graph output), params on b.
    graph = hand_graph(
        [("a", 1e9, 1e6, 0), ("b", 1e9, 2e6, 5e5), ("c", 1e9, 3e6, 0)],
        [("X", "a"), ("a", "b"), ("b", "c")],
        inputs=[("X", 4e6)],
    )
    _, result = evaluate(graph, [0, 0, 0])
    # at a: X + a; at b: X freed at a's finish, a + b; at c: a freed, b + c (c lives to the end)
    assert result.peak_memory[0] == max(4e6 + 1e6, 1e6 + 2e6, 2e6 + 3e6) + 5e5
    assert result.peak_memory[1] == 0.0


def test_received_copies_count_on_the_destination():
    graph = hand_graph([("a", 1e9, 7e6, 0), ("b", 1e9, 1e3, 0)], [("a", "b")])
    _, result = evaluate(graph, [0, 1])
    # gpu:1 holds the received 7 MB while b runs, plus b's output
    assert result.peak_memory[1] == 7e6 + 1e3
    assert result.peak_memory[0] == 7e6


def test_out_of_memory_is_an_infeasible_result_not_a_crash():
    graph = hand_graph([("big", 1e9, 1e6, 8e9), ("small", 1e9, 1e6, 0)], [("big", "small")])
    cluster = hand_cluster(memory=4e9)
    _, result = evaluate(graph, [0, 1], cluster)
    assert not result.feasible
    assert result.runtime > 0
    assert result.peak_memory[0] > 4e9
    training = make_task(graph, cluster, "train_step", optimizer="sgd")
    assert not simulate(training, [0, 0]).feasible
    fits = make_task(hand_graph([("w", 1e9, 1e6, 1e9)], []), cluster, "train_step", optimizer="adam")
    # Adam: weights + gradients + 2 states = 4 GB of static memory, plus the 1 MB output
    assert simulate(fits, [0]).peak_memory[0] == 4e9 + 1e6
    assert not simulate(fits, [0]).feasible


def test_train_step_adds_backward_and_update_ops_on_the_same_device():
    graph = hand_graph([("a", 1e9, 1e6, 1e6), ("b", 2e9, 1e6, 0)], [("a", "b")])
    task = make_task(graph, hand_cluster(), "train_step", optimizer="sgd")
    assert task.op_names == ("a", "b", "b.grad", "a.grad", "a.update")
    np.testing.assert_array_equal(task.expand([1, 0]), [1, 0, 0, 1, 1])
    result = simulate(task, [0, 0])
    # one device: every op back to back; backward doubles matmul FLOPs; SGD update: 2 FLOPs/param
    expected = op_time(1) + op_time(2) + op_time(4) + op_time(2) + (2 * 1e6 / 4) / 1e12 + OVERHEAD
    assert result.runtime == pytest.approx(expected, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(**random_task_sizes((1, 40), (1, 5)),
       window=st.one_of(st.none(), st.integers(1, 6)),
       objective=OBJECTIVES,
       executor_costs=st.booleans())
def test_fast_simulator_equals_the_reference_exactly(
    n_ops, n_devices, seed, window, objective, executor_costs
):
    graph = random_graph(n_ops, seed=seed, window=window)
    task = make_task(graph, random_cluster(n_devices, np.random.default_rng(seed), executor_costs), objective)
    rng = np.random.default_rng(seed)
    assert_simulators_agree(task, (rng.integers(0, n_devices, n_ops), np.zeros(n_ops, dtype=int)))


def sorted_sweep_peak(device, nbytes, alloc, free, n_devices):
    """The peak of live bytes per device by the definition: every event in time order, frees before
    allocations at equal times, the peak taken after each event."""
    events = sorted([(a, 1, d, b) for d, b, a in zip(device, nbytes, alloc)]
                    + [(f, 0, d, -b) for d, b, f in zip(device, nbytes, free) if f < np.inf])
    usage, peak = np.zeros(n_devices), np.zeros(n_devices)
    for _, _, d, change in events:
        usage[d] += change
        peak[d] = max(peak[d], usage[d])
    return peak


@settings(max_examples=200, deadline=None)
@given(
    n_buffers=st.integers(0, 300),
    n_devices=st.integers(1, 6),
    n_times=st.integers(1, 40),
    seed=SEEDS,
)
def test_the_memory_sweep_finds_the_peak_of_every_event_order(n_buffers, n_devices, n_times, seed):
    # Few distinct times, so that many events share one (frees and allocations at equal times, in
    # one bucket and across buckets); some buffers are never freed and some are freed when made.
    from placement_gym.cost_model import fast

    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0.0, 1.0, n_times))
    device = rng.integers(0, n_devices, n_buffers)
    nbytes = rng.integers(1, 1000, n_buffers).astype(float)
    alloc = times[rng.integers(0, n_times, n_buffers)]
    free = np.maximum(alloc, times[rng.integers(0, n_times, n_buffers)])
    free[rng.random(n_buffers) < 0.1] = np.inf
    horizon = float(times[-1])
    peak = np.zeros(n_devices)
    cells, events = n_buffers + n_devices, 2 * n_buffers
    fast._peak_live_bytes(device, nbytes, alloc, free, horizon, peak, np.empty(cells), np.empty(cells),
                          np.empty(cells, dtype=np.int64), np.empty(events, dtype=np.int64), np.empty(events),
                          np.empty(events), np.empty(n_devices))
    np.testing.assert_array_equal(peak, sorted_sweep_peak(device, nbytes, alloc, free, n_devices))


@pytest.mark.parametrize("n_times", [1, 7, 300])
def test_the_memory_sweep_of_events_bunched_in_time(n_times):
    # Nearly every event in the first thousandth of the horizon, so in the first bucket: cells of
    # hundreds of events, which the sweep sorts in n log n, not by insertion. Few distinct times make
    # frees and allocations meet at equal times.
    from placement_gym.cost_model import fast

    rng = np.random.default_rng(n_times)
    n_buffers, n_devices = 600, 2
    times = np.sort(rng.uniform(0.0, 1e-3, n_times))
    device = rng.integers(0, n_devices, n_buffers)
    nbytes = rng.integers(1, 1000, n_buffers).astype(float)
    alloc = times[rng.integers(0, n_times, n_buffers)]
    free = np.maximum(alloc, times[rng.integers(0, n_times, n_buffers)])
    free[:2] = 1.0  # two buffers live to the horizon
    peak = np.zeros(n_devices)
    cells, events = n_buffers + n_devices, 2 * n_buffers
    fast._peak_live_bytes(device, nbytes, alloc, free, 1.0, peak, np.empty(cells), np.empty(cells),
                          np.empty(cells, dtype=np.int64), np.empty(events, dtype=np.int64), np.empty(events),
                          np.empty(events), np.empty(n_devices))
    np.testing.assert_array_equal(peak, sorted_sweep_peak(device, nbytes, alloc, free, n_devices))


def test_the_memory_sweep_by_hand():
    # Device 0: 4 bytes from 2 on (freed at inf), 5 over [0, 2), 3 over [1, 3): 8 at 1, then 7 at 2,
    # not 12 (the free at 2 comes before the allocation at 2, listed first here); device 1: 6 over
    # [0, 1) and 6 over [1, 2): never 12.
    from placement_gym.cost_model import fast

    device = np.array([0, 0, 0, 1, 1])
    nbytes = np.array([4.0, 5.0, 3.0, 6.0, 6.0])
    alloc = np.array([2.0, 0.0, 1.0, 0.0, 1.0])
    free = np.array([np.inf, 2.0, 3.0, 1.0, 2.0])
    peak = np.zeros(2)
    fast._peak_live_bytes(device, nbytes, alloc, free, 3.0, peak, np.empty(7), np.empty(7),
                          np.empty(7, dtype=np.int64), np.empty(10, dtype=np.int64), np.empty(10),
                          np.empty(10), np.empty(2))
    np.testing.assert_array_equal(peak, [8.0, 6.0])


@settings(max_examples=60, deadline=None)
@given(**random_task_sizes((2, 60), (1, 6)), microbatches=st.integers(1, 3), objective=OBJECTIVES)
def test_the_reference_agrees_when_launches_queue_for_dispatch_threads(
    n_ops, n_devices, seed, microbatches, objective
):
    # Dispatch times up to 3 ms, as long as many ops, and 1 to 4 threads per host: launches wait for
    # threads, and a launch whose inputs arrive early can end before one issued earlier, so the thread
    # that frees first is not the one used longest ago. Some tensors are empty (no memory, yet still
    # sent and waited for).
    rng = np.random.default_rng(seed)
    graph = random_graph(n_ops, seed=seed, window=5)
    empty = rng.random(graph.n_tensors) < 0.3
    graph = dataclasses.replace(graph, tensor_bytes=np.where(empty, 0.0, graph.tensor_bytes))
    cluster = random_cluster(n_devices, rng, executor_costs=True)
    threads = tuple(int(k) for k in rng.integers(1, 5, len(cluster.host_names)))
    cluster = dataclasses.replace(cluster, host_dispatch_threads=threads,
                                  dispatch_time=rng.uniform(0.0, 3e-3, n_devices))
    task = make_task(graph, cluster, objective, microbatches=microbatches)
    assert_simulators_agree(task, (rng.integers(0, n_devices, n_ops), np.zeros(n_ops, dtype=int)))


@pytest.mark.parametrize("objective", ["inference", "train_step"])
def test_schedule_respects_dependencies_devices_and_links(objective):
    graph = random_graph(300, seed=7, window=12)
    task = make_task(graph, random_cluster(4, np.random.default_rng(7), True), objective)
    placement = np.random.default_rng(7).integers(0, 4, graph.n_ops)
    s = simulate(task, placement, schedule=True).schedule
    for d in range(4):  # one op at a time per device
        on = np.flatnonzero(s.op_device == d)
        order = on[np.argsort(s.op_start[on])]
        assert np.all(s.op_start[order][1:] >= s.op_finish[order][:-1])
    arrival = {}
    for k in range(s.transfer_tensor.size):
        t, src, dst = s.transfer_tensor[k], s.transfer_src[k], s.transfer_dst[k]
        assert s.transfer_start[k] >= s.op_finish[task.tensor_producer[t]]
        arrival[(t, dst)] = s.transfer_finish[k]
    for src in range(4):  # one transfer at a time per link
        for dst in range(4):
            on = np.flatnonzero((s.transfer_src == src) & (s.transfer_dst == dst))
            assert np.all(s.transfer_start[on][1:] >= s.transfer_finish[on][:-1])
    cluster = task.cluster
    for segment in range(len(cluster.segment_names)):  # one transfer at a time per shared segment
        uses = np.flatnonzero((cluster.link_segments[s.transfer_src, s.transfer_dst] == segment).any(axis=1))
        assert uses.size > 0
        order = uses[np.argsort(s.transfer_start[uses], kind="stable")]
        assert np.all(s.transfer_start[order][1:] >= s.transfer_finish[order][:-1])
    for t in range(task.n_tensors):  # every input present when its consumer starts
        p = task.tensor_producer[t]
        for c in task.tensor_consumers[task.tensor_consumer_pointer[t] : task.tensor_consumer_pointer[t + 1]]:
            if p >= 0:
                ready = s.op_finish[p] if s.op_device[p] == s.op_device[c] else arrival[(t, s.op_device[c])]
                assert s.op_start[c] >= ready


@pytest.mark.parametrize("objective", ["inference", "train_step"])
def test_single_device_runtime_is_the_sum_of_op_times_and_bounds_hold(objective):
    graph = random_graph(200, seed=3, window=10)
    task = make_task(graph, random_cluster(3, np.random.default_rng(3)), objective)
    singles = single_device(task)
    for d in range(3):
        assert singles.runtimes[d] == pytest.approx(task.duration[:, d].sum(), rel=1e-9)
    bound = lower_bound(task)
    placements = np.random.default_rng(0).integers(0, 3, (32, graph.n_ops))
    runtimes, feasible, peaks = simulate_batch(task, placements)
    assert np.all(runtimes >= bound * (1 - 1e-12))
    assert np.all(singles.runtimes >= bound * (1 - 1e-12))
    for row, runtime, peak in zip(placements, runtimes, peaks):  # the batch equals one at a time
        single = simulate(task, row)
        assert single.runtime == runtime
        np.testing.assert_array_equal(single.peak_memory, peak)


def test_same_inputs_same_result():
    graph = random_graph(150, seed=11, window=8)
    task = make_task(graph, random_cluster(5, np.random.default_rng(11)), "train_step")
    placement = np.random.default_rng(1).integers(0, 5, graph.n_ops)
    again = make_task(graph, random_cluster(5, np.random.default_rng(11)), "train_step")
    first, second = simulate(task, placement), simulate(again, placement)
    assert first.runtime == second.runtime
    np.testing.assert_array_equal(first.peak_memory, second.peak_memory)


@pytest.mark.parametrize(
    "placement, message",
    [
        (np.zeros(2, dtype=int), "shape"),
        (np.zeros((3, 1), dtype=int), "shape"),
        (np.array([0, 1, 2]), "out of range"),
        (np.array([0, -1, 0]), "out of range"),
        (np.array([0.5, 0, 0]), "integer"),
    ],
)
def test_bad_placements_get_a_clear_error(placement, message):
    task = make_task(CHAIN, hand_cluster(), "inference")
    with pytest.raises(ValueError, match=message):
        simulate(task, placement)


def test_unknown_objective_and_optimizer_are_named():
    with pytest.raises(ValueError, match="train_step"):
        make_task(CHAIN, hand_cluster(), "training")
    with pytest.raises(ValueError, match="adam"):
        make_task(CHAIN, hand_cluster(), "train_step", optimizer="lamb")


@pytest.mark.parametrize("width", [2, 5, 16])
def test_layered_benchmark_graphs_agree_with_the_reference(width):
    graph = layered_graph(240, width=width, seed=width)
    assert graph.n_ops == 240 and np.all(graph.depth == np.arange(240) // width)
    for objective in ("inference", "train_step"):
        task = make_task(graph, random_cluster(4, np.random.default_rng(width)), objective)
        placement = np.random.default_rng(width).integers(0, 4, graph.n_ops)
        fast, slow = simulate(task, placement), reference_simulate(task, placement)
        assert fast.runtime == slow.runtime
        np.testing.assert_array_equal(fast.peak_memory, slow.peak_memory)


# --- Costs real executors pay: host dispatch, transfer synchronisation, shared segments -----------

US = 1e-6


def executor_cluster(n_devices=2, **figures) -> Cluster:
    """`hand_cluster` (1e12 FLOP/s, 1 GB/s links, 100 us latency, 1 us overhead) with executor costs."""
    import dataclasses

    return dataclasses.replace(hand_cluster(n_devices), **figures)


def test_dispatch_hides_behind_long_ops_and_bounds_short_ones():
    # One device, one dispatch thread taking 10 us per launch. Launches run ahead of the device, so a
    # chain of 1 ms ops pays the first launch only; a chain of tiny ops runs at one op per launch.
    cluster = executor_cluster(1, dispatch_time=np.array([10 * US]))
    _, long_ops = evaluate(CHAIN, [0, 0, 0], cluster)
    assert long_ops.runtime == pytest.approx(10 * US + op_time(1) + op_time(2) + op_time(3), rel=1e-12)
    tiny = hand_graph([("a", 1e3, 1e3, 0), ("b", 1e3, 1e3, 0), ("c", 1e3, 1e3, 0)], [("a", "b"), ("b", "c")])
    _, short_ops = evaluate(tiny, [0, 0, 0], cluster)
    assert short_ops.runtime == pytest.approx(3 * 10 * US + op_time(1e-6), rel=1e-12)


def test_devices_of_one_host_share_its_dispatch_threads():
    # Two independent chains of four tiny ops, one per device. One thread issues all eight
    # launches (10 us each, alternating devices in start order); two threads issue them in pairs.
    ops = [(f"{chain}{k}", 1e3, 1e3, 0) for chain in "xy" for k in range(4)]
    edges = [(f"{chain}{k}", f"{chain}{k + 1}") for chain in "xy" for k in range(3)]
    graph = hand_graph(ops, edges)
    placement = [0, 0, 0, 0, 1, 1, 1, 1]
    _, one_thread = evaluate(graph, placement, executor_cluster(dispatch_time=np.full(2, 10 * US)))
    assert one_thread.runtime == pytest.approx(8 * 10 * US + op_time(1e-6), rel=1e-12)
    _, two_threads = evaluate(
        graph, placement, executor_cluster(dispatch_time=np.full(2, 10 * US), host_dispatch_threads=(2,))
    )
    assert two_threads.runtime == pytest.approx(4 * 10 * US + op_time(1e-6), rel=1e-12)
    _, two_hosts = evaluate(
        graph,
        placement,
        executor_cluster(
            dispatch_time=np.full(2, 10 * US),
            device_host=[0, 1],
            host_names=("h0", "h1"),
            host_dispatch_threads=(1, 1),
        ),
    )
    assert two_hosts.runtime == two_threads.runtime


def test_a_received_input_is_launched_after_it_arrives():
    # a on gpu:0, b on gpu:1: b's launch (10 us) starts when a's output has arrived.
    graph = hand_graph([("a", 1e9, 1e6, 0), ("b", 1e9, 1e6, 0)], [("a", "b")])
    _, result = evaluate(graph, [0, 1], executor_cluster(dispatch_time=np.full(2, 10 * US)))
    assert result.runtime == pytest.approx(
        10 * US + op_time(1) + transfer_time(1e6) + 10 * US + op_time(1), rel=1e-12
    )


def test_transfer_synchronisation_is_paid_on_both_ends():
    # One copy out of a (its device records and issues it), one wait in b; c reads a on gpu:0.
    graph = hand_graph([("a", 1e9, 1e6, 0), ("b", 1e9, 1e6, 0), ("c", 1e9, 1e6, 0)], [("a", "b"), ("a", "c")])
    sync = np.array([20 * US, 50 * US])
    _, result = evaluate(graph, [0, 1, 0], executor_cluster(transfer_sync=sync))
    s = result.schedule
    assert s.op_finish[0] == pytest.approx(op_time(1) + 20 * US, rel=1e-12)
    assert s.transfer_start[0] == s.op_finish[0]
    assert s.op_finish[1] - s.op_start[1] == pytest.approx(op_time(1) + 50 * US, rel=1e-12)
    assert s.op_finish[2] - s.op_start[2] == pytest.approx(op_time(1), rel=1e-12)  # local reader: no sync


def test_links_that_share_a_segment_take_turns():
    # a on gpu:0 and b on gpu:1 both send 1 GB to c on gpu:2 at the same time. With private links the
    # two transfers overlap; behind one shared uplink the second waits for the first.
    graph = hand_graph([("a", 1e9, 1e9, 0), ("b", 1e9, 1e9, 0), ("c", 1e9, 1e3, 0)], [("a", "c"), ("b", "c")])
    _, private = evaluate(graph, [0, 1, 2], hand_cluster(3))
    assert private.runtime == pytest.approx(op_time(1) + transfer_time(1e9) + op_time(1), rel=1e-12)
    segments = np.full((3, 3, 1), -1)
    segments[0, 2, 0] = segments[1, 2, 0] = 0
    _, shared = evaluate(
        graph, [0, 1, 2], executor_cluster(3, segment_names=("uplink",), link_segments=segments)
    )
    assert shared.runtime == pytest.approx(op_time(1) + 2 * transfer_time(1e9) + op_time(1), rel=1e-12)
    first, second = np.argsort(shared.schedule.transfer_start)
    assert shared.schedule.transfer_src[first] == 0  # device order at a tie
    assert shared.schedule.transfer_start[second] == shared.schedule.transfer_finish[first]


def test_executor_costs_are_checked():
    with pytest.raises(ValueError, match="dispatch_time"):
        executor_cluster(dispatch_time=np.array([-1e-6, 0.0]))
    with pytest.raises(ValueError, match="host_dispatch_threads"):
        executor_cluster(host_dispatch_threads=(0,))
    with pytest.raises(ValueError, match="device_host"):
        executor_cluster(device_host=[0, 1])
    with pytest.raises(ValueError, match="link_segments"):
        executor_cluster(segment_names=("s",), link_segments=np.full((2, 2, 1), 3))
