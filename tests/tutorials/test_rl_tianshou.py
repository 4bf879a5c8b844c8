"""tianshou 2.0's procedural PPO recipe trains on the flat observation of every env id, through its
own vector envs (SubprocVectorEnv, DummyVectorEnv), Collector and on-policy trainer; the data it
collects carries ``runtime``. The recipe is docs/tutorials/tianshou_ppo.py; the last tests show that
the stock trainer takes the envs' infos as they are, and pin down what the single-shot glue there is
for (stock parts that reject MultiDiscrete)."""

from __future__ import annotations

import runpy

import gymnasium as gym
import numpy as np
import pytest
from paths import ROOT

pytest.importorskip("tianshou")
import torch  # noqa: E402 - tianshou brings torch
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy  # noqa: E402
from tianshou.data import Collector, CollectStats, VectorReplayBuffer  # noqa: E402
from tianshou.env import DummyVectorEnv, SubprocVectorEnv  # noqa: E402
from tianshou.trainer import OnPolicyTrainerParams  # noqa: E402
from tianshou.utils.net.common import Net  # noqa: E402
from tianshou.utils.net.discrete import DiscreteActor  # noqa: E402
from tianshou.utils.space_info import SpaceInfo  # noqa: E402

import placement_gym  # noqa: E402, F401 - registers the environments

RECIPE = runpy.run_path(
    str(ROOT / "docs" / "tutorials" / "tianshou_ppo.py"), run_name="recipe"
)
ENV_IDS = ["DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0"]
KWARGS = {"graph": "cifar10_cnn", "cluster": "k80x2", "obs_mode": "flat"}
STEPS = 256


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.slow
@pytest.mark.parametrize("vector_env", [SubprocVectorEnv, DummyVectorEnv], ids=["subproc", "dummy"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_stock_ppo_trains_and_collects_runtime(env_id, vector_env):
    algorithm, collector, *_ = RECIPE["train"](env_id, timesteps=STEPS, seed=0, n_envs=2,
                                              vector_env=vector_env)
    try:
        collector.reset_buffer()
        stats = collector.collect(n_episode=2)
    finally:
        collector.close()
    assert stats.n_collected_episodes >= 2 and np.isfinite(stats.returns).all()

    buffer = collector.buffer
    steps = buffer[: len(buffer)]
    assert np.isfinite(steps.rew).all()
    ends = steps.terminated | steps.truncated
    assert ends.any()
    runtime = np.asarray(steps.info.runtime)
    assert runtime.shape == (len(buffer),)
    # An episode's last step simulated the full placement: a real runtime, flagged as simulated.
    assert np.asarray(steps.info.simulated)[ends].all()
    assert (runtime[ends] > 0).all() and np.isfinite(runtime).all()
    n_devices = RECIPE["make_env"](env_id).unwrapped.task.n_devices
    assert np.asarray(steps.info.peak_memory).shape == (len(buffer), n_devices)
    # The trainer updated the policy: its parameters moved from the initial ones (same seed).
    torch.manual_seed(0)
    initial = RECIPE["make_ppo"](RECIPE["make_env"](env_id))
    moved = [not torch.equal(a, b) for a, b in zip(algorithm.policy.parameters(), initial.policy.parameters(),
                                                   strict=True)]
    assert any(moved)


@pytest.mark.slow
def test_single_shot_actions_are_one_device_per_node():
    env = RECIPE["make_env"]("DevicePlacement-v0")
    algorithm = RECIPE["make_ppo"](env)
    obs, _ = env.reset(seed=0)
    action = algorithm.policy.compute_action(obs)
    assert action.shape == env.action_space.shape and env.action_space.contains(action.astype(np.int64))
    _, reward, terminated, _, info = env.step(action)
    assert terminated and np.isfinite(reward) and info["runtime"] > 0


@pytest.mark.slow
def test_same_seed_same_policy():
    def trained_parameters(seed):
        algorithm, collector, *_ = RECIPE["train"](
            "DevicePlacementStaged-v0", timesteps=STEPS, seed=seed, n_envs=2, vector_env=DummyVectorEnv
        )
        collector.close()
        return [p.detach().clone() for p in algorithm.policy.parameters()]

    first, second, other = trained_parameters(0), trained_parameters(0), trained_parameters(1)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


# What the glue in the recipe is for: without it, a stock part fails.


def _stock_discrete_ppo(env):
    space = SpaceInfo.from_env(env)
    net = Net(state_shape=space.observation_info.obs_shape, hidden_sizes=[64, 64])
    actor = DiscreteActor(preprocess_net=net, action_shape=space.action_info.action_shape)
    policy = DiscreteActorPolicy(
        actor=actor, dist_fn=torch.distributions.Categorical, action_space=env.action_space
    )
    return RECIPE["PPO"](
        policy=policy, critic=RECIPE["DiscreteCritic"](preprocess_net=net),
        optim=RECIPE["AdamOptimizerFactory"](lr=3e-4), gamma=1.0,
    )


def test_the_stock_trainer_takes_the_sparse_staged_envs_infos():
    # Staged stages before the last simulate nothing, and tianshou's trainer checks the whole buffer,
    # infos included, for NaN (MalformedBufferError): the env reports 0 there, not NaN.
    env_fn = lambda: gym.make("DevicePlacementStaged-v0", **KWARGS)  # noqa: E731
    envs = DummyVectorEnv([env_fn, env_fn])
    algorithm = _stock_discrete_ppo(env_fn())
    collector = Collector[CollectStats](algorithm, envs, VectorReplayBuffer(512, 2))
    params = OnPolicyTrainerParams(
        training_collector=collector, test_collector=None, max_epochs=1, epoch_num_steps=64,
        collection_step_num_env_steps=64, batch_size=64, test_step_num_episodes=1, show_progress=False,
    )
    algorithm.run_training(params)  # raised MalformedBufferError while the envs reported NaN
    collector.reset_buffer()
    collector.collect(n_step=64)
    steps = collector.buffer[: len(collector.buffer)]
    assert not np.asarray(steps.info.simulated).all() and np.isfinite(np.asarray(steps.info.runtime)).all()


def test_without_the_multidiscrete_glue_the_stock_parts_reject_single_shot():
    env = gym.make("DevicePlacement-v0", **KWARGS)
    with pytest.raises(ValueError, match="Unsupported space type"):
        SpaceInfo.from_env(env)
    net = Net(state_shape=env.observation_space.shape, hidden_sizes=[64])
    actor = DiscreteActor(preprocess_net=net, action_shape=env.action_space.shape)
    with pytest.raises(ValueError, match="must be an instance of Discrete"):
        DiscreteActorPolicy(
            actor=actor, dist_fn=torch.distributions.Categorical, action_space=env.action_space
        )
