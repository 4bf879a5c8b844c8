"""The generalisation track: a fixed split of a suite's graphs into training graphs and held-out graphs.

A generalisation entry may train on any task whose *graph* is not held out (the suite's training tasks,
or other graphs of its own) and is scored only on the held-out tasks, which it must not have trained
on. The split is by graph, not by task: training on ``bert_large/k80x4/train`` would leak
``bert_large/h100x8/train``.

A suite's split is part of its suite file (``split``, `suite_spec`): graphs held out by name
(``held_out_graphs``), chosen so that each held-out task has a training task with the same number of
devices, because the GNN placers of the baselines (`placeto`, `hsdag`) have a policy head sized for one
device count and can only move between clusters of that size; or a dataset (``dataset``), whose test
splits are held out whole. A split holds graph names only, nothing measured with the cost model, so a
retired suite's split stays readable with its old submissions.

A dataset suite's tasks are drawn from the dataset (``measure.dataset_sample``,
`dataset_sample_task_ids`): a number of graphs of each test split, evenly spaced in dataset order within
each (split, family), on a few clusters of the same device count (so that a policy with an output per
device moves between them unchanged). Every graph of the dataset's test splits is held out, not only the
scored ones: an entry may train on ``<dataset>:train`` and ``<dataset>:valid`` (named so in
``trained_on``), on tasks of those graphs, or on any graph outside the dataset, and states its
pre-training compute (``pretraining``: evaluations, wall time, machine) where its suite requires it.
Graphs outside the dataset may be named by the training split of another dataset (``synthetic-v1:train``
for a suite drawn from ``architectures-v1``: what a checkpoint pre-trained elsewhere states), unless
that dataset has a family of the suite's dataset (its graphs could be held-out graphs under other
names) or the split is a test split (held out by the suites drawn from that dataset, so that one
checkpoint stays admissible to all of them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from placement_gym.datasets import SPLIT_ALIASES, get_dataset, is_dataset_graph_name
from placement_gym.datasets import SPLITS as DATASET_SPLITS
from placement_gym.leaderboard.registry import suite_registry
from placement_gym.leaderboard.suite import Suite, get_suite
from placement_gym.leaderboard.suite_spec import DatasetSample
from placement_gym.task.ids import task_id_parts

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

    def other_dataset_problem(self, entry: str) -> str | None:
        """Why a ``trained_on`` entry ``<other dataset>:<split or graph id>`` breaks the split of a
        dataset suite (None: it does not; module docstring): only another dataset's `TRAINING_SPLITS` or
        graphs outside its test splits, and none of a dataset that shares a family with the split's."""
        name, _, part = entry.partition(":")
        other = get_dataset(name)
        shared = sorted({f.family for f in other.families}
                        & {f.family for f in get_dataset(self.dataset).families})
        if shared:
            return (f"trained_on: {entry} is of dataset {name}, which has families of {self.dataset} "
                    f"({', '.join(shared)}): its graphs may be held-out ones; name "
                    f"{self.dataset}:train or graphs outside both datasets")
        if part in TRAINING_SPLITS:
            return None
        if part in DATASET_SPLITS or part in SPLIT_ALIASES:
            return (f"trained_on: {entry} holds test graphs of {name}, held out by its own suites; of "
                    f"another dataset an entry names {name}:train or {name}:valid")
        try:
            spec, k = other.locate(part)
        except ValueError:
            return f"trained_on: {entry} is neither a split nor a graph of dataset {name}"
        if other.split_of(spec, k).startswith("test"):
            return f"trained_on: {entry} is a test graph of {name}, held out by its own suites"
        return None


@cache
def _test_ids(dataset: str) -> frozenset[str]:
    """The ids of every graph of ``dataset``'s test splits (from its definition: nothing is built)."""
    return frozenset(get_dataset(dataset).ids("test"))


def dataset_sample_task_ids(sample: DatasetSample) -> tuple[str, ...]:
    """The task ids of a dataset sample (`suite_spec.DatasetSample`), graph by graph, then cluster: per
    split, its graphs go to its families in equal parts (the first families take the remainder), evenly
    spaced in dataset order within each family."""
    dataset = get_dataset(sample.dataset)
    graphs = []
    for split in sample.splits:
        ids = dataset.ids(split)
        families = list(dict.fromkeys(dataset.locate(i)[0].family for i in ids))
        for n, family in enumerate(families):
            count = sample.graphs_per_split // len(families) + (n < sample.graphs_per_split % len(families))
            members = [i for i in ids if dataset.locate(i)[0].family == family]
            graphs += [members[j * len(members) // count] for j in range(count)]
    return tuple(f"{sample.dataset}:{g}/{c}/{sample.objective}" for g in graphs for c in sample.clusters)


def split_of_task(task_id: str) -> str:
    """The dataset split (such as ``test-sizes``) of a dataset task's graph (``<dataset>:<id>/...``)."""
    name, _, graph_id = graph_of(task_id).partition(":")
    dataset = get_dataset(name)
    return dataset.split_of(*dataset.locate(graph_id))


def get_split(suite: str | Suite) -> Split:
    """The generalisation split of a suite (its file's ``split``), with a clear error for a suite
    without one."""
    version = suite.version if isinstance(suite, Suite) else suite
    found = suite if isinstance(suite, Suite) else suite_registry().suites.get(suite)
    spec = None if found is None else found.spec
    if spec is None or not spec.has_split:
        raise ValueError(
            f"suite {version!r} has no generalisation split; suites with one: {', '.join(splits())}"
        )
    return Split(version, spec.held_out_graphs, spec.split_dataset)


def splits() -> dict[str, Split]:
    """The split of every suite of the registry that has one (retired suites' too: they stay readable)."""
    return {version: get_split(version) for version, suite in suite_registry().suites.items()
            if suite.spec.has_split}


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
        if split.dataset is not None and "/" not in task_id and is_dataset_graph_name(task_id):
            # A split or graph of a dataset, not a task id: of the split's dataset, or of another one.
            problem = (split.training_split_problem(task_id) if task_id.partition(":")[0] == split.dataset
                       else split.other_dataset_problem(task_id))
            if problem is not None:
                problems.append(problem)
            continue
        try:
            graph = graph_of(task_id)
            if split.is_held_out(task_id):
                leaked.append(task_id)
            elif (split.dataset is not None and is_dataset_graph_name(graph)
                  and graph.partition(":")[0] != split.dataset):
                # A task of another dataset's graph: the graph judged as if it were named alone.
                if (problem := split.other_dataset_problem(graph)) is not None:
                    problems.append(problem)
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
