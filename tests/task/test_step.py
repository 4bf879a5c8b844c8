"""`Step`: one frozen value of what a task times, with the one formatter and the one parser of a task
id's objective part; the step passed whole from tasks, envs and the command line; and the ids of every
existing task unchanged."""

from __future__ import annotations

import argparse
import dataclasses
import glob
import itertools
import json
import re
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from conftest import hand_cluster
from paths import ROOT

import placement_gym  # noqa: F401 - registers the env ids
from placement_gym.cli.common import add_optimizer_argument, add_task_arguments, step_from_args
from placement_gym.envs.config import EnvConfig
from placement_gym.graph.synthetic import random_graph
from placement_gym.plans.space import is_plan_task_id
from placement_gym.real.distributed import TaskSpec
from placement_gym.task.compiled import make_task
from placement_gym.task.ids import split_task_id, task_id_parts, task_identity
from placement_gym.task.named import get_task, parse_task_id
from placement_gym.task.step import STEP_OPTIONS, Step, as_step

OBJECTIVES = ("train_step", "inference")
OPTIMIZERS = ("adam", "momentum", "sgd")
PRECISIONS = ("fp32", "bf16", "fp16")
MICROBATCHES = (1, 2, 3, 4, 16, 1024)


def frozen_suffix(objective: str, optimizer: str, precision: str, microbatches: int, recompute: bool) -> str:
    """The objective part of a task id as the committed suites and submissions write it (docs/own_model.md,
    "Task ids"), spelled out apart from the code that writes it: ``train`` or ``inference``, then each
    option that is not its default (Adam, fp32, no recomputation, one micro-batch) after a ``+``, in the
    order optimizer, precision, ``rc``, ``mb<M>``."""
    parts = ["train" if objective == "train_step" else "inference"]
    if optimizer != "adam":
        parts.append(optimizer)
    if precision != "fp32":
        parts.append(precision)
    if recompute:
        parts.append("rc")
    if microbatches != 1:
        parts.append(f"mb{microbatches}")
    return "+".join(parts)


def _combinations():
    return itertools.product(OBJECTIVES, OPTIMIZERS, PRECISIONS, MICROBATCHES, (False, True))


# --- one formatter, one parser ------------------------------------------------------------------------

def test_the_formatter_writes_every_id_as_it_was_frozen_and_the_parser_reads_it_back():
    written = set()
    for objective, optimizer, precision, microbatches, recompute in _combinations():
        training_only = optimizer != "adam" or recompute
        if objective == "inference" and training_only:
            with pytest.raises(ValueError, match="applies to a training step"):
                Step(objective, optimizer, precision, microbatches, recompute)
            continue
        step = Step(objective, optimizer, precision, microbatches, recompute)
        suffix = frozen_suffix(objective, optimizer, precision, microbatches, recompute)
        assert step.suffix == suffix
        assert Step.from_suffix(suffix) == step and hash(Step.from_suffix(suffix)) == hash(step)
        written.add(suffix)
    assert len(written) == 3 * 3 * 6 * 2 + 3 * 6  # two steps never share a suffix


def test_every_committed_task_id_names_its_step_one_way():
    suites = sorted(glob.glob(str(ROOT / "placement_gym" / "leaderboard" / "suites" / "*.json")))
    submissions = sorted(glob.glob(str(ROOT / "leaderboard" / "submissions" / "*.json")))
    assert suites and submissions
    ids = {task["task_id"] for path in suites for task in json.loads(Path(path).read_text())["tasks"]}
    ids |= {task_id for path in submissions for task_id in json.loads(Path(path).read_text())["results"]}
    # a parallel-plan suite's task ids name a plan problem's global batch, not a step
    suffixes = {task_id_parts(task_id)[2] for task_id in ids if not is_plan_task_id(task_id)}
    assert {"train", "inference", "train+mb4", "train+bf16+rc+mb4", "inference+bf16"} <= suffixes
    for suffix in suffixes:
        step = Step.from_suffix(suffix)
        assert step.suffix == suffix
        assert frozen_suffix(step.objective, step.optimizer, step.precision, step.microbatches,
                             step.recompute) == suffix


@pytest.mark.parametrize("suffix, step", [
    ("train", Step()),
    ("inference", Step("inference")),
    ("train+sgd", Step(optimizer="sgd")),
    ("inference+fp16+mb2", Step("inference", precision="fp16", microbatches=2)),
    ("train+momentum+bf16+rc+mb1024", Step("train_step", "momentum", "bf16", 1024, True)),
])
def test_hand_written_suffixes(suffix, step):
    assert Step.from_suffix(suffix) == step and step.suffix == suffix
    assert split_task_id(f"bert_base/k80x4/{suffix}") == ("bert_base", "k80x4", step)


