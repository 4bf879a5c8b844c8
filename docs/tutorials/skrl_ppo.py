"""skrl PPO (torch) on 4 placement envs in a gymnasium vector env with the SAME_STEP autoreset mode,
wrapped by skrl's ``wrap_env`` and trained by its ``SequentialTrainer``, then one greedy episode.

``python docs/tutorials/skrl_ppo.py [--env-id ID] [--timesteps N] [--seed S] [--dataset NAME:SPLIT]``
(a dataset split: a graph of it at every reset); the last line it prints is JSON: the greedy placement's
runtime, the best single device's, the devices the sampled placements used and the placements evaluated
(``placement_gym.get_task(...).evaluations``; not summed over a dataset's tasks: null there)."""

import argparse
import json

import gymnasium as gym
import torch
from skrl.agents.torch.ppo import PPO
from skrl.envs.wrappers.torch import wrap_env
from skrl.memories.torch import RandomMemory
from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model, MultiCategoricalMixin
from skrl.trainers.torch import SequentialTrainer
from skrl.utils import set_seed
from torch import nn

import placement_gym
from placement_gym.common.progress import Progress


def make_env(env_id="DevicePlacementStaged-v0", num_envs=4, seed=0,
             autoreset_mode=gym.vector.AutoresetMode.SAME_STEP, **env_kwargs):
    """``num_envs`` copies of a placement env in one gymnasium vector env, wrapped for skrl, after
    seeding numpy, torch and skrl (whose seed the wrapper passes to the env's first reset). skrl
    stores what each step returns as one transition; in gymnasium's default NEXT_STEP mode the step
    after an episode's end only resets (reward 0, action ignored), and skrl would store it as a real
    transition. SAME_STEP resets within the ending step, so every stored transition is real."""
    set_seed(seed)
    graph = {} if env_kwargs.get("dataset") else {"graph": "cifar10_cnn"}  # a dataset env draws its graphs
    env_kwargs = graph | {"cluster": "k80x2"} | {k: v for k, v in env_kwargs.items() if v}
    vector_env = gym.make_vec(f"placement_gym:{env_id}", num_envs=num_envs, vectorization_mode="sync",
                              vector_kwargs={"autoreset_mode": autoreset_mode}, **env_kwargs)
    return wrap_env(vector_env, wrapper="gymnasium", verbose=False)


def _mlp(n_in, n_out, hidden):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                         nn.Linear(hidden, n_out))


class Policy(CategoricalMixin, Model):
    """Logits over the devices (``Discrete``: the staged and refine envs). skrl hands the model the
    dict observation flattened into one vector."""

    def __init__(self, observation_space, action_space, device=None, hidden=64):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        CategoricalMixin.__init__(self, unnormalized_log_prob=True)
        self.net = _mlp(self.num_observations, self.num_actions, hidden)

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {}


class MultiPolicy(MultiCategoricalMixin, Policy):
    """One categorical per node (``MultiDiscrete``: the single-shot env), log-probabilities summed."""

    def __init__(self, observation_space, action_space, device=None, hidden=64):
        Policy.__init__(self, observation_space, action_space, device, hidden)
        MultiCategoricalMixin.__init__(self, unnormalized_log_prob=True, reduction="sum")


class Value(DeterministicMixin, Model):
    def __init__(self, observation_space, action_space, device=None, hidden=64):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        DeterministicMixin.__init__(self, clip_actions=False)
        self.net = _mlp(self.num_observations, 1, hidden)

    def compute(self, inputs, role=""):
        return self.net(inputs["observations"]), {}


