"""`train`: a learned agent trained on a budget of evaluations (checkpoints, the learning curve, the
best placement; what it shows and writes is `baselines.learning.outputs`), and `register_learned`,
which makes a `baselines.learning.agent.LearnedAgent` known to it and to the baselines registry.

`train` also runs the search agents of the registry that take a `placement_gym.evaluation.budget.Budget`
(`baselines.search`: ``anneal``, ``cem``; `trainable_agents` lists them), so that they get the same
learning curve, read from the budget; their placements are exactly those of a plain run.

Reference lines. With an output folder or a TensorBoard folder, a run also computes the runtimes
every curve is read against (`references`): the best single device, HEFT and the lower bound, on
the scale of the evaluations (the cost model, or the profiled one); for measured runtimes only the
best single device, run once through the evaluator, since the other two are cost-model figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from baselines.learning.agent import LEARNED_AGENTS, LearnedAgent, get_learned
from baselines.learning.outputs import (
    BEST_SINGLE,
    TensorBoardLog,
    progress_bar,
    references,
    run_name,
    tensorboard_writer,
    write_outputs,
)
from baselines.registry import OPTIONAL_AGENTS, budget_agents, get_agent, register
from placement_gym.common.threads import set_torch_threads
from placement_gym.evaluation.agents import INSTALL_HINT, AgentResult
from placement_gym.evaluation.budget import Budget, BudgetExhausted
from placement_gym.evaluation.evaluator import COST_MODEL
from placement_gym.evaluation.placements import placement_to_dict
from placement_gym.task.compiled import Task
from placement_gym.task.ids import identity_mismatch, task_identity

DEFAULT_BUDGET = 1000
CHECKPOINT = "checkpoint.pt"  # the file name of a run's checkpoint in its output folder


def register_learned(cls: type[LearnedAgent]) -> type[LearnedAgent]:
    """Class decorator: make a learned agent known to `train` and, as an agent
    ``agent(task, seed, budget)``, to the baselines registry (``placement-gym evaluate --agent``;
    not run by ``--agent all``, where a training run would dominate)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in OPTIONAL_AGENTS:  # described there, so that `agents` describes it without torch
        cls.description = OPTIONAL_AGENTS[cls.name].description
    LEARNED_AGENTS[cls.name] = cls

    def agent(task: Task, seed: int = 0, budget: int | None = None, *, evaluator: Any = None) -> AgentResult:
        budget = budget or DEFAULT_BUDGET
        result = train(cls.name, task, budget, seed=seed, progress=False, evaluator=evaluator)
        return _agent_result(result, report_scorer=evaluator is not None)

    register(cls.name, cls.description, in_all=lambda task: False)(agent)
    return cls


def _agent_result(result: TrainResult, report_scorer: bool = False) -> AgentResult:
    info = {"best_runtime": result.best_runtime, "iterations": result.iterations}
    if report_scorer:  # the cost model's info stays as it was
        info["scored_by"] = result.scored_by
    return AgentResult(result.best_placement, result.evaluations, info)


def resumable_agent(name: str, folder: str | Path, checkpoint_every: int = 5) -> Callable[..., AgentResult]:
    """Learned agent ``name`` as the registry gives it, ``agent(task, seed, budget)`` (`register_learned`),
    made to survive a stop: its run writes a checkpoint to ``folder`` every ``checkpoint_every``
    iterations (``outputs=False``: nothing else, so the task counts the agent's evaluations alone) and,
    when ``folder`` holds one, continues from it. The result, the evaluations the task counted and their
    trace are those of the registry's agent run without a stop (every learned agent resumes exactly);
    ValueError for a name that is not a learned agent (`checkpoint_wall_s` gives the time the stopped
    part took)."""
    get_learned(name)
    folder = Path(folder)

    def agent(task: Task, seed: int = 0, budget: int | None = None) -> AgentResult:
        resume = (folder / CHECKPOINT).is_file()
        result = train(name, task, budget or DEFAULT_BUDGET, seed=seed, out_dir=folder, resume=resume,
                       progress=False, checkpoint_every=checkpoint_every, outputs=False)
        return _agent_result(result)

    return agent


def checkpoint_wall_s(folder: str | Path) -> float:
    """The seconds the run whose checkpoint ``folder`` holds had trained when it was written (0.0
    without one)."""
    path = Path(folder) / CHECKPOINT
    if not path.is_file():
        return 0.0
    import torch

    # Memory-mapped: the weights, gigabytes for some agents, are not read.
    return float(torch.load(path, weights_only=False, mmap=True)["wall_s"])


