"""RLlib's stock PPO on the flat observation (``obs_mode="flat"``), no glue, then one greedy episode.

``python examples/rllib_ppo_flat.py [--env ID] [--iterations N] [--batch B] [--seed S]
[--dataset NAME:SPLIT]`` (a dataset split: a graph of it at every reset, on the same cluster); the last
line it prints is JSON, as the tutorials' files print it: the greedy placement's runtime, the best
single device's, its graph, the devices the sampled placements used, the placements evaluated and
torch's threads.

RLlib pins its own gymnasium (1.2.x for ray 2.60), so install it in a venv of its own beside the
project (docs/tutorials/rllib.md)::

    python -m venv .venv-rllib && . .venv-rllib/bin/activate
    pip install torch 'ray[rllib]' && pip install -e .
    python examples/rllib_ppo_flat.py --iterations 4

RLlib's default encoder takes a 1-D `Box` and nothing else (a `Dict` observation needs its
``FlattenObservations`` connector), hence ``obs_mode="flat"``. It builds the env itself from the
registered id (``"placement_gym:..."`` imports the package, which registers the ids) and the
``env_config`` dict, which it passes to ``gym.make`` as keyword arguments.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np

ENV_IDS = ("DevicePlacementStaged-v0", "DevicePlacementRefine-v0", "DevicePlacement-v0")
GRAPH, CLUSTER = "cifar10_cnn", "k80x2"


def env_config(dataset: str | None = None) -> dict:
    """The env's keyword arguments: cifar10_cnn, or with ``dataset`` ("synthetic-mini-v1:train") a
    graph of that split at every reset, over two K80s, flat observations."""
    return {**({"dataset": dataset} if dataset else {"graph": GRAPH}), "cluster": CLUSTER, "obs_mode": "flat"}


def make_config(env_id: str, seed: int = 0, batch: int = 256, on_sample_end=None, dataset: str | None = None):
    """A stock `PPOConfig` for ``placement_gym:<env_id>`` (`env_config`), sized for a laptop: sampling
    and learning in this process (no remote env runners or learners).
    ``on_sample_end``: RLlib's callback after each sampling round, given the sampled episodes."""
    from ray.rllib.algorithms.ppo import PPOConfig

    single_shot = env_id == "DevicePlacement-v0"
    config = (
        PPOConfig()
        .environment(f"placement_gym:{env_id}", env_config=env_config(dataset))
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
        .learners(num_learners=0)
        # gamma 1: the staged env rewards only the last stage; the episode return is the objective.
        # Single-shot episodes are one step, a whole placement each: a larger step size and more epochs
        # per batch, without the KL penalty that holds each update back, learn from the few placements a
        # short run samples (the defaults stayed above random search at 2,048 placements).
        .training(gamma=1.0, lr=3e-3 if single_shot else 3e-4, train_batch_size_per_learner=batch,
                  minibatch_size=64, num_epochs=10 if single_shot else 2, use_kl_loss=not single_shot)
        .debugging(seed=seed)
    )
    return config.callbacks(on_sample_end=on_sample_end) if on_sample_end is not None else config


def greedy_episode(algo, env_id: str, seed: int, dataset: str | None = None) -> tuple[dict, gym.Env]:
    """One episode of the trained module's most likely actions (on a graph of ``dataset``'s split when
    given); the last step's info and the env."""
    import torch

    module = algo.get_module()
    distribution = module.get_inference_action_dist_cls()
    env = gym.make(f"placement_gym:{env_id}", **env_config(dataset))
    obs, info = env.reset(seed=seed)
    done = False
    while not done:
        with torch.no_grad():
            logits = module.forward_inference({"obs": torch.as_tensor(obs[None])})["action_dist_inputs"]
        action = distribution.from_logits(logits).to_deterministic().sample()[0].numpy()
        obs, _, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    return info, env


def main(
    env_id: str = "DevicePlacementStaged-v0", iterations: int = 2, seed: int = 0, batch: int = 256,
    dataset: str | None = None,
) -> dict:
    """Train ``iterations`` PPO iterations, then play one greedy episode; print and return the result."""
    import ray
    import torch

    import placement_gym

    sampled: set[int] = set()

    def on_sample_end(*, samples, **_):
        for episode in samples:
            sampled.update(np.unique(episode.get_actions()).tolist())

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    algo = make_config(env_id, seed, batch, on_sample_end, dataset).build_algo()
    try:
        for i in range(iterations):
            start = time.perf_counter()
            result = algo.train()
            runners = result["env_runners"]
            mean_return = float(runners.get("episode_return_mean", np.nan))
            steps = int(runners.get("num_env_steps_sampled", 0))
            print(f"{env_id} iteration {i + 1}: {steps} env steps in {time.perf_counter() - start:.1f} s, "
                  f"mean episode return {mean_return:.3f}")
        info, greedy = greedy_episode(algo, env_id, seed, dataset)
        if dataset:
            # the envs RLlib's local env runner built (a vector env of them), and the greedy episode's
            trained = algo.env_runner.env.unwrapped.envs
            evaluations = sum(env.unwrapped.evaluations for env in [*trained, greedy])
        else:
            evaluations = placement_gym.get_task(GRAPH, CLUSTER).evaluations  # every env here shares it
    finally:
        algo.stop()
    runtime, best_single = float(info["runtime"]), float(info["best_single_runtime"])
    devices = sorted(sampled)
    graph = greedy.unwrapped.task.graph.name
    print(f"policy on {graph}: {runtime * 1e3:.2f} ms, feasible {bool(info['feasible'])}; "
          f"best single device {best_single * 1e3:.2f} ms; "
          f"sampled placements used devices {devices}; {evaluations} placements evaluated")
    outcome = {"env_id": env_id, "graph": graph, "dataset": dataset, "cluster": CLUSTER, "runtime": runtime,
               "best_single_runtime": best_single, "sampled_devices": devices,
               "evaluations": evaluations, "torch_threads": torch.get_num_threads(),
               "mean_return": mean_return}
    print(json.dumps(outcome))
    return outcome


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)  # small MLPs: one thread is faster, more so on a shared machine
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="DevicePlacementStaged-v0", choices=ENV_IDS)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=256, help="env steps per iteration")
    parser.add_argument("--dataset", default=None, help="a dataset split (synthetic-mini-v1:train)")
    args = parser.parse_args()
    main(args.env, args.iterations, args.seed, args.batch, args.dataset)
