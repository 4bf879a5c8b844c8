"""Versioned task suites of the leaderboard.

A suite version pins the tasks *and* the numbers the cost model gives them: per task the sha256 of the
graph's ONNX file and a fingerprint (the best single device's runtime and the lower bound, seconds).
Any change to the cost model or a graph that moves a runtime changes a fingerprint; `check_suite`
then reports it and the suite version must be bumped (add ``v1`` here, keep ``v0`` so that old
submissions stay readable and are shown with their version).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from placement_gym.cost_model import lower_bound, single_device
from placement_gym.task import Task
from placement_gym.tasks import parse_task_id

CURRENT_SUITE = "v0"
# Relative tolerance on fingerprints: the simulator is deterministic bit for bit, so anything
# beyond float-printing noise means the cost model changed.
FINGERPRINT_RTOL = 1e-9


@dataclass(frozen=True)
class SuiteTask:
    """One task of a suite and its fingerprint under the cost model the suite was frozen with."""

    task_id: str
    graph_sha256: str
    best_single_runtime: float
    lower_bound: float

    def task(self) -> Task:
        """The compiled task (cached by `placement_gym.tasks`)."""
        return parse_task_id(self.task_id)


@dataclass(frozen=True)
class Suite:
    """A named, versioned list of tasks."""

    version: str
    tasks: tuple[SuiteTask, ...]
    description: str = ""

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(t.task_id for t in self.tasks)

    def get(self, task_id: str) -> SuiteTask:
        """The suite task of ``task_id``, or a ValueError naming the suite's tasks."""
        for suite_task in self.tasks:
            if suite_task.task_id == task_id:
                return suite_task
        raise ValueError(
            f"task {task_id!r} is not in suite {self.version}; its tasks are: {', '.join(self.task_ids)}"
        )

    def subset(self, task_ids: list[str] | tuple[str, ...]) -> Suite:
        """The same suite version restricted to ``task_ids`` (for quick runs and tests)."""
        return Suite(self.version, tuple(self.get(t) for t in task_ids), self.description)


# Fingerprints computed with placement-gym 0.1.0 (single_device(task).runtime, lower_bound(task)).
SUITE_V0 = Suite(
    "v0",
    (
        SuiteTask("cifar10_cnn/k80x2/train",
                  "d5d1bd2af15e68bdb28bb8f7677597827f94b9dbc8d70eb8853e3b8e965d0abe",
                  0.015239508086705895, 0.015012359186705895),
        SuiteTask("cifar10_resnet56/k80x2/train",
                  "0b91b5cc48e35569d97293957f7183670baec81a39686273c8c6e046eba49f69",
                  0.05874688501052609, 0.057597644910526186),
        SuiteTask("inception_v3/k80x4/train",
                  "455dc8e7c1ac4b1535f9d0a3797b45acca721cde64f46ca517517d4885e41075",
                  0.5036280490711783, 0.33353868511480894),
        SuiteTask("resnet50/p100x4/train",
                  "8a6bc8726f0576336ce05b749566c12ad0cc59593eca19db7484b4335f496ea8",
                  0.1752875242089699, 0.1596578470079123),
        SuiteTask("rnnlm/k80x4/train",
                  "745b935829c0c6faf5cadfc0cc8b96accc2d9697f9388910acaf543beab0bb90",
                  0.42012868935919023, 0.0840257378718361),
        SuiteTask("gnmt4/k80x4/train",
                  "bac829f641fab0c293e95cc478ee3a42d088515c28f3b483e262be95b3f152c5",
                  0.6933893253217762, 0.13867786506434782),
        SuiteTask("gnmt4/k40x8/train",
                  "bac829f641fab0c293e95cc478ee3a42d088515c28f3b483e262be95b3f152c5",
                  0.6884912758088558, 0.08263625890423451),
        SuiteTask("bert_base/v100x8/train",
                  "29e1a2ff39d7bc1ae4c7a802cf89468edef248bc754d7ad2999a729429745b0b",
                  0.11948874690368291, 0.09622465739858088),
        SuiteTask("bert_large/k80x4/train",
                  "785616397ee62a40fd4a0697bc381e3200cf06d9636c49bc2c46e1bcf002e165",
                  59.53817515856746, 5.004533816512566),
        SuiteTask("bert_large/h100x8/train",
                  "785616397ee62a40fd4a0697bc381e3200cf06d9636c49bc2c46e1bcf002e165",
                  0.40234369998737657, 0.3354107819442205),
        SuiteTask("inception_v3/cpu-igpu/inference",
                  "455dc8e7c1ac4b1535f9d0a3797b45acca721cde64f46ca517517d4885e41075",
                  0.7578114758379128, 0.5043516584752745),
        SuiteTask("resnet50/cpu-igpu/inference",
                  "8a6bc8726f0576336ce05b749566c12ad0cc59593eca19db7484b4335f496ea8",
                  0.576883518365384, 0.5293078788049446),
        SuiteTask("bert_base/cpu-igpu/inference",
                  "29e1a2ff39d7bc1ae4c7a802cf89468edef248bc754d7ad2999a729429745b0b",
                  0.5837303373351651, 0.4875551434821423),
    ),
    "The paper settings (Mirhoseini 2017/2018, Spotlight, Placeto, Baechi, HSDAG) plus modern "
    "clusters (V100, H100) and CPU + integrated GPU inference.",
)

SUITES: dict[str, Suite] = {SUITE_V0.version: SUITE_V0}


def get_suite(version: str | Suite = CURRENT_SUITE) -> Suite:
    """A suite by version (or the suite itself), with a clear error naming the known versions."""
    if isinstance(version, Suite):
        return version
    if version not in SUITES:
        raise ValueError(f"unknown suite version {version!r}; known: {', '.join(SUITES)}")
    return SUITES[version]


def fingerprint_problems(suite_task: SuiteTask) -> list[str]:
    """Why the current code no longer reproduces ``suite_task``'s fingerprint (empty list: it does)."""
    task = suite_task.task()
    problems = []
    if task.graph.sha256 != suite_task.graph_sha256:
        problems.append(
            f"graph sha256 is {task.graph.sha256[:12]}..., suite froze {suite_task.graph_sha256[:12]}..."
        )
    measured = {"best single-device runtime": single_device(task).runtime, "lower bound": lower_bound(task)}
    frozen = {"best single-device runtime": suite_task.best_single_runtime,
              "lower bound": suite_task.lower_bound}
    for name, value in measured.items():
        if not math.isclose(value, frozen[name], rel_tol=FINGERPRINT_RTOL, abs_tol=0.0):
            problems.append(f"{name} is {value!r} s, suite froze {frozen[name]!r} s")
    return problems


def check_suite(version: str | Suite = CURRENT_SUITE) -> dict[str, list[str]]:
    """Per task id, the fingerprint problems of a suite under the current code (only tasks with any).
    A non-empty answer for the current suite means: bump the suite version."""
    suite = get_suite(version)
    return {t.task_id: p for t in suite.tasks if (p := fingerprint_problems(t))}