def search_agents() -> list[str]:
    """The registry's agents, not learned ones, that take a `Budget` (``register(...,
    takes_budget=True)``), in registration order: `train` runs them and draws their curves."""
    return [name for name in budget_agents() if name not in LEARNED_AGENTS]


def trainable_agents() -> list[str]:
    """What ``placement-gym train --agent`` takes: the learned agents (sorted), then the search agents."""
    searches = search_agents()  # first: it imports every agent module, the learned ones included
    return [*sorted(LEARNED_AGENTS), *searches]


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
    # `references` of the run (empty when it wrote no output folder and no TensorBoard log).
    references: dict[str, float] = field(default_factory=dict)

    @property
    def evaluations_per_s(self) -> float:
        return self.evaluations / self.wall_s if self.wall_s > 0 else float("inf")

    @property
    def best_single_runtime(self) -> float | None:
        """The best single device's runtime on the scale of the evaluations, when computed."""
        return self.references.get(BEST_SINGLE)

    @property
    def speedup(self) -> float | None:
        """Best single device runtime / best runtime found (None when either is missing, or the
        best placement found does not fit in memory)."""
        single = self.best_single_runtime
        if single is None or not self.best_feasible or not self.best_runtime > 0:
            return None
        return single / self.best_runtime

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
            "references": self.references,
            "speedup": self.speedup,
            "files": self.files,
        }


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
    tensorboard: str | Path | None = None,
    outputs: bool = True,
    **config: Any,
) -> TrainResult:
    """Train ``agent`` on ``task`` until ``budget`` evaluations are spent; deterministic for a seed
    on the CPU. With ``out_dir``: a checkpoint every ``checkpoint_every`` iterations and at the end
    (``checkpoint.pt``, replaced whole, so a run killed while writing it keeps the one before;
    ``resume=True`` continues from it, and refuses one made on another task:
    `placement_gym.task.ids.task_identity`), the learning curve (``curve.csv``, and
    ``curve.png`` when matplotlib is installed) and the best placement (``best_placement.json``);
    ``outputs=False`` writes the checkpoint alone and computes no `references` (which count nothing on
    ``task``: they are computed on a copy). The checkpoint keeps what ``task`` counted of the run
    (`Task.evaluations_since`), so after a resume ``task.evaluations`` and its trace read as those
    of a run never stopped. A checkpoint may be resumed with a larger ``budget`` to continue the
    run. ``threads``: torch's intra-op threads for this process (default 1: the policies are small,
    and one thread is faster and leaves the other cores to simulation or parallel runs; None leaves
    torch's setting).
    ``evaluator``: what scores the placements (`Budget`'s ``evaluator``: None is the cost model; or any
    `placement_gym.evaluation.evaluator.Evaluator`: `placement_gym.evaluation.evaluator.make_evaluator`'s, a
    `RayEvaluatorPool`...);
    a checkpoint resumes only with the same kind (``scored_by``). ``tensorboard``: a folder; the run
    logs its curve to ``<folder>/<agent>-<graph>-<cluster>-<objective>-s<seed>`` (`TensorBoardLog` lists the
    tags; needs torch and the tensorboard package). With ``out_dir`` or ``tensorboard`` the run
    also computes its `references` (``curve.png`` draws them as labelled lines).

    ``agent`` may also be a search agent (`search_agents`: ``anneal``, ``cem``): it runs once with
    the budget, its placement exactly that of a plain run, and reports the same curve and files
    (no checkpoint: ``resume`` is refused; ``config`` goes to the agent as keyword options)."""
    if agent not in LEARNED_AGENTS and agent in search_agents():
        return _train_search(agent, task, budget, seed, out_dir, resume, progress, evaluator, tensorboard,
                             outputs, **config)
    try:
        import torch
    except ImportError as error:
        raise ImportError(f"training {agent!r} needs torch ({error}): {INSTALL_HINT}") from None

    if threads is not None:
        set_torch_threads(threads)

    cls = get_learned(agent)
    counted_from = task.evaluations
    torch.manual_seed(seed)
    model = cls(task, seed=seed, **config)
    # Named `budgeted`: every evaluation of the run goes through it, scored by ``evaluator``.
    budgeted = Budget(task, budget, evaluator)
    out = Path(out_dir) if out_dir is not None else None
    checkpoint = out / CHECKPOINT if out else None
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
        if "task_evaluations" in state:  # a checkpoint written before it was kept leaves the count as is
            task.resume_evaluations(counted_from, state["task_evaluations"])

    def save() -> None:
        if checkpoint is not None:
            out.mkdir(parents=True, exist_ok=True)
            partial = checkpoint.with_name(checkpoint.name + ".partial")
            torch.save(
                {
                    "agent": agent,
                    "task": task.id,
                    # The task's content, checked on resume: an id alone was once shared by two graphs.
                    "task_identity": task_identity(task),
                    "seed": seed,
                    "model": model.state_dict(),
                    "evaluator": budgeted.state_dict(),
                    "task_evaluations": task.evaluations_since(counted_from),
                    "torch_rng": torch.get_rng_state(),
                    "iterations": iterations,
                    "wall_s": wall_before + time.perf_counter() - started,
                },
                partial,
            )
            partial.replace(checkpoint)

    board = TensorBoardLog(tensorboard_writer(tensorboard, run_name(agent, task, seed, budgeted.scored_by)))
    first_step = budgeted.used
    started = time.perf_counter()
    bar = progress_bar(budget, budgeted.used, progress, f"{agent} on {task.id}")
    while budgeted.remaining > 0:
        before, rows_before = budgeted.used, len(budgeted.curve)
        try:
            stats = model.iteration(budgeted)
        except BudgetExhausted:
            break  # the agent asked for more than was left: nothing was evaluated, training ends
        if budgeted.used == before:
            raise RuntimeError(f"agent {agent!r} made an iteration without evaluating anything")
        iterations += 1
        board.update(budgeted.used, iterations, budgeted.curve[rows_before:], stats)
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
    wants_references = outputs and (out is not None or tensorboard is not None)
    found = references(task, evaluator) if wants_references else {}
    board.close(first_step, budgeted.used, found)
    files = write_outputs(out, task, agent, budgeted.curve, budgeted.best_runtime, budgeted.best_feasible,
                           budgeted.best_placement, budgeted.scored_by, found) if out and outputs else {}
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
        references=found,
    )


