"""tianshou 2.0's procedural PPO recipe (Net + DiscreteActor + DiscreteCritic, Collector, trainer)
on the flat observation of the three envs, then one greedy episode.

``python docs/tutorials/tianshou_ppo.py [--env-id ID] [--timesteps N] [--seed S] [--graph G]
[--cluster C] [--dataset NAME:SPLIT]`` (a dataset split: a graph of it at every reset); it prints the
training's steps per second, and its last line is JSON: the greedy placement's runtime, the best single
device's, the devices the sampled placements used and the placements evaluated
(``placement_gym.get_task(...).evaluations``; not summed over a dataset's tasks: null there)."""

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
from tianshou.algorithm import PPO
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy, ProbabilisticActorPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, CollectStats, VectorReplayBuffer
from tianshou.env import DummyVectorEnv, SubprocVectorEnv
from tianshou.trainer import OnPolicyTrainerParams
from tianshou.utils.net.common import Net
from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic

import placement_gym  # registers the environments
from placement_gym.common.progress import Progress


def make_env(env_id: str = "DevicePlacementStaged-v0", **kwargs) -> gym.Env:
    # The "placement_gym:" prefix makes gymnasium import the package, which registers the ids, also in
    # a SubprocVectorEnv worker started with "spawn" or "forkserver" (nothing is inherited there).
    graph = {} if kwargs.get("dataset") else {"graph": "cifar10_cnn"}  # a dataset env draws its graphs
    kwargs = graph | {"cluster": "k80x2", "obs_mode": "flat"} | {k: v for k, v in kwargs.items() if v}
    return gym.make(f"placement_gym:{env_id}", **kwargs)


def make_ppo(env: gym.Env, lr: float = 1e-3) -> PPO:
    """The stock actor-critic: a shared MLP, a softmax actor head and a value head."""
    net = Net(state_shape=env.observation_space.shape, hidden_sizes=[64, 64])
    critic = DiscreteCritic(preprocess_net=net)
    if isinstance(env.action_space, gym.spaces.MultiDiscrete):
        # DevicePlacement-v0: one device per node. tianshou's discrete policy takes Discrete only;
        # its generic ProbabilisticActorPolicy takes any distribution: one Categorical per node.
        n_nodes, n_devices = len(env.action_space.nvec), int(env.action_space.nvec[0])
        actor = DiscreteActor(preprocess_net=net, action_shape=(n_nodes, n_devices), softmax_output=False)

        def one_categorical_per_node(logits):
            per_node = torch.distributions.Categorical(logits=logits.view(-1, n_nodes, n_devices))
            return torch.distributions.Independent(per_node, 1)

        policy = ProbabilisticActorPolicy(
            actor=actor, dist_fn=one_categorical_per_node, action_space=env.action_space,
            action_scaling=False, action_bound_method=None, deterministic_eval=True,
        )
    else:
        actor = DiscreteActor(preprocess_net=net, action_shape=env.action_space.n)
        policy = DiscreteActorPolicy(
            actor=actor, dist_fn=torch.distributions.Categorical, action_space=env.action_space,
            deterministic_eval=True,
        )
    # gamma 1: the staged env rewards only the last stage; the episode return is the objective.
    return PPO(policy=policy, critic=critic, optim=AdamOptimizerFactory(lr=lr), gamma=1.0)


def train(env_id: str = "DevicePlacementStaged-v0", timesteps: int = 4096, seed: int = 0,
          n_envs: int = 4, vector_env=SubprocVectorEnv, **env_kwargs):
    """Train with tianshou's on-policy trainer; return the algorithm, the training collector, the
    devices its sampled actions chose (a step hook reads every collected action) and the seconds the
    training itself took (not building the envs and models, where tianshou compiles its numba code).
    It reports on stderr what it does (building, then the steps collected) at least every 3 s."""
    torch.manual_seed(seed)  # the network's initial weights and the sampled actions
    np.random.seed(seed)  # tianshou shuffles minibatches with numpy's global generator
    progress = Progress()  # a line on stderr at least every 3 s; stdout keeps the results
    progress("building the envs and the model")
    envs = vector_env([lambda: make_env(env_id, **env_kwargs) for _ in range(n_envs)])
    envs.seed(seed)
    algorithm = make_ppo(make_env(env_id, **env_kwargs))
    collector = Collector[CollectStats](algorithm, envs, VectorReplayBuffer(2048, n_envs))
    sampled: set[int] = set()
    steps = 0

    def on_step(actions, _rollout):
        nonlocal steps
        sampled.update(np.unique(actions.act).tolist())
        steps += len(actions.act)  # one action per env that stepped
        progress("training", min(steps, timesteps), timesteps)

    collector.set_on_step_hook(on_step)
    start = time.perf_counter()
    algorithm.run_training(OnPolicyTrainerParams(
        training_collector=collector, test_collector=None, max_epochs=1, epoch_num_steps=timesteps,
        collection_step_num_env_steps=256, update_step_num_repetitions=10, batch_size=64,
        test_step_num_episodes=1, test_in_training=False, show_progress=False,
    ))
    progress.close()
    return algorithm, collector, sorted(sampled), time.perf_counter() - start


def main(timesteps: int = 4096, seed: int = 0, env_id: str = "DevicePlacementStaged-v0",
         graph: str = "cifar10_cnn", cluster: str = "k80x2", dataset: str | None = None) -> float:
    source = {"dataset": dataset} if dataset else {"graph": graph}
    algorithm, collector, sampled, seconds = train(env_id, timesteps, seed, vector_env=DummyVectorEnv,
                                                   cluster=cluster, **source)
    collector.close()
    print(f"{env_id} on {dataset or graph}/{cluster}: trained {timesteps} steps in {seconds:.1f} s "
          f"({timesteps / seconds:,.0f} steps/s)")

    env = make_env(env_id, cluster=cluster, **source)  # one greedy episode of the trained policy
    obs, info = env.reset(seed=seed)
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(algorithm.policy.compute_action(obs))
        done = terminated or truncated
    runtime, best_single = float(info["runtime"]), float(info["best_single_runtime"])
    # every env of the process shares its task's count (a dataset's graphs have one task each)
    evaluations = None if dataset else placement_gym.get_task(graph, cluster).evaluations
    print(f"policy: {runtime * 1e3:.2f} ms, feasible {bool(info['feasible'])}; "
          f"best single device {best_single * 1e3:.2f} ms; "
          f"sampled placements used devices {sampled}; {evaluations or 'uncounted'} placements evaluated")
    print(json.dumps({"env_id": env_id, "graph": env.unwrapped.task.graph.name, "dataset": dataset,
                      "cluster": cluster, "runtime": runtime,
                      "best_single_runtime": best_single, "sampled_devices": sampled,
                      "evaluations": evaluations, "torch_threads": torch.get_num_threads()}))
    return runtime


if __name__ == "__main__":
    torch.set_num_threads(1)  # small MLPs: one thread is 5x faster here (intra-op threads only wait)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="DevicePlacementStaged-v0")
    parser.add_argument("--timesteps", type=int, default=4096, help="env steps to train for")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--graph", default="cifar10_cnn")
    parser.add_argument("--cluster", default="k80x2")
    parser.add_argument("--dataset", default=None, help="a dataset split (synthetic-mini-v1:train)")
    args = parser.parse_args()
    main(timesteps=args.timesteps, seed=args.seed, env_id=args.env_id, graph=args.graph, cluster=args.cluster,
         dataset=args.dataset)