@pytest.mark.parametrize("suffix", [
    "train+bf16+sgd", "train+sgd+sgd", "train+adam", "train+fp32", "train+mb1", "train+mb04", "train+mb",
    "train+mb2+rc", "train+rc+rc", "train+rc+bf16", "train+mb4+sgd", "train+", "train+foo", "training",
    "train_step", "", "train+mb" + "9" * 5000,
])
def test_a_suffix_the_formatter_never_writes_is_refused_in_one_line(suffix):
    form = "is not the objective of a task id: that is train or inference"
    with pytest.raises(ValueError, match=form) as error:
        Step.from_suffix(suffix)
    assert "\n" not in str(error.value) and len(str(error.value)) < 1000


@pytest.mark.parametrize("suffix, reason", [
    ("inference+sgd", "only a training step has an optimizer"),
    ("inference+rc", "only a training step recomputes"),
    ("train+mb2048", "microbatches must be an integer from 1 to 1024"),
])
def test_an_option_the_step_refuses_is_refused_in_the_id_too(suffix, reason):
    with pytest.raises(ValueError, match=reason):
        Step.from_suffix(suffix)
    with pytest.raises(ValueError, match=re.escape(f"task a/b/{suffix}: ") + f".*{reason}"):
        parse_task_id(f"a/b/{suffix}")


# --- the value ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("fields, message", [
    ({"objective": "training"}, "unknown objective 'training'; allowed: train_step, inference"),
    ({"objective": ["train_step"]}, "unknown objective"),
    ({"optimizer": "adamw"}, "unknown optimizer 'adamw'; allowed: adam, momentum, sgd"),
    ({"precision": "fp8"}, "unknown precision 'fp8'; allowed: fp32, bf16, fp16"),
    ({"microbatches": 0}, "microbatches must be an integer from 1 to 1024"),
    ({"microbatches": 2.0}, "microbatches must be an integer"),
    ({"microbatches": True}, "microbatches must be an integer"),
    ({"recompute": "yes"}, "recompute must be True or False"),
    ({"objective": "inference", "optimizer": "sgd"}, "optimizer 'sgd' applies to a training step"),
    ({"objective": "inference", "recompute": True}, "recompute applies to a training step"),
])
def test_a_step_is_checked_when_made_in_one_line(fields, message):
    with pytest.raises(ValueError, match=message) as error:
        Step(**fields)
    assert "\n" not in str(error.value)


def test_a_step_is_frozen_and_normalised():
    step = Step("train", microbatches=np.int64(4), recompute=np.bool_(True))
    assert step == Step("train_step", microbatches=4, recompute=True)
    assert type(step.microbatches) is int and step.recompute is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.precision = "bf16"  # type: ignore[misc]
    assert step.departures() == {"microbatches": 4, "recompute": True}
    assert Step("inference").update_optimizer is None and step.update_optimizer == "adam"
    assert Step(optimizer="sgd").disagreements(Step(optimizer="sgd", precision="bf16")) == {}
    assert Step(precision="bf16").disagreements(Step(optimizer="sgd")) == {"precision": "bf16"}


def test_keywords_replace_the_fields_they_name():
    assert as_step() == Step()
    assert as_step("inference") == Step("inference")
    assert as_step("train+sgd+bf16", microbatches=2) == Step("train_step", "sgd", "bf16", 2)
    assert as_step(Step(precision="bf16"), precision="fp16") == Step(precision="fp16")
    with pytest.raises(ValueError, match="a step is a Step, an objective"):
        as_step(3)  # type: ignore[arg-type]


# --- passed whole -------------------------------------------------------------------------------------

