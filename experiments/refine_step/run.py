"""Milliseconds per step of `DevicePlacementRefine-v0` on a 100,000-op layered graph (`layered_graph`,
``k80x4``, training step), split into the simulation the step calls and the rest (observation, masks,
info), optionally side by side against another checkout of the package.

Each case runs in its own process (a fresh interpreter, so that two versions of the package can take
turns): it makes the task and the env, resets it, steps it ``--warmup`` times, then times ``--steps``
seeded random steps, the evaluator's ``simulate`` inside each step, and an `action_masks()` call after
each (what sb3-contrib's MaskablePPO calls once a step). With ``--against PATH`` every case also runs with
``PYTHONPATH=PATH``, the two alternating for ``--rounds`` rounds; the table gives medians over all steps
of all rounds. Run from the repository root::

    python experiments/refine_step/run.py [--against /path/to/other/checkout] [--rounds 3] [--steps 12]

A case is ``obs_mode:mask_in_obs:groups`` (``dict:1:none``: the dict observation with the action mask
in it, one node per op).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DEFAULT_CASES = "dict:0:none,dict:1:none,flat:1:none,graph:0:none,dict:1:chains"
N_OPS = 100_000


def one_case(case: str, steps: int, warmup: int) -> dict:
    """Time one case in this process; returns the per-step times (seconds)."""
    from placement_gym.cluster import load_cluster
    from placement_gym.envs.refine import DevicePlacementRefineEnv
    from placement_gym.graph.synthetic import layered_graph
    from placement_gym.task.compiled import make_task

    obs_mode, mask, groups = case.split(":")
    task = make_task(layered_graph(N_OPS), load_cluster("k80x4"), "train_step")
    env = DevicePlacementRefineEnv(graph=task, obs_mode=obs_mode, mask_in_obs=bool(int(mask)),
                                   groups=None if groups == "none" else groups)
    simulate_seconds: list[float] = []
    evaluator = env.evaluator

    class Timed:
        """The env's evaluator, timing each ``simulate`` the step makes."""

        def simulate(self, placement, schedule=False):
            start = time.perf_counter()
            result = evaluator.simulate(placement, schedule=schedule)
            simulate_seconds.append(time.perf_counter() - start)
            return result

    env.evaluator = Timed()
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, task.n_devices, size=warmup + steps)
    for action in actions[:warmup]:
        env.step(int(action))
    simulate_seconds.clear()
    step_seconds, mask_seconds = [], []
    for action in actions[warmup:]:
        start = time.perf_counter()
        env.step(int(action))
        step_seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        env.action_masks()
        mask_seconds.append(time.perf_counter() - start)
    return {"n_nodes": env.n_nodes, "step": step_seconds, "simulate": simulate_seconds, "masks": mask_seconds}


def run_case(root: str | None, case: str, steps: int, warmup: int) -> dict:
    """`one_case` in a fresh process, importing the package from ``root`` (None: this checkout)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = root or str(Path(__file__).resolve().parents[2])
    command = [sys.executable, __file__, "--one", case, "--steps", str(steps), "--warmup", str(warmup)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=env["PYTHONPATH"])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", default=None,
                        help="another checkout's root, timed in turn with this one")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_case(args.one, args.steps, args.warmup)))
        return
    print(f"load before: {os.getloadavg()[0]:.2f} (1-min), {os.cpu_count()} cores")
    roots = {"this": None} | ({"against": args.against} if args.against else {})
    times: dict[tuple[str, str], dict[str, list[float]]] = {}
    for _ in range(args.rounds):
        for case in args.cases.split(","):
            for name, root in roots.items():
                result = run_case(root, case, args.steps, args.warmup)
                slot = times.setdefault((case, name), {"step": [], "simulate": [], "masks": []})
                for key in slot:
                    slot[key] += result[key]
    print(f"load after: {os.getloadavg()[0]:.2f} (1-min)")
    print(f"{'case':<16}{'code':<9}{'step ms':>9}{'simulate ms':>13}{'rest ms':>9}{'sim share':>11}"
          f"{'masks ms':>10}")
    for (case, name), slot in times.items():
        step, sim = np.array(slot["step"]), np.array(slot["simulate"])
        print(f"{case:<16}{name:<9}{np.median(step) * 1e3:>9.1f}{np.median(sim) * 1e3:>13.1f}"
              f"{np.median(step - sim) * 1e3:>9.2f}{np.median(sim / step):>11.3f}"
              f"{np.median(slot['masks']) * 1e3:>10.3f}")


if __name__ == "__main__":
    main()
