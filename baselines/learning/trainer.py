"""Training machinery shared by the learned agents: the agent base class, their registry, and
`train` (budget in evaluations, progress bar, checkpoints, learning curve, best placement)."""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from baselines.learning.evaluator import BudgetedEvaluator, BudgetExhausted
from baselines.registry import AgentResult, register
from placement_gym.evaluator import COST_MODEL
from placement_gym.placements import placement_to_dict
from placement_gym.task import Task
from placement_gym.task_ids import identity_mismatch, task_identity

DEFAULT_BUDGET = 1000


class LearnedAgent:
    """A placement policy trained against the cost model.

    Subclasses set `name` and `description`, build their networks in ``__init__(task, seed,
    **config)`` (config keys are the documented hyper-parameters), and implement `iteration`:
    sample placements, evaluate them through the evaluator (never `simulate` directly: the budget
    counts every evaluation), update. All state needed to resume (networks, optimisers, the numpy
    generator, baselines) goes through `state_dict` / `load_state_dict`. Agents that can move to
    another graph keeping their weights (GNNs) implement `set_task`."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""

    def __init__(self, task: Task, seed: int = 0, **config: Any) -> None:
        self.task = task
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        if config:
            raise ValueError(f"agent {self.name!r} takes no option(s) {', '.join(sorted(config))}")

    def iteration(self, evaluator: BudgetedEvaluator) -> dict[str, float]:
        """One training iteration; returns scalars worth logging (loss, mean reward...)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]

    def set_task(self, task: Task) -> None:
        raise NotImplementedError(f"agent {self.name!r} cannot move to another graph")


LEARNED_AGENTS: dict[str, type[LearnedAgent]] = {}


def register_learned(cls: type[LearnedAgent]) -> type[LearnedAgent]:
    """Class decorator: make a learned agent known to `train` and, as an agent
    ``agent(task, seed, budget)``, to the baselines registry (``placement-gym evaluate --agent``;
    not run by ``--agent all``, where a training run would dominate)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    LEARNED_AGENTS[cls.name] = cls

    def agent(task: Task, seed: int = 0, budget: int | None = None, *, evaluator: Any = None) -> AgentResult:
        budget = budget or DEFAULT_BUDGET
        result = train(cls.name, task, budget, seed=seed, progress=False, evaluator=evaluator)
        info = {"best_runtime": result.best_runtime, "iterations": result.iterations}
        if evaluator is not None:  # the default's info stays as it was
            info["scored_by"] = result.scored_by
        return AgentResult(result.best_placement, result.evaluations, info)

    register(cls.name, cls.description, in_all=lambda task: False)(agent)
    return cls


def get_learned(name: str) -> type[LearnedAgent]:
    from baselines.registry import _load_all

    _load_all()
    if name not in LEARNED_AGENTS:
        raise ValueError(f"unknown learned agent {name!r}; allowed: {', '.join(sorted(LEARNED_AGENTS))}")
    return LEARNED_AGENTS[name]


@dataclass
class TrainResult:
    """The outcome of `train`: the best placement seen and how much it cost. ``scored_by`` says
    what scored the runtimes (the evaluator's ``name``: ``"cost_model"``, ``"profiled"``, ``"real"``...)."""

    agent: str
    task: str
    seed: int
    best_runtime: float
    best_feasible: bool
    best_placement: np.ndarray
    evaluations: int
    iterations: int
    wall_s: float
    curve: list[tuple[int, float, bool, float]]
    files: dict[str, str]
    scored_by: str = COST_MODEL

    @property
    def evaluations_per_s(self) -> float:
        return self.evaluations / self.wall_s if self.wall_s > 0 else float("inf")

    def to_dict(self, task: Task) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "task": self.task,
            "seed": self.seed,
            "best_runtime": self.best_runtime,
            "scored_by": self.scored_by,
            "feasible": self.best_feasible,
            "evaluations": self.evaluations,
            "iterations": self.iterations,
            "wall_s": self.wall_s,
            "evaluations_per_s": self.evaluations_per_s,
            "best_placement": placement_to_dict(task, self.best_placement),
            "files": self.files,
        }


def _progress_bar(total: int, initial: int, enabled: bool, label: str):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc=label, unit="eval", dynamic_ncols=True)