def test_make_task_takes_a_step_and_the_old_keywords_without_a_warning():
    graph, cluster = random_graph(12, seed=1), hand_cluster(2)
    step = Step(optimizer="sgd", precision="bf16", microbatches=2, recompute=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        task = make_task(graph, cluster, step)
        by_keywords = make_task(graph, cluster, "train_step", optimizer="sgd", precision="bf16",
                                microbatches=2, recompute=True)
        by_suffix = make_task(graph, cluster, "train+sgd+bf16+rc+mb2")
        by_objective_keyword = make_task(graph, cluster, objective="train_step", optimizer="sgd",
                                         precision="bf16", microbatches=2, recompute=True)
    assert task.step == step and task.id.endswith("/train+sgd+bf16+rc+mb2")
    assert (task.objective, task.optimizer, task.precision, task.microbatches, task.recompute) == (
        "train_step", "sgd", "bf16", 2, True)
    for other in (by_keywords, by_suffix, by_objective_keyword):
        assert other.id == task.id and other.step == step and other.n_ops == task.n_ops
    assert task_identity(task) == {**task_identity(by_keywords)}
    # an optimizer given with inference is ignored by the compiler (documented), not by the step
    assert make_task(graph, cluster, "inference", optimizer="sgd").step == Step("inference")
    with pytest.raises(ValueError, match="recompute applies to a training step"):
        make_task(graph, cluster, "inference", recompute=True)


def test_options_by_position_still_work_with_a_deprecation_warning():
    graph, cluster = random_graph(12, seed=1), hand_cluster(2)
    with pytest.warns(DeprecationWarning, match=r"make_task\(\): passing optimizer, precision by position"):
        task = make_task(graph, cluster, "train_step", "sgd", "bf16")
    assert task.step == Step(optimizer="sgd", precision="bf16")
    with pytest.warns(DeprecationWarning, match=r"get_task\(\): passing optimizer, precision, microbatches, "
                                                r"recompute by position is deprecated.*Step"):
        named = get_task("cifar10_cnn", "k80x2", "train_step", "sgd", "bf16", 2, True)
    assert named is get_task("cifar10_cnn", "k80x2", "train+sgd+bf16+rc+mb2")
    with pytest.raises(TypeError, match="multiple values for argument 'optimizer'"), \
            pytest.warns(DeprecationWarning):
        make_task(graph, cluster, "train_step", "sgd", optimizer="adam")
    with pytest.raises(TypeError, match="unexpected keyword argument 'precison'; a step's options are"):
        make_task(graph, cluster, precison="bf16")


def test_get_task_and_parse_task_id_share_the_task_of_one_step():
    step = Step(precision="bf16", microbatches=2)
    task = get_task("cifar10_cnn", "k80x2", step)
    assert get_task("cifar10_cnn", "k80x2", precision="bf16", microbatches=2) is task
    assert get_task("cifar10_cnn", "k80x2", step=step) is task
    assert parse_task_id("cifar10_cnn/k80x2/train+bf16+mb2") is task
    assert TaskSpec("cifar10_cnn", "k80x2", "train+bf16+mb2").build() is task


def test_envs_take_the_step_whole_or_its_fields_as_keywords():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        by_step = gym.make("DevicePlacement-v0", graph="cifar10_cnn", cluster="k80x2",
                           step=Step("inference", precision="bf16", microbatches=2))
        by_keywords = gym.make("DevicePlacement-v0", graph="cifar10_cnn", cluster="k80x2",
                               objective="inference", precision="bf16", microbatches=2)
        by_suffix = gym.make("DevicePlacement-v0", graph="cifar10_cnn", cluster="k80x2",
                             step="inference+bf16", microbatches=2)
    for env in (by_step, by_keywords, by_suffix):
        assert env.unwrapped.task.id == "cifar10_cnn/k80x2/inference+bf16+mb2"
        assert env.unwrapped.config.step == Step("inference", precision="bf16", microbatches=2)
        assert env.unwrapped.config.precision == "bf16"  # the shorthands read back
        env.close()
    config = EnvConfig(precision="bf16")
    assert config == EnvConfig(step=Step(precision="bf16")) == EnvConfig(step="train+bf16")
    assert dataclasses.replace(config, step=Step("inference")).step == Step("inference")
    assert dataclasses.replace(config, microbatches=4).step == Step(precision="bf16", microbatches=4)
    with pytest.raises(TypeError, match="unexpected keyword argument 'precison'.*step's fields objective"):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", precison="bf16")


def test_an_env_given_a_task_refuses_a_step_that_contradicts_it():
    task = get_task("cifar10_cnn", "k80x2", "train+sgd")
    assert gym.make("DevicePlacement-v0", graph=task, optimizer="sgd").unwrapped.task is task
    assert gym.make("DevicePlacement-v0", graph=task, step=Step(optimizer="sgd")).unwrapped.task is task
    assert gym.make("DevicePlacement-v0", graph=task, precision="fp32").unwrapped.task is task  # the default
    for settings, name in (({"precision": "bf16"}, "precision"), ({"objective": "inference"}, "objective"),
                           ({"step": "train+momentum"}, "optimizer")):
        contradiction = re.escape(f"compiled task {task.id}; {name}=") + ".* is not the task's"
        with pytest.raises(ValueError, match=contradiction):
            gym.make("DevicePlacement-v0", graph=task, **settings)


def test_the_command_line_builds_one_step_from_its_arguments():
    parser = argparse.ArgumentParser()
    add_task_arguments(parser)
    add_optimizer_argument(parser)
    args = parser.parse_args(["--objective", "train_step", "--optimizer", "sgd", "--precision", "bf16",
                              "--microbatches", "4", "--recompute"])
    assert step_from_args(args) == Step("train_step", "sgd", "bf16", 4, True)
    bare = argparse.ArgumentParser()
    add_task_arguments(bare)  # a command without the optimizer's arguments: their defaults
    assert step_from_args(bare.parse_args(["--objective", "inference"])) == Step("inference")


def test_every_field_of_the_step_is_an_option_of_the_calls_that_take_a_step():
    assert STEP_OPTIONS == tuple(f.name for f in dataclasses.fields(Step))
    defaults = {f.name: f.default for f in dataclasses.fields(Step)}
    assert as_step(**defaults) == Step() and EnvConfig(**defaults).step == Step()
