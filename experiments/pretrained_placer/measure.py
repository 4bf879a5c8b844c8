"""Measure `pretrained-list` (baselines/learning/pretrained.py) against its targets (issue 29).

    python experiments/pretrained_placer/measure.py zero-shot [--models runs/seed0.json,...] [--random 100]
    python experiments/pretrained_placer/measure.py anneal [--sample 12] [--seeds 0]
    python experiments/pretrained_placer/measure.py finetune [--models ...] [--seeds 0]

``zero-shot``: every task of the generalisation track v2 (100 test graphs of synthetic-v1 x k80x4,
k40x4, p100x4) and each of its graphs on one test cluster of random-v1 (graph i on random-v1:1000+i
for the first ``--random`` graphs): the model's placement at one evaluation against HEFT and m-ETF (as
registered: up to 7 evaluations with their memory retries) and best-single. ``finetune``: a sample of
the gen-v2 tasks whose best known (the best runtime of any gen-v2 submission) is below 0.97 x best
single: the agent at 1,000 evaluations (move-bandit from its zero-shot placement) against anneal at
10,000. Rows go to ``results/*.jsonl``; the summary is printed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from baselines.learning.pretrained import load_checkpoint, pretrained_list
from baselines.registry import run_agent
from placement_gym.cost_model import simulate
from placement_gym.leaderboard.generalisation import gen_v2_task_ids, split_of_task
from placement_gym.task.named import parse_task_id

HERE = Path(__file__).parent
SUBMISSIONS = HERE.parents[1] / "leaderboard" / "submissions"


def _score(task, placement) -> tuple[float, bool]:
    result = simulate(task, placement)
    return float(result.runtime), bool(result.feasible)


def _key(runtime: float, feasible: bool) -> tuple[bool, float]:
    return (not feasible, runtime)


def zero_shot_tasks(random_graphs: int) -> list[str]:
    ids = list(gen_v2_task_ids())
    graphs = list(dict.fromkeys(t.split("/")[0] for t in ids))
    return ids + [f"{g}/random-v1:{1000 + i}/train" for i, g in enumerate(graphs[:random_graphs])]


def measure_zero_shot(models: list[Path], random_graphs: int, out: Path) -> None:
    loaded = [load_checkpoint(path)[0] for path in models]
    rows = []
    with out.open("w") as sink:
        for n, task_id in enumerate(zero_shot_tasks(random_graphs)):
            task = parse_task_id(task_id)
            row = {"task": task_id, "split": split_of_task(task_id),
                   "cluster": "random" if "random-v1" in task_id else "preset", "ops": task.n_ops}
            for name in ("heft", "m-etf", "best-single"):
                row[name] = _score(task, run_agent(task, name).placement)
            for k, model in enumerate(loaded):
                result = pretrained_list(task, 0, 1, model=model)
                row[f"model{k}"] = _score(task, result.placement)
                row[f"model{k}_evaluations"] = result.evaluations
            rows.append(row)
            sink.write(json.dumps(row) + "\n")
            if n % 50 == 0:
                print(f"{n} tasks", flush=True)
    summarise_zero_shot(rows, len(loaded))


def summarise_zero_shot(rows: list[dict], n_models: int) -> None:
    print("| split | clusters | pairs | model | > HEFT | > m-ETF | > both | > best-single "
          "| geo-mean HEFT/model |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    groups = {}
    for row in rows:
        groups.setdefault((row["split"], row["cluster"]), []).append(row)
        groups.setdefault(("all", "all"), []).append(row)
    for (split, cluster), members in sorted(groups.items()):
        for k in range(n_models):
            mine = [_key(*r[f"model{k}"]) for r in members]
            beats = {name: np.mean([m < _key(*r[name]) for m, r in zip(mine, members)])
                     for name in ("heft", "m-etf", "best-single")}
            both = np.mean([m < _key(*r["heft"]) and m < _key(*r["m-etf"]) for m, r in zip(mine, members)])
            ratio = np.exp(np.mean([np.log(r["heft"][0] / r[f"model{k}"][0]) for r in members]))
            print(f"| {split} | {cluster} | {len(members)} | seed {k} | {beats['heft']:.0%} | "
                  f"{beats['m-etf']:.0%} | {both:.0%} | {beats['best-single']:.0%} | {ratio:.3f} |")


def best_known() -> dict[str, float]:
    best: dict[str, float] = {}
    for path in SUBMISSIONS.glob("gen-v2-*.json"):
        for task_id, result in json.loads(path.read_text())["results"].items():
            if result.get("feasible") and result.get("runtime") is not None:
                best[task_id] = min(best.get(task_id, np.inf), float(result["runtime"]))
    return best


def finetune_sample(sample: int) -> list[str]:
    """``sample`` gen-v2 tasks, drawn with seed 0 among those whose best known is below 0.97 x best
    single."""
    known = best_known()
    eligible = []
    for task_id in gen_v2_task_ids():
        task = parse_task_id(task_id)
        single = _score(task, run_agent(task, "best-single").placement)[0]
        if known.get(task_id, np.inf) < 0.97 * single:
            eligible.append(task_id)
    rng = np.random.default_rng(0)
    chosen = sorted(rng.choice(len(eligible), min(sample, len(eligible)), replace=False).tolist())
    print(f"{len(eligible)} of 300 gen-v2 tasks have best known < 0.97 x best single; sample {len(chosen)}",
          flush=True)
    return [eligible[i] for i in chosen]


def measure_anneal(sample: int, seeds: list[int], out: Path) -> None:
    """Anneal at 10,000 and move-bandit at 1,000 (no pre-training) on the sample."""
    known = best_known()
    with out.open("w") as sink:
        for task_id in finetune_sample(sample):
            task = parse_task_id(task_id)
            row = {"task": task_id, "split": split_of_task(task_id), "best_known": known[task_id],
                   "best_single": _score(task, run_agent(task, "best-single").placement)[0]}
            for seed in seeds:
                started = time.perf_counter()
                row[f"anneal10k_s{seed}"] = _score(task, run_agent(task, "anneal", seed, 10_000).placement)
                row[f"anneal10k_s{seed}_wall"] = round(time.perf_counter() - started, 1)
                row[f"bandit1k_s{seed}"] = _score(task, run_agent(task, "move-bandit", seed, 1_000).placement)
            sink.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)


def measure_finetune(models: list[Path], seeds: list[int], anneal: Path, out: Path) -> None:
    """Each model at 1,000 evaluations (zero-shot, then move-bandit from it) on the sample of
    `measure_anneal`, whose rows it extends."""
    loaded = [load_checkpoint(path)[0] for path in models]
    rows = [json.loads(line) for line in anneal.open()]
    with out.open("w") as sink:
        for row in rows:
            task = parse_task_id(row["task"])
            for seed in seeds:
                for k, model in enumerate(loaded):
                    zero = pretrained_list(task, seed, 1, model=model)
                    row[f"model{k}_zero"] = _score(task, zero.placement)
                    result = pretrained_list(task, seed, 1_000, model=model)
                    assert result.evaluations <= 1_000
                    row[f"model{k}_1k_s{seed}"] = _score(task, result.placement)
            sink.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    summarise_finetune(rows, len(loaded), seeds)


def summarise_finetune(rows: list[dict], n_models: int, seeds: list[int]) -> None:
    print("| split | pairs | entry (1k) | seed | >= anneal 10k | median runtime / anneal 10k |")
    print("|---|---:|---|---:|---:|---:|")
    for split in sorted({r["split"] for r in rows}) + ["all"]:
        members = [r for r in rows if split in ("all", r["split"])]
        for seed in seeds:
            for name in [f"model{k}_1k" for k in range(n_models)] + ["bandit1k"]:
                ok = [_key(*r[f"{name}_s{seed}"]) <= _key(*r[f"anneal10k_s{seed}"]) for r in members]
                ratio = np.median([r[f"{name}_s{seed}"][0] / r[f"anneal10k_s{seed}"][0] for r in members])
                print(f"| {split} | {len(members)} | {name} | {seed} | {np.mean(ok):.0%} | {ratio:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["zero-shot", "anneal", "finetune", "summary"])
    parser.add_argument("--models", default=",".join(str(HERE / "runs" / f"seed{s}.json") for s in (0, 1, 2)))
    parser.add_argument("--random", type=int, default=100)
    parser.add_argument("--sample", type=int, default=12)
    parser.add_argument("--seeds", default="0")
    args = parser.parse_args()
    models = [Path(p) for p in args.models.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    (HERE / "results").mkdir(exist_ok=True)
    if args.what == "zero-shot":
        measure_zero_shot(models, args.random, HERE / "results" / "zero_shot.jsonl")
    elif args.what == "anneal":
        measure_anneal(args.sample, seeds, HERE / "results" / "anneal10k.jsonl")
    elif args.what == "finetune":
        results = HERE / "results"
        measure_finetune(models, seeds, results / "anneal10k.jsonl", results / "finetune.jsonl")
    else:
        rows = [json.loads(line) for line in (HERE / "results" / "zero_shot.jsonl").open()]
        summarise_zero_shot(rows, len(models))


if __name__ == "__main__":
    main()
