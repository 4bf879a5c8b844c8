"""skrl 2.1 (torch) on every env id, with the real library: its PPO with ``wrap_env`` around a gymnasium
vector env of 4 envs, trained by its ``SequentialTrainer`` (the code of docs/tutorials/skrl_ppo.py).

What skrl needs (skrl 2.1.1, gymnasium 1.4; the envs are not at fault):

* The SAME_STEP autoreset mode. skrl's wrapper stores what every ``step`` returns as one transition.
  In gymnasium's default NEXT_STEP mode the step after an episode's end only resets the sub-env (action
  ignored, reward 0, not terminated), and skrl stores it as a real transition: half of the
  single-shot env's stored transitions, one per episode of the others
  (`test_next_step_stores_fake_reset_transitions`). Under SAME_STEP none.
* Nothing for the ``Dict`` observation: skrl flattens it into one vector itself; ``MultiDiscrete``
  takes skrl's ``MultiCategoricalMixin``.
* skrl passes the vector env's info dict to ``Agent.record_transition`` unchanged (numpy values;
  under SAME_STEP the ending step's ``runtime`` is in ``infos["final_info"]``), but its trainer logs
  only the one-element torch tensors of ``infos["episode"]``: the tutorial's ``PlacementPPO``
  subclass (five lines) keeps and logs ``runtime``.
"""

from __future__ import annotations

import runpy

import gymnasium as gym
import numpy as np
import pytest
from paths import ROOT

pytest.importorskip("skrl")
import torch  # noqa: E402
from skrl.utils.spaces.torch import unflatten_tensorized_space  # noqa: E402

TUTORIAL = ROOT / "docs" / "tutorials" / "skrl_ppo.py"
ENV_IDS = ["DevicePlacement-v0", "DevicePlacementStaged-v0", "DevicePlacementRefine-v0"]
N_NODES = 30  # cifar10_cnn's forward ops: the staged and refine episodes' length
EPISODE = {"DevicePlacement-v0": 1, "DevicePlacementStaged-v0": N_NODES, "DevicePlacementRefine-v0": N_NODES}
ROLLOUTS = 60  # steps of each env per PPO update: two staged or refine episodes
SAME_STEP, NEXT_STEP = gym.vector.AutoresetMode.SAME_STEP, gym.vector.AutoresetMode.NEXT_STEP


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tutorial():
    return runpy.run_path(str(TUTORIAL), run_name="tutorial")


def _train(tutorial, env_id, autoreset_mode=SAME_STEP, updates=2, seed=0):
    env = tutorial["make_env"](env_id, seed=seed, autoreset_mode=autoreset_mode)
    agent = tutorial["make_agent"](env, rollouts=ROLLOUTS)
    before = [p.detach().clone() for p in agent.policy.parameters()]
    tutorial["train"](env, agent, timesteps=updates * ROLLOUTS)
    env.close()
    return env, agent, before


def _stored(agent, env):
    """The transitions skrl stored for its last update: observations (as the env's dict, unflattened
    by skrl's own helper), actions, rewards and terminated, each ``(rollouts, num_envs, ...)``."""
    memory = agent.memory
    obs = memory.get_tensor_by_name("observations")
    steps, envs = obs.shape[:2]
    observations = unflatten_tensorized_space(env.observation_space, obs.reshape(steps * envs, -1))
    observations = {key: value.reshape(steps, envs, *value.shape[1:]) for key, value in observations.items()}
    rewards, terminated = (memory.get_tensor_by_name(name).squeeze(-1) for name in ("rewards", "terminated"))
    return observations, memory.get_tensor_by_name("actions"), rewards, terminated


def _fake_resets(env_id, observations):
    """Stored steps whose observation is an episode's last one, which only a reset step starts from:
    single-shot, a placement is shown; staged and refine, no node is current."""
    if env_id == "DevicePlacement-v0":
        return observations["placement"].sum((-1, -2)) > 0
    return observations["current"].sum(-1) == 0


def _episode_returns(rewards, terminated):
    """Returns of the episodes that start and end inside the stored rollout, per env."""
    returns = []
    for env in range(rewards.shape[1]):
        ends = torch.nonzero(terminated[:, env]).flatten().tolist()
        returns += [rewards[a + 1:b + 1, env].sum().item() for a, b in zip(ends, ends[1:])]
    return returns


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_ppo_on_a_same_step_vector_env(tutorial, env_id):
    env, agent, before = _train(tutorial, env_id)
    observations, actions, rewards, terminated = _stored(agent, env)
    assert rewards.shape == (ROLLOUTS, 4)
    # No fake reset transitions: every stored step starts from a real observation, and the episode
    # ends come exactly every EPISODE steps.
    assert not _fake_resets(env_id, observations).any()
    assert terminated.sum().item() == 4 * (ROLLOUTS // EPISODE[env_id])
    if env_id == "DevicePlacement-v0":
        assert terminated.all() and (rewards != 0).all()
    returns = _episode_returns(rewards, terminated)
    assert returns and np.isfinite(returns).all()
    # runtime reaches the infos skrl hands to record_transition (the subclass keeps them).
    episodes = 4 * 2 * ROLLOUTS // EPISODE[env_id]
    assert len(agent.runtimes) == episodes
    assert np.isfinite(agent.runtimes).all() and min(agent.runtimes) > 0
    # PPO updated the policy, and its parameters stayed finite.
    after = list(agent.policy.parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(after, before))
    runtime, best_single = tutorial["greedy_runtime"](env_id, agent)
    assert np.isfinite(runtime) and runtime > 0 and best_single > 0


def test_next_step_stores_fake_reset_transitions(tutorial):
    """Under gymnasium's default NEXT_STEP mode, half of what skrl stores on the single-shot env are
    reset steps (reward 0, not terminated, the last placement as observation); SAME_STEP, none."""
    env, agent, _ = _train(tutorial, "DevicePlacement-v0", autoreset_mode=NEXT_STEP, updates=1)
    observations, _, rewards, terminated = _stored(agent, env)
    fake = _fake_resets("DevicePlacement-v0", observations)
    assert fake.sum().item() == rewards.numel() // 2
    assert (rewards[fake] == 0).all() and not terminated[fake].any()
    assert terminated[~fake].all()
    # The staged env: one fake step per episode, which starts from the finished placement.
    env, agent, _ = _train(tutorial, "DevicePlacementStaged-v0", autoreset_mode=NEXT_STEP, updates=1)
    observations, _, rewards, terminated = _stored(agent, env)
    fake = _fake_resets("DevicePlacementStaged-v0", observations)
    # 60 steps: an episode (30), its reset step, 29 steps of the next one.
    assert fake.sum().item() == terminated.sum().item() == 4
    assert (rewards[fake] == 0).all() and not terminated[fake].any()


def test_same_seed_same_result(tutorial):
    def run():
        env, agent, _ = _train(tutorial, "DevicePlacementRefine-v0", updates=1, seed=5)
        _, actions, rewards, _ = _stored(agent, env)
        return actions, rewards, [p.detach().clone() for p in agent.policy.parameters()], agent.runtimes

    first, second = run(), run()
    torch.testing.assert_close(first[0], second[0], rtol=0, atol=0)
    torch.testing.assert_close(first[1], second[1], rtol=0, atol=0)
    for a, b in zip(first[2], second[2]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert first[3] == second[3]
