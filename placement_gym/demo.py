"""The short demo that README's first command runs: simple placements on bundled graphs, one env
episode, and a schedule picture."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from placement_gym.cost_model import lower_bound, simulate, simulate_batch, single_device
from placement_gym.named_tasks import get_task
from placement_gym.placements import round_robin_placement

DEMO_GRAPHS = ("cifar10_cnn", "inception_v3", "bert_large")


def demo_rows(graphs=DEMO_GRAPHS, cluster: str = "k80x4", samples: int = 256, seed: int = 0) -> list[dict]:
    """For each graph's training step: the best single device, round-robin over the GPUs and the best
    of ``samples`` random placements (one batched call), beside the lower bound."""
    rows = []
    for name in graphs:
        task = get_task(name, cluster, "train_step")
        best_single, bound = single_device(task), lower_bound(task)
        rng = np.random.default_rng(seed)
        runtimes, feasible, _ = simulate_batch(
            task, rng.integers(0, task.n_devices, (samples, task.n_forward))
        )
        best_random = int(np.argmin(np.where(feasible, runtimes, np.inf) if feasible.any() else runtimes))
        robin = simulate(task, round_robin_placement(task))
        candidates = [
            (
                f"single:{task.cluster.device_names[best_single.best]}",
                best_single.runtime,
                best_single.best_feasible,
            ),
            ("round-robin", robin.runtime, robin.feasible),
            (f"best of {samples} random", float(runtimes[best_random]), bool(feasible[best_random])),
        ]
        for agent, runtime, ok in candidates:
            rows.append(
                {
                    "task": task.id,
                    "ops": task.n_forward,
                    "agent": agent,
                    "runtime": runtime,
                    "feasible": bool(ok),
                    "speedup": best_single.runtime / runtime,
                    "lower_bound": bound,
                }
            )
    return rows


def demo_episode(seed: int = 0) -> dict:
    """One episode of DevicePlacement-v0 on cifar10_cnn / k80x2 with a random action."""
    import gymnasium as gym

    env = gym.make("DevicePlacement-v0", graph="cifar10_cnn", cluster="k80x2")
    env.reset(seed=seed)
    env.action_space.seed(seed)
    _, reward, terminated, _, info = env.step(env.action_space.sample())
    env.close()
    return {
        "reward": float(reward),
        "terminated": bool(terminated),
        "runtime": info["runtime"],
        "best_single_runtime": info["best_single_runtime"],
    }


def demo_timeline(path: str | Path, graph: str = "inception_v3", cluster: str = "k80x4") -> Path:
    """Draw round-robin's schedule of one training step as a PNG file ``path`` (its folder created
    when missing; needs the viz extra)."""
    from placement_gym.timeline import draw_timeline

    task = get_task(graph, cluster, "train_step")
    result = simulate(task, round_robin_placement(task), schedule=True)
    draw_timeline(task, result.schedule, path, title=f"{task.id}: round-robin")
    return Path(path)
