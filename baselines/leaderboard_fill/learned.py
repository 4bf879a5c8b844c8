"""Fill the leaderboard with the learned baselines: 10,000 evaluations per task, seeds 0, 1 and 2.

Run from the repository root (hours of CPU; stop it any time and run it again to resume)::

    python -m baselines.leaderboard_fill.learned [--agents pg,spotlight] [--seeds 0,1,2] [--workers 2]
        [--budget 10000] [--tasks ID,ID] [--out-dir leaderboard/submissions] [--suite VERSION]
        [--checkpoints DIR]

``--suite`` picks the accepted suite the runs are made on, among those whose suite file names this
script in its ``fill`` (default: the current suite).

``--from-suite OLD,OLDER`` starts each file of ``--suite`` from the files of those earlier suites in
``leaderboard/submissions`` made by the same agent, seed and budget (`carry_over`): their results for the
tasks the two suites share with the same frozen fingerprint are copied, and only the other tasks run. A
run is a function of the task, agent, seed and budget, so the copy is the run ``validate --rerun``
would make again; ``validate`` re-simulates every copied placement like any other. A new suite's
entries are made this way, for example::

    python -m baselines.leaderboard_fill.learned --suite NEW --from-suite OLD,OLDER \
        --agents anneal,move-bandit --seeds 0,1,2 --budget 10000

With ``--tasks``, only the named tasks are copied, so a file begun by a one-task fill holds that task
alone until a fill without ``--tasks`` adds the shared ones.

Each (agent, seed, task) runs once through the leaderboard harness on a one-task subset of the suite,
and its result is merged at once into ``leaderboard/submissions/<suite>-<agent>-seed<seed>.json``:
the file holds the tasks done so far, so a stopped fill leaves valid submissions (the leaderboard
shows how many tasks each covers) and a new run skips the tasks they already hold. Tasks run cheapest
first, so that every agent covers the same tasks at any time. The leaderboard is rendered at the end
(it shows the median seed per task). Each run is the agent of the baselines registry at its default
settings (`baselines.registry.harness_agent`), which is what ``placement-gym leaderboard validate
--rerun`` runs again.

A stopped fill starts the task it was on again, unless ``--checkpoints DIR`` is given: then each run
keeps a checkpoint in a folder of ``DIR`` of its own (`checkpoint_folder`; every 5 training
iterations, replaced whole) and the next fill continues it; the folder is removed once the result is
merged. The result is the run's without a stop, bit for bit (every learned agent resumes exactly; the
search agents keep no checkpoint and are refused); its ``wall_s`` adds the seconds of the stopped part
up to its last checkpoint. This is how a run longer than a working session (placeto at 10,000 on the
103k-op task) is made in parts.

``--tasks`` and ``--out-dir`` make small entries elsewhere: the one CI re-runs bit for bit,
``leaderboard/reproducible/v1-pg-200-seed0.json``, was made with::

    python -m baselines.leaderboard_fill.learned --agents pg --seeds 0 --budget 200 \
        --tasks cifar10_cnn/k80x2/train,resnet50/cpu-igpu/inference --out-dir leaderboard/reproducible \
        --workers 1 --no-render
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shutil
import time
from collections.abc import Collection
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

LEADERBOARD = Path("leaderboard")  # relative to the repository root the fill runs from
FILL = Path(__file__).stem  # how a suite file's "fill" names this script
LEARNED_AGENTS = ("pg", "spotlight", "hierarchical", "hsdag", "placeto", "sb3-ppo", "sb3-maskable-ppo",
                  "random-search")
BUDGET = 10_000
SEEDS = (0, 1, 2)


def submission_path(agent: str, seed: int, budget: int, folder: Path = LEADERBOARD / "submissions",
                    suite: str | None = None) -> Path:
    """The (agent, seed, budget) file of ``suite`` (default: the current suite) in ``folder``."""
    from placement_gym.leaderboard import get_suite, submission_filename

    return folder / submission_filename({"suite": suite or get_suite().version, "algorithm": agent,
                                         "seed": seed, "budget": budget})


def done_tasks(agent: str, seed: int, budget: int, folder: Path, suite: str | None = None) -> set[str]:
    """Tasks the (agent, seed) submission of ``suite`` in ``folder`` already holds at this budget."""
    submission = submission_at_budget(submission_path(agent, seed, budget, folder, suite), budget)
    return set(submission["results"]) if submission else set()


def submission_at_budget(path: Path, budget: int) -> dict | None:
    """The submission at ``path`` (None when there is none); SystemExit when it was made at another budget."""
    from placement_gym.leaderboard import load_submission

    if not path.is_file():
        return None
    submission = load_submission(path)
    if submission.get("budget") != budget:
        raise SystemExit(f"{path} was made with budget {submission.get('budget')}, not {budget}: "
                         "move it away or pass --budget to match")
    return submission


def run_one(agent: str, seed: int, task_id: str, budget: int, suite: str | None = None,
            checkpoints: Path | None = None) -> dict:
    """One harness run on a one-task subset of ``suite`` (default: the current suite), in a worker
    process; returns its submission. With ``checkpoints`` (a learned agent) the run keeps a checkpoint in
    its `checkpoint_folder` and continues from the one there: its result is the run's without a stop, its
    ``wall_s`` the stopped part's seconds plus this part's."""
    from baselines.learning.trainer import checkpoint_wall_s, resumable_agent
    from baselines.registry import agent_descriptions, declared_pretraining, harness_agent
    from placement_gym.common.threads import set_torch_threads
    from placement_gym.leaderboard import evaluate, get_suite

    set_torch_threads(1)
    suite = suite or get_suite().version
    earlier_s = 0.0
    if checkpoints is None:
        run = harness_agent(agent)
    else:
        folder = checkpoint_folder(checkpoints, suite, agent, seed, budget, task_id)
        run, earlier_s = resumable_agent(agent, folder), checkpoint_wall_s(folder)
    part = evaluate(
        run,
        get_suite(suite).subset([task_id]), budget, algorithm=agent,
        authors=["placement-gym baselines"],
        description=agent_descriptions().get(agent, ""), seed=seed,
        pretraining=declared_pretraining(agent),  # an agent pre-trained outside the harness declares it
    )
    result = part["results"][task_id]
    result["wall_s"] = round(result["wall_s"] + earlier_s, 6)
    return part


def checkpoint_folder(root: Path, suite: str, agent: str, seed: int, budget: int, task_id: str) -> Path:
    """Where ``--checkpoints root`` keeps the checkpoint of one (agent, seed, budget, task) run: a
    folder per run, named readably after the task id and told apart by its digest."""
    readable = re.sub(r"[^A-Za-z0-9.+=-]+", "_", task_id)
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:8]
    return root / f"{suite}-{agent}-{budget}-seed{seed}" / f"{readable}-{digest}"


def merge(part: dict, folder: Path) -> Path:
    """Add a one-task submission to its (agent, seed) file in ``folder``; tasks stay in suite order."""
    from placement_gym.leaderboard import get_suite, load_submission, save_submission

    path = submission_path(part["algorithm"], part["seed"], part["budget"], folder, part["suite"])
    merged = load_submission(path) if path.is_file() else dict(part, results={})
    results = {**merged["results"], **part["results"]}
    merged["results"] = {t: results[t] for t in get_suite(part["suite"]).task_ids if t in results}
    return save_submission(merged, path)


def carry_over(agent: str, seed: int, budget: int, folder: Path, suite: str, from_suites: list[str],
               source: Path = LEADERBOARD / "submissions", task_ids: Collection[str] | None = None) -> int:
    """Copy into the (agent, seed, budget) file of ``suite`` in ``folder`` the results that the files of
    ``from_suites`` in ``source`` (same agent, seed and budget; earlier suites first) hold for tasks
    ``suite`` shares with theirs unchanged (equal frozen fingerprints), for tasks it does not hold yet
    (of ``task_ids`` only, when given).
    The file is created from the first source's header when it does not exist. Returns how many results
    were added."""
    from placement_gym.leaderboard import get_suite

    target_suite = get_suite(suite)
    wanted = set(target_suite.task_ids)
    if task_ids is not None:
        wanted &= set(task_ids)
    held = done_tasks(agent, seed, budget, folder, suite)
    header, added = None, {}
    for old in from_suites:
        old_submission = submission_at_budget(submission_path(agent, seed, budget, source, old), budget)
        if old_submission is None:
            continue
        old_suite, header = get_suite(old), header or old_submission
        added.update({t: r for t, r in old_submission["results"].items()
                      if t in wanted and t not in held and t not in added
                      and old_suite.get(t) == target_suite.get(t)})
    if added:  # merge keeps the file's header when it exists, else takes the first source's
        merge(dict(header, suite=suite, results=added), folder)
    return len(added)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default=",".join(LEARNED_AGENTS), help="comma-separated agent names")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="comma-separated seeds")
    parser.add_argument("--budget", type=int, default=BUDGET, help="evaluations per task")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--tasks", default=None, help="comma-separated task ids (default: the whole suite)")
    parser.add_argument("--out-dir", type=Path, default=LEADERBOARD / "submissions",
                        help="folder of the submission files (default: %(default)s)")
    parser.add_argument("--suite", default=None,
                        help="suite version the runs are made on (default: the current suite)")
    parser.add_argument("--from-suite", default=None,
                        help="comma-separated earlier suites whose files (same agent, seed and budget, in "
                             "leaderboard/submissions) give the results of the tasks they share")
    parser.add_argument("--checkpoints", type=Path, default=None,
                        help="folder where each run of a learned agent keeps a checkpoint, so that a "
                             "stopped fill continues the task it was on")
    parser.add_argument("--no-render", action="store_true")
    args = parser.parse_args()

    from rich.progress import track

    from baselines.registry import get_agent, harness_agent
    from placement_gym.leaderboard import get_suite, render
    from placement_gym.leaderboard.registry import suite_registry

    filled = suite_registry().filled_by(FILL)
    args.suite = args.suite or suite_registry().default_fill_suite(FILL)
    if args.suite not in filled:
        parser.error(f"--suite must be one of {', '.join(filled)}, got {args.suite!r}")
    from_suites = [v.strip() for v in (args.from_suite or "").split(",") if v.strip()]
    for version in from_suites:
        if version not in filled or version == args.suite:
            parser.error(f"--from-suite takes suites of this fill other than --suite ({args.suite}): "
                         f"{', '.join(v for v in filled if v != args.suite)}; got {version!r}")

    # Checked here, not in the workers: a bad name would otherwise surface as a worker's traceback.
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    for name in agents:
        try:  # the registry's own lookups: the known names, the install hint, the not re-runnable
            get_agent(name)
            harness_agent(name)
        except (ValueError, ImportError) as error:
            parser.error(f"--agents: {error}")
        if args.checkpoints is not None:
            from baselines.learning.trainer import resumable_agent

            try:
                resumable_agent(name, args.checkpoints)
            except ValueError as error:
                parser.error(f"--checkpoints: {error}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds takes comma-separated whole numbers, got {args.seeds!r}")
    if not agents or not seeds:
        parser.error("--agents and --seeds each need at least one value")
    if args.budget < 1:
        parser.error(f"--budget must be >= 1 evaluation, got {args.budget}")
    suite = get_suite(args.suite)
    if args.tasks is not None:
        try:
            suite = suite.subset([t.strip() for t in args.tasks.split(",") if t.strip()])
        except ValueError as error:
            parser.error(f"--tasks: {error}")
    # Cheapest first: forward ops x devices is roughly what an evaluation and a policy step cost.
    cost = {t: suite.get(t).task().n_forward * suite.get(t).task().n_devices for t in suite.task_ids}
    tasks = sorted(suite.task_ids, key=cost.__getitem__)
    for a in agents:
        for s in seeds:
            copied = carry_over(a, s, args.budget, args.out_dir, args.suite, from_suites,
                                task_ids=suite.task_ids)
            if copied:
                name = submission_path(a, s, args.budget, args.out_dir, args.suite).name
                print(f"{name}: {copied} results carried over from {', '.join(from_suites)}", flush=True)
    done = {(a, s): done_tasks(a, s, args.budget, args.out_dir, args.suite) for a in agents for s in seeds}
    jobs = [(a, s, t) for t in tasks for a in agents for s in seeds if t not in done[a, s]]
    total = len(agents) * len(seeds) * len(tasks)
    print(f"{len(jobs)} of {total} runs to do ({len(agents)} agents x {len(seeds)} seeds x "
          f"{len(tasks)} tasks)", flush=True)
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(run_one, a, s, t, args.budget, args.suite, args.checkpoints): (a, s, t)
                   for a, s, t in jobs}
        for future in track(as_completed(futures), total=len(futures), description="learned runs"):
            merge(future.result(), args.out_dir)
            if args.checkpoints is not None:  # the result is kept: its checkpoint is of no more use
                a, s, t = futures[future]
                folder = checkpoint_folder(args.checkpoints, args.suite, a, s, args.budget, t)
                shutil.rmtree(folder, ignore_errors=True)
                with contextlib.suppress(OSError):  # the (agent, seed) folder, once it holds no other run
                    folder.parent.rmdir()
    print(f"done in {time.perf_counter() - start:.0f} s")
    if not args.no_render:
        render(LEADERBOARD, suite=args.suite)


if __name__ == "__main__":
    main()
