"""Fill a generalisation suite drawn from a dataset (its suite file's ``measure.dataset_sample``): the
baselines on its test graphs x clusters, at 1, 100 and 1,000 evaluations per task.

Run from the repository root (``--dir``, default ``leaderboard``; submissions go to its ``submissions/``
folder and the suite's page is rendered)::

    python -m baselines.leaderboard_fill.generalisation_v2 [--agents heft,anneal,placeto] [--seeds 0,1,2]
        [--budgets 1,100,1000] [--portfolio-budget 2000] [--tasks N] [--dir leaderboard] [--suite VERSION]
        [--no-render]
    python -m baselines.leaderboard_fill.generalisation_v2 [--suite VERSION] --write-suite   # measure, stop

``--suite`` is a suite whose file names this script in its ``fill`` (default: the current one); with
``--write-suite`` a draft's too, so that a new suite's tasks are measured before its status is set to
``accepted`` (docs/leaderboard.md, "Adding a suite"). The suites filled: ``gen-v2`` (synthetic-v1) and
``gen-arch-v1`` (architectures-v1, with clusters of 5, 9 and 12 devices). The
entries (`placement_gym.leaderboard.generalisation`: what the suite holds and what may be trained on):

* the heuristics of `HEURISTICS`, at their default settings, once (seeded ones, `random`, per seed):
  they evaluate at most once per task, so each is in every budget track;
* `anneal` and `move-bandit` at each budget of ``--budgets`` from 100, per seed: no pre-training, the
  budget spent on the task. At one evaluation they cannot run (their start alone, the best of the
  constructive heuristics, takes 26 evaluations), so the zero-shot track has the heuristics only; a task
  whose start takes more than the budget (the heuristics' memory retries: up to 182 evaluations on
  gen-arch-v1's K80 tasks) is left out of that budget's file and scores 0 (`startable_run`);
* `placeto` and `hsdag` pre-trained on the dataset's train split: per seed, `PRETRAIN_GRAPHS` training
  graphs drawn from the split with the seed, each on the suite's clusters (the test clusters: the track
  tests unseen graphs, not unseen machines), `PRETRAIN_BUDGET` evaluations per training task,
  round-robin (`baselines.learning.generalize.train_on_tasks`), counted by the harness
  (`counted_pretraining`). Then per budget B: ``<agent>-zero-shot`` (B = 1: the greedy placement of the
  policy) and ``<agent>-finetuned`` (B = 100, 1,000: the greedy placement, then B - 1 evaluations of
  training on the task; the best kept), each task from a copy of the pre-trained model. Their policy has
  one output per device, so they run only on a suite whose clusters have one device count (gen-v2's,
  not gen-arch-v1's);
* the agents of `PRETRAINED` (``pretrained-list``, ``pretrained-gnn``): each with its shipped
  checkpoint, pre-trained outside the harness; the agent is registered with ``pretraining=``
  (`baselines.registry.declared_pretraining` gives the compute its entries declare) and the module
  that registers it has ``load_checkpoint()``, whose training record (``seed``; ``config``:
  ``dataset`` or ``datasets``, optional ``max_ops`` and ``clusters``) gives ``trained_on`` and the
  description (`checkpoint_training`), ``trained_on`` checked against the suite's split first; per
  seed and budget: one evaluation (B = 1), or B evaluations as the agent spends them (both: move-bandit
  from the better of its placement and the heuristics' best);
* ``best-known``: the best-known portfolio (`baselines.portfolio`) at ``--portfolio-budget``
  evaluations per task, seed 0: it makes the track's best known runtimes (above the tracks, so it
  ranks in none).

Everything is seeded; torch runs one thread.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from baselines.leaderboard_fill.generalisation import held_out_agent
from baselines.registry import agent_descriptions, declared_pretraining, default_agent, get_agent
from placement_gym.common.threads import set_torch_threads
from placement_gym.datasets import get_dataset
from placement_gym.leaderboard import evaluate, get_suite, render, save_submission, submission_filename
from placement_gym.leaderboard.generalisation import trained_on_problems
from placement_gym.leaderboard.harness import counted_pretraining
from placement_gym.leaderboard.registry import SUITE_FOLDER, suite_registry
from placement_gym.leaderboard.suite_measure import write_suite_file
from placement_gym.leaderboard.suite_spec import DatasetSample
from placement_gym.task.named import get_task, named_cluster

FILL = Path(__file__).stem  # how a suite file's "fill" names this script
LEADERBOARD = Path("leaderboard")
HEURISTICS = ("best-single", "round-robin", "random", "expert", "partition", "heft", "cpop", "m-topo",
              "m-etf", "m-sct")
SEEDED_HEURISTICS = ("random",)
SEARCHES = ("anneal", "move-bandit")
LEARNED = ("placeto", "hsdag")
# Shipped pre-trained, each entered with its checkpoint's training record (`checkpoint_training`): a new
# such agent is one more name here.
PRETRAINED = ("pretrained-list", "pretrained-gnn")
BUDGETS = (1, 100, 1_000)
SEEDS = (0, 1, 2)
SEARCH_MIN_BUDGET = 100  # anneal's start (the best of the constructive heuristics) takes 26 evaluations
PORTFOLIO_BUDGET = 2_000
PRETRAIN_GRAPHS = 30
PRETRAIN_BUDGET = 300
SWITCH_EVERY = 100
AUTHORS = ["placement-gym baselines"]


def _save(submission: dict, args: argparse.Namespace, started: float) -> None:
    path = save_submission(submission, args.dir / "submissions" / submission_filename(submission))
    print(f"  {path.name} ({time.perf_counter() - started:.0f} s)", flush=True)


def _run(agent, args: argparse.Namespace, *, algorithm: str, seed: int, budget: int | None,
         description: str, trained_on: list[str], pretraining: dict) -> None:
    started = time.perf_counter()
    suite = get_suite(args.suite)
    if args.tasks:
        suite = suite.subset(suite.task_ids[:args.tasks])

    def run(task_ids) -> dict:
        return evaluate(agent, suite.subset(task_ids), budget, algorithm=algorithm, authors=AUTHORS,
                        description=description, seed=seed, trained_on=trained_on,
                        track="generalisation", pretraining=pretraining)

    submission = run(suite.task_ids) if budget is None else startable_run(run, suite.task_ids, budget)
    _save(submission, args, started)


def startable_run(run: Callable[[list[str]], dict], task_ids: tuple[str, ...], budget: int) -> dict:
    """``run(task_ids)`` (a submission) task by task, leaving out each task whose search start alone
    takes more than ``budget`` evaluations (`baselines.search.find_start` refuses it: on gen-arch-v1's
    K80 tasks the constructive heuristics' memory retries take up to 182): the file holds the other
    tasks, and the page scores a task not run 0. Any other error stops the fill."""
    parts = []
    for task_id in task_ids:
        try:
            parts.append(run([task_id]))
        except ValueError as error:
            if not str(error).startswith(f"budget {budget} is too small"):
                raise
            print(f"  not run: {task_id} ({error})", flush=True)
    if not parts:
        raise SystemExit(f"no task of the suite can start within {budget} evaluations")
    # Every task's result is independent of the others (its own copy of the task, the same seed), so
    # the one-task runs make the whole run's file.
    return {**parts[0], "results": {t: r for part in parts for t, r in part["results"].items()}}


NO_PRETRAINING = {"evaluations": 0, "wall_s": 0.0, "machine": "none", "counted": "harness"}


def _sample(args: argparse.Namespace) -> DatasetSample:
    """The dataset sample of the suite filled."""
    sample = get_suite(args.suite).spec.measure.dataset_sample
    if sample is None:
        raise SystemExit(f"suite {args.suite} is not drawn from a dataset (no measure.dataset_sample)")
    return sample


def untrained(args: argparse.Namespace) -> list[str]:
    """What an entry that learns nothing before the scored run "trained on": the split it may use
    (nothing of it was used)."""
    return [f"{_sample(args).dataset}:train"]


def fill_heuristic(name: str, seed: int, args: argparse.Namespace) -> None:
    print(f"{name} seed {seed}", flush=True)
    _run(default_agent(name), args, algorithm=name, seed=seed, budget=None,
         description=f"{name} at its default settings; no pre-training (trained_on names the split it "
                     "was allowed, unused).", trained_on=untrained(args), pretraining=NO_PRETRAINING)


def fill_search(name: str, seed: int, budget: int, args: argparse.Namespace) -> None:
    print(f"{name} seed {seed} budget {budget}", flush=True)
    _run(default_agent(name), args, algorithm=name, seed=seed, budget=budget,
         description=f"{name} at its default settings with {budget} evaluations per task, from scratch on "
                     "each task; no pre-training (trained_on names the split it was allowed, unused).",
         trained_on=untrained(args), pretraining=NO_PRETRAINING)


def pretraining_tasks(seed: int, sample: DatasetSample) -> list:
    """`PRETRAIN_GRAPHS` graphs of the sample's dataset's train split drawn with ``seed``, each on every
    cluster of the sample."""
    ids = get_dataset(sample.dataset).ids("train")
    chosen = sorted(np.random.default_rng(seed).choice(len(ids), PRETRAIN_GRAPHS, replace=False).tolist())
    return [get_task(f"{sample.dataset}:{ids[i]}", cluster, "train_step")
            for i in chosen for cluster in sample.clusters]


def device_counts(sample: DatasetSample) -> list[int]:
    """The device counts of the sample's clusters, each once, in order."""
    return list(dict.fromkeys(named_cluster(cluster).n_devices for cluster in sample.clusters))


def fill_learned(name: str, seed: int, budgets: list[int], args: argparse.Namespace) -> None:
    from baselines.learning.generalize import train_on_tasks

    sample = _sample(args)
    tasks = pretraining_tasks(seed, sample)
    print(f"{name} seed {seed}: pre-training on {len(tasks)} tasks, {PRETRAIN_BUDGET} evaluations each",
          flush=True)
    def pretrain(copies: list) -> object:
        return train_on_tasks(name, copies, PRETRAIN_BUDGET, seed=seed, switch_every=SWITCH_EVERY)[0]

    model, pretraining = counted_pretraining(pretrain, tasks)
    print(f"  pre-trained: {pretraining['evaluations']} evaluations, {pretraining['wall_s']:.0f} s",
          flush=True)
    trained = (f"{name} (default config) pre-trained on {PRETRAIN_GRAPHS} graphs of {sample.dataset}:train "
               f"drawn with the seed, each on {', '.join(sample.clusters)}, {PRETRAIN_BUDGET} evaluations "
               f"per training task (round-robin, {SWITCH_EVERY} at a time); each test task is placed by a "
               "copy of the pre-trained model")
    models = {model.task.n_devices: model}
    for budget in budgets:
        kind = "zero-shot" if budget == 1 else "finetuned"
        how = ("the greedy placement of the policy" if budget == 1 else
               f"the greedy placement, then fine-tuned on the task for {budget - 1} evaluations; the best "
               "kept")
        agent = held_out_agent(models, seed, 1, budget - 1)
        _run(agent, args, algorithm=f"{name}-{kind}", seed=seed,
             budget=budget, description=f"{trained}: {how}.", trained_on=untrained(args),
             pretraining=pretraining)


def checkpoint_training(name: str) -> tuple[list[str], str]:
    """What the shipped checkpoint of agent ``name`` (of `PRETRAINED`) was trained on, from its own
    training record: ``trained_on`` (``<dataset>:train`` per dataset of the record's ``config``, or the
    split it names) and a sentence for the description. The record comes from ``load_checkpoint()`` of
    the module that registers the agent (``(model, record)`` as `baselines.learning.pretrained`'s, or a
    model with a ``record``), so that a new pre-trained agent needs no code here; SystemExit when it has
    none."""
    module = importlib.import_module(get_agent(name).__module__)
    if declared_pretraining(name) is None or not callable(getattr(module, "load_checkpoint", None)):
        raise SystemExit(f"{name} is not an agent shipped pre-trained: it is registered without "
                         f"pretraining= or {module.__name__} has no load_checkpoint()")
    loaded = module.load_checkpoint()
    # pretrained-list's gives (model, record); a model object may carry its record instead.
    record = loaded.record if hasattr(loaded, "record") else loaded[1]
    config = record.get("config", {})
    datasets = config.get("datasets") or config.get("dataset")
    if not datasets:
        raise SystemExit(f"{name}'s checkpoint record names no dataset (config.dataset or config.datasets)")
    datasets = [datasets] if isinstance(datasets, str) else list(datasets)
    trained_on = [d if ":" in d else f"{d}:train" for d in datasets]
    where = " and ".join(trained_on) + " graphs"
    if config.get("max_ops"):
        where += f" of at most {config['max_ops']:,} ops"
    if config.get("clusters"):
        where += f" on {', '.join(config['clusters'])}"
    return trained_on, (f"{name}: the shipped checkpoint, pre-trained outside the harness (seed "
                        f"{record.get('seed', 'unstated')}) on {where}")


def fill_pretrained(name: str, seed: int, budgets: list[int], args: argparse.Namespace) -> None:
    """``name`` with its shipped checkpoint at each budget: pre-trained once, outside the harness, so its
    pre-training compute is the checkpoint's record (``counted: declared``), and what it trained on too
    (`checkpoint_training`), checked against the suite's split before anything runs."""
    trained_on, trained = checkpoint_training(name)
    problems = trained_on_problems({"suite": args.suite, "trained_on": trained_on})
    if problems:
        raise SystemExit(f"{name} cannot enter suite {args.suite}: {'; '.join(problems)}")
    pretraining = declared_pretraining(name)
    spends = agent_descriptions()[name]
    for budget in budgets:
        how = ("its placement, one evaluation" if budget == 1 else
               f"{budget:,} evaluations per task in all, as the agent spends them ({spends})")
        print(f"{name} seed {seed} budget {budget}", flush=True)
        _run(default_agent(name), args, algorithm=name, seed=seed, budget=budget,
             description=f"{trained}; {how}.", trained_on=trained_on, pretraining=pretraining)


def fill_portfolio(budget: int, args: argparse.Namespace) -> None:
    print(f"best-known portfolio at {budget} evaluations per task", flush=True)
    _run(default_agent("best-known"), args, algorithm="best-known", seed=0, budget=budget,
         description=f"The best-known portfolio (baselines/portfolio.py) at {budget} evaluations per task: "
                     "it makes the track's best known runtimes.",
         trained_on=untrained(args), pretraining=NO_PRETRAINING)


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    everything = (*HEURISTICS, *SEARCHES, *LEARNED, *PRETRAINED, "best-known")
    parser.add_argument("--agents", default=",".join(everything), help="comma-separated names: %(default)s")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--portfolio-budget", type=int, default=PORTFOLIO_BUDGET)
    parser.add_argument("--tasks", type=int, default=0, help="only the first N tasks (a quick look)")
    parser.add_argument("--dir", type=Path, default=LEADERBOARD)
    parser.add_argument("--no-render", action="store_true")
    registry = suite_registry()
    parser.add_argument("--suite", default=registry.default_fill_suite(FILL),
                        help=f"the suite filled, one of {', '.join(registry.filled_by(FILL))} (default: "
                        "%(default)s)")
    parser.add_argument("--write-suite", action="store_true",
                        help="measure the suite's file (suites/SUITE.json; a draft too), write its tasks "
                        "into it and stop")
    args = parser.parse_args()
    # A draft is measured before it is accepted, so --write-suite takes one; filling it does not.
    allowed = registry.filled_by(FILL, drafts=args.write_suite)
    if args.suite not in allowed:
        parser.error(f"--suite must be one of {', '.join(allowed)}, got {args.suite!r}")
    if args.write_suite:
        path = SUITE_FOLDER / f"{args.suite}.json"
        write_suite_file(path)
        print(f"wrote {path}")
        return
    set_torch_threads(1)
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    unknown = sorted(set(agents) - set(everything))
    if unknown:
        parser.error(f"unknown agents {', '.join(unknown)}; known: {', '.join(everything)}")
    seeds, budgets = _ints(args.seeds), _ints(args.budgets)
    counts = device_counts(_sample(args))
    if len(counts) > 1 and set(agents) & set(LEARNED):
        # Their policy has one output per device: one model cannot place clusters of several sizes.
        parser.error(f"{', '.join(sorted(set(agents) & set(LEARNED)))} need clusters of one device count; "
                     f"suite {args.suite}'s have {', '.join(map(str, counts))} devices (leave them out of "
                     "--agents)")
    for name in agents:
        if name in HEURISTICS:
            for seed in seeds if name in SEEDED_HEURISTICS else [0]:
                fill_heuristic(name, seed, args)
        elif name in SEARCHES:
            for seed in seeds:
                for budget in [b for b in budgets if b >= SEARCH_MIN_BUDGET]:
                    fill_search(name, seed, budget, args)
        elif name in LEARNED:
            for seed in seeds:
                fill_learned(name, seed, budgets, args)
        elif name in PRETRAINED:
            for seed in seeds:
                fill_pretrained(name, seed, budgets, args)
        else:
            fill_portfolio(args.portfolio_budget, args)
    if not args.no_render:
        render(args.dir, suite=args.suite)


if __name__ == "__main__":
    main()
