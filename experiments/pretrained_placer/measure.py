"""Measure `pretrained-list` (baselines/learning/pretrained.py) against its targets (issue 29).

    (from experiments/pretrained_placer/, with the repository root on PYTHONPATH)
    python measure.py baselines [--random 50]
    python measure.py zero-shot --model checkpoints/seed0.json --tag 0 [--random 50]
    python measure.py anneal [--sample 12] [--seeds 0]
    python measure.py finetune --model checkpoints/seed0.json --tag 0 [--seeds 0]
    python measure.py summary [--models 3]
    python measure.py leaderboard      # target 2 on every qualifying gen-v2 task, from the leaderboard
    python measure.py baselines --pairs real             # issue 68: held-out real models
    python measure.py zero-shot --pairs real --model ../../baselines/learning/pretrained_list.json --tag 0
    python measure.py summary --pairs real --models 1

``--pairs real`` (issue 68) measures the same on held-out real models instead, its files under
``results/real/``: every graph of the test splits of ``architectures-v1`` (test-families: T5 and
Whisper, families no training set holds; test-sizes: each family's largest sizes) on ``k80x4``, on
``h100x8`` and graph i on ``random-v1:1000 + i mod 100``, training steps; ``summary`` then groups them
by family and cluster kind.

Zero-shot tasks (``--pairs gen-v2``, the default): every task of the generalisation track v2 (100 test
graphs of synthetic-v1 x k80x4, k40x4, p100x4) and the first ``--random`` of its graphs on one test
cluster of random-v1 each (graph i on random-v1:1000+i). ``baselines``: HEFT, m-ETF (as registered: up
to 7 evaluations with their memory retries) and best-single on them; ``zero-shot``: a model at one
evaluation. ``anneal``: a sample of the gen-v2 tasks whose best known (the best runtime of any gen-v2
submission) is below 0.97 x best single, with anneal at 10,000 evaluations and move-bandit at 1,000;
``finetune``: a model at 1,000 evaluations (move-bandit from its zero-shot placement) on that sample.
Every step appends to ``results/*.jsonl`` and skips the tasks already there, so a step cut short goes on
where it stopped; ``summary`` prints the tables of the README from the tasks every file has.
``leaderboard`` measures target 2 on every gen-v2 task instead of a sample, from the committed gen-v2
entries (validated and re-simulated first, `placement_gym.leaderboard.render.checked_submissions`): each
entry at 1,000 evaluations against anneal at 10,000 of the same seed, and the median seed of each
against the median seed of anneal (per task, when all three seeds exist), per split and family, on the
tasks whose best known (any gen-v2 entry) is below 0.97 x best single.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from baselines.learning.pretrained import load_checkpoint, pretrained_list
from baselines.registry import run_agent
from placement_gym.cost_model import simulate
from placement_gym.leaderboard import get_suite
from placement_gym.leaderboard.generalisation import split_of_task
from placement_gym.task.compiled import Task
from placement_gym.task.named import parse_task_id

HERE = Path(__file__).parent
SUBMISSIONS = HERE.parents[1] / "leaderboard" / "submissions"


def _score(task, placement) -> tuple[float, bool]:
    result = simulate(task, placement)
    return float(result.runtime), bool(result.feasible)


def _key(runtime: float, feasible: bool) -> tuple[bool, float]:
    return (not feasible, runtime)


def unmeasured(out: Path, task_ids: Iterable[str]) -> Iterator[tuple[str, Task, Callable[[dict], None]]]:
    """Each of ``task_ids`` that ``out`` (JSON lines, one row a task) has no row for yet, with its task and
    the function that appends its row to ``out`` at once (so that a stopped run resumes where it was)."""
    done = {json.loads(line)["task"] for line in out.open()} if out.exists() else set()
    with out.open("a") as sink:

        def write(row: dict) -> None:
            sink.write(json.dumps(row) + "\n")
            sink.flush()

        for task_id in task_ids:
            if task_id not in done:
                yield task_id, parse_task_id(task_id), write


def zero_shot_tasks(random_graphs: int, pairs: str = "gen-v2") -> list[str]:
    if pairs == "real":
        return real_model_tasks()
    ids = list(get_suite("gen-v2").task_ids)
    graphs = list(dict.fromkeys(t.split("/")[0] for t in ids))
    return ids + [f"{g}/random-v1:{1000 + i}/train" for i, g in enumerate(graphs[:random_graphs])]


REAL_PRESETS = ("k80x4", "h100x8")


def real_model_tasks() -> list[str]:
    """Issue 68's held-out real-model pairs (module docstring), small graphs first, the presets and the
    random cluster of each graph interleaved, so that a run cut short holds every kind."""
    from placement_gym.datasets import get_dataset

    dataset = get_dataset("architectures-v1")
    graphs = sorted((dataset.graph(g).n_ops, g) for split in ("test-families", "test-sizes")
                    for g in dataset.ids(split))
    tasks = []
    for i, (_, graph) in enumerate(graphs):
        clusters = [*REAL_PRESETS, f"random-v1:{1000 + i % 100}"]
        tasks += [f"architectures-v1:{graph}/{cluster}/train" for cluster in clusters]
    return tasks


def _split(task_id: str) -> str:
    if task_id.startswith("architectures-v1:"):
        from placement_gym.datasets import get_dataset

        dataset = get_dataset("architectures-v1")
        return dataset.split_of(*dataset.locate(task_id.split("/")[0].split(":", 1)[1]))
    return split_of_task(task_id)


def measure_baselines(random_graphs: int, out: Path, pairs: str = "gen-v2") -> None:
    """HEFT, m-ETF and best-single on every zero-shot task (tasks already in ``out`` are kept)."""
    for task_id, task, write in unmeasured(out, zero_shot_tasks(random_graphs, pairs)):
        cluster = task_id.split("/")[1]
        kind = "random" if "random-v1" in cluster else (cluster if pairs == "real" else "preset")
        row = {"task": task_id, "split": _split(task_id), "family": _family(task_id), "cluster": kind,
               "ops": task.n_ops}
        for name in ("heft", "m-etf", "best-single"):
            row[name] = _score(task, run_agent(task, name).placement)
        write(row)


def measure_zero_shot(model_path: Path, tasks: list[str], out: Path) -> None:
    """The model at one evaluation on each of ``tasks`` (tasks already in ``out`` are kept)."""
    model = load_checkpoint(model_path)[0]
    for task_id, task, write in unmeasured(out, tasks):
        result = pretrained_list(task, 0, 1, model=model)
        row = {"task": task_id, "model": _score(task, result.placement),
               "evaluations": result.evaluations}
        write(row)


def merged_zero_shot(results: Path, n_models: int) -> list[dict]:
    """The baselines' rows with each model's result (``model<k>``), for the tasks every model has."""
    rows = {row["task"]: row for row in map(json.loads, (results / "baselines.jsonl").open())}
    for k in range(n_models):
        mine = {row["task"]: row for row in map(json.loads, (results / f"zero_shot_model{k}.jsonl").open())}
        for task_id in list(rows):
            if task_id in mine:
                rows[task_id][f"model{k}"] = mine[task_id]["model"]
            else:
                del rows[task_id]
    return list(rows.values())


def summarise_zero_shot(rows: list[dict], n_models: int, by_family: bool = False) -> None:
    """The zero-shot table: per split and cluster kind (``by_family``: per family and cluster kind,
    then per split) the share of pairs where the model is faster than each baseline, the share where
    it is infeasible while HEFT is feasible, and the geometric mean of HEFT's runtime over the model's."""
    print("| split | family | clusters | pairs | model | > HEFT | > m-ETF | > both | > best-single "
          "| infeasible where HEFT is not | geo-mean HEFT/model |")
    print("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    groups = {}
    for row in rows:
        family = row.get("family", "all") if by_family else "all"
        groups.setdefault((row["split"], family, row["cluster"]), []).append(row)
        groups.setdefault((row["split"], "all", "all"), []).append(row)
        groups.setdefault(("all", "all", "all"), []).append(row)
    for row in rows:  # per pair, the median seed (infeasible placements rank last)
        ranked = sorted((row[f"model{k}"] for k in range(n_models)), key=lambda r: _key(*r))
        row["median"] = ranked[len(ranked) // 2]
    for (split, family, cluster), members in sorted(groups.items()):
        for k in [*range(n_models), "median"] if n_models > 1 else [0]:
            mine = [_key(*r[f"model{k}" if k != "median" else "median"]) for r in members]
            beats = {name: np.mean([m < _key(*r[name]) for m, r in zip(mine, members)])
                     for name in ("heft", "m-etf", "best-single")}
            both = np.mean([m < _key(*r["heft"]) and m < _key(*r["m-etf"]) for m, r in zip(mine, members)])
            worse = sum(m[0] and r["heft"][1] for m, r in zip(mine, members))
            name = f"model{k}" if k != "median" else "median"
            finite = [r for r in members if np.isfinite(r[name][0]) and np.isfinite(r["heft"][0])]
            ratio = np.exp(np.mean([np.log(r["heft"][0] / r[name][0]) for r in finite])) if finite else np.nan
            label = f"seed {k}" if k != "median" else "median of seeds"
            print(f"| {split} | {family} | {cluster} | {len(members)} | {label} | {beats['heft']:.0%} | "
                  f"{beats['m-etf']:.0%} | {both:.0%} | {beats['best-single']:.0%} | {worse} | {ratio:.3f} |")


def best_known() -> dict[str, float]:
    best: dict[str, float] = {}
    for path in SUBMISSIONS.glob("gen-v2-*.json"):
        for task_id, result in json.loads(path.read_text())["results"].items():
            if result.get("feasible") and result.get("runtime") is not None:
                best[task_id] = min(best.get(task_id, np.inf), float(result["runtime"]))
    return best


def finetune_sample(sample: int) -> list[str]:
    """Up to ``sample`` gen-v2 tasks of each test split whose best known is below 0.97 x best single,
    drawn with seed 0, interleaved (unseen sizes, unseen families, ...) so that a run cut short holds
    both splits."""
    known = best_known()
    eligible: dict[str, list[str]] = {}
    for task_id in get_suite("gen-v2").task_ids:
        task = parse_task_id(task_id)
        single = _score(task, run_agent(task, "best-single").placement)[0]
        if known.get(task_id, np.inf) < 0.97 * single:
            eligible.setdefault(split_of_task(task_id), []).append(task_id)
    rng = np.random.default_rng(0)
    drawn = {split: [ids[i] for i in rng.choice(len(ids), min(sample, len(ids)), replace=False).tolist()]
             for split, ids in sorted(eligible.items())}
    print("eligible (best known < 0.97 x best single) per split: "
          + ", ".join(f"{split} {len(ids)}" for split, ids in sorted(eligible.items())), flush=True)
    order = []
    for k in range(sample):
        order += [ids[k] for ids in drawn.values() if k < len(ids)]
    return order


def measure_anneal(sample: int, seeds: list[int], out: Path) -> None:
    """Anneal at 10,000 and move-bandit at 1,000 (no pre-training) on the sample; tasks already in
    ``out`` are kept and not run again."""
    known = best_known()
    for task_id, task, write in unmeasured(out, finetune_sample(sample)):
        row = {"task": task_id, "split": split_of_task(task_id), "best_known": known[task_id],
               "best_single": _score(task, run_agent(task, "best-single").placement)[0]}
        for seed in seeds:
            started = time.perf_counter()
            row[f"anneal10k_s{seed}"] = _score(task, run_agent(task, "anneal", seed, 10_000).placement)
            row[f"anneal10k_s{seed}_wall"] = round(time.perf_counter() - started, 1)
            row[f"bandit1k_s{seed}"] = _score(task, run_agent(task, "move-bandit", seed, 1_000).placement)
        write(row)
        print(json.dumps(row), flush=True)


def measure_finetune(model_path: Path, seeds: list[int], anneal: Path, out: Path) -> None:
    """The model at one and at 1,000 evaluations (zero-shot, then move-bandit from it) on the sample
    of `measure_anneal` (tasks already in ``out`` are kept)."""
    model = load_checkpoint(model_path)[0]
    for task_id, task, write in unmeasured(out, [json.loads(line)["task"] for line in anneal.open()]):
        row: dict = {"task": task_id}
        for seed in seeds:
            result = pretrained_list(task, seed, 1_000, model=model)
            assert result.evaluations <= 1_000
            row[f"zero_s{seed}"] = [result.info["zero_shot_runtime"], None]
            row[f"1k_s{seed}"] = _score(task, result.placement)
        write(row)


def merged_finetune(results: Path, n_models: int) -> list[dict]:
    rows = {row["task"]: row for row in map(json.loads, (results / "anneal10k.jsonl").open())}
    for k in range(n_models):
        path = results / f"finetune_model{k}.jsonl"
        mine = {row["task"]: row for row in map(json.loads, path.open())} if path.exists() else {}
        for task_id in list(rows):
            if task_id in mine:
                rows[task_id].update({f"model{k}_{key}": value for key, value in mine[task_id].items()
                                      if key != "task"})
            else:
                del rows[task_id]
    return list(rows.values())


def summarise_finetune(rows: list[dict], n_models: int, seeds: list[int]) -> None:
    print("| split | pairs | entry | seed | >= anneal 10k | median runtime / anneal 10k |")
    print("|---|---:|---|---:|---:|---:|")
    for split in sorted({r["split"] for r in rows}) + ["all"]:
        members = [r for r in rows if split in ("all", r["split"])]
        for seed in seeds:
            names = [f"model{k}_1k" for k in range(n_models)] + [f"model{k}_zero" for k in range(n_models)]
            for name in [*names, "bandit1k"]:
                mine = [r[f"{name}_s{seed}"] for r in members]
                ok = [m[0] <= r[f"anneal10k_s{seed}"][0] for m, r in zip(mine, members)]
                ratio = np.median([m[0] / r[f"anneal10k_s{seed}"][0] for m, r in zip(mine, members)])
                print(f"| {split} | {len(members)} | {name} | {seed} | {np.mean(ok):.0%} | {ratio:.3f} |")


def _family(task_id: str) -> str:
    graph = task_id.split("/")[0].split(":")[-1]
    return graph.rstrip("0123456789").rstrip("-")


def summarise_leaderboard() -> None:
    """Target 2 from the gen-v2 entries of the leaderboard (module docstring)."""
    import shutil
    import tempfile

    from placement_gym.leaderboard.render import checked_submissions

    with tempfile.TemporaryDirectory() as folder:
        for path in SUBMISSIONS.glob("gen-v2-*.json"):
            shutil.copy(path, folder)
        files = dict(checked_submissions(folder))
    best: dict[str, float] = {}
    for data in files.values():
        for task_id, result in data["results"].items():
            if result["feasible"]:
                best[task_id] = min(best.get(task_id, np.inf), result["runtime"])
    single = {t: r["runtime"] for t, r in files["gen-v2-best-single-seed0.json"]["results"].items()}
    qualifying = sorted(t for t in single if best.get(t, np.inf) < 0.97 * single[t])
    print(f"{len(qualifying)} of {len(single)} gen-v2 tasks qualify (best known < 0.97 x best single)")
    print("| entry (1,000 evaluations) | seed | split | family | pairs | >= anneal 10k "
          "| median runtime / anneal 10k |")
    print("|---|---:|---|---|---:|---:|---:|")
    groups: dict[tuple[str, str], list[str]] = {}
    for task_id in qualifying:
        split = split_of_task(task_id)
        for key in ((split, _family(task_id)), (split, "all"), ("all", "all")):
            groups.setdefault(key, []).append(task_id)

    def median_seed(name: str) -> dict | None:
        """Per task, the result of the median seed (infeasible ranks last), when all three seeds exist."""
        runs = [files.get(name.format(seed=seed)) for seed in range(3)]
        if any(run is None for run in runs):
            return None
        def middle(task_id: str) -> dict:
            return sorted((run["results"][task_id] for run in runs),
                          key=lambda r: _key(r["runtime"], r["feasible"]))[1]

        return {"results": {task_id: middle(task_id) for task_id in qualifying}}

    for algorithm in ("pretrained-list", "move-bandit", "anneal"):
        pairs = [(seed, files.get(f"gen-v2-{algorithm}-1k-seed{seed}.json"),
                  files.get(f"gen-v2-anneal-10k-seed{seed}.json")) for seed in range(3)]
        pairs.append(("median", median_seed(f"gen-v2-{algorithm}-1k-seed{{seed}}.json"),
                      median_seed("gen-v2-anneal-10k-seed{seed}.json")))
        for seed, mine, anneal in pairs:
            if mine is None or anneal is None:
                continue
            for (split, family), members in sorted(groups.items()):
                ours = [mine["results"][t] for t in members]
                theirs = [anneal["results"][t] for t in members]
                ok = [_key(a["runtime"], a["feasible"]) <= _key(b["runtime"], b["feasible"])
                      for a, b in zip(ours, theirs)]
                ratio = np.median([a["runtime"] / b["runtime"] for a, b in zip(ours, theirs)])
                print(f"| {algorithm} | {seed} | {split} | {family} | {len(members)} | {np.mean(ok):.0%} | "
                      f"{ratio:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["baselines", "zero-shot", "anneal", "finetune", "summary",
                                                   "leaderboard"])
    parser.add_argument("--model", type=Path, help="a checkpoint (zero-shot, finetune)")
    parser.add_argument("--tag", type=int, default=0, help="the model's number in the result files")
    parser.add_argument("--models", type=int, default=3, help="summary: how many models to merge")
    parser.add_argument("--random", type=int, default=50)
    parser.add_argument("--sample", type=int, default=12)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--pairs", choices=("gen-v2", "real"), default="gen-v2",
                        help="the zero-shot pairs: gen-v2's (default) or held-out real models (issue 68)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    results = HERE / "results" / ("real" if args.pairs == "real" else "")
    results.mkdir(exist_ok=True, parents=True)
    if args.pairs == "real" and args.what not in ("baselines", "zero-shot", "summary"):
        parser.error("--pairs real: baselines, zero-shot and summary only")
    if args.what == "baselines":
        measure_baselines(args.random, results / "baselines.jsonl", args.pairs)
    elif args.what == "zero-shot":
        out = results / f"zero_shot_model{args.tag}.jsonl"
        measure_zero_shot(args.model, zero_shot_tasks(args.random, args.pairs), out)
    elif args.what == "anneal":
        measure_anneal(args.sample, seeds, results / "anneal10k.jsonl")
    elif args.what == "finetune":
        out = results / f"finetune_model{args.tag}.jsonl"
        measure_finetune(args.model, seeds, results / "anneal10k.jsonl", out)
    elif args.what == "leaderboard":
        summarise_leaderboard()
    elif args.pairs == "real":
        summarise_zero_shot(merged_zero_shot(results, args.models), args.models, by_family=True)
    else:
        summarise_zero_shot(merged_zero_shot(results, args.models), args.models)
        summarise_finetune(merged_finetune(results, args.models), args.models, seeds)


if __name__ == "__main__":
    main()
