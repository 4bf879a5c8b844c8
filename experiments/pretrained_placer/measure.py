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
    python measure.py zero-shot --pairs real --agent pretrained-gnn --tag 2   # a registered agent
    python measure.py zero-shot --pairs real --agent pretrained-gnn --tag 3 --budget none  # + memory retries
    python measure.py layouts --pairs real     # every layout pretrained-gnn chooses among, simulated
    python measure.py off-grid              # train families exported at configurations off their grids
    python measure.py summary --pairs real --models 3
    python measure.py anneal --pairs real --sample 20 [--max-ops N]   # issue 68 item 4: 20 pairs a stratum
    python measure.py finetune --pairs real --start heft                   # and --start pretrained-list
    python measure.py finetune --pairs real --agent pretrained-list        # an agent's own fine-tuning

``--pairs real`` (issue 68) measures the same on held-out real models instead, its files under
``results/real/``: every graph of the test splits of ``architectures-v1`` (test-families: T5 and
Whisper, families no training set holds; test-sizes: each family's largest sizes) on ``k80x4``, on
``h100x8`` and graph i on ``random-v1:1000 + i mod 100``, training steps; ``summary`` then groups them
by family and cluster kind.

Zero-shot tasks (``--pairs gen-v2``, the default): every task of the generalisation track v2 (100 test
graphs of synthetic-v1 x k80x4, k40x4, p100x4) and the first ``--random`` of its graphs on one test
cluster of random-v1 each (graph i on random-v1:1000+i). ``baselines``: HEFT, m-ETF (as registered: up
to 7 evaluations with their memory retries) and best-single on them; ``zero-shot``: a model at one
evaluation (``--budget none``: with the baselines' memory retries instead). ``anneal``: a sample of the
gen-v2 tasks whose best known (the best runtime of any gen-v2 submission) is below 0.97 x best single,
with anneal at 10,000 evaluations and move-bandit at 1,000;
``finetune``: a model at 1,000 evaluations (move-bandit from its zero-shot placement) on that sample.
Every step appends to ``results/*.jsonl`` and skips the tasks already there, so a step cut short goes on
where it stopped; ``summary`` prints the tables of the README from the tasks every file has.
With ``--pairs real``, ``anneal`` and ``finetune`` measure issue 68's item 4 (fine-tuning from a
pre-trained start) on a sample of those pairs (`real_finetune_sample`): ``anneal`` draws it and runs
anneal at 10,000 evaluations (the reference) on it, into ``results/real/anneal10k.jsonl``;
``finetune --start NAME`` runs the registered agent NAME once (``--start-budget``: its budget, default
None) and starts move-bandit and anneal from its placement at 100 and at 1,000 evaluations, the start
agent's own evaluations counted in each budget (``results/real/finetune_start_NAME.jsonl``);
``finetune --agent NAME`` runs agent NAME as registered at 100 and at 1,000 evaluations
(``results/real/finetune_agent_NAME.jsonl``). ``summary --pairs real`` compares each start with HEFT's
(``--start heft`` must have run) and every entry with anneal at 10,000, per family group and cluster kind,
then how often search, and the gen-arch-v1 entries together, are strictly faster than HEFT at all.
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


def rows_by_task(path: Path) -> dict[str, dict]:
    """The rows of a results file (JSON lines) by task id; none when the file is missing."""
    return {row["task"]: row for row in map(json.loads, path.open())} if path.exists() else {}


def unmeasured(out: Path, task_ids: Iterable[str], make_task: Callable[[str], Task] = parse_task_id
               ) -> Iterator[tuple[str, Task, Callable[[dict], None]]]:
    """Each of ``task_ids`` that ``out`` (JSON lines, one row a task) has no row for yet, with its task
    (``make_task(task_id)``) and the function that appends its row to ``out`` at once (so that a stopped
    run resumes where it was)."""
    done = {json.loads(line)["task"] for line in out.open()} if out.exists() else set()
    with out.open("a") as sink:

        def write(row: dict) -> None:
            sink.write(json.dumps(row) + "\n")
            sink.flush()

        for task_id in task_ids:
            if task_id not in done:
                yield task_id, make_task(task_id), write


def unmeasured_seeds(out: Path, task_ids: Iterable[str], seeds: list[int], marker: Callable[[int], str]
                     ) -> Iterator[tuple[str, Task, dict, list[int], Callable[[dict], None]]]:
    """Each of ``task_ids`` whose row in ``out`` (JSON lines, one row a task) lacks the key
    ``marker(seed)`` of some of ``seeds``: its task, its row so far (``{}`` when none), those seeds, and
    the function that puts its row in ``out`` at once (replacing the old row: the file is rewritten
    whole, through a temporary file, so that a stopped run resumes where it was)."""
    rows = rows_by_task(out)

    def save(row: dict) -> None:
        rows[row["task"]] = row
        partial = out.with_name(out.name + ".partial")
        partial.write_text("".join(json.dumps(r) + "\n" for r in rows.values()))
        partial.replace(out)

    for task_id in task_ids:
        row = rows.get(task_id, {})
        missing = [seed for seed in seeds if marker(seed) not in row]
        if missing:
            yield task_id, parse_task_id(task_id), dict(row), missing, save


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


def measure_zero_shot(model_path: Path | None, tasks: list[str], out: Path, agent: str | None = None,
                      budget: int | None = 1) -> None:
    """The model (a `pretrained-list` checkpoint) or the registered ``agent`` at ``budget`` evaluations
    (None: with the memory retries, as the baselines run) on each of ``tasks`` (tasks already in ``out``
    are kept); an agent's ``layout`` (pretrained-gnn's choice) is kept beside."""
    model = load_checkpoint(model_path)[0] if agent is None else None
    for task_id, task, write in unmeasured(out, tasks):
        result = pretrained_list(task, 0, budget, model=model) if agent is None \
            else run_agent(task, agent, 0, budget)
        row = {"task": task_id, "model": _score(task, result.placement),
               "evaluations": result.evaluations}
        if "layout" in result.info:
            row["layout"] = result.info["layout"]
        write(row)


def measure_layouts(tasks: list[str], out: Path) -> None:
    """Every layout `pretrained-gnn` chooses among (`baselines.learning.pretrained_gnn.candidates`)
    simulated on each of ``tasks``: how good its choice could be with hindsight."""
    from baselines.learning.pretrained_gnn import candidates

    for task_id, task, write in unmeasured(out, tasks):
        write({"task": task_id, **{name: _score(task, p) for name, p in candidates(task).items()}})


def summarise_layouts(results: Path) -> None:
    """The share of pairs where each layout, and the best of them, is faster than HEFT as registered."""
    path = results / "layouts.jsonl"
    if not path.exists():
        return
    baselines = rows_by_task(results / "baselines.jsonl")
    rows = [row for task_id, row in rows_by_task(path).items() if task_id in baselines]
    names = sorted({name for row in rows for name in row if name != "task"})
    print(f"\nLayouts of pretrained-gnn on {len(rows)} pairs: faster than HEFT as registered")
    for name in [*names, "best of them"]:
        faster = [min(_key(*row[n]) for n in names if n in row) if name == "best of them"
                  else _key(*row[name]) if name in row else (True, np.inf)
                  for row in rows]
        share = np.mean([f < _key(*baselines[row["task"]]["heft"]) for f, row in zip(faster, rows)])
        print(f"  {name}: {share:.0%}")


# Issue 68's models exported from the project's own definitions (`placement_gym.datasets.architectures`)
# at configurations no grid of architectures-v1 holds: a value of each between or beyond the grid's.
OFF_GRID = (
    ("resnet", {"depth": 26, "widen": 3, "batch": 48}),
    ("inception", {"depth": 5, "width": 120, "batch": 24, "image": 256}),
    ("convnext", {"depth": 5, "width": 80, "batch": 48, "image": 192}),
    ("vit", {"layers": 10, "hidden": 512, "heads": 8, "batch": 64, "image": 256}),
    ("bert", {"layers": 8, "hidden": 512, "heads": 8, "batch": 32, "seq": 256}),
    ("gpt2", {"layers": 8, "hidden": 640, "heads": 10, "batch": 16, "seq": 512}),
    ("llama", {"layers": 6, "hidden": 2048, "heads": 16, "kv_heads": 8, "batch": 4, "seq": 1024}),
    ("moe", {"layers": 6, "hidden": 768, "heads": 8, "kv_heads": 2, "experts": 6, "top_k": 2, "batch": 4,
             "seq": 256}),
    ("rnnlm", {"layers": 3, "hidden": 1000, "steps": 25, "batch": 20}),
    ("gnmt", {"layers": 3, "hidden": 768, "steps": 15, "batch": 64}),
)
OFF_GRID_AGENTS = ("heft", "m-etf", "best-single", "pretrained-list", "pretrained-gnn")


def measure_off_grid(out: Path) -> None:
    """Each `OFF_GRID` model exported by torch.onnx.export on ``k80x4``, ``h100x8`` and
    ``random-v1:1000 + i``, training steps: `OFF_GRID_AGENTS` as registered at one evaluation where they
    take a budget (HEFT, m-ETF: as registered, with their memory retries)."""
    from placement_gym.datasets import architectures
    from placement_gym.task.named import get_task

    models = {f"{family}-" + "-".join(f"{k}{v}" for k, v in params.items()): (i, family, params)
              for i, (family, params) in enumerate(OFF_GRID)}
    exported: dict[str, object] = {}  # the model of the tasks being measured (its three clusters in a row)

    def make_task(task_id: str) -> Task:
        name, cluster, _ = task_id.split("/")
        if name not in exported:
            _, family, params = models[name]
            exported.clear()
            exported[name] = architectures.export_graph(getattr(architectures, family)(params), name)
        return get_task(exported[name], cluster, "train")

    task_ids = [f"{name}/{cluster}/train" for name, (i, _, _) in models.items()
                for cluster in (*REAL_PRESETS, f"random-v1:{1000 + i}")]
    for task_id, task, write in unmeasured(out, task_ids, make_task):
        name, cluster, _ = task_id.split("/")
        row = {"task": task_id, "family": models[name][1], "cluster": cluster, "ops": task.n_ops}
        for agent in OFF_GRID_AGENTS:
            budget = 1 if agent.startswith("pretrained") else None
            row[agent] = _score(task, run_agent(task, agent, 0, budget).placement)
        write(row)
        print(task_id, flush=True)


def summarise_off_grid(results: Path) -> None:
    path = results / "off_grid.jsonl"
    if not path.exists():
        return
    rows = list(rows_by_task(path).values())
    print(f"\nOff-grid exports ({len(rows)} pairs): faster than HEFT / infeasible where HEFT is not / "
          "geo-mean HEFT over it")
    for agent in OFF_GRID_AGENTS[1:]:
        faster = np.mean([_key(*r[agent]) < _key(*r["heft"]) for r in rows])
        worse = sum(not r[agent][1] and r["heft"][1] for r in rows)
        ratio = np.exp(np.mean([np.log(r["heft"][0] / r[agent][0]) for r in rows]))
        print(f"  {agent}: {faster:.0%} / {worse} / {ratio:.3f}")


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
    it is infeasible while HEFT is feasible, and the geometric mean of HEFT's runtime over the model's.
    The models' median per pair is a row of its own unless ``by_family`` (the real-model pairs' models
    are different agents, not seeds of one)."""
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
        for k in [*range(n_models), "median"] if n_models > 1 and not by_family else range(n_models):
            mine = [_key(*r[f"model{k}" if k != "median" else "median"]) for r in members]
            beats = {name: np.mean([m < _key(*r[name]) for m, r in zip(mine, members)])
                     for name in ("heft", "m-etf", "best-single")}
            both = np.mean([m < _key(*r["heft"]) and m < _key(*r["m-etf"]) for m, r in zip(mine, members)])
            worse = sum(m[0] and r["heft"][1] for m, r in zip(mine, members))
            name = f"model{k}" if k != "median" else "median"
            finite = [r for r in members if np.isfinite(r[name][0]) and np.isfinite(r["heft"][0])]
            ratio = np.exp(np.mean([np.log(r["heft"][0] / r[name][0]) for r in finite])) if finite else np.nan
            label = f"model {k}" if k != "median" else "median of models"
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


# ---------------------------------------------------------------------------------------------------
# Issue 68, item 4: fine-tuning from a pre-trained start on held-out real models (--pairs real)

REAL_GROUPS = ("t5", "whisper", "test-sizes")  # test-families' two families, then test-sizes
REAL_CLUSTERS = ("k80x4", "h100x8", "random")
REAL_BUDGETS = (100, 1_000)
SEARCHES = ("move-bandit", "anneal")  # what `measure_real_start` runs from a start placement


def _group(row: dict) -> str:
    return row["family"] if row["split"] == "test-families" else "test-sizes"


def real_finetune_sample(per_stratum: int, max_ops: int | None, results: Path) -> list[dict]:
    """Issue 68's fine-tuning sample: the held-out real pairs (`real_model_tasks`, their rows in
    ``results/baselines.jsonl``) where the better of HEFT and m-ETF (feasible) is below 0.97 x best
    single (gen-v2's rule, with the baselines as best known), stratified by family group
    (`REAL_GROUPS`) x cluster kind (`REAL_CLUSTERS`). Per stratum, in this order, one generator of seed
    0 permutes the eligible pairs; the first ``per_stratum`` of at most ``max_ops`` ops (all the
    task's ops, backward and update included) are drawn, so that a larger ``per_stratum`` or cap
    extends the sample. The strata are interleaved, so that a run cut short holds every stratum. Each
    drawn pair's baselines row, with its ``group``."""
    rows = {row["task"]: row for row in map(json.loads, (results / "baselines.jsonl").open())}
    eligible: dict[tuple[str, str], list[dict]] = {}
    for task_id in real_model_tasks():
        row = rows[task_id]
        single = row["best-single"][0] if row["best-single"][1] else np.inf
        known = min([r[0] for r in (row["heft"], row["m-etf"]) if r[1]], default=np.inf)
        if known < 0.97 * single:
            eligible.setdefault((_group(row), row["cluster"]), []).append({**row, "group": _group(row)})
    rng = np.random.default_rng(0)
    drawn = []
    for stratum in [(g, c) for g in REAL_GROUPS for c in REAL_CLUSTERS]:
        members = eligible.get(stratum, [])
        order = rng.permutation(len(members)).tolist()
        capped = [members[i] for i in order if max_ops is None or members[i]["ops"] <= max_ops]
        drawn.append(capped[:per_stratum])
        print(f"{stratum[0]} x {stratum[1]}: {len(members)} eligible, {len(capped)} of <= "
              f"{max_ops or 'any'} ops, {len(drawn[-1])} drawn", flush=True)
    return [ids[k] for k in range(per_stratum) for ids in drawn if k < len(ids)]


def measure_real_anneal(per_stratum: int, max_ops: int | None, seeds: list[int], results: Path) -> None:
    """Anneal at 10,000 evaluations on `real_finetune_sample`, for each of ``seeds`` a task's row does not
    hold yet (`unmeasured_seeds`)."""
    sample = {row["task"]: row for row in real_finetune_sample(per_stratum, max_ops, results)}
    for task_id, task, row, missing, write in unmeasured_seeds(results / "anneal10k.jsonl", sample, seeds,
                                                               lambda seed: f"anneal10k_s{seed}"):
        base = sample[task_id]
        row = row or {key: base[key] for key in ("task", "split", "family", "group", "cluster", "ops", "heft",
                                                 "m-etf", "best-single")}
        for seed in missing:
            started = time.perf_counter()
            result = run_agent(task, "anneal", seed, 10_000)
            row[f"anneal10k_s{seed}"] = [*_score(task, result.placement), result.evaluations]
            row[f"anneal10k_s{seed}_wall"] = round(time.perf_counter() - started, 2)
        write(row)
        print(json.dumps(row), flush=True)


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def measure_real_start(start: str, start_budget: int | None, seeds: list[int], results: Path) -> None:
    """From agent ``start``'s placement (run once per seed at ``start_budget``), move-bandit and anneal
    at each of `REAL_BUDGETS` evaluations in all, the start agent's evaluations counted in the
    budget (and the start placement scored once more by the search, counted too), on the pairs of
    ``results/anneal10k.jsonl``, for each of ``seeds`` a task's row does not hold yet. A budget the
    start alone uses up is recorded as None."""
    from baselines.registry import get_agent
    from placement_gym.evaluation.agents import AgentResult
    from placement_gym.evaluation.budget import Budget

    out = results / f"finetune_start_{_file_name(start)}.jsonl"
    tasks = [json.loads(line)["task"] for line in (results / "anneal10k.jsonl").open()]
    marker = "start_s{}".format
    for task_id, task, row, missing, write in unmeasured_seeds(out, tasks, seeds, marker):
        row = row or {"task": task_id, "start_agent": start, "start_budget": start_budget}
        for seed in missing:
            started = time.perf_counter()
            first = AgentResult.checked(task, get_agent(start)(task, seed=seed, budget=start_budget))
            row[f"start_s{seed}"] = [*_score(task, first.placement), first.evaluations]
            row[f"start_s{seed}_wall"] = round(time.perf_counter() - started, 2)
            for search in SEARCHES:
                for budget in REAL_BUDGETS:
                    key = f"{search}{budget}_s{seed}"
                    if first.evaluations + 1 > budget:  # no evaluation left for the search
                        row[key] = None
                        continue
                    started = time.perf_counter()
                    own = Budget(task, budget, used=first.evaluations)
                    result = AgentResult.checked(task, get_agent(search)(
                        task, seed=seed, budget=own, start=first.placement))
                    assert result.evaluations <= budget, (task_id, key, result.evaluations)
                    row[key] = [*_score(task, result.placement), result.evaluations]
                    row[f"{key}_wall"] = round(time.perf_counter() - started, 2)
        write(row)
        print(json.dumps(row), flush=True)


def measure_real_agent(name: str, seeds: list[int], results: Path) -> None:
    """Agent ``name`` as registered at each of `REAL_BUDGETS` evaluations, on the pairs of
    ``results/anneal10k.jsonl``, for each of ``seeds`` a task's row does not hold yet. A budget the
    agent refuses (ValueError: too small for its start) is recorded as None, with the reason."""
    out = results / f"finetune_agent_{_file_name(name)}.jsonl"
    tasks = [json.loads(line)["task"] for line in (results / "anneal10k.jsonl").open()]
    for task_id, task, row, missing, write in unmeasured_seeds(out, tasks, seeds,
                                                               lambda seed: f"{REAL_BUDGETS[0]}_s{seed}"):
        row = row or {"task": task_id, "agent": name}
        for seed in missing:
            for budget in REAL_BUDGETS:
                key = f"{budget}_s{seed}"
                started = time.perf_counter()
                try:
                    result = run_agent(task, name, seed, budget)
                except ValueError as error:
                    row[key], row[f"{key}_refused"] = None, str(error)
                    continue
                assert result.evaluations <= budget, (task_id, key, result.evaluations)
                row[key] = [*_score(task, result.placement), result.evaluations]
                row[f"{key}_wall"] = round(time.perf_counter() - started, 2)
                if "start" in result.info:
                    row[f"{key}_start"] = result.info["start"]
        write(row)
        print(json.dumps(row), flush=True)


def _key_of(result: list | None) -> tuple[bool, float]:
    """`_key` of a stored ``[runtime, feasible, ...]``; a result not run (None) ranks last."""
    return (True, np.inf) if result is None else _key(result[0], result[1])


def summarise_real_finetune(results: Path, seeds: list[int]) -> None:
    """Issue 68 item 4's table (module docstring): per family group and cluster kind (then per group,
    then all), for every start but HEFT's (each search from it) and every agent file, at each budget:
    the share of pairs strictly better (feasible first) than the same search from HEFT's placement
    (an agent file: than move-bandit from HEFT's, its search) and the share strictly worse, the share
    at least as good as anneal at 10,000, and the median of runtime / anneal-10k's."""
    anneal = rows_by_task(results / "anneal10k.jsonl")
    heft = rows_by_task(results / "finetune_start_heft.jsonl")
    if not anneal or not heft:
        print("(no fine-tuning table: run `anneal --pairs real` and `finetune --pairs real --start heft`)")
        return
    entries = []  # (label, rows by task, key of a result, key of HEFT's same search)
    for path in sorted(results.glob("finetune_start_*.jsonl")):
        mine = rows_by_task(path)
        start = next(iter(mine.values()))["start_agent"] if mine else path.stem
        for search in SEARCHES:
            entries.append((f"{start} -> {search}", mine, f"{search}{{budget}}_s{{seed}}",
                            f"{search}{{budget}}_s{{seed}}"))
    for path in sorted(results.glob("finetune_agent_*.jsonl")):
        mine = rows_by_task(path)
        name = next(iter(mine.values()))["agent"] if mine else path.stem
        entries.append((f"{name} (as registered)", mine, "{budget}_s{seed}", "move-bandit{budget}_s{seed}"))
    print("\n| group | clusters | pairs | entry | budget | seed | > same search from HEFT "
          "| < same search from HEFT | >= anneal 10k | median runtime / anneal 10k | not run |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    groups: dict[tuple[str, str], list[str]] = {}
    for task_id, row in anneal.items():
        for key in ((row["group"], row["cluster"]), (row["group"], "all"), ("all", "all")):
            groups.setdefault(key, []).append(task_id)
    order = {name: i for i, name in enumerate([*REAL_GROUPS, *REAL_CLUSTERS, "all"])}
    for (group, cluster), members in sorted(groups.items(), key=lambda kv: (order[kv[0][0]],
                                                                            order[kv[0][1]])):
        for label, mine, key, heft_key in entries:
            if label.startswith("heft -> "):
                continue
            for budget in REAL_BUDGETS:
                for seed in seeds:
                    k, hk = key.format(budget=budget, seed=seed), heft_key.format(budget=budget, seed=seed)
                    tasks = [t for t in members if t in mine and t in heft]
                    if not tasks:
                        continue
                    ran = [t for t in tasks if mine[t].get(k) is not None]
                    ref = f"anneal10k_s{seed}"

                    better = np.mean([_key_of(mine[t].get(k)) < _key_of(heft[t].get(hk)) for t in tasks])
                    worse = np.mean([_key_of(mine[t].get(k)) > _key_of(heft[t].get(hk)) for t in tasks])
                    ok = np.mean([_key_of(mine[t].get(k)) <= _key_of(anneal[t][ref]) for t in tasks])
                    ratio = (np.median([mine[t][k][0] / anneal[t][ref][0] for t in ran]) if ran
                             else np.nan)
                    print(f"| {group} | {cluster} | {len(tasks)} | {label} | {budget:,} | {seed} | "
                          f"{better:.0%} | {worse:.0%} | {ok:.0%} | {ratio:.3f} | {len(tasks) - len(ran)} |")
    # HEFT's own searches, the reference of the first columns, against anneal at 10,000
    print("\n| group | clusters | pairs | entry | budget | seed | >= anneal 10k "
          "| median runtime / anneal 10k | not run |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|")
    for (group, cluster), members in sorted(groups.items(), key=lambda kv: (order[kv[0][0]],
                                                                            order[kv[0][1]])):
        tasks = [t for t in members if t in heft]
        for search in SEARCHES:
            for budget in REAL_BUDGETS:
                for seed in seeds:
                    k, ref = f"{search}{budget}_s{seed}", f"anneal10k_s{seed}"
                    ran = [t for t in tasks if heft[t].get(k) is not None]
                    ok = np.mean([t in ran and _key(*heft[t][k][:2]) <= _key(*anneal[t][ref][:2])
                                  for t in tasks])
                    ratio = np.median([heft[t][k][0] / anneal[t][ref][0] for t in ran]) if ran else np.nan
                    print(f"| {group} | {cluster} | {len(tasks)} | heft -> {search} | {budget:,} | {seed} | "
                          f"{ok:.0%} | {ratio:.3f} | {len(tasks) - len(ran)} |")


def _family(task_id: str) -> str:
    graph = task_id.split("/")[0].split(":")[-1]
    return graph.rstrip("0123456789").rstrip("-")


def checked_entries(pattern: str) -> dict[str, dict]:
    """The committed submissions matching ``pattern``, by file name, validated and their placements
    re-simulated (`placement_gym.leaderboard.render.checked_submissions`): figures recomputed here."""
    import shutil
    import tempfile

    from placement_gym.leaderboard.render import checked_submissions

    with tempfile.TemporaryDirectory() as folder:
        for path in SUBMISSIONS.glob(pattern):
            shutil.copy(path, folder)
        return dict(checked_submissions(folder))


def summarise_search_ceiling(results: Path, seeds: list[int]) -> None:
    """How often anything beats HEFT (as registered) strictly, per cluster kind: on the fine-tuning
    sample (the first of ``seeds``), each search from HEFT's placement and anneal at 10,000 from its
    own start; on the gen-arch-v1 tasks, the best of all its committed entries (searches up to 10,000
    evaluations, three seeds) and the best of those at one evaluation. A zero-shot placer's share cannot
    be expected above what search finds."""
    anneal = rows_by_task(results / "anneal10k.jsonl")
    heft = rows_by_task(results / "finetune_start_heft.jsonl")
    if not anneal or not heft:
        return
    print("\nStrictly faster than HEFT, fine-tuning sample (pairs: " + ", ".join(
        f"{c} {sum(r['cluster'] == c for r in anneal.values())}" for c in REAL_CLUSTERS) + ")")
    seed = seeds[0]
    runs = [(f"heft -> {search} {budget:,}", heft, f"{search}{budget}_s{seed}")
            for search in SEARCHES for budget in REAL_BUDGETS]
    runs.append(("anneal 10,000", anneal, f"anneal10k_s{seed}"))
    for label, rows, key in runs:
        shares = []
        for cluster in [*REAL_CLUSTERS, "all"]:
            tasks = [t for t, r in anneal.items() if cluster in ("all", r["cluster"]) and t in rows]
            shares.append(np.mean([_key_of(rows[t].get(key)) < _key(*anneal[t]["heft"]) for t in tasks]))
        print(f"  {label}: " + " / ".join(f"{c} {v:.0%}" for c, v in zip([*REAL_CLUSTERS, "all"], shares)))
    files = checked_entries("gen-arch-v1-*.json")
    reference = files.get("gen-arch-v1-heft-seed0.json")
    if reference is None:
        return
    print(f"Strictly faster than HEFT, gen-arch-v1 ({len(reference['results'])} tasks, "
          f"{len(files) - 1} other entries, re-simulated)")
    for label, one_evaluation in (("best of all entries", False), ("best at one evaluation", True)):
        better: dict[str, list[bool]] = {key: [] for key in ("k80x4", "h100x8", "random", "all")}
        for task_id, mine in reference["results"].items():
            entries = [data["results"][task_id] for name, data in files.items()
                       if name != "gen-arch-v1-heft-seed0.json" and task_id in data["results"]
                       and (not one_evaluation or data["results"][task_id]["evaluations"] == 1)]
            best = min((_key(r["runtime"], r["feasible"]) for r in entries), default=(True, np.inf))
            cluster = task_id.split("/")[1].split(":")[0].removesuffix("-v1")
            for key in (cluster, "all"):
                better.setdefault(key, []).append(best < _key(mine["runtime"], mine["feasible"]))
        print(f"  {label}: " + " / ".join(f"{c} {np.mean(v):.0%}" for c, v in better.items() if v))


def summarise_leaderboard() -> None:
    """Target 2 from the gen-v2 entries of the leaderboard (module docstring)."""
    files = checked_entries("gen-v2-*.json")
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
                                                   "leaderboard", "layouts", "off-grid"])
    parser.add_argument("--model", type=Path, help="a checkpoint (zero-shot, finetune)")
    parser.add_argument("--tag", type=int, default=0, help="the model's number in the result files")
    parser.add_argument("--models", type=int, default=3, help="summary: how many models to merge")
    parser.add_argument("--random", type=int, default=50)
    parser.add_argument("--sample", type=int, default=12)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--pairs", choices=("gen-v2", "real"), default="gen-v2",
                        help="the zero-shot pairs: gen-v2's (default) or held-out real models (issue 68)")
    parser.add_argument("--max-ops", type=int, help="anneal --pairs real: the largest graph drawn (all ops)")
    parser.add_argument("--start", help="finetune --pairs real: the registered agent whose placement "
                        "move-bandit and anneal start from")
    parser.add_argument("--start-budget", type=int, help="finetune --pairs real --start: the start "
                        "agent's budget (default None)")
    parser.add_argument("--agent", help="zero-shot: a registered agent (instead of --model); finetune "
                        "--pairs real: a registered agent run as it is")
    parser.add_argument("--budget", default="1", help="zero-shot: the evaluations, or 'none' for the "
                        "memory retries the baselines have (up to 7 evaluations; default 1)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.budget.lower() != "none" and not (args.budget.isdigit() and int(args.budget) >= 1):
        parser.error(f"--budget: a number of evaluations >= 1 or 'none', got {args.budget!r}")
    budget = None if args.budget.lower() == "none" else int(args.budget)
    results = HERE / "results" / ("real" if args.pairs == "real" else "")
    results.mkdir(exist_ok=True, parents=True)
    if args.pairs == "real" and args.what == "leaderboard":
        parser.error("--pairs real: no leaderboard (the real-model pairs have none)")
    if args.pairs == "real" and args.what == "finetune" and (args.start is None) == (args.agent is None):
        parser.error("finetune --pairs real needs one of --start NAME and --agent NAME")
    if args.pairs != "real" and (args.start or args.max_ops or args.start_budget):
        parser.error("--start, --start-budget and --max-ops go with --pairs real")
    if args.agent and args.what not in ("zero-shot", "finetune") or args.what == "finetune" and args.agent \
            and args.pairs != "real":
        parser.error("--agent goes with zero-shot, or with finetune --pairs real")
    if args.pairs == "real" and args.what == "anneal":
        measure_real_anneal(args.sample, args.max_ops, seeds, results)
    elif args.pairs == "real" and args.what == "finetune":
        if args.start is not None:
            measure_real_start(args.start, args.start_budget, seeds, results)
        else:
            measure_real_agent(args.agent, seeds, results)
    elif args.what == "baselines":
        measure_baselines(args.random, results / "baselines.jsonl", args.pairs)
    elif args.what == "zero-shot":
        out = results / f"zero_shot_model{args.tag}.jsonl"
        if (args.model is None) == (args.agent is None):
            parser.error("zero-shot needs one of --model CHECKPOINT and --agent NAME")
        measure_zero_shot(args.model, zero_shot_tasks(args.random, args.pairs), out, args.agent, budget)
    elif args.what == "off-grid":
        measure_off_grid(HERE / "results" / "real" / "off_grid.jsonl")
    elif args.what == "layouts":
        measure_layouts(zero_shot_tasks(args.random, args.pairs), results / "layouts.jsonl")
    elif args.what == "anneal":
        measure_anneal(args.sample, seeds, results / "anneal10k.jsonl")
    elif args.what == "finetune":
        out = results / f"finetune_model{args.tag}.jsonl"
        measure_finetune(args.model, seeds, results / "anneal10k.jsonl", out)
    elif args.what == "leaderboard":
        summarise_leaderboard()
    elif args.pairs == "real":
        summarise_zero_shot(merged_zero_shot(results, args.models), args.models, by_family=True)
        summarise_layouts(results)
        summarise_off_grid(results)
        summarise_real_finetune(results, seeds)
        summarise_search_ceiling(results, seeds)
    else:
        summarise_zero_shot(merged_zero_shot(results, args.models), args.models)
        summarise_finetune(merged_finetune(results, args.models), args.models, seeds)


if __name__ == "__main__":
    main()
