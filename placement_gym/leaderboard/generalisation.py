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

Suite ``gen-v2``, the generalisation track version 2, is a split of a dataset instead
(`placement_gym.datasets`): its tasks are `GEN_V2_GRAPHS_PER_SPLIT` graphs of each of
``synthetic-v1``'s two test splits (``test-sizes``: regal graphs of 1,600 ops and ENAS conv networks of
15 cells, sizes no training graph of those families has; ``test-families``: the ENAS recurrent family,
which has no training graph at all), evenly spaced in dataset order within each (split, family), on the
three 5-device clusters `GEN_V2_CLUSTERS` (Kepler over PCIe, Kepler K40, Pascal over NVLink), training
steps. Every graph of the dataset's test splits is held out, not only the scored ones: an entry may
train on ``synthetic-v1:train`` and ``synthetic-v1:valid`` (named so in ``trained_on``), on tasks of
those graphs, or on any graph outside the dataset, and states its pre-training compute
(``pretraining``: evaluations, wall time, machine). Five devices each, so that a policy with an output
per device (`placeto`, `hsdag`) moves between the three clusters unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from placement_gym.datasets import SPLIT_ALIASES, get_dataset
from placement_gym.datasets import SPLITS as DATASET_SPLITS
from placement_gym.leaderboard.suite import GEN_V2, Suite, get_suite
from placement_gym.task.ids import task_id_parts

GEN_V2_DATASET = "synthetic-v1"
GEN_V2_CLUSTERS = ("k80x4", "k40x4", "p100x4")
GEN_V2_GRAPHS_PER_SPLIT = 50
GEN_V2_TEST_SPLITS = ("test-sizes", "test-families")
# What a dataset split may be trained on: its name in ``trained_on`` (``synthetic-v1:train``).
TRAINING_SPLITS = ("train", "valid")


def graph_of(task_id: str) -> str:
    """The graph name of a task id ``graph/cluster/objective``; ValueError for another shape."""
    return task_id_parts(task_id)[0]


@dataclass(frozen=True)
class Split:
    """Held-out graphs of one suite version: ``held_out_graphs`` by name, and with ``dataset`` every
    graph of that dataset's test splits (``<dataset>:<id>``); every other graph is a training graph."""

    suite: str
    held_out_graphs: tuple[str, ...] = ()
    dataset: str | None = None

    def held_out_tasks(self) -> tuple[str, ...]:
        """The suite's tasks whose graph is held out (the only tasks the track scores)."""
        return tuple(t for t in get_suite(self.suite).task_ids if self.is_held_out(t))

    def training_tasks(self) -> tuple[str, ...]:
        """The suite's tasks whose graph is not held out."""
        return tuple(t for t in get_suite(self.suite).task_ids if not self.is_held_out(t))

    def training_graphs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(graph_of(t) for t in self.training_tasks()))

    def is_held_out(self, task_id: str) -> bool:
        """Whether ``task_id`` (any well-formed task id, in the suite or not) has a held-out graph."""
        return self.is_held_out_graph(graph_of(task_id))

    def held_out_text(self) -> str:
        """The held-out graphs in words."""
        named = ", ".join(self.held_out_graphs)
        of_dataset = f"every graph of the test splits of {self.dataset}" if self.dataset else ""
        return " and ".join(part for part in (named, of_dataset) if part)

    def is_held_out_graph(self, graph: str) -> bool:
        if graph in self.held_out_graphs:
            return True
        name, _, graph_id = graph.partition(":")
        return self.dataset is not None and name == self.dataset and graph_id in _test_ids(name)

    def training_split_problem(self, entry: str) -> str | None:
        """Why a ``trained_on`` entry ``<dataset>:<split or graph id>`` of the split's dataset breaks the
        split (None: it does not): only `TRAINING_SPLITS` and graphs outside the test splits may be
        trained on."""
        name, _, part = entry.partition(":")
        splits = " and ".join(f"{name}:{s}" for s in TRAINING_SPLITS)
        allowed = f"of dataset {name} an entry may train on {splits}"
        if part in TRAINING_SPLITS:
            return None
        if part in DATASET_SPLITS or part in SPLIT_ALIASES:
            return f"trained_on: {entry} holds held-out graphs; {allowed} (or their graphs) only"
        try:
            get_dataset(name).locate(part)
        except ValueError:
            return f"trained_on: {entry} is neither a split nor a graph of dataset {name}; {allowed}"
        if self.is_held_out_graph(entry):
            return f"trained_on: {entry} is a held-out graph; {allowed}"
        return None


