"""Env configuration: every documented keyword, passed by name, reaches the setting it names on
every env; the shared settings are one `EnvConfig` (the base class takes nothing else), given as
keywords or as ``config=``, checked when made."""

from __future__ import annotations

import dataclasses
import inspect

import gymnasium as gym
import pytest

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym.envs.base import PlacementEnvBase
from placement_gym.envs.config import EnvConfig
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv
from placement_gym.task.groups import make_grouping

GRAPH, CLUSTER = "cifar10_cnn", "k80x2"
ENVS = {
    "placement_gym:DevicePlacement-v0": (DevicePlacementEnv, {"reward": "neg_sqrt_runtime"}),
    "placement_gym:DevicePlacementStaged-v0": (
        DevicePlacementStagedEnv, {"reward": "inverse", "dense": True},
    ),
    "placement_gym:DevicePlacementRefine-v0": (
        DevicePlacementRefineEnv, {"initial": "best-single", "sweeps": 3},
    ),
}
# Values unlike each other and unlike the defaults, so a setting that reached another's place shows.
SHARED = {
    "graph": GRAPH,
    "cluster": CLUSTER,
    "objective": "train_step",
    "optimizer": "momentum",
    "groups": "chains",
    "obs_mode": "dict",
    "max_ops": 211,
    "max_edges": 307,
    "max_devices": 5,
    "render_mode": "ansi",
    "oom_runtime": 123.0,
    "oom_runtime_factor": 7.0,
    "reward_mode": "cost_model",
}


def _check_shared(env: PlacementEnvBase, settings: dict) -> None:
    assert env.task.graph.name == GRAPH
    assert env.task.cluster.name == CLUSTER
    assert env.task.objective == settings["objective"]
    assert env.task.optimizer == settings["optimizer"]
    assert env.grouping.name == make_grouping(env.task.graph, settings["groups"]).name
    assert env.n_nodes == make_grouping(env.task.graph, settings["groups"]).n_groups
    assert env.obs_mode == settings["obs_mode"]
    assert env.render_mode == settings["render_mode"]
    assert env.oom_runtime == settings["oom_runtime"]
    assert env.oom_runtime_factor == settings["oom_runtime_factor"]
    assert env.penalty_runtime == settings["oom_runtime"]
    assert env.reward_mode == settings["reward_mode"]


@pytest.mark.parametrize("env_id", list(ENVS))
@pytest.mark.parametrize("through_make", [False, True])
def test_every_keyword_reaches_its_setting(env_id: str, through_make: bool) -> None:
    cls, own = ENVS[env_id]
    settings = SHARED | own
    env = gym.make(env_id, **settings).unwrapped if through_make else cls(**settings)
    _check_shared(env, settings)
    space = env.observation_space
    assert space["node_features"].shape[0] == settings["max_ops"]
    assert space["edge_index"].shape == (2, settings["max_edges"])
    assert space["device_features"].shape[0] == env.max_devices == settings["max_devices"]
    if "reward" in own:
        assert env.reward == own["reward"]
    if "dense" in own:
        assert env.dense is True
    if "sweeps" in own:
        assert env.sweeps == own["sweeps"]
        assert env.initial == own["initial"]
        assert env.episode_length == own["sweeps"] * env.n_nodes
    env.close()


@pytest.mark.parametrize("env_id", list(ENVS))
def test_graph_mode_and_factor_penalty(env_id: str) -> None:
    """The other values of the keywords above: the graph observation, inference, and the penalty
    from ``oom_runtime_factor`` when ``oom_runtime`` is None."""
    cls, _ = ENVS[env_id]
    env = cls(graph=GRAPH, cluster=CLUSTER, objective="inference", obs_mode="graph", oom_runtime_factor=4.0)
    assert env.obs_mode == "graph"
    assert isinstance(env.observation_space, gym.spaces.Graph)
    assert env.task.objective == "inference"
    assert env.oom_runtime is None
    assert env.penalty_runtime == 4.0 * env.best_single_runtime
    assert env.render_mode is None and env.reward_mode == "cost_model"


def test_the_base_takes_one_config() -> None:
    parameters = list(inspect.signature(PlacementEnvBase.__init__).parameters)[1:]
    assert parameters == ["config"]


