"""torchrl PPO (ClipPPOLoss + GAE + the synchronous Collector) on the flat observation of 4 envs in
a gymnasium vector env with the SAME_STEP autoreset mode, then one greedy episode.

``python docs/tutorials/torchrl_ppo.py [--env-id ID] [--iterations N] [--seed S] [--dataset NAME:SPLIT]``
(a dataset split: a graph of it at every reset); the last line it prints is JSON: the greedy placement's
runtime, the best single device's, the devices the sampled placements used and the placements evaluated
(``placement_gym.get_task(...).evaluations``; not summed over a dataset's tasks: null there)."""

import argparse
import json
import math

import gymnasium as gym
import numba
import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector  # torchrl 0.14's name for SyncDataCollector
from torchrl.data import LazyTensorStorage, OneHot, ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.envs import GymWrapper, RewardSum
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import placement_gym
from placement_gym.common.progress import Progress


def make_env(env_id="DevicePlacementStaged-v0", num_envs=4, seed=0, vectorization_mode="sync", **env_kwargs):
    """``num_envs`` copies of a placement env in one gymnasium vector env ("sync": in this process;
    "async": one subprocess each, worth it for large graphs), summing each episode's reward into
    ``episode_reward``. torchrl reads a vector env right only in the SAME_STEP autoreset mode: there
    the step that ends an episode carries its own info (``runtime``) and last observation in
    ``final_info`` / ``final_obs``, which torchrl puts back in the data."""
    graph = {} if env_kwargs.get("dataset") else {"graph": "cifar10_cnn"}  # a dataset env draws its graphs
    env_kwargs = graph | {"cluster": "k80x2", "obs_mode": "flat"} | {k: v for k, v in env_kwargs.items() if v}
    vector_env = gym.make_vec(
        f"placement_gym:{env_id}", num_envs=num_envs, vectorization_mode=vectorization_mode,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}, **env_kwargs,
    )
    env = GymWrapper(vector_env).append_transform(RewardSum())
    env.set_seed(seed)
    return env


class PerNode(torch.distributions.Independent):
    """One categorical per node, log-probabilities summed over the nodes: the distribution of a
    ``MultiDiscrete`` action (``DevicePlacement-v0``). PPO needs one log-probability per step, not one
    per node. ``one_hot``: samples are one-hot rows ``(n_nodes, n_devices)`` (the spec torchrl gives a
    single ``GymEnv``), else device indices ``(n_nodes,)`` (the spec it gives a vector env)."""

    one_hot = False

    def __init__(self, logits):
        base = OneHotCategorical if self.one_hot else torch.distributions.Categorical
        super().__init__(base(logits=logits), 1)

    @property
    def deterministic_sample(self):
        return self.base_dist.mode


class OneHotPerNode(PerNode):
    one_hot = True


def action_layout(spec):
    """``(n_nodes, n_devices, distribution)`` of a torchrl action spec (unbatched); n_nodes is None for
    one device per step (the staged and refine envs). torchrl maps ``Discrete(n)`` to a one-hot spec of
    shape ``(n,)``, and ``MultiDiscrete([n_devices] * n_nodes)`` to a one-hot ``(n_nodes, n_devices)``
    in a single env but to integer indices of shape ``(n_nodes,)`` (values 0 to n_devices - 1) in a
    gymnasium vector env: a distribution over the last axis of the spec would then choose among the
    nodes, not the devices."""
    if isinstance(spec, OneHot):
        if len(spec.shape) == 1:
            return None, spec.shape[0], OneHotCategorical
        return spec.shape[0], spec.shape[1], OneHotPerNode
    return spec.shape[0], int(spec.space.high.max()) + 1, PerNode


def devices_of(action, spec):
    """The device indices in a batch of actions of ``spec`` (one-hot rows or indices)."""
    return action.argmax(-1) if isinstance(spec, OneHot) else action


