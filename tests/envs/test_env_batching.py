"""Infos that batch and vector envs in every autoreset mode: each env id's info has one key set, with
the same dtype and shape per key, at reset and at every step (terminal and out-of-memory steps too),
every value a numpy number or array, so that np.stack and gymnasium's vector envs batch them."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from conftest import hand_cluster, hand_graph
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import placement_gym  # noqa: F401  (registers the ids)
from placement_gym.envs import ENV_IDS
from placement_gym.envs.base import INFO_KEYS
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv
from placement_gym.real.evaluators import REAL_INFO_KEYS

SMALL = dict(graph="cifar10_cnn", cluster="k80x2", objective="inference")
OWN_KEYS = {
    "DevicePlacement-v0": (),
    "DevicePlacementStaged-v0": ("stage",),
    "DevicePlacementRefine-v0": ("initial_runtime", "node", "sweep"),
}
# (env id, extra kwargs): the staged env both with its sparse (default) and its dense reward.
VARIANTS = [(env_id, {}) for env_id in ENV_IDS] + [("DevicePlacementStaged-v0", {"dense": True})]
VARIANT_IDS = [env_id + ("-dense" if extra else "") for env_id, extra in VARIANTS]


def _signature(info: dict) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """key -> (dtype, shape); every value must be a numpy number or a numpy array."""
    signature = {}
    for key, value in info.items():
        assert isinstance(value, (np.number, np.ndarray)), f"info[{key!r}] is a {type(value).__name__}"
        array = np.asarray(value)
        assert array.dtype != object, f"info[{key!r}] is an object array"
        signature[key] = (array.dtype, array.shape)
    return signature


def _episodes(env: gym.Env, n: int, seed: int, actions=None) -> list[dict]:
    """The infos of ``n`` episodes (reset and every step) with seeded random actions, or with the
    fixed ``actions`` (one per step) when given."""
    infos = []
    env.action_space.seed(seed)
    for episode in range(n):
        _, info = env.reset(seed=seed + episode)
        infos.append(info)
        done, t = False, 0
        while not done:
            action = env.action_space.sample() if actions is None else actions[t]
            _, _, terminated, truncated, info = env.step(action)
            infos.append(info)
            done, t = terminated or truncated, t + 1
    return infos


@pytest.mark.parametrize("groups", [None, "chains"], ids=str)
@pytest.mark.parametrize(("env_id", "extra"), VARIANTS, ids=VARIANT_IDS)
def test_one_key_set_and_dtype_per_key_at_reset_and_every_step(env_id, extra, groups):
    env = gym.make(env_id, **SMALL, groups=groups, **extra)
    infos = _episodes(env, 2, seed=5)
    expected = set(INFO_KEYS) | set(OWN_KEYS[env_id])
    first = _signature(infos[0])
    assert set(first) == expected and "task_id" not in first
    for info in infos[1:]:
        assert _signature(info) == first
    n_devices = env.unwrapped.task.n_devices
    assert first["peak_memory"] == (np.dtype(np.float64), (n_devices,))
    assert first["feasible"] == first["simulated"] == (np.dtype(bool), ())
    assert first["runtime"] == (np.dtype(np.float64), ())


def _oom_task():
    """Two independent ops with 6 kB of parameters each on two devices of 10 kB: both on one device
    run out of memory, one per device fits."""
    graph = hand_graph([("a", 1e9, 1e3, 6e3), ("b", 1e9, 1e3, 6e3)], edges=[])
    cluster = dataclasses.replace(hand_cluster(2), memory_capacity=np.array([1e4, 1e4]))
    return dict(graph=graph, cluster=cluster, objective="inference")


@pytest.mark.parametrize(
    ("env_class", "kwargs", "actions"),
    [
        (DevicePlacementEnv, {}, [np.array([0, 0])]),
        (DevicePlacementStagedEnv, {}, [0, 0]),
        (DevicePlacementStagedEnv, {"dense": True}, [0, 0]),
        (DevicePlacementRefineEnv, {"initial": np.array([0, 1])}, [1, 1]),
    ],
    ids=["single-shot", "staged", "staged-dense", "refine"],
)
def test_out_of_memory_steps_keep_the_key_set_and_dtypes(env_class, kwargs, actions):
    env = env_class(**_oom_task(), **kwargs)
    infos = _episodes(env, 1, seed=0, actions=actions)
    oom = infos[-1]
    assert oom["simulated"] and not oom["feasible"]
    assert oom["reward_runtime"] == env.penalty_runtime and np.isfinite(oom["runtime"])
    assert all(_signature(info) == _signature(infos[0]) for info in infos)


@pytest.mark.parametrize(("env_id", "extra"), VARIANTS, ids=VARIANT_IDS)
def test_zero_and_not_simulated_exactly_where_nothing_was_simulated(env_id, extra):
    env = gym.make(env_id, **SMALL, groups=3, **extra)
    infos = _episodes(env, 1, seed=2)
    for t, info in enumerate(infos):
        last = t == len(infos) - 1
        simulated = env_id == "DevicePlacementRefine-v0" or (t > 0 and (extra.get("dense") or last))
        assert bool(info["simulated"]) == bool(simulated), t
        result = [info[key] for key in ("runtime", "speedup", "reward_runtime")] + list(info["peak_memory"])
        if simulated:
            assert np.all(np.isfinite(result)) and info["runtime"] > 0
        else:
            assert np.all(np.asarray(result) == 0.0) and not info["feasible"]
        assert np.isfinite(info["lower_bound"]) and np.isfinite(info["best_single_runtime"])


def test_refine_reset_info_marks_no_move():
    env = DevicePlacementRefineEnv(**SMALL, groups=3, initial="best-single")
    _, info = env.reset(seed=0)
    assert info["node"] == -1 and info["sweep"] == -1 and info["initial_runtime"] == info["runtime"]
    _, _, _, _, info = env.step(1)
    assert info["node"] == 0 and info["sweep"] == 0


@pytest.mark.parametrize(("env_id", "extra"), VARIANTS, ids=VARIANT_IDS)
def test_infos_of_two_envs_stack_per_key(env_id, extra):
    """A reset info of one env and a terminal info of another stack into one array per key."""
    first = gym.make(env_id, **SMALL, groups="chains", **extra)
    second = gym.make(env_id, **SMALL, groups="chains", **extra)
    _, at_reset = first.reset(seed=0)
    at_end = _episodes(second, 1, seed=1)[-1]
    for key, value in at_reset.items():
        stacked = np.stack([value, at_end[key]])
        assert stacked.shape == (2, *np.shape(value)) and stacked.dtype == np.asarray(value).dtype, key


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_vector_env_infos_are_typed_arrays(env_id):
    """Gymnasium batches numpy numbers into arrays of their dtype; np.bool_ would become an object
    array, which is why the booleans are 0-d bool arrays."""
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode="sync", **SMALL, groups="chains")
    try:
        _, info = envs.reset(seed=0)
        for _ in range(3):
            _, _, _, _, info = envs.step(envs.action_space.sample())
            for key, value in info.items():
                assert isinstance(value, np.ndarray) and value.dtype != object, key
                assert value.shape[0] == 2, key
            assert info["feasible"].dtype == bool and info["runtime"].dtype == np.float64
    finally:
        envs.close()


def test_real_mode_info_keys_are_numbers_at_reset_and_step():
    pytest.importorskip("torch")
    from placement_gym.real.devices import virtual_cpu_cluster

    cluster = virtual_cpu_cluster(2)
    env = DevicePlacementEnv(graph="cifar10_cnn", cluster=cluster, objective="inference", reward_mode="real",
                             devices={name: "cpu" for name in cluster.device_names})
    _, at_reset = env.reset(seed=0)
    _, _, _, _, at_step = env.step(np.zeros(env.n_nodes, dtype=np.int64))
    assert set(at_reset) == set(INFO_KEYS) | set(REAL_INFO_KEYS)
    assert _signature(at_reset) == _signature(at_step)
    assert at_reset["real_runtime"] == 0.0 and at_reset["real_repeats"] == 0
    assert at_step["real_runtime"] == at_step["runtime"] and at_step["real_repeats"] >= 1
    assert np.isfinite(at_step["real_spread"]) and at_step["real_loss"] == 0.0  # inference: no loss


# --- autoreset ---------------------------------------------------------------------------------------

def _env_fns(env_id: str) -> list:
    """Two sub-envs whose episodes end at different steps where the id allows it (2 and 3 groups,
    padded to one observation space); single-shot episodes all last one step."""
    pad = dict(max_ops=3, max_edges=8)
    if env_id == "DevicePlacement-v0":
        return [lambda: gym.make(env_id, **SMALL, groups=3, **pad)] * 2
    return [lambda k=k: gym.make(env_id, **SMALL, groups=k, **pad) for k in (2, 3)]


def _item(batched, i: int):
    """Sub-env ``i``'s part of a batched observation or info (dicts recursively, masks left out)."""
    if isinstance(batched, dict):
        return {key: _item(value, i) for key, value in batched.items() if not key.startswith("_")}
    return batched[i]


