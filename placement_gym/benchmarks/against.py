"""The same single calls timed with another checkout's simulator, in a subprocess, in rounds that
alternate with this one's (`AgainstRunner`, `compare_against`)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys
import time
from typing import Any

from placement_gym.benchmarks.simulators import BenchRow
from placement_gym.benchmarks.timing import bench_placements, in_turn
from placement_gym.cost_model import simulate
from placement_gym.task.compiled import Task

# Runs under the other checkout (PYTHONPATH), so it uses only what the project had at commit 4bd99e3:
# get_task, layered_graph, load_cluster, make_task, simulate (and, for a task id's row only,
# parse_task_id: a checkout without it or without that task answers that row with an error). Lines of
# JSON in, lines of JSON out.
AGAINST_SCRIPT = r"""
import hashlib, json, sys, time
import numpy as np
out, sys.stdout = sys.stdout, sys.stderr  # only the replies go to the pipe
import placement_gym
from placement_gym.cluster import load_cluster
from placement_gym.cost_model import simulate
from placement_gym.graph.synthetic import layered_graph
from placement_gym.task.compiled import make_task
from placement_gym.task.named import get_task
def reply(value):
    out.write(json.dumps(value) + "\n")
    out.flush()
reply({"module": placement_gym.__file__})
task = placements = None
turn = 0
for line in sys.stdin:
    ask = json.loads(line)
    if ask["do"] == "load":
        spec = ask["task"]
        try:  # a graph that commit does not have: that row goes without, the others still run
            if "task" in spec:
                from placement_gym.task.named import parse_task_id
                task = parse_task_id(spec["task"])
            else:
                task = (get_task(spec["graph"], spec["cluster"], spec["objective"]) if "graph" in spec else
                        make_task(layered_graph(spec["layered"]), load_cluster(spec["cluster"]),
                                  spec["objective"]))
        except Exception as error:
            reply({"error": f"{type(error).__name__}: {error}"})
            continue
        placements = np.random.default_rng(ask["seed"]).integers(
            0, task.n_devices, size=(ask["batch"], task.n_forward))
        runtimes = [simulate(task, p).runtime for p in placements]  # also the warm-up
        turn = 0
        reply({"ops": task.n_ops, "runtimes": runtimes,
               "placements": hashlib.sha256(placements.tobytes()).hexdigest()})
    elif ask["do"] == "time":
        start = time.perf_counter()
        for _ in range(ask["calls"]):
            simulate(task, placements[turn % len(placements)])
            turn += 1
        reply({"seconds": time.perf_counter() - start})
"""

AGAINST_ROUNDS = 5


class AgainstRunner:
    """Another checkout's simulator in a subprocess (``python -c AGAINST_SCRIPT`` with PYTHONPATH set
    to the checkout), so that one run times both side by side; `close` ends it."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.path.abspath(path)
        if not os.path.isdir(os.path.join(self.path, "placement_gym")):
            raise ValueError(f"{path} is not a checkout of placement-gym (no placement_gym folder in it)")
        env = {**os.environ, "PYTHONPATH": self.path}
        self.process = subprocess.Popen([sys.executable, "-c", AGAINST_SCRIPT], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env, cwd=self.path)
        module = self._ask(None)["module"]
        if not os.path.abspath(module).startswith(os.path.join(self.path, "")):
            self.close()
            raise ValueError(f"the subprocess imported placement_gym from {module}, not from {self.path}")

    def _ask(self, request: dict[str, Any] | None) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        if request is not None:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise ValueError(f"the simulator of {self.path} stopped (exit code {code}; its error is above)")
        return json.loads(line)

    def load(self, spec: dict[str, Any], seed: int, batch: int) -> dict[str, Any]:
        """Build the task of ``spec`` and its ``batch`` placements of ``seed`` there: its op count, its
        runtimes of the placements and the placements' sha256; or ``error``, why it cannot."""
        return self._ask({"do": "load", "task": spec, "seed": seed, "batch": batch})

    def time(self, calls: int) -> float:
        """Seconds that ``calls`` single calls take there, over the placements in turn."""
        return float(self._ask({"do": "time", "calls": calls})["seconds"])

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


def compare_against(task: Task, spec: dict[str, Any], runner: AgainstRunner, row: BenchRow, seconds: float,
                    repeats: int, seed: int = 0) -> BenchRow:
    """``row`` with its ``*_against`` fields: the single calls of both simulators on the row's seeded
    placements, in `AGAINST_ROUNDS` alternating rounds of the same number of calls (ours first):
    ``ns_per_op_against`` theirs, ``ns_per_op_alternating`` ours in those rounds, ``speedup_against``
    the first over the second; ``identical_against``: whether both give the same runtimes of the
    placements, bit for bit (and the same placements and op count)."""
    placements = bench_placements(task, row.batch, seed)
    theirs = runner.load(spec, seed, row.batch)
    if "error" in theirs:
        print(f"{row.graph}: no comparison, {runner.path} cannot build it ({theirs['error']})",
              file=sys.stderr)
        return row
    ours = [simulate(task, p).runtime for p in placements]
    identical = (theirs["placements"] == hashlib.sha256(placements.tobytes()).hexdigest()
                 and theirs["ops"] == task.n_ops and theirs["runtimes"] == ours)
    calls = max(math.ceil(repeats / AGAINST_ROUNDS),
                math.ceil(seconds / AGAINST_ROUNDS * row.fast_evals_per_s))
    single = in_turn(lambda p: simulate(task, p), placements)
    our_s = their_s = 0.0
    for _ in range(AGAINST_ROUNDS):
        start = time.perf_counter()
        for _ in range(calls):
            single()
        our_s += time.perf_counter() - start
        their_s += runner.time(calls)
    total = calls * AGAINST_ROUNDS
    against, alternating = 1e9 * their_s / total / theirs["ops"], 1e9 * our_s / total / task.n_ops
    return dataclasses.replace(row, ns_per_op_against=against, ns_per_op_alternating=alternating,
                               speedup_against=against / alternating, identical_against=bool(identical))