def _train_search(
    agent: str,
    task: Task,
    budget: int,
    seed: int,
    out_dir: str | Path | None,
    resume: bool,
    progress: bool,
    evaluator: Any,
    tensorboard: str | Path | None,
    outputs: bool,
    **config: Any,
) -> TrainResult:
    """`train` of a search agent: one run of it through a `Budget`, whose curve the run reports (the
    placements it evaluates and returns are those of a plain run)."""
    if resume:
        raise ValueError(
            f"--resume is for learned agents: {agent} is a search that keeps no checkpoint "
            "(a run again with the same seed and budget gives the same placement)"
        )
    budgeted = Budget(task, budget, evaluator)
    board = TensorBoardLog(tensorboard_writer(tensorboard, run_name(agent, task, seed, budgeted.scored_by)))
    bar = progress_bar(budget, 0, progress, f"{agent} on {task.id}")
    updates = 0

    def watch(spent: Budget, new: int) -> None:
        nonlocal updates
        updates += 1
        board.update(spent.used, updates, spent.curve[-new:], None)
        if bar is not None:
            bar.update(spent.used - bar.n)  # the start agents' own evaluations are counted in `used` too
            if spent.best_feasible:
                bar.set_postfix_str(f"best {spent.best_runtime * 1e3:,.2f} ms")

    budgeted.watch(watch)
    started = time.perf_counter()
    try:
        result = get_agent(agent)(task, seed=seed, budget=budgeted, **config)
    finally:
        if bar is not None:
            bar.close()
    curve = budgeted.curve
    wall_s = time.perf_counter() - started
    info = result.info
    out = Path(out_dir) if out_dir is not None else None
    found = references(task, evaluator) if outputs and (out is not None or tensorboard is not None) else {}
    board.close(curve[0][0] if curve else 0, int(result.evaluations), found)
    scored_by = info.get("scored_by", COST_MODEL)
    placement = task.check_placement(result.placement)
    files = write_outputs(out, task, agent, curve, float(info["runtime"]), bool(info["feasible"]),
                           placement, scored_by, found) if out and outputs else {}
    return TrainResult(
        agent=agent,
        task=task.id,
        seed=seed,
        best_runtime=float(info["runtime"]),
        best_feasible=bool(info["feasible"]),
        best_placement=placement,
        evaluations=int(result.evaluations),
        iterations=int(info.get("steps", info.get("generations", updates))),
        wall_s=wall_s,
        curve=curve,
        files=files,
        scored_by=scored_by,
        references=found,
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