def train(
    agent: str,
    task: Task,
    budget: int,
    seed: int = 0,
    out_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    checkpoint_every: int = 20,
    threads: int | None = 1,
    evaluator: Any = None,
    **config: Any,
) -> TrainResult:
    """Train ``agent`` on ``task`` until ``budget`` evaluations are spent; deterministic for a seed
    on the CPU. With ``out_dir``: a checkpoint every ``checkpoint_every`` iterations and at the end
    (``checkpoint.pt``; ``resume=True`` continues from it, and refuses one made on another task:
    `placement_gym.task_ids.task_identity`), the learning curve (``curve.csv``, and
    ``curve.png`` when matplotlib is installed) and the best placement (``best_placement.json``).
    A checkpoint may be resumed with a larger ``budget`` to continue the run. ``threads``: torch's
    intra-op threads for this process (default 1: the policies are small, and one thread is faster
    and leaves the other cores to simulation or parallel runs; None leaves torch's setting).
    ``evaluator``: what scores the placements (`BudgetedEvaluator`'s ``evaluator``: None is the cost
    model; or any `placement_gym.evaluator.Evaluator`: `placement_gym.real.evaluators.make_evaluator`'s,
    a `RayEvaluatorPool`...);
    a checkpoint resumes only with the same kind (``scored_by``)."""
    import torch

    if threads is not None:
        torch.set_num_threads(int(threads))

    cls = get_learned(agent)
    torch.manual_seed(seed)
    model = cls(task, seed=seed, **config)
    # Named `budgeted`: every evaluation of the run goes through it, scored by ``evaluator``.
    budgeted = BudgetedEvaluator(task, budget, evaluator)
    out = Path(out_dir) if out_dir is not None else None
    checkpoint = out / "checkpoint.pt" if out else None
    iterations, wall_before = 0, 0.0
    if resume:
        if checkpoint is None or not checkpoint.is_file():
            raise ValueError(f"nothing to resume: no checkpoint in {out_dir}")
        state = torch.load(checkpoint, weights_only=False)
        if (state["agent"], state["task"], state["seed"]) != (agent, task.id, seed):
            raise ValueError(
                f"checkpoint {checkpoint} is of {state['agent']} on {state['task']} (seed {state['seed']}), "
                f"not {agent} on {task.id} (seed {seed})"
            )
        _check_same_task(checkpoint, state, task)
        model.load_state_dict(state["model"])
        budgeted.load_state_dict(state["evaluator"])
        torch.set_rng_state(state["torch_rng"])
        iterations, wall_before = state["iterations"], state["wall_s"]

    def save() -> None:
        if checkpoint is not None:
            out.mkdir(parents=True, exist_ok=True)
            torch.save(
                {
                    "agent": agent,
                    "task": task.id,
                    # The task's content, checked on resume: an id alone was once shared by two graphs.
                    "task_identity": task_identity(task),
                    "seed": seed,
                    "model": model.state_dict(),
                    "evaluator": budgeted.state_dict(),
                    "torch_rng": torch.get_rng_state(),
                    "iterations": iterations,
                    "wall_s": wall_before + time.perf_counter() - started,
                },
                checkpoint,
            )

    started = time.perf_counter()
    bar = _progress_bar(budget, budgeted.used, progress, f"{agent} on {task.id}")
    while budgeted.remaining > 0:
        before = budgeted.used
        try:
            model.iteration(budgeted)
        except BudgetExhausted:
            break  # the agent asked for more than was left: nothing was evaluated, training ends
        if budgeted.used == before:
            raise RuntimeError(f"agent {agent!r} made an iteration without evaluating anything")
        iterations += 1
        if bar is not None:
            bar.update(budgeted.used - before)
            if budgeted.best_feasible:
                bar.set_postfix_str(f"best {budgeted.best_runtime * 1e3:,.2f} ms")
        if checkpoint is not None and iterations % checkpoint_every == 0:
            save()
    if bar is not None:
        bar.close()
    save()
    wall_s = wall_before + time.perf_counter() - started
    files = _write_outputs(out, task, agent, budgeted) if out else {}
    return TrainResult(
        agent=agent,
        task=task.id,
        seed=seed,
        best_runtime=budgeted.best_runtime,
        best_feasible=budgeted.best_feasible,
        best_placement=budgeted.best_placement,
        evaluations=budgeted.used,
        iterations=iterations,
        wall_s=wall_s,
        curve=budgeted.curve,
        files=files | ({"checkpoint": str(checkpoint)} if checkpoint else {}),
        scored_by=budgeted.scored_by,
    )


def _check_same_task(checkpoint: Path, state: dict[str, Any], task: Task) -> None:
    """Refuse to resume ``checkpoint`` on another task than its own: another graph or cluster
    content, objective or optimizer, even under the same name (`task_identity`)."""
    recorded = state.get("task_identity")
    if recorded is None:
        raise ValueError(
            f"checkpoint {checkpoint} does not record the content of its task (it was written by an older "
            f"placement-gym), so nothing shows it was made on task {task.id}; start a new run "
            "(another --out, or remove the checkpoint)"
        )
    mismatch = identity_mismatch(recorded, task)
    if mismatch:
        raise ValueError(
            f"checkpoint {checkpoint} was made on task {recorded.get('id')}, another task than {task.id}: "
            f"{mismatch}; a run continues only on the task it started on"
        )


def _write_outputs(out: Path, task: Task, agent: str, evaluator: BudgetedEvaluator) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    files = {"curve_csv": str(out / "curve.csv"), "best_placement": str(out / "best_placement.json")}
    with open(out / "curve.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["evaluation", "runtime_s", "feasible", "best_runtime_s"])
        writer.writerows(evaluator.curve)
    (out / "best_placement.json").write_text(
        json.dumps(
            {
                "task": task.id,
                "agent": agent,
                "runtime": evaluator.best_runtime,
                "scored_by": evaluator.scored_by,
                "feasible": evaluator.best_feasible,
                "placement": placement_to_dict(task, evaluator.best_placement),
            },
            indent=1,
        )
        + "\n"
    )
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError:
        return files
    curve = np.array([(n, r, b) for n, r, _, b in evaluator.curve], dtype=float)
    figure = Figure(figsize=(7, 4))
    axes = figure.add_subplot()
    axes.scatter(curve[:, 0], curve[:, 1] * 1e3, s=3, alpha=0.3, label="sampled placement")
    axes.plot(curve[:, 0], curve[:, 2] * 1e3, color="black", label="best feasible so far")
    axes.set(xlabel="evaluations", ylabel="runtime (ms)", yscale="log", title=f"{agent} on {task.id}")
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "curve.png", dpi=110)
    files["curve_png"] = str(out / "curve.png")
    return files
