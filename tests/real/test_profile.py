"""Measured profiles (`placement_gym.real.profile`) and the envs' ``reward_mode`` plumbing."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import MS, hand_cluster, hand_graph
from profiles import synthetic_profile

from placement_gym.cost_model import lower_bound, simulate, single_device
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv
from placement_gym.evaluation.evaluator import CostModelEvaluator, evaluator_names, make_evaluator
from placement_gym.graph import load_graph
from placement_gym.real.measure import fit_link, measure_handover, measure_links, pool_virtual_devices
from placement_gym.real.profile import (
    ProfileError,
    find_profile,
    graph_digest,
    load_profile,
    profile_key,
    save_profile,
)
from placement_gym.real.profiled import profiled_task
from placement_gym.task.compiled import make_task


@pytest.fixture(scope="module")
def cifar():
    return load_graph("cifar10_cnn")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_CACHE", str(tmp_path))
    return tmp_path / "profiles"


def test_profiled_task_takes_measured_times_and_links(cifar):
    cluster = hand_cluster(2)
    task = make_task(cifar, cluster, "train_step")
    profile = synthetic_profile(cifar, cluster.device_names)
    profiled = profiled_task(task, profile)
    n = cifar.n_ops
    for f, name in enumerate(cifar.op_names):
        for d, device in enumerate(cluster.device_names):
            assert profiled.duration[f, d] == profile["forward_s"][name][device]
            # Task's layout: the backward op of forward op f is at index 2n - 1 - f.
            assert profiled.duration[2 * n - 1 - f, d] == profile["backward_s"][name][device]
    # No update_s: update ops keep the analytical figure.
    updates = task.op_kind == 2
    assert updates.any()
    np.testing.assert_array_equal(profiled.duration[updates], task.duration[updates])
    assert profiled.cluster.link_bandwidth[0, 1] == profile["link_bandwidth"]["gpu:0"]["gpu:1"]
    assert profiled.cluster.link_latency[1, 0] == profile["link_latency"]["gpu:1"]["gpu:0"]
    # Everything else is the task's.
    assert profiled.graph is task.graph and profiled.id == task.id
    np.testing.assert_array_equal(profiled.static_bytes, task.static_bytes)
    np.testing.assert_array_equal(profiled.tensor_bytes, task.tensor_bytes)
    np.testing.assert_array_equal(profiled.cluster.memory_capacity, cluster.memory_capacity)
    assert profiled.cluster.device_names == cluster.device_names


def test_measured_update_times_replace_the_analytical_ones(cifar):
    cluster = hand_cluster(2)
    task = make_task(cifar, cluster, "train_step")
    profile = synthetic_profile(cifar, cluster.device_names, update=True)
    profiled = profiled_task(task, profile)
    for op in np.flatnonzero(task.op_kind == 2):
        name = cifar.op_names[task.op_forward[op]]
        assert profiled.duration[op, 1] == profile["update_s"][name]["gpu:1"]


def test_inference_task_needs_no_backward_times(cifar):
    cluster = hand_cluster(2)
    profile = synthetic_profile(cifar, cluster.device_names)
    del profile["backward_s"]
    profiled = profiled_task(make_task(cifar, cluster, "inference"), profile)
    assert profiled.duration[0, 0] == profile["forward_s"][cifar.op_names[0]]["gpu:0"]
    with pytest.raises(ProfileError, match="backward_s"):
        profiled_task(make_task(cifar, cluster, "train_step"), profile)


def test_simulation_uses_measured_times_and_links_hand_computed():
    # a -> b, a on gpu:0, b on gpu:1: runtime = a's time + latency + bytes / bandwidth + b's time.
    graph = hand_graph([("a", 1e9, 4e6, 0), ("b", 1e9, 8, 0)], [("a", "b")])
    cluster = hand_cluster(2)
    profile = synthetic_profile(graph, cluster.device_names)
    profile["forward_s"] = {"a": {"gpu:0": 2 * MS, "gpu:1": 9 * MS}, "b": {"gpu:0": 9 * MS, "gpu:1": 3 * MS}}
    profile["link_bandwidth"]["gpu:0"]["gpu:1"] = 2e9
    profile["link_latency"]["gpu:0"]["gpu:1"] = 1 * MS
    task = profiled_task(make_task(graph, cluster, "inference"), profile)
    result = simulate(task, np.array([0, 1]))
    assert result.runtime == pytest.approx(2 * MS + 1 * MS + 4e6 / 2e9 + 3 * MS)


def test_save_load_round_trip_and_cache_lookup(cifar, cache):
    names = ("gpu:0", "gpu:1")
    old = synthetic_profile(cifar, names, seed=0)
    other_host = [
        {"name": n, "torch_device": "cpu", "kind": "cpu", "host": "other", "torch_version": "0"}
        for n in names
    ]
    new = synthetic_profile(cifar, names, seed=1, descriptions=other_host)
    path = save_profile(old)
    assert path.parent == cache and path.name == f"cifar10_cnn-{old['key']}.json"
    assert load_profile(path) == json.loads(json.dumps(old))
    save_profile(new)
    # By names: the newest profile of this graph on exactly these device names.
    assert find_profile(cifar, list(names))["key"] == new["key"]
    assert find_profile(cifar, ["gpu:0", "gpu:2"]) is None
    assert find_profile(cifar, list(names), batch=64) is None
    assert find_profile(load_graph("rnnlm"), list(names)) is None


def test_cache_lookup_by_device_map_uses_the_exact_key(cifar, cache):
    pytest.importorskip("torch")
    from placement_gym.real.profile import describe_devices

    devices = {"gpu:0": "cpu", "gpu:1": "cpu"}
    described = describe_devices(devices)
    assert [d["name"] for d in described] == ["gpu:0", "gpu:1"]
    profile = synthetic_profile(cifar, list(devices), descriptions=described)
    assert find_profile(cifar, devices) is None
    save_profile(profile)
    assert find_profile(cifar, devices)["key"] == profile["key"]
    # Same names on other torch devices is another key.
    digest = graph_digest(cifar)
    assert profile_key(digest, described, None) != profile_key(digest, described, 32)


def test_profile_key_ignores_device_order(cifar):
    described = synthetic_profile(cifar, ("gpu:0", "gpu:1"))["devices"]
    digest = graph_digest(cifar)
    assert profile_key(digest, described, None) == profile_key(digest, described[::-1], None)


def test_profile_of_another_graph_or_devices_is_refused(cifar):
    cluster = hand_cluster(2)
    task = make_task(cifar, cluster)
    other = load_graph("rnnlm")
    with pytest.raises(ProfileError, match="rnnlm.*cifar10_cnn"):
        profiled_task(task, synthetic_profile(other, cluster.device_names))
    with pytest.raises(ProfileError, match=r"missing \['gpu:1'\], extra \['cpu:0'\]"):
        profiled_task(task, synthetic_profile(cifar, ("gpu:0", "cpu:0")))
    broken = synthetic_profile(cifar, cluster.device_names)
    del broken["forward_s"][cifar.op_names[3]]
    with pytest.raises(ProfileError, match=cifar.op_names[3]):
        profiled_task(task, broken)
    with pytest.raises(ProfileError, match="format"):
        profiled_task(task, {"format": "something else"})


def test_a_train_step_task_refuses_a_profile_of_another_optimizer(cifar):
    cluster = hand_cluster(2)
    sgd = synthetic_profile(cifar, cluster.device_names, update=True, optimizer="sgd")
    with pytest.raises(ProfileError, match="optimizer 'sgd', task .* trains with 'adam'.*--optimizer adam"):
        profiled_task(make_task(cifar, cluster, "train_step"), sgd)
    # Its own optimizer takes it, update times included; inference has no update op: any optimizer.
    task = profiled_task(make_task(cifar, cluster, "train+sgd"), sgd)
    first_update = int(np.flatnonzero(task.op_kind == 2)[0])
    name = cifar.op_names[task.op_forward[first_update]]
    assert task.duration[first_update, 0] == sgd["update_s"][name]["gpu:0"]
    profiled_task(make_task(cifar, cluster, "inference"), sgd)
    # A profile that names no optimizer predates the field: its train steps ran SGD.
    unrecorded = synthetic_profile(cifar, cluster.device_names, optimizer=None)
    with pytest.raises(ProfileError, match="records none.*always ran SGD"):
        profiled_task(make_task(cifar, cluster, "train+momentum"), unrecorded)
    profiled_task(make_task(cifar, cluster, "train+sgd"), unrecorded)
    with pytest.raises(ProfileError, match="optimizer is 'adagrad'; allowed: adam, momentum, sgd"):
        profiled_task(make_task(cifar, cluster, "train_step"), {**sgd, "optimizer": "adagrad"})


def test_profiles_are_cached_and_found_per_optimizer(cifar, cache):
    names = ["gpu:0", "gpu:1"]
    digest = graph_digest(cifar)
    described = synthetic_profile(cifar, names)["devices"]
    keys = {opt: profile_key(digest, described, None, opt) for opt in ("adam", "momentum", "sgd")}
    assert len(set(keys.values())) == 3
    save_profile(synthetic_profile(cifar, names, optimizer="sgd"))
    assert find_profile(cifar, names, optimizer="adam") is None
    assert find_profile(cifar, names, optimizer="sgd")["optimizer"] == "sgd"
    assert find_profile(cifar, names, optimizer=None)["optimizer"] == "sgd"
    # The envs look the profile up with the task's optimizer; an inference task takes any.
    cluster = hand_cluster(2)
    with pytest.raises(ValueError, match="for optimizer adam.*--optimizer adam"):
        DevicePlacementEnv(graph=cifar, cluster=cluster, reward_mode="profiled")
    env = DevicePlacementEnv(graph=cifar, cluster=cluster, reward_mode="profiled", optimizer="sgd")
    assert env.task.optimizer == "sgd"
    DevicePlacementEnv(graph=cifar, cluster=cluster, objective="inference", reward_mode="profiled")
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'"):
        find_profile(cifar, names, optimizer="rmsprop")


def test_load_profile_errors(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(tmp_path / "bad.json")


ENV_CLASSES = [DevicePlacementEnv, DevicePlacementStagedEnv, DevicePlacementRefineEnv]


@pytest.mark.parametrize("env_class", ENV_CLASSES)
def test_profiled_env_runtimes_are_the_profiled_task_s(cifar, env_class):
    cluster = hand_cluster(2)
    profile = synthetic_profile(cifar, cluster.device_names)
    expected_task = profiled_task(make_task(cifar, cluster), profile)
    env = env_class(graph=cifar, cluster=cluster, reward_mode="profiled", profile=profile)
    assert env.reward_mode == "profiled"
    np.testing.assert_array_equal(env.task.duration, expected_task.duration)
    assert env.best_single_runtime == single_device(expected_task).runtime
    assert env.lower_bound == lower_bound(expected_task)
    _, info = env.reset(seed=0)
    assert info["best_single_runtime"] == single_device(expected_task).runtime
    rng = np.random.default_rng(0)
    placement = rng.integers(0, 2, size=cifar.n_ops)
    if env_class is DevicePlacementEnv:
        _, _, _, _, info = env.step(placement)
    else:
        for device in placement:
            _, _, terminated, _, info = env.step(int(device))
        assert terminated
    assert info["runtime"] == simulate(expected_task, placement).runtime
    # The profile's numbers matter: the analytical task gives another runtime.
    assert info["runtime"] != simulate(make_task(cifar, cluster), placement).runtime


def test_profiled_env_finds_the_cached_profile(cifar, cache):
    cluster = hand_cluster(2)
    hint = "run placement-gym profile --graph cifar10_cnn --devices gpu:0=<torch device>,gpu:1=<torch device>"
    with pytest.raises(ValueError, match=hint):
        DevicePlacementEnv(graph=cifar, cluster=cluster, reward_mode="profiled")
    profile = synthetic_profile(cifar, cluster.device_names)
    save_profile(profile)
    env = DevicePlacementEnv(graph=cifar, cluster=cluster, reward_mode="profiled")
    assert env.task.duration[0, 0] == profile["forward_s"][cifar.op_names[0]]["gpu:0"]
    path_env = DevicePlacementEnv(graph=cifar, cluster=cluster, reward_mode="profiled",
                                  profile=save_profile(profile, cache / "copy.json"))
    np.testing.assert_array_equal(path_env.task.duration, env.task.duration)


def test_unknown_reward_mode_is_refused(cifar):
    allowed = "unknown evaluator 'measured'; allowed: cost_model, profiled, real"
    with pytest.raises(ValueError, match=allowed):
        DevicePlacementEnv(graph=cifar, cluster=hand_cluster(2), reward_mode="measured")
    with pytest.raises(ValueError, match="not \"cost_model\""):
        DevicePlacementEnv(graph=cifar, cluster=hand_cluster(2), devices={"gpu:0": "cpu"})
    assert evaluator_names()[:3] == ("cost_model", "profiled", "real")
    task = make_task(cifar, hand_cluster(2))
    evaluator = make_evaluator(task, "cost_model")
    assert type(evaluator) is CostModelEvaluator and evaluator.task is task and evaluator.name == "cost_model"


def test_real_mode_needs_devices(cifar):
    with pytest.raises(ValueError, match="needs devices="):
        DevicePlacementEnv(graph=cifar, cluster=hand_cluster(2), reward_mode="real")
    with pytest.raises(ValueError, match="lacks a torch device for gpu:1"):
        DevicePlacementEnv(graph=cifar, cluster=hand_cluster(2), reward_mode="real", devices={"gpu:0": "cpu"})


def test_real_mode_smoke_on_two_virtual_cpu_devices(cifar):
    pytest.importorskip("torch")
    from placement_gym.real.devices import virtual_cpu_cluster

    cluster = virtual_cpu_cluster(2)
    devices = {name: "cpu" for name in cluster.device_names}
    evaluator = make_evaluator(make_task(cifar, cluster, "inference"), "real", devices=devices, batch=2)
    result = evaluator.simulate(np.arange(cifar.n_ops) % 2)
    assert result.feasible and result.runtime > 0 and result.schedule is None
    assert evaluator.last_info["runtime"] == result.runtime and len(evaluator.last_info["runtimes"]) >= 1
    with pytest.raises(ValueError, match='profile= is for evaluator="profiled"'):
        make_evaluator(make_task(cifar, cluster), "real", devices=devices, profile={})
    env = DevicePlacementEnv(graph=cifar, cluster=cluster, objective="inference", reward_mode="real",
                             devices=devices)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(np.zeros(cifar.n_ops, dtype=np.int64))
    # Rewards compare measured runtimes: the reference is a measured run too.
    assert info["real_runtime"] == info["runtime"] and np.isfinite(reward)
    assert env.best_single_runtime != single_device(env.task).runtime


def test_measure_profile_on_two_virtual_cpu_devices(cifar, cache):
    pytest.importorskip("torch")
    from placement_gym.real.measure import measure_profile

    devices = {"gpu:0": "cpu", "gpu:1": "cpu"}
    profile = measure_profile(cifar, devices, batch=2, repeats=1, warmup=0, link_sizes=(1 << 10, 1 << 14))
    for table in ("forward_s", "backward_s"):
        assert set(profile[table]) == set(cifar.op_names)
        assert all(set(row) == set(devices) for row in profile[table].values())
    assert all(v > 0 for row in profile["forward_s"].values() for v in row.values())
    save_profile(profile)
    assert find_profile(cifar, devices, batch=2)["key"] == profile["key"]
    task = profiled_task(make_task(cifar, hand_cluster(2)), profile)
    # The measured dispatch overhead of the task's objective is part of every op's time.
    overhead = profile["launch_overhead_s"][task.objective]
    assert task.duration[0, 1] == profile["forward_s"][cifar.op_names[0]]["gpu:1"] + overhead["gpu:1"]
    for objective in ("inference", "train_step"):
        values = profile["launch_overhead_s"][objective]
        assert set(values) == set(devices) and all(v >= 0 for v in values.values())
        # Two names on one torch device are one piece of hardware: pooled to the same figure.
        assert values["gpu:0"] == values["gpu:1"]
    row = profile["forward_s"][cifar.op_names[0]]
    assert row["gpu:0"] == row["gpu:1"]
    owners = [name for name in cifar.op_names if name in profile["update_s"]]
    assert owners and all(set(profile["update_s"][n]) == set(devices) for n in owners)
    # The calibrated transfer latency is at least the measured links' (copy + hand-over).
    lowest = min(v for r in profile["link_latency"].values() for v in r.values())
    assert all(profile["transfer_latency_s"][o] >= lowest * (1 - 1e-9) for o in ("inference", "train_step"))
    handover = profile["settings"]["handover_s"]
    assert all(v >= handover for r in profile["link_latency"].values() for v in r.values())


def test_measured_updates_and_train_steps_run_the_profile_s_optimizer(cifar, cache, monkeypatch):
    # Every update timed for update_s, and every update of the executor's train steps (dispatch
    # overhead, transfer latency), is the optimizer's own, as the executor runs it in real mode.
    pytest.importorskip("torch")
    from placement_gym.real import executor, measure, optimizers
    from placement_gym.real.measure import measure_profile

    seen = []

    def recording(optimizer, parameters, lr):
        made = optimizers.torch_optimizer(optimizer, parameters, lr)
        step, steps = made.step, [0]

        def counted_step():
            step()
            steps[0] += 1
            names = {tuple(sorted(optimizers.optimizer_state(made, p)))
                     for p in parameters if p.grad is not None}
            seen.append((optimizer, names, steps[0]))

        made.step = counted_step
        return made

    monkeypatch.setattr(measure, "torch_optimizer", recording)
    monkeypatch.setattr(executor, "torch_optimizer", recording)
    devices = {"gpu:0": "cpu", "gpu:1": "cpu"}
    measured = measure_profile(cifar, devices, batch=2, repeats=1, warmup=0, link_sizes=(1 << 10, 1 << 14),
                               optimizer="momentum")
    assert measured["optimizer"] == "momentum" and {s[0] for s in seen} == {"momentum"}
    assert set().union(*(s[1] for s in seen)) == {("velocity",)}
    assert max(s[2] for s in seen) >= 2  # state carried across steps, not re-created per step
    task = make_task(cifar, hand_cluster(2), "train+momentum")
    assert profiled_task(task, measured).optimizer == "momentum"
    with pytest.raises(ProfileError, match="optimizer 'momentum'"):
        profiled_task(make_task(cifar, hand_cluster(2), "train_step"), measured)
    with pytest.raises(ValueError, match="unknown optimizer 'nadam'"):
        measure_profile(cifar, devices, batch=2, optimizer="nadam")


def test_profiled_task_adds_the_launch_overhead_of_its_objective(cifar):
    cluster = hand_cluster(2)
    profile = synthetic_profile(cifar, cluster.device_names, update=True)
    plain = {objective: profiled_task(make_task(cifar, cluster, objective), profile)
             for objective in ("inference", "train_step")}
    profile["launch_overhead_s"] = {"inference": {"gpu:0": 1 * MS, "gpu:1": 2 * MS},
                                    "train_step": {"gpu:0": 3 * MS, "gpu:1": 5 * MS}}
    for objective, offsets in (("inference", [1 * MS, 2 * MS]), ("train_step", [3 * MS, 5 * MS])):
        task = profiled_task(make_task(cifar, cluster, objective), profile)
        # Every op (forward, backward, update) gets its device's overhead, once.
        np.testing.assert_allclose(task.duration - plain[objective].duration,
                                   np.broadcast_to(offsets, task.duration.shape), rtol=0, atol=1e-15)
        assert list(task.cluster.launch_overhead) == offsets
    # A chain of n ops on one device takes n overheads more.
    single = np.zeros(cifar.n_ops, dtype=np.int64)
    task = profiled_task(make_task(cifar, cluster, "inference"), profile)
    assert simulate(task, single).runtime == pytest.approx(
        simulate(plain["inference"], single).runtime + cifar.n_ops * 1 * MS)


def test_launch_overhead_that_is_missing_or_negative_is_a_profile_error(cifar):
    cluster = hand_cluster(2)
    task = make_task(cifar, cluster, "inference")
    profile = synthetic_profile(cifar, cluster.device_names)
    profile["launch_overhead_s"] = {"inference": {"gpu:0": 1e-5}}
    with pytest.raises(ProfileError, match="gpu:1"):
        profiled_task(task, profile)
    profile["launch_overhead_s"] = {"inference": {"gpu:0": 1e-5, "gpu:1": -1e-5}}
    with pytest.raises(ProfileError, match="not a time >= 0"):
        profiled_task(task, profile)
    # Only the task's objective is needed: a profile with train_step figures alone adds nothing here.
    profile["launch_overhead_s"] = {"train_step": {"gpu:0": 1e-5, "gpu:1": 1e-5}}
    assert profiled_task(task, profile).duration[0, 0] == profile["forward_s"][cifar.op_names[0]]["gpu:0"]


def test_transfer_latency_replaces_every_link_latency_for_its_objective(cifar):
    cluster = hand_cluster(2)
    profile = synthetic_profile(cifar, cluster.device_names)
    profile["transfer_latency_s"] = {"train_step": 7 * MS}
    train = profiled_task(make_task(cifar, cluster, "train_step"), profile)
    assert train.cluster.link_latency[0, 1] == train.cluster.link_latency[1, 0] == 7 * MS
    # Another objective keeps the measured links.
    inference = profiled_task(make_task(cifar, cluster, "inference"), profile)
    assert inference.cluster.link_latency[0, 1] == profile["link_latency"]["gpu:0"]["gpu:1"]
    profile["transfer_latency_s"] = {"train_step": 0.0}
    with pytest.raises(ProfileError, match="transfer_latency_s"):
        profiled_task(make_task(cifar, cluster, "train_step"), profile)


def test_calibration_placements_range_from_few_crossings_to_alternating():
    from placement_gym.real.measure import calibration_placements

    placements = calibration_placements(200, 2)
    crossings = [int(np.sum(p[1:] != p[:-1])) for p in placements]
    assert crossings == sorted(crossings) and len(set(crossings)) == len(crossings)
    assert crossings[0] <= 4 and crossings[-1] == 199  # the last alternates op by op
    assert all(set(np.unique(p)) <= {0, 1} for p in placements)
    assert len(calibration_placements(3, 2)) == 1  # runs capped at the number of ops, duplicates dropped


def test_transfer_latency_fit_recovers_the_latency_that_made_the_measurements(cifar, monkeypatch):
    """Fake measurements made by the profiled model itself with a known latency: the fit finds it
    (within one step of its log-spaced grid)."""
    from placement_gym.real import executor as executor_module
    from placement_gym.real.measure import measure_transfer_latency, placeholder_cluster

    devices = {"cpu:0": "cpu", "cpu:1": "cpu"}
    profile = synthetic_profile(cifar, list(devices))
    truth = 3e-4
    base = profiled_task(make_task(cifar, placeholder_cluster(devices), "inference"), profile)
    linked = dataclasses.replace(base.cluster, link_latency=np.full_like(base.cluster.link_latency, truth))
    truth_task = dataclasses.replace(base, cluster=linked)

    class ModelExecutor:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def run(self, placement, warmup=1, repeats=3):
            runtime = simulate(truth_task, placement).runtime
            return executor_module.RealResult(runtime=runtime, runtimes=(runtime,), spread=0.0, feasible=True,
                                              error=None, peak_memory=np.zeros(2))

    monkeypatch.setattr(executor_module, "Executor", ModelExecutor)
    fitted = measure_transfer_latency(cifar, devices, "inference", profile)
    assert abs(np.log10(fitted / truth)) <= 1.0 / 40 + 1e-9


def test_pool_virtual_devices_averages_names_on_one_torch_device():
    table = {"a": {"x": 1.0, "y": 3.0, "z": 5.0}, "b": {"x": 2.0, "y": 2.0, "z": 7.0}}
    pool_virtual_devices(table, {"x": "cpu", "y": "cpu", "z": "cuda:0"})
    assert table == {"a": {"x": 2.0, "y": 2.0, "z": 5.0}, "b": {"x": 2.0, "y": 2.0, "z": 7.0}}


def test_measure_handover_is_a_small_positive_time():
    seconds = measure_handover(repeats=20)
    assert 0 < seconds < 0.5
    with pytest.raises(ValueError, match="repeats"):
        measure_handover(repeats=0)


def test_fit_link_recovers_a_line():
    sizes = [1e3, 1e5, 1e6, 1e7]
    bandwidth, latency = fit_link(sizes, [5e-6 + s / 2e9 for s in sizes])
    assert bandwidth == pytest.approx(2e9) and latency == pytest.approx(5e-6)
    # Noise that makes the intercept negative: the latency is floored, still positive.
    bandwidth, latency = fit_link([1e3, 1e6], [1e-9, 1e-3])
    assert latency > 0 and bandwidth > 0
    with pytest.raises(ValueError, match="two"):
        fit_link([1e3], [1e-6])


def test_measure_links_between_virtual_cpu_devices():
    pytest.importorskip("torch")
    bandwidth, latency = measure_links({"cpu:0": "cpu", "cpu:1": "cpu"}, sizes=(1 << 10, 1 << 16), repeats=2)
    for table in (bandwidth, latency):
        assert set(table) == {"cpu:0", "cpu:1"} and set(table["cpu:0"]) == {"cpu:1"}
        assert all(np.isfinite(v) and v > 0 for row in table.values() for v in row.values())


def test_profile_module_does_not_import_torch():
    code = ("import sys, placement_gym, placement_gym.real.profile, placement_gym.real.measure, "
            "placement_gym.real.profiled, placement_gym.real.evaluators; "
            "assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
