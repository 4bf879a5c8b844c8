"""The compile passes of a task (placement_gym/task/passes/), each on its own: the forward pass is the
graph, a training step adds one backward op per forward op and one update op per op with parameters
(DESIGN's Task), and recomputation's segments cover the forward ops in order."""

import numpy as np

from placement_gym.task.named import named_graph
from placement_gym.task.passes.backward import training_step
from placement_gym.task.passes.forward import forward_step
from placement_gym.task.passes.recompute import recompute_segments


def test_the_forward_pass_is_the_graph_and_a_training_step_adds_backward_and_update_ops():
    graph = named_graph("cifar10_cnn")
    assert len(forward_step(graph).op_kind) == graph.n_ops
    with_parameters = int(np.count_nonzero(graph.param_bytes > 0))
    assert 0 < with_parameters < graph.n_ops
    for optimizer in ("adam", "momentum", "sgd"):
        assert len(training_step(graph, optimizer).op_kind) == 2 * graph.n_ops + with_parameters


def test_recomputation_segments_are_contiguous_and_cover_the_forward_ops_in_order():
    for n in (1, 2, 7, 16, 100, 1001):
        segment = np.asarray(recompute_segments(n))
        assert len(segment) == n and segment[0] == 0
        steps = np.diff(segment)
        assert np.all((steps == 0) | (steps == 1))  # each segment one run of ops, numbered in order