class PlacementPPO(PPO):
    """skrl's PPO, also keeping the devices its sampled actions chose (``devices``) and the ``runtime``
    (seconds) of every episode that ends, which it logs
    (``Info / runtime (ms)``, when the experiment writes TensorBoard data). skrl passes the vector
    env's info dict to ``record_transition`` as it is, but its trainer logs only the entries of
    ``infos["episode"]`` that are one-element torch tensors. In the SAME_STEP mode the ending step's
    info sits in ``infos["final_info"]`` (``infos["_final_info"]`` says which envs ended). While
    `train` runs, ``progress`` reports the time steps done on stderr."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.runtimes: list[float] = []
        self.devices: set[int] = set()
        self.progress = None

    def record_transition(self, *, infos, actions, timestep, timesteps, **kwargs):
        super().record_transition(infos=infos, actions=actions, timestep=timestep, timesteps=timesteps,
                                  **kwargs)
        if self.progress is not None:
            self.progress("training", timestep + 1, timesteps)
        self.devices.update(actions.unique().tolist())  # device indices: one per node or per step
        if "final_info" in infos:
            ended = infos["_final_info"]
            runtimes = infos["final_info"]["runtime"][ended]
            self.runtimes.extend(float(r) for r in runtimes)
            for runtime in runtimes:
                self.track_data("Info / runtime (ms)", float(runtime) * 1e3)


def make_agent(env, rollouts=64, **cfg):
    """PPO with an MLP policy and value, ``rollouts`` steps of every env per update; ``gamma=1``
    because the staged env rewards at the last stage. No TensorBoard files or checkpoints (set
    ``experiment`` to write them)."""
    multi = isinstance(env.action_space, gym.spaces.MultiDiscrete)
    models = {
        "policy": (MultiPolicy if multi else Policy)(env.observation_space, env.action_space, env.device),
        "value": Value(env.observation_space, env.action_space, env.device),
    }
    cfg = {
        "rollouts": rollouts, "learning_epochs": 4, "mini_batches": 4, "discount_factor": 1.0,
        "learning_rate": 3e-3, "entropy_loss_scale": 0.01,
        "experiment": {"write_interval": 0, "checkpoint_interval": 0},
    } | cfg
    memory = RandomMemory(memory_size=rollouts, num_envs=env.num_envs, device=env.device)
    return PlacementPPO(models=models, memory=memory, observation_space=env.observation_space,
                        action_space=env.action_space, device=env.device, cfg=cfg)


def train(env, agent, timesteps):
    """``timesteps`` steps of every env (``timesteps x num_envs`` transitions). The env stays open."""
    trainer = SequentialTrainer(env=env, agents=agent, cfg={
        "timesteps": timesteps, "headless": True, "disable_progressbar": True,
        "close_environment_at_exit": False,
    })
    agent.progress = Progress()  # a line on stderr at least every 3 s; stdout keeps the results
    trainer.train()
    agent.progress.close()


def greedy_runtime(env_id, agent, **env_kwargs):
    """The runtime of the placement the policy's most likely actions build, in one env (through
    skrl's wrapper, so the observation is flattened as in training)."""
    env = make_env(env_id, num_envs=1, **env_kwargs)
    multi = isinstance(env.action_space, gym.spaces.MultiDiscrete)
    observation, _ = env.reset()
    while True:
        with torch.no_grad():
            _, outputs = agent.policy.act({"observations": observation}, role="policy")
        logits = outputs["net_output"]
        if multi:  # one row of device logits per node
            action = logits.view(1, len(env.action_space.nvec), -1).argmax(-1)
        else:
            action = logits.argmax(-1, keepdim=True)
        observation, _, terminated, truncated, infos = env.step(action)
        if terminated.any() or truncated.any():  # SAME_STEP: the ended step's info is final_info
            env.close()
            final = infos["final_info"]
            return float(final["runtime"][0]), float(final["best_single_runtime"][0])


def main(timesteps=640, seed=0, env_id="DevicePlacementStaged-v0", graph="cifar10_cnn", cluster="k80x2",
         dataset=None):
    source = {"dataset": dataset} if dataset else {"graph": graph}
    env = make_env(env_id, seed=seed, cluster=cluster, **source)
    agent = make_agent(env)
    train(env, agent, timesteps)
    env.close()
    last = agent.runtimes[-20:]
    print(f"{env_id}: {timesteps * env.num_envs} steps, {len(agent.runtimes)} episodes; "
          f"mean runtime of the last {len(last)}: {sum(last) / len(last) * 1e3:.2f} ms")
    runtime, best_single = greedy_runtime(env_id, agent, cluster=cluster, **source)
    sampled = sorted(agent.devices)
    # every env of the process shares its task's count (a dataset's graphs have one task each)
    evaluations = None if dataset else placement_gym.get_task(graph, cluster).evaluations
    print(f"policy: {runtime * 1e3:.2f} ms; best single device {best_single * 1e3:.2f} ms; "
          f"sampled placements used devices {sampled}; {evaluations or 'uncounted'} placements evaluated")
    print(json.dumps({"env_id": env_id, "graph": None if dataset else graph, "dataset": dataset,
                      "cluster": cluster, "runtime": runtime,
                      "best_single_runtime": best_single, "sampled_devices": sampled,
                      "evaluations": evaluations, "torch_threads": torch.get_num_threads()}))
    return runtime


if __name__ == "__main__":
    torch.set_num_threads(1)  # small MLPs: one thread is faster, more so on a shared machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="DevicePlacementStaged-v0")
    parser.add_argument("--timesteps", type=int, default=640, help="steps of each of the 4 envs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", default=None, help="a dataset split (synthetic-mini-v1:train)")
    args = parser.parse_args()
    main(timesteps=args.timesteps, seed=args.seed, env_id=args.env_id, dataset=args.dataset)
