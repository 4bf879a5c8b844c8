"""Checks that several parts of the project share, each written once: device-index arrays (task
placements and the envs' group actions), {op: device} placements (files and leaderboard submissions),
task-id shapes (task ids and the generalisation split), the simple agents (CLI and registry) and the
learned agents' numeric options."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import hand_cluster, hand_graph

from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.evaluation.budget import check_limit
from placement_gym.evaluation.placements import (
    SIMPLE_AGENTS,
    is_simple_agent,
    placement_from_dict,
    placement_problems,
    placement_to_dict,
    simple_agent,
)
from placement_gym.leaderboard.generalisation import graph_of
from placement_gym.task.ids import split_task_id, task_id_parts
from placement_gym.task.named import get_task
from placement_gym.task.step import Step

TASK = ("cifar10_cnn", "k80x2", "inference")


def test_placements_and_group_actions_are_checked_alike():
    task = get_task(*TASK)
    graph = hand_graph([("a", 1e9, 1e3, 0), ("b", 1e9, 1e3, 0), ("c", 1e9, 1e3, 0)], edges=[])
    grouped = DevicePlacementEnv(graph=graph, cluster=hand_cluster(3), objective="inference",
                                 groups=[0, 1, 0])
    grouped.reset()
    for check, length, subject in (
        (task.check_placement, task.n_forward, f"placement for task {task.id}"),
        (grouped._check_node_placement, 2, f"action for task {grouped.task.id} with 2 groups"),
    ):
        np.testing.assert_array_equal(check(np.zeros(length, dtype=np.float32)), np.zeros(length))
        assert check(np.zeros(length)).dtype == np.int64
        with pytest.raises(ValueError, match=f"^{subject}.* must have shape"):
            check(np.zeros(length + 1, dtype=np.int64))
        with pytest.raises(ValueError, match=f"^{subject}.* must hold integer device indices"):
            check(np.full(length, 0.5))
        with pytest.raises(ValueError, match=f"^{subject}.*: device index 9 at .* range; allowed 0..2 "):
            check(np.full(length, 9))


def test_placement_problems_names_every_problem_and_parsing_raises_them():
    task = get_task(*TASK)
    mapping = placement_to_dict(task, np.zeros(task.n_forward, dtype=np.int64))
    placement, reasons = placement_problems(task, mapping)
    assert reasons == [] and placement.tolist() == [0] * task.n_forward
    first = task.graph.op_names[0]
    bad = {**mapping, "no_such_op": "gpu:0", task.graph.op_names[1]: "gpu:7"}
    del bad[first]
    placement, reasons = placement_problems(task, bad)
    assert placement is None and len(reasons) == 3
    assert "1 unknown op names: 'no_such_op'" in reasons[0]
    assert "ops missing" in reasons[1] and repr(first) in reasons[1]
    assert "devices not in cluster 'k80x2': 'gpu:7'" in reasons[2]
    with pytest.raises(ValueError, match="no_such_op.*missing.*gpu:7"):
        placement_from_dict(task, bad)
    with pytest.raises(ValueError, match="device names"):
        placement_from_dict(task, {**mapping, first: 1})


def test_task_id_shape_is_checked_once():
    assert task_id_parts("my_model@3f2a9c1d0b7e/k80x4/train+sgd") == ("my_model@3f2a9c1d0b7e", "k80x4",
                                                                      "train+sgd")
    assert graph_of("my_model@3f2a9c1d0b7e/k80x4/train") == "my_model@3f2a9c1d0b7e"
    assert split_task_id("resnet50/v100x8/train+sgd") == ("resnet50", "v100x8", Step(optimizer="sgd"))
    for bad in ("resnet50", "a//train", "a/b/c/d", None):
        for parse in (task_id_parts, graph_of, split_task_id):
            with pytest.raises(ValueError, match="a task id is graph/cluster/objective"):
                parse(bad)


def test_the_simple_agents_place_and_count_alike_in_the_cli_and_the_registry():
    registry = pytest.importorskip("baselines.registry")
    from placement_gym.cli.common import place_with_agent

    task = get_task(*TASK)
    for name in [*SIMPLE_AGENTS[1:], "single:gpu:1"]:
        assert is_simple_agent(name)
        placement, evaluations = simple_agent(task, name, seed=3)
        assert evaluations == (task.n_devices if name == "best-single" else 0)
        for found in (registry.run_agent(task, name, seed=3), place_with_agent(task, name, seed=3)):
            np.testing.assert_array_equal(found.placement, placement)
            assert found.evaluations == evaluations
    assert set(SIMPLE_AGENTS) <= set(registry.agent_descriptions())
    assert not is_simple_agent("heft")


def test_learned_options_follow_one_rule():
    options = pytest.importorskip("baselines.learning.options")
    check = options.check_number
    assert check("lr", np.int64(1), 0, open_low=True) == 1.0  # numpy integers are numbers everywhere
    assert check("lr", np.float32(0.5), 0, open_low=True) == 0.5
    assert check("batch", np.int32(4), 1, integer=True) == 4
    rejected = ((True, {}), (np.bool_(True), {}), (float("nan"), {}), (10**400, {}), (0, {"open_low": True}),
                (2.0, {"integer": True}), (1.0, {"high": 1, "open_high": True}))
    for value, kwargs in rejected:
        with pytest.raises(ValueError, match="^x must be"):
            check("x", value, 0, **kwargs)
    assert check_limit("budget", np.int64(3)) == 3
    for value in (0, True, 2.0):
        message = f"^budget must be a positive number of evaluations, got {value!r}$"
        with pytest.raises(ValueError, match=message):
            check_limit("budget", value)


# What the envs call a setting, the learned agents call it too, with the envs' bounds; one name for each
# other shared setting.
ENV_NAMES = {"oom_factor": "oom_runtime_factor", "entropy": "entropy_coef", "ent_coef": "entropy_coef",
             "lr": "learning_rate"}


def test_learned_agents_name_their_options_as_the_envs_and_each_other_do():
    pytest.importorskip("torch")
    import inspect

    from baselines.learning.agent import LEARNED_AGENTS
    from baselines.registry import load_agents

    load_agents()
    task = get_task(*TASK)
    penalised = []
    def keywords(cls) -> set[str]:
        """The keywords ``cls(...)`` takes: its own ``__init__``'s and, through ``**options``, its bases'."""
        names: set[str] = set()
        for klass in cls.__mro__:
            if "__init__" not in vars(klass):
                continue
            parameters = inspect.signature(vars(klass)["__init__"]).parameters.values()
            names |= {p.name for p in parameters if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
            if not any(p.kind == p.VAR_KEYWORD for p in parameters):
                break
        return names

    for name, cls in sorted(LEARNED_AGENTS.items()):
        parameters = keywords(cls)
        assert not parameters & set(ENV_NAMES), f"{name} takes {sorted(parameters & set(ENV_NAMES))}"
        if "oom_runtime_factor" in parameters:
            penalised.append(name)
            # the envs' rule: an out-of-memory placement never scores above the best single device
            rule = r"^oom_runtime_factor must be a finite number >= 1"
            with pytest.raises(ValueError, match=rule + ", got 0.5$"):
                cls(task, oom_runtime_factor=0.5)
            with pytest.raises(ValueError, match=rule):
                DevicePlacementEnv(*TASK[:2], oom_runtime_factor=0.5)
    assert {"pg", "spotlight", "hierarchical", "placeto", "hsdag"} <= set(penalised)