@pytest.mark.parametrize("cls", [cls for cls, _ in ENVS.values()])
def test_every_shared_setting_is_a_keyword_of_each_env_and_lands_in_its_config(cls) -> None:
    """The envs take every `EnvConfig` field by name (what `gym.make` passes), and ``env.config``
    holds it; ``config=`` gives them at once, keywords beside it replace its fields."""
    env = cls(**SHARED)
    assert env.config == EnvConfig(**SHARED)
    given = EnvConfig(**SHARED)
    replaced = cls(config=given, optimizer="sgd", max_ops=None)
    assert replaced.config == dataclasses.replace(given, optimizer="sgd", max_ops=None)
    assert replaced.task.optimizer == "sgd" and replaced.observation_space["node_features"].shape[0] != 211
    assert cls(GRAPH, CLUSTER).config == EnvConfig(graph=GRAPH, cluster=CLUSTER)  # the two positional ones
    # Python's wording, which libraries match (torchrl drops frameskip on it)
    unexpected = f"{cls.__name__}.__init__.. got an unexpected keyword argument 'grups'"
    with pytest.raises(TypeError, match=unexpected):
        cls(graph=GRAPH, cluster=CLUSTER, grups=3)


def test_the_config_is_checked_when_made() -> None:
    cases = (({"obs_mode": "pixels"}, "obs_mode"), ({"oom_runtime_factor": 0.5}, "oom_runtime_factor"),
             ({"render_mode": "human"}, "render_mode"), ({"graph": 123}, "graph must be"),
             ({"mask_in_obs": "yes"}, "mask_in_obs"),
             ({"evaluator": "cost_model", "reward_mode": "real"}, "not both"))
    for bad, message in cases:
        with pytest.raises(ValueError, match=message):
            EnvConfig(**bad)
    with pytest.raises(dataclasses.FrozenInstanceError):
        EnvConfig().graph = "bert_base"  # type: ignore[misc]


def test_defaults_unchanged() -> None:
    """The documented defaults of the shared settings."""
    defaults = EnvConfig()
    assert defaults.graph == "inception_v3" and defaults.cluster == "k80x4"
    assert defaults.objective == "train_step" and defaults.optimizer == "adam"
    assert defaults.groups is None and defaults.obs_mode == "dict"
    assert defaults.max_ops is None and defaults.max_edges is None
    assert defaults.render_mode is None and defaults.oom_runtime is None
    assert defaults.oom_runtime_factor == 10.0 and defaults.reward_mode == "cost_model"
    assert defaults.profile is None and defaults.devices is None
    assert defaults.mask_in_obs is False and defaults.evaluator is None
    for cls, _ in ENVS.values():
        assert cls(GRAPH, CLUSTER).config.objective == "train_step"


def test_the_vector_env_takes_the_single_shot_configuration() -> None:
    """The native vector env takes the same `EnvConfig` (keywords or ``config=``) and ``reward`` and
    hands them to the single-shot env it steps, so both check and name a setting alike."""
    from placement_gym.envs.vector import DevicePlacementVectorEnv

    settings = {key: value for key, value in SHARED.items() if key != "render_mode"}
    vector = DevicePlacementVectorEnv(num_envs=2, reward="neg_sqrt_runtime", **settings)
    assert vector.env.config == EnvConfig(**settings) and vector.env.reward == "neg_sqrt_runtime"
    given = EnvConfig(**settings)
    assert DevicePlacementVectorEnv(num_envs=2, config=given, max_ops=None).env.config == (
        dataclasses.replace(given, max_ops=None))
    unexpected = r"DevicePlacementVectorEnv.__init__.. got an unexpected keyword argument 'grups'"
    with pytest.raises(TypeError, match=unexpected):
        DevicePlacementVectorEnv(num_envs=2, graph=GRAPH, cluster=CLUSTER, grups=3)
    with pytest.raises(ValueError, match="oom_runtime_factor must be a finite number >= 1"):
        DevicePlacementVectorEnv(num_envs=2, graph=GRAPH, cluster=CLUSTER, oom_runtime_factor=0.5)
