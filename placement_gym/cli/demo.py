"""The short demo that README's first command runs: simple placements and HEFT on bundled graphs, one
env episode, and a picture of a placement that wins beside the best single device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from placement_gym.cost_model import lower_bound, simulate, simulate_batch, single_device
from placement_gym.evaluation.placements import best_single_placement, round_robin_placement
from placement_gym.task.compiled import Task
from placement_gym.task.named import get_task
from placement_gym.task.step import Step, step_of_call

DEMO_GRAPHS = ("cifar10_cnn", "inception_v3", "bert_large")
# The agent the demo shows winning. The core never imports an agent package: HEFT comes from an
# installed provider (`placement_gym.evaluation.agents`, the bundled baselines by default), and without one
# the demo falls back to the best of its random placements.
WINNER_AGENT = "heft"


def winning_placement(task: Task, samples: int = 256, seed: int = 0) -> tuple[str, np.ndarray]:
    """A placement that beats the best single device where one can: an installed provider's HEFT
    (``("HEFT", placement)``), else the best feasible of ``samples`` seeded random placements
    (``("best of N random", placement)``)."""
    from placement_gym.evaluation.agents import lookup_agent  # entry points are read on first use only

    try:
        agent = lookup_agent(WINNER_AGENT)
    except ImportError:  # a provider offers HEFT but its dependencies are missing
        agent = None
    if agent is not None:
        return "HEFT", task.check_placement(agent(task, seed, None).placement)
    rng = np.random.default_rng(seed)
    placements = rng.integers(0, task.n_devices, (samples, task.n_forward))
    runtimes, feasible, _ = simulate_batch(task, placements)
    best = int(np.argmin(np.where(feasible, runtimes, np.inf) if feasible.any() else runtimes))
    return f"best of {samples} random", placements[best]


def demo_rows(
    graphs=DEMO_GRAPHS,
    cluster: str = "k80x4",
    samples: int = 256,
    seed: int = 0,
    step: Step | str | None = None,
    **step_options: Any,
) -> list[dict]:
    """For each graph's step (``step`` and the keywords naming its fields, as `get_task` takes them;
    default: a training step): the best single device,
    HEFT (when an agent provider offers it, `winning_placement`), round-robin over the GPUs and the
    best of ``samples`` random placements (one batched call), beside the simple lower bound
    (`lower_bound`)."""
    step = step_of_call("demo_rows", step, (), step_options)
    rows = []
    for name in graphs:
        task = get_task(name, cluster, step)
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
        ]
        winner, placement = winning_placement(task, samples, seed)
        if winner == "HEFT":  # the fallback is the random row below already
            heft = simulate(task, placement)
            candidates.append(("HEFT", heft.runtime, heft.feasible))
        candidates += [
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


def demo_timeline(
    path: str | Path,
    graph: str = "inception_v3",
    cluster: str = "k80x4",
    samples: int = 256,
    seed: int = 0,
    step: Step | str | None = None,
    **step_options: Any,
) -> Path:
    """Draw two schedules of one step (``step`` and its keywords as in `demo_rows`), on one time axis,
    as a PNG file ``path`` (its folder created when missing; needs
    the viz extra): the best single device on top, and below it the placement that wins
    (`winning_placement`: HEFT, 1.46x on inception_v3 / k80x4)."""
    from placement_gym.cost_model.timeline import build_timeline_figure

    task = get_task(graph, cluster, step_of_call("demo_timeline", step, (), step_options))
    best = single_device(task)
    winner, placement = winning_placement(task, samples, seed)
    panels = [
        (f"{task.id}: best single device ({task.cluster.device_names[best.best]})",
         simulate(task, best_single_placement(task), schedule=True)),
        (f"{task.id}: {winner}", simulate(task, placement, schedule=True)),
    ]
    longest = max(result.runtime for _, result in panels) * 1e3 * 1.01
    images = []
    for title, result in panels:
        speedup = best.runtime / result.runtime
        figure = build_timeline_figure(task, result.schedule, title=f"{title}, {speedup:.2f}x")
        axes = figure.axes[0]
        axes.set_xlim(0.0, longest)  # one time axis: the shorter schedule looks shorter
        # The same margins in inches on both panels, so that their time axes line up when stacked
        # (constrained layout would size each panel's margin to its own row labels).
        figure.set_layout_engine("none")
        width_in, height_in = figure.get_size_inches()
        left, right, top, bottom = 1.3, 2.5, 0.4, 0.6
        axes.set_position([left / width_in, bottom / height_in, 1 - (left + right) / width_in,
                           1 - (top + bottom) / height_in])
        figure.canvas.draw()
        images.append(np.asarray(figure.canvas.buffer_rgba())[..., :3].copy())
    width = max(image.shape[1] for image in images)
    # Equal-width panels stacked: pad any narrower one with white on the right.
    padded = [np.pad(image, ((0, 0), (0, width - image.shape[1]), (0, 0)), constant_values=255)
              for image in images]
    stacked = np.concatenate(padded)
    from matplotlib.image import imsave

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    imsave(Path(path), stacked, format="png")
    return Path(path)
