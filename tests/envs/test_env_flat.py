"""``obs_mode="flat"`` and ``mask_in_obs``: the flat vector is the dict observation's arrays concatenated
in the documented order, its layout unflattens it bit for bit, its bounds hold every observation, and
stock stable-baselines3 ``MlpPolicy`` trains on it; the mask in the observation is `action_masks()`."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from conftest import hand_cluster, hand_graph

import placement_gym  # noqa: F401  (registers the ids)
from placement_gym.envs import ENV_IDS
from placement_gym.envs.flat import FLAT_KEYS, FlatLayout
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv

SMALL = dict(graph="cifar10_cnn", cluster="k80x2", objective="inference")
CLASSES = {
    "DevicePlacement-v0": DevicePlacementEnv,
    "DevicePlacementStaged-v0": DevicePlacementStagedEnv,
    "DevicePlacementRefine-v0": DevicePlacementRefineEnv,
}


def _run(env_id: str, seed: int, steps: int = 8, **kwargs) -> list:
    """Observations of ``steps`` seeded random steps, resetting at each episode end."""
    env = gym.make(env_id, **SMALL, **kwargs)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    observations = [obs]
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        observations.append(obs)
        if terminated or truncated:
            obs, _ = env.reset()
            observations.append(obs)
    return observations


@pytest.mark.parametrize("mask_in_obs", [False, True])
@pytest.mark.parametrize("groups", [None, "chains"], ids=str)
@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_flat_is_the_dict_arrays_concatenated_in_order(env_id, groups, mask_in_obs):
    padding = dict(max_ops=40, max_edges=60)  # padded beyond the task, as dict mode pads
    flats = _run(env_id, 3, groups=groups, obs_mode="flat", mask_in_obs=mask_in_obs, **padding)
    dicts = _run(env_id, 3, groups=groups, obs_mode="dict", mask_in_obs=mask_in_obs, **padding)
    keys = [key for key in FLAT_KEYS if key != "action_mask" or mask_in_obs]
    assert len(flats) == len(dicts) and list(dicts[0]) == keys
    for flat, obs in zip(flats, dicts, strict=True):
        assert flat.dtype == np.float32 and flat.ndim == 1
        expected = np.concatenate([np.ravel(obs[key]) for key in keys]).astype(np.float32)
        np.testing.assert_array_equal(flat, expected)


@pytest.mark.parametrize("mask_in_obs", [False, True])
@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_flat_slices_and_unflatten_give_the_dict_back(env_id, mask_in_obs):
    env = gym.make(env_id, **SMALL, groups="chains", obs_mode="flat", mask_in_obs=mask_in_obs).unwrapped
    dict_env = gym.make(env_id, **SMALL, groups="chains", mask_in_obs=mask_in_obs).unwrapped
    slices = env.flat_slices
    # The documented order, whatever order gymnasium's Dict keeps its keys in (it sorts them).
    assert list(slices) == [key for key in FLAT_KEYS if key in dict_env.observation_space.spaces]
    assert len(slices) == len(dict_env.observation_space.spaces)
    # Contiguous, in order, covering the vector exactly.
    assert [s.start for s in slices.values()] == [0] + [s.stop for s in slices.values()][:-1]
    assert list(slices.values())[-1].stop == env.observation_space.shape[0]
    flats = _run(env_id, 4, steps=4, groups="chains", obs_mode="flat", mask_in_obs=mask_in_obs)
    dicts = _run(env_id, 4, steps=4, groups="chains", mask_in_obs=mask_in_obs)
    for flat, obs in zip(flats, dicts, strict=True):
        back = env.flat_layout.unflatten(flat)
        for key, array in obs.items():
            assert back[key].dtype == array.dtype and back[key].shape == array.shape, key
            np.testing.assert_array_equal(back[key], array)
    batch = env.flat_layout.unflatten(np.stack(flats[:3]))
    np.testing.assert_array_equal(batch["placement"], np.stack([obs["placement"] for obs in dicts[:3]]))
    assert env.flat_layout.shapes["edge_index"] == (2, env._observation.max_edges)


def test_flat_bounds():
    env = DevicePlacementStagedEnv(**SMALL, groups="chains", obs_mode="flat", max_ops=9, mask_in_obs=True)
    space, slices = env.observation_space, env.flat_slices
    assert space.dtype == np.float32 and space.shape == (slices["action_mask"].stop,)
    edges = slices["edge_index"]
    assert np.all(space.low == 0.0)
    assert np.all(space.high[edges] == 8.0)  # node indices in [0, max_ops - 1]
    others = np.ones(space.shape[0], dtype=bool)
    others[edges] = False
    assert np.all(space.high[others] == 1.0)
    settings = dict(groups="chains", obs_mode="flat", max_ops=9, mask_in_obs=True)
    for obs in _run("DevicePlacementStaged-v0", 0, **settings):
        assert space.contains(obs)


def test_dict_observations_do_not_change_with_the_mask():
    """The dict mode with ``mask_in_obs=True`` is the default dict plus one key, every other array
    equal (the default dict observation is untouched by the option)."""
    plain = _run("DevicePlacementRefine-v0", 9, steps=6, groups="chains")
    masked = _run("DevicePlacementRefine-v0", 9, steps=6, groups="chains", mask_in_obs=True)
    for a, b in zip(plain, masked, strict=True):
        assert set(b) == set(a) | {"action_mask"}
        for key in a:
            assert a[key].dtype == b[key].dtype
            np.testing.assert_array_equal(a[key], b[key])


def _tight():
    """Three chained ops of 6 kB parameters on two devices of 13 kB: two fit on a device, three do not,
    so the staged and refine masks change with the placement and mask some device."""
    graph = hand_graph([("a", 1e9, 1e3, 6e3), ("b", 1e9, 1e3, 6e3), ("c", 1e9, 1e3, 6e3)],
                       edges=[("a", "b"), ("b", "c")])
    cluster = dataclasses.replace(hand_cluster(2), memory_capacity=np.array([1.3e4, 1.3e4]))
    return dict(graph=graph, cluster=cluster, objective="inference")


@pytest.mark.parametrize("obs_mode", ["dict", "flat"])
@pytest.mark.parametrize("env_class", list(CLASSES.values()), ids=list(CLASSES))
def test_mask_in_obs_is_action_masks_at_every_step(env_class, obs_mode):
    own = {"initial": np.array([0, 0, 1])} if env_class is DevicePlacementRefineEnv else {}
    env = env_class(**_tight(), obs_mode=obs_mode, mask_in_obs=True, **own)

    def mask_of(obs):
        return env.flat_layout.unflatten(obs)["action_mask"] if obs_mode == "flat" else obs["action_mask"]

    actions = [np.array([0, 0, 1])] if env_class is DevicePlacementEnv else [0, 0, 1]
    masks = []
    obs, _ = env.reset(seed=0)
    for action in actions:
        masks.append(mask_of(obs))
        assert masks[-1].dtype == bool
        np.testing.assert_array_equal(masks[-1], env.action_masks())
        obs, _, terminated, _, _ = env.step(action)
    assert terminated
    np.testing.assert_array_equal(mask_of(obs), env.action_masks())
    if env_class is not DevicePlacementEnv:
        # The third op cannot join the two others on gpu:0 (staged: both placed there; refine: both
        # start there), so the mask of the last step rules gpu:0 out.
        np.testing.assert_array_equal(masks[-1], [False, True])


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_mask_layout_per_action_space(env_id):
    env = gym.make(env_id, **SMALL, groups="chains", mask_in_obs=True).unwrapped
    space = env.observation_space["action_mask"]
    assert space.dtype == bool
    if env_id == "DevicePlacement-v0":
        assert space.shape == (env.n_nodes, env.task.n_devices)  # one row per MultiDiscrete entry
    else:
        assert space.shape == (env.task.n_devices,)  # one entry per Discrete choice


@pytest.mark.parametrize("env_id", list(ENV_IDS))
def test_stock_sb3_ppo_mlp_policy_trains_in_flat_mode(env_id):
    sb3 = pytest.importorskip("stable_baselines3")
    env = gym.make(env_id, **SMALL, groups="chains", obs_mode="flat")
    model = sb3.PPO("MlpPolicy", env, n_steps=16, batch_size=16, seed=0, device="cpu")
    model.learn(32)
    obs, _ = env.reset(seed=0)
    action, _ = model.predict(obs, deterministic=True)
    assert env.action_space.contains(action)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mask_in_obs": 1}, r"mask_in_obs must be True or False, got 1"),
        ({"mask_in_obs": True, "obs_mode": "graph"}, r'mask_in_obs=True needs obs_mode "dict" or "flat"'),
        ({"obs_mode": "vector"}, r"unknown obs_mode 'vector'; allowed: dict, graph, flat"),
    ],
)
@pytest.mark.parametrize("env_class", list(CLASSES.values()), ids=list(CLASSES))
def test_bad_settings_are_one_clear_error(env_class, kwargs, message):
    with pytest.raises(ValueError, match=message):
        env_class(**SMALL, **kwargs)


def test_unflatten_rejects_a_vector_of_the_wrong_size():
    layout = DevicePlacementEnv(**SMALL, obs_mode="flat").flat_layout
    with pytest.raises(ValueError, match=rf"a flat observation has {layout.size} entries"):
        layout.unflatten(np.zeros(layout.size + 1, dtype=np.float32))


def test_layout_rejects_unknown_keys():
    space = gym.spaces.Dict({"pixels": gym.spaces.Box(0, 1, (2,))})
    with pytest.raises(ValueError, match=r"cannot flatten observation keys \['pixels'\]"):
        FlatLayout(space)


def test_flat_and_mask_attributes_outside_flat_mode():
    env = DevicePlacementEnv(**SMALL)
    assert env.flat_slices is None and env.flat_layout is None and env.mask_in_obs is False