def make_agent(env, hidden=64):
    """Actor (an MLP to one row of device logits per node, or one row for the staged and refine envs)
    and critic (an MLP to one value)."""
    n_nodes, n_devices, distribution = action_layout(env.action_spec_unbatched)
    logits_shape = (n_devices,) if n_nodes is None else (n_nodes, n_devices)
    n_obs = env.observation_spec_unbatched["observation"].shape[-1]
    mlp = MLP(in_features=n_obs, out_features=math.prod(logits_shape), num_cells=[hidden, hidden],
              activation_class=nn.Tanh)
    logits = nn.Sequential(mlp, nn.Unflatten(-1, logits_shape))
    actor = ProbabilisticActor(
        TensorDictModule(logits, in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        spec=env.action_spec,
        distribution_class=distribution,
        return_log_prob=True,
    )
    critic = ValueOperator(
        MLP(in_features=n_obs, out_features=1, num_cells=[hidden, hidden], activation_class=nn.Tanh),
        in_keys=["observation"],
    )
    return actor, critic


def train(env, actor, critic, iterations=10, frames_per_batch=256, epochs=4, minibatch=64, lr=3e-3):
    """PPO; returns one record per iteration: the losses, the mean return of the episodes that
    ended in the batch, the ``runtime`` (seconds) of their placements, read from the data, and the
    devices its sampled actions chose."""
    # total_frames=-1 and a break: a collector that reaches total_frames closes the env, which
    # greedy_runtime still uses.
    collector = Collector(env, actor, frames_per_batch=frames_per_batch, total_frames=-1,
                          auto_register_policy_transforms=False)  # an MLP policy needs no InitTracker
    advantage = GAE(gamma=1.0, lmbda=0.95, value_network=critic, average_gae=True)
    loss_module = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.01, critic_coeff=1.0)
    optimizer = torch.optim.Adam(loss_module.parameters(), lr=lr)
    buffer = ReplayBuffer(storage=LazyTensorStorage(frames_per_batch), sampler=SamplerWithoutReplacement(),
                          batch_size=minibatch)
    history = []
    progress = Progress()  # a line on stderr at least every 3 s; stdout keeps the results
    progress("training", 0, iterations)
    for data in collector:  # (num_envs, frames_per_batch / num_envs), time last
        ended = data["next", "done"].squeeze(-1)
        record = {"returns": data["next", "episode_reward"][ended].squeeze(-1),
                  "runtimes": data["next", "runtime"][ended],
                  "devices": devices_of(data["action"], env.action_spec_unbatched).unique().tolist()}
        for _ in range(epochs):
            with torch.no_grad():
                advantage(data)
            buffer.extend(data.reshape(-1))
            for _ in range(frames_per_batch // minibatch):
                losses = loss_module(buffer.sample())
                loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(loss_module.parameters(), 1.0)
                optimizer.step()
        record |= {key: losses[key].item() for key in ("loss_objective", "loss_critic", "loss_entropy")}
        history.append(record)
        progress("training", len(history), iterations)
        if len(history) == iterations:
            break
        collector.update_policy_weights_()
    progress.close()
    collector.shutdown(close_env=False)  # the caller closes the env
    return history


def greedy_runtime(env, actor):
    """The runtime of the placement the policy's most likely actions build (first env of the batch)."""
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        rollout = env.rollout(100_000, actor, break_when_any_done=True)  # stops at the episode's end
    ended = rollout["next", "done"][0].squeeze(-1)
    return rollout["next", "runtime"][0][ended][0].item(), rollout["next", "best_single_runtime"][0, 0].item()


def main(iterations=10, seed=0, env_id="DevicePlacementStaged-v0", graph="cifar10_cnn", cluster="k80x2",
         dataset=None):
    torch.manual_seed(seed)
    source = {"dataset": dataset} if dataset else {"graph": graph}
    env = make_env(env_id, seed=seed, cluster=cluster, **source)
    try:
        actor, critic = make_agent(env)
        history = train(env, actor, critic, iterations=iterations)
        last = history[-1]
        print(f"{env_id}: {iterations} iterations, last mean return {last['returns'].mean().item():+.3f}, "
              f"losses (objective, critic, entropy) {last['loss_objective']:+.3f}, "
              f"{last['loss_critic']:.3f}, {last['loss_entropy']:+.3f}")
        runtime, best_single = greedy_runtime(env, actor)
    finally:
        env.close()
    sampled = sorted({device for record in history for device in record["devices"]})
    # every env of the process shares its task's count (a dataset's graphs have one task each)
    evaluations = None if dataset else placement_gym.get_task(graph, cluster).evaluations
    print(f"policy: {runtime * 1e3:.2f} ms; best single device {best_single * 1e3:.2f} ms; "
          f"sampled placements used devices {sampled}; {evaluations or 'uncounted'} placements evaluated")
    print(json.dumps({"env_id": env_id, "graph": None if dataset else graph, "dataset": dataset,
                      "cluster": cluster, "runtime": runtime,
                      "best_single_runtime": best_single, "sampled_devices": sampled,
                      "evaluations": evaluations, "torch_threads": torch.get_num_threads()}))
    return runtime


if __name__ == "__main__":  # torchrl makes subprocesses start with "spawn": keep this guard for "async"
    # The cost model's parallel loops (numba, OpenMP) set the OpenMP thread count, which torch reads
    # too, to numba's: when numba starts its threads, and at every call; after importing torchrl that
    # undid torch.set_num_threads(1) alone. One numba thread, set first (it starts them), keeps torch
    # at one. (Safe with "async": torchrl starts subprocesses with "spawn"; a forked process would
    # inherit numba's OpenMP threads, which GNU OpenMP does not survive.)
    numba.set_num_threads(1)
    torch.set_num_threads(1)  # small MLPs: one thread is faster, more so on a shared machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="DevicePlacementStaged-v0")
    parser.add_argument("--iterations", type=int, default=10, help="PPO iterations of 256 steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", default=None, help="a dataset split (synthetic-mini-v1:train)")
    args = parser.parse_args()
    main(iterations=args.iterations, seed=args.seed, env_id=args.env_id, dataset=args.dataset)