@cache
def _test_ids(dataset: str) -> frozenset[str]:
    """The ids of every graph of ``dataset``'s test splits (from its definition: nothing is built)."""
    return frozenset(get_dataset(dataset).ids("test"))


def gen_v2_task_ids() -> tuple[str, ...]:
    """The tasks of suite ``gen-v2`` (module docstring), graph by graph, then cluster."""
    dataset = get_dataset(GEN_V2_DATASET)
    graphs = []
    for split in GEN_V2_TEST_SPLITS:
        ids = dataset.ids(split)
        families = list(dict.fromkeys(dataset.locate(i)[0].family for i in ids))
        for n, family in enumerate(families):
            # The split's graphs go to its families in equal parts (the first ones take the remainder).
            count = GEN_V2_GRAPHS_PER_SPLIT // len(families) + (n < GEN_V2_GRAPHS_PER_SPLIT % len(families))
            members = [i for i in ids if dataset.locate(i)[0].family == family]
            graphs += [members[j * len(members) // count] for j in range(count)]
    return tuple(f"{GEN_V2_DATASET}:{g}/{c}/train" for g in graphs for c in GEN_V2_CLUSTERS)


def split_of_task(task_id: str) -> str:
    """The dataset split (``test-sizes`` or ``test-families``) of a ``gen-v2`` task's graph."""
    name, _, graph_id = graph_of(task_id).partition(":")
    dataset = get_dataset(name)
    return dataset.split_of(*dataset.locate(graph_id))


_HELD_OUT_GRAPHS = ("cifar10_resnet56", "resnet50", "rnnlm", "bert_large")
SPLITS: dict[str, Split] = {
    # v0 is retired (RETIRED_SUITES in suite.py): its split is plain data, kept for its old submissions.
    "v0": Split("v0", _HELD_OUT_GRAPHS),
    "v1": Split("v1", _HELD_OUT_GRAPHS),
    GEN_V2: Split(GEN_V2, dataset=GEN_V2_DATASET),
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
        if split.dataset is not None and task_id.partition(":")[0] == split.dataset and "/" not in task_id:
            if (problem := split.training_split_problem(task_id)) is not None:
                problems.append(problem)
            continue
        try:
            if split.is_held_out(task_id):
                leaked.append(task_id)
        except ValueError as error:
            problems.append(f"trained_on: {error}")
    if leaked:
        problems.append(
            f"trained on held-out graph(s) of the {split.suite} split: {', '.join(leaked)} "
            f"(held-out graphs: {split.held_out_text()})"
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
                f"training graph; held out: {split.held_out_text()})"]
    return []


def measure_gen_v2() -> Suite:
    """Suite ``gen-v2`` measured under the current code (what ``suites/gen-v2.json`` freezes;
    ``python -m baselines.leaderboard_fill.generalisation_v2 --write-suite`` writes it)."""
    from placement_gym.leaderboard.suite import measure_suite_task
    from placement_gym.task.named import parse_task_id

    description = (f"Generalisation track v2: {GEN_V2_GRAPHS_PER_SPLIT} graphs of each test split of "
                   f"{GEN_V2_DATASET} on {', '.join(GEN_V2_CLUSTERS)}, training steps")
    return Suite(GEN_V2, tuple(measure_suite_task(parse_task_id(t)) for t in gen_v2_task_ids()), description)

