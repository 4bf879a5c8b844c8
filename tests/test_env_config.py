"""Env configuration: every documented keyword, passed by name, reaches the setting it names on
every env, and the base class takes its settings by name only (so no reordering can swap two)."""

from __future__ import annotations

import inspect

import gymnasium as gym
import pytest

import placement_gym  # noqa: F401  (registers the env ids)
from placement_gym.envs.base import PlacementEnvBase
from placement_gym.envs.refine import DevicePlacementRefineEnv
from placement_gym.envs.single_shot import DevicePlacementEnv
from placement_gym.envs.staged import DevicePlacementStagedEnv
from placement_gym.groups import make_grouping

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


def test_base_takes_settings_by_name_only() -> None:
    parameters = list(inspect.signature(PlacementEnvBase.__init__).parameters.values())[1:]
    assert parameters and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)
    with pytest.raises(TypeError):
        PlacementEnvBase(GRAPH, CLUSTER)  # type: ignore[misc]


@pytest.mark.parametrize("cls", [cls for cls, _ in ENVS.values()])
def test_envs_offer_every_base_setting_with_the_same_default(cls) -> None:
    """Every setting of the base is a keyword of each env, with the default the base has (where it
    has one), so the envs document and forward one common set."""
    base = inspect.signature(PlacementEnvBase.__init__).parameters
    env = inspect.signature(cls.__init__).parameters
    for name, parameter in base.items():
        if name == "self":
            continue
        assert name in env, f"{cls.__name__} lacks {name}"
        if parameter.default is not inspect.Parameter.empty:
            assert env[name].default == parameter.default, name


def test_defaults_unchanged() -> None:
    """The documented defaults of the shared keywords."""
    for cls, _ in ENVS.values():
        defaults = {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()}
        assert defaults["graph"] == "inception_v3" and defaults["cluster"] == "k80x4"
        assert defaults["objective"] == "train_step" and defaults["optimizer"] == "adam"
        assert defaults["groups"] is None and defaults["obs_mode"] == "dict"
        assert defaults["max_ops"] is None and defaults["max_edges"] is None
        assert defaults["render_mode"] is None and defaults["oom_runtime"] is None
        assert defaults["oom_runtime_factor"] == 10.0 and defaults["reward_mode"] == "cost_model"
        assert defaults["profile"] is None and defaults["devices"] is None
