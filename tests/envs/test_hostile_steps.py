"""Hostile settings of the envs, tasks and datasets: an empty or unknown split, a step option
that does not apply, an unknown reset option, a cache write that fails, cached files that are not what
they should be, and dataset builds that must stop with their caller."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from paths import ROOT

import placement_gym  # noqa: F401 - registers the env ids
from placement_gym.cli import main
from placement_gym.datasets import Dataset, dataset_graph, dataset_split, get_dataset
from placement_gym.datasets import dataset as dataset_module
from placement_gym.envs.config import EnvConfig
from placement_gym.envs.vector import DevicePlacementVectorEnv
from placement_gym.task.named import get_task

SPLITS = "train, valid, test-sizes, test-families"
ENV_IDS = ("DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0")


def _one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text and len(text) < 400, text
    return text


# --- splits -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["synthetic-mini-v1:", "synthetic-mini-v1:tests",
                                  "synthetic-mini-v1:regal-3", "synthetic-mini-v1: train"])
def test_an_empty_or_unknown_split_is_refused_naming_the_splits(spec, capsys):
    with pytest.raises(ValueError) as error:
        dataset_split(spec)
    assert SPLITS in _one_line(error)
    with pytest.raises(ValueError, match=SPLITS):
        gym.make("DevicePlacement-v0", dataset=spec, cluster="k80x2")
    assert main(["evaluate", "--dataset", spec, "--agent", "random", "--cluster", "k80x2"]) == 2
    assert SPLITS in capsys.readouterr().err
    # a bare name is every graph (documented), a named split its own graphs
    assert len(dataset_split("synthetic-mini-v1")[1]) == len(get_dataset("synthetic-mini-v1"))


def test_a_split_names_a_graph_it_holds_and_a_cluster_split_is_checked_too():
    with pytest.raises(ValueError, match="'regal-3' is a graph of synthetic-mini-v1: give graph="):
        dataset_split("synthetic-mini-v1:regal-3")
    for clusters in ("random-v1:", "random-v1:tests"):
        with pytest.raises(ValueError, match="allowed: train, test, all"):
            gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters=clusters)
    for name in ("random-v1:" + "9" * 5000, "random-v1:\u00b2"):  # too long to convert; not ASCII
        with pytest.raises(ValueError, match="a family cluster's name is random-v1:<k>") as error:
            gym.make("DevicePlacement-v0", graph="cifar10_cnn", clusters=[name])
        _one_line(error)
    with pytest.raises(ValueError, match="has no graph") as error:
        dataset_graph("synthetic-mini-v1:regal-" + "1" * 5000)
    _one_line(error)


# --- step options -------------------------------------------------------------------------------------

@pytest.mark.parametrize("optimizer", ["sgd", "momentum"])
def test_an_optimizer_with_inference_is_refused(optimizer):
    with pytest.raises(ValueError, match=f"optimizer '{optimizer}' applies to a training step") as error:
        get_task("cifar10_cnn", "k80x2", "inference", optimizer=optimizer)
    _one_line(error)
    with pytest.raises(ValueError, match="applies to a training step"):
        gym.make("DevicePlacement-v0", graph="cifar10_cnn", cluster="k80x2", objective="inference",
                 optimizer=optimizer)
    with pytest.raises(ValueError, match="applies to a training step"):
        EnvConfig(objective="inference", optimizer=optimizer)
    with pytest.raises(ValueError, match="recompute applies to a training step"):
        EnvConfig(objective="inference", recompute=True)
    # what applies to inference stays accepted, and the optimizer changes a training step's task
    assert get_task("cifar10_cnn", "k80x2", "inference", microbatches=2, precision="bf16").id.endswith(
        "/inference+bf16+mb2")
    assert get_task("cifar10_cnn", "k80x2", optimizer=optimizer).id.endswith(f"/train+{optimizer}")

    # the fidelity command compiles its task itself: it refuses the same before measuring anything
    assert main(["fidelity", "--graph", "cifar10_cnn", "--objective", "inference", "--optimizer",
                 optimizer]) == 2


@pytest.mark.parametrize("where", ["graph", "cluster"])
@pytest.mark.parametrize("name", ["x" * 5000, "a\x00b"])
def test_a_name_no_file_system_holds_is_an_unknown_name_in_one_short_line(where, name):
    names = {"graph": "cifar10_cnn", "cluster": "k80x2", where: name}
    with pytest.raises(ValueError, match="unknown") as error:
        get_task(names["graph"], names["cluster"])
    text = str(error.value)
    assert "\n" not in text and name[:200] not in text and len(text) < 1000, text


# --- reset options ------------------------------------------------------------------------------------

def _envs():
    for env_id in ENV_IDS:
        yield gym.make(env_id, graph="cifar10_cnn", cluster="k80x2"), "no options"
    yield gym.make("DevicePlacement-v0", dataset="synthetic-mini-v1:train", cluster="k80x2"), "graph, cluster"
    yield DevicePlacementVectorEnv(2, graph="cifar10_cnn", cluster="k80x2"), "reset_mask"


def test_unknown_reset_options_are_refused_naming_the_allowed_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    for env, allowed in _envs():
        for bad in ({"grpah": "regal-1"}, {"seed": 1}, {3: 1}):
            with pytest.raises(ValueError, match="unknown reset option") as error:
                env.reset(options=bad)
            assert allowed in _one_line(error)
        env.reset(options=None)
        env.reset(options={})  # what stable-baselines3 and others pass
        env.close()
    env = gym.make("DevicePlacement-v0", dataset="synthetic-mini-v1:train", cluster="k80x2")
    with pytest.raises(ValueError, match="options\\['graph'\\] is a graph id"):
        env.reset(options={"graph": ["regal-1"]})
    with pytest.raises(ValueError, match="not in this env's split"):
        env.reset(options={"graph": "enas-rnn-3"})


# --- cache files --------------------------------------------------------------------------------------

def _fill_disk(monkeypatch, owner, name):
    """Make ``owner.name`` (a writer given a file object or a path first) write a few bytes and then
    fail as a full disk does."""
    def full(target, *args, **kwargs):
        if hasattr(target, "write"):
            target.write(b"PK partial")
        else:
            Path(target).write_bytes(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(owner, name, full)


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_a_full_disk_leaves_no_temporary_or_partial_cache_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    graphs = get_dataset("unrolled-v1").graph_path("rnnlm-tf-0").parent
    with monkeypatch.context() as patch:
        _fill_disk(patch, np, "savez_compressed")
        with pytest.raises(ValueError, match="cannot write the dataset cache .*No space left") as error:
            dataset_graph("unrolled-v1:rnnlm-tf-0")
        _one_line(error)
    assert [name for name in _files(graphs) if name.endswith((".tmp", ".npz"))] == []
    assert dataset_graph("unrolled-v1:rnnlm-tf-0").n_ops > 0 and _files(graphs) == ["rnnlm-tf-0.npz"]
    mini = Dataset("mini-copy-v1", "", get_dataset("synthetic-mini-v1").families[:1], ())
    with monkeypatch.context() as patch:
        _fill_disk(patch, Path, "write_text")
        with pytest.raises(ValueError, match="No space left") as error:
            mini.manifest(progress=False)
        _one_line(error)
    assert _files(mini.manifest_path.parent) == []


def test_cached_files_that_are_not_regular_or_unpack_too_large_are_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    mini = Dataset("fifo-v1", "", get_dataset("synthetic-mini-v1").families[:1], ())
    mini.manifest_path.parent.mkdir(parents=True)
    os.mkfifo(mini.manifest_path)  # reading it would wait for a writer forever
    listed = threading.Thread(target=mini.summary, daemon=True)
    listed.start()
    listed.join(20)
    assert not listed.is_alive() and not mini.summary()["built"]
    # a cached graph of kilobytes that unpacks to 64 MiB is not unpacked: the graph is built again
    expected = dataset_graph("unrolled-v1:rnnlm-tf-0")
    path = get_dataset("unrolled-v1").graph_path("rnnlm-tf-0")
    path.unlink()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bomb, bomb.open("category.npy", "w") as member:
        np.lib.format.write_array(member, np.zeros(64 * 2**20, dtype=np.int8))
    monkeypatch.setattr(dataset_module, "MAX_CACHED_GRAPH_BYTES", 2**20)
    tracemalloc.start()
    try:
        graph = dataset_graph("unrolled-v1:rnnlm-tf-0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert graph.content_sha256 == expected.content_sha256 and peak < 16 * 2**20


def test_reading_a_cached_manifest_is_linear_in_its_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    row = {"id": "regal-0", "family": "regal", "params": {"ops": 50}, "seed": 0, "split": "train", "ops": 50,
           "edges": 80, "parameters": 0, "tensor_bytes": 1.0, "content_sha256": "0" * 64}

    def read_time(n: int) -> float:
        dataset = Dataset(f"linear{n}-v1", "", get_dataset("synthetic-mini-v1").families[:1], ())
        dataset.manifest_path.parent.mkdir(parents=True)
        dataset.manifest_path.write_text(json.dumps({"graphs": [row] * n}))
        times = []
        for _ in range(3):
            start = time.perf_counter()
            assert len(Dataset(dataset.name, "", dataset.families, ()).manifest()) == n
            times.append(time.perf_counter() - start)
        return min(times)

    assert read_time(8_000) / read_time(2_000) < 8


# --- builds that stop with their caller ---------------------------------------------------------------

def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(pid) and fields[0] != "Z":
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def _start_build(tmp_path: Path, argv: list[str]) -> tuple[subprocess.Popen, list[int]]:
    """A Python process run with ``argv`` that builds synthetic-v1 (10,000 graphs: minutes) with two
    workers, once both workers run."""
    env = dict(os.environ, PLACEMENT_GYM_OUTPUT=str(tmp_path), PYTHONPATH=str(ROOT))
    process = subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(_children(process.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the workers are building
    return process, _children(process.pid)


def _clean_up(process: subprocess.Popen, workers: list[int]) -> None:
    for pid in [process.pid, *workers]:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    process.wait(10)


LINUX_ONLY = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@LINUX_ONLY
def test_sigint_stops_a_dataset_build_and_its_workers_at_once(tmp_path):
    # two workers on any machine (the command takes one a core, at most 8)
    code = ("import os, runpy; os.cpu_count = lambda: 2; "
            "runpy.run_module('placement_gym', run_name='__main__')")
    process, workers = _start_build(tmp_path, ["-c", code, "datasets", "--build", "synthetic-v1"])
    try:
        assert len(workers) == 2
        process.send_signal(signal.SIGINT)
        left = _gone_within([process.pid, *workers], 2.0)
        assert left == [], f"still running 2 s after SIGINT: {left}"
        assert process.wait(1) == 130
        lines = process.stderr.read().strip().splitlines()
        assert len(lines) == 1 and "interrupted; nothing was cached" in lines[0], lines
        assert not (tmp_path / "datasets" / "synthetic-v1" / "manifest.json").exists()
    finally:
        _clean_up(process, workers)


@LINUX_ONLY
@pytest.mark.parametrize("prctl", [True, False], ids=["prctl", "parent-pid-check"])
def test_build_workers_exit_when_their_parent_is_killed(tmp_path, prctl):
    # Without prctl (other systems), the workers' check of their parent's pid alone must end them.
    platform = "" if prctl else "sys.platform = 'other'\n"
    code = (f"import sys\n{platform}from placement_gym.datasets import get_dataset\n"
            "get_dataset('synthetic-v1').build_manifest(progress=False, workers=2)\n")
    process, workers = _start_build(tmp_path, ["-c", code])
    try:
        assert len(workers) == 2
        process.kill()
        process.wait(5)
        left = _gone_within(workers, 5.0)
        assert left == [], f"workers still running 5 s after their parent was killed: {left}"
    finally:
        _clean_up(process, workers)