def _assert_same(batched_part, single) -> None:
    if isinstance(single, dict):
        assert set(batched_part) == set(single)
        for key in single:
            _assert_same(batched_part[key], single[key])
    else:
        np.testing.assert_array_equal(batched_part, single)


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.name)
@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_vector_env_autoreset_modes_match_single_envs(env_id, mode):
    """A sync vector env in each autoreset mode against single envs driven by hand with gymnasium's
    documented semantics: NEXT_STEP resets on the step after an end (reward 0, not terminated, action
    ignored); SAME_STEP resets in the ending step, the ending observation and info in ``final_obs``
    and ``final_info``; DISABLED leaves resets to the caller (``reset_mask``)."""
    fns = _env_fns(env_id)
    envs = SyncVectorEnv(fns, autoreset_mode=mode)
    singles = [fn() for fn in fns]
    seed, n = 7, len(fns)
    obs, info = envs.reset(seed=seed)
    for i, single in enumerate(singles):
        single_obs, single_info = single.reset(seed=seed + i)
        _assert_same(_item(obs, i), single_obs)
        _assert_same(_item(info, i), single_info)
    envs.action_space.seed(seed)
    ended = np.zeros(n, dtype=bool)
    episodes = np.zeros(n, dtype=int)
    for _ in range(14):
        actions = envs.action_space.sample()
        obs, rewards, terminated, truncated, info = envs.step(actions)
        assert not truncated.any()
        for i, single in enumerate(singles):
            if mode == AutoresetMode.NEXT_STEP and ended[i]:
                single_obs, single_info = single.reset()
                reward, end = 0.0, False
            else:
                single_obs, reward, end, _, single_info = single.step(actions[i])
                if mode == AutoresetMode.SAME_STEP and end:
                    _assert_same(info["final_obs"][i], single_obs)
                    _assert_same(_item(info["final_info"], i), single_info)
                    single_obs, single_info = single.reset()
            assert rewards[i] == reward and terminated[i] == end
            _assert_same(_item(obs, i), single_obs)
            _assert_same(_item({k: v for k, v in info.items() if not k.startswith("final")}, i), single_info)
            ended[i] = end
            episodes[i] += end
        if mode == AutoresetMode.SAME_STEP:
            assert ("final_obs" in info) == terminated.any()
        if mode == AutoresetMode.DISABLED and terminated.any():
            obs, info = envs.reset(options={"reset_mask": terminated.copy()})
            for i in np.flatnonzero(terminated):
                single_obs, single_info = singles[i].reset()
                _assert_same(_item(obs, i), single_obs)
                _assert_same(_item(info, i), single_info)
            ended[:] = False
    assert (episodes >= 3).all()  # the run crossed several episode ends of every sub-env
    envs.close()
