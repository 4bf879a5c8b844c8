"""The generalisation track: a fixed split of a suite's graphs into training graphs and held-out graphs.

A generalisation entry may train on any task whose *graph* is not held out (the suite's training tasks,
or other graphs of its own) and is scored only on the held-out tasks, which it must not have trained
on. The split is by graph, not by task: training on ``bert_large/k80x4/train`` would leak
``bert_large/h100x8/train``.

Split of suite ``v1`` (`SPLITS`), the same as ``v0``'s (the two suites have the same task ids): held
out ``cifar10_resnet56``, ``resnet50``, ``rnnlm`` and ``bert_large``; trained on ``cifar10_cnn``,
``inception_v3``, ``gnmt4`` and ``bert_base``. The held-out tasks cover three graph families (residual
CNNs, a recurrent language model, a large transformer), both objectives and five clusters (k80x2,
p100x4, k80x4, h100x8, cpu-igpu). Each held-out task has a training task with the same number of
devices (2, 3, 5 or 9), because the GNN placers of the baselines (`placeto`, `hsdag`) have a policy
head sized for one device count and can only move between clusters of that size; this was re-checked
with the calibrated clusters of ``v1``, which have the same devices. A split holds graph names only,
nothing measured with the cost model, so the entry of the retired suite ``v0`` stays, for reading its
old submissions.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement_gym.leaderboard.suite import Suite, get_suite
from placement_gym.task.ids import task_id_parts


def graph_of(task_id: str) -> str:
    """The graph name of a task id ``graph/cluster/objective``; ValueError for another shape."""
    return task_id_parts(task_id)[0]


@dataclass(frozen=True)
class Split:
    """Held-out graphs of one suite version; every other graph of the suite is a training graph."""

    suite: str
    held_out_graphs: tuple[str, ...]

    def held_out_tasks(self) -> tuple[str, ...]:
        """The suite's tasks whose graph is held out (the only tasks the track scores)."""
        return tuple(t for t in get_suite(self.suite).task_ids if graph_of(t) in self.held_out_graphs)

    def training_tasks(self) -> tuple[str, ...]:
        """The suite's tasks whose graph is not held out."""
        return tuple(t for t in get_suite(self.suite).task_ids if graph_of(t) not in self.held_out_graphs)

    def training_graphs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(graph_of(t) for t in self.training_tasks()))

    def is_held_out(self, task_id: str) -> bool:
        """Whether ``task_id`` (any well-formed task id, in the suite or not) has a held-out graph."""
        return graph_of(task_id) in self.held_out_graphs


_HELD_OUT_GRAPHS = ("cifar10_resnet56", "resnet50", "rnnlm", "bert_large")
SPLITS: dict[str, Split] = {
    # v0 is retired (RETIRED_SUITES in suite.py): its split is plain data, kept for its old submissions.
    "v0": Split("v0", _HELD_OUT_GRAPHS),
    "v1": Split("v1", _HELD_OUT_GRAPHS),
}


def get_split(suite: str | Suite) -> Split:
    """The generalisation split of a suite version, with a clear error for a suite without one."""
    version = suite.version if isinstance(suite, Suite) else suite
    if version not in SPLITS:
        raise ValueError(
            f"suite {version!r} has no generalisation split; suites with one: {', '.join(SPLITS)}"
        )
    return SPLITS[version]


def trained_on_problems(data: dict) -> list[str]:
    """Why a generalisation submission's ``trained_on`` breaks its suite's split (empty: it does not).
    Expects a schema-checked submission (``trained_on`` a list of strings)."""
    try:
        split = get_split(data["suite"])
    except ValueError as error:
        return [str(error)]
    problems = []
    leaked = []
    for task_id in data.get("trained_on", []):
        try:
            if split.is_held_out(task_id):
                leaked.append(task_id)
        except ValueError as error:
            problems.append(f"trained_on: {error}")
    if leaked:
        problems.append(
            f"trained on held-out graph(s) of the {split.suite} split: {', '.join(leaked)} "
            f"(held-out graphs: {', '.join(split.held_out_graphs)})"
        )
    return problems


def result_problems(suite: str, task_id: str, result: dict) -> list[str]:
    """Why one task's result does not belong in a generalisation submission (empty: it does). Its
    ``trained_on_task`` may be true: the harness sets it when the entry evaluated the task during its
    scored run (zero-shot samples, fine-tuning), which the track allows and the evaluation count shows;
    training on a held-out graph beforehand is what `trained_on_problems` rejects."""
    split = get_split(suite)
    if not split.is_held_out(task_id):
        return [f"not a held-out task of the {suite} generalisation split (graph {graph_of(task_id)!r} is a "
                f"training graph; held-out tasks: {', '.join(split.held_out_tasks())})"]
    return []
