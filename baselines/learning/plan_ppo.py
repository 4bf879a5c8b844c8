"""MaskablePPO (sb3-contrib) on the parallel-plan environments: trained on one problem within an
evaluation budget (`ppo_on_task`), or on the train split of ``plans-v1`` and then asked, zero-shot, for
the plans of held-out problems (`train_plan_policy`, `policy_plan`, `compare_with_rules`).

On one problem (issue 66: "PPO on the single-shot env beats random search at equal evaluations").
`ppo_on_task` trains MaskablePPO on `ParallelPlan-v0` (single shot: an episode is one step, the action
the whole choice, masked per dimension by `PlanTask.value_masks`) or on `ParallelPlanStaged-v0` posed
on the task; every step that ends an episode prices one plan, so a budget of N evaluations is N
single-shot steps or 10 N staged ones. The answer is the fastest feasible plan any step priced, the
count the plans priced (exactly ``budget``: ``budget // n_steps`` rollouts of ``n_steps`` plans, each
followed by PPO's update, then the plans left sampled from the policy and not trained on). The
observation of a fixed problem does not change, so on the single-shot env the policy is in effect one
categorical distribution per dimension that PPO sharpens towards the faster plans. `DEFAULT_CONFIG` is
what tests/baselines/test_plan_ppo.py's comparison with random search runs. On its problem (Llama 3.2
1B, 16 DGX H100, 32 sequences; 4 optimal choices of 120,960) PPO's best of 2,048 plans is within about 1%
of the optimum for each of seeds 0 to 11, random search's 0.5% to 43% above it (median 27%); random
search reaches PPO's worst seed's plan in about one run of four, so PPO's plan is the faster on 8 of
the 12 seeds, not all.
The staged env does no better: its masks alone make uniform sampling strong (a uniform staged sampler
beat staged PPO on Megatron's 1T GPT on 64 DGX A100 at 128 sequences), and PPO narrows it too early.

Across problems (issue 66: "a policy trained on the train split finds, zero-shot, plans at least as
fast as the Megatron rules"). `train_plan_policy` trains MaskablePPO on `ParallelPlan-v0` (or, with
``staged``, `ParallelPlanStaged-v0`) over ``n_envs`` envs, each drawing a problem of a split at every
reset (the observation carries the model's, the mesh's and the batch's features). `policy_plan` asks
a trained policy for the plan of a new problem: its greedy plan (one evaluation; the most likely
allowed value of each dimension) and, with ``samples`` above 1, that many plans in all, the others
sampled, the fastest feasible one kept. `compare_with_rules` sets that plan against the ``megatron``
plan agent's (which prices up to 8). `POLICY` is the policy ``python -m baselines.learning.plan_ppo``
saves with `TRAIN_CONFIG` (250,000 plans, about 3 minutes on 2 cores, 600 kB; deterministic for its
seed on a CPU with one torch thread: two runs gave the same weights). Its results (the note): on the 60
problems `held_out_ids` spaces evenly over test-sizes and test-families, the best of 8 plans is at
least as fast as the rules' on 42 (70%), the greedy plan alone on 37 (62%); on all 410 held-out
problems 282 (69%) and 245 (60%). The held-out model sizes do well (greedy 74% of 232), the
mixture-of-experts family, which the train split never shows (its expert degree is always masked
there), does not (greedy 41% of 178). The rules are far from optimal there to be beaten: on the 60
their plan is optimal for 10%, its step a median 13% above the sweep's optimum. Staged training, at
the same wall time, prices ten times fewer plans and did worse (18% greedy after 200,000 steps).

Speed. The staged env's masks filter the task's divisible degree combinations in Python at every step
(`PlanTask.choice_masks`); `StagedMasks` computes the same masks on arrays, once for each prefix of
degrees, and the environments here take theirs from it (tests/baselines/test_plan_ppo.py checks that
the two agree). A dataset env makes a new `PlanTask` at every reset, whose masks (some 6 ms) and layer
prices would be computed anew; `PlanRecorder` poses the first task of each problem again. Everything
runs on the CPU with one torch thread (small MLPs, for which more threads only wait for each other),
restored afterwards.

sb3-contrib and torch are imported inside the functions that need them, so that importing this module
works without them. No plan agent is registered: the provider imports the modules `baselines.registry`
lists; `plan_ppo` has the plan agents' signature for one that does.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from baselines.plans import megatron
from placement_gym.common.threads import intra_op_threads
from placement_gym.envs.parallel_plan import ParallelPlanEnv
from placement_gym.envs.parallel_plan_staged import ParallelPlanStagedEnv
from placement_gym.evaluation.agents import AgentResult
from placement_gym.plans.dataset import plan_dataset_ids, plan_dataset_task
from placement_gym.plans.space import DIMENSION_NAMES, DIMENSIONS, OPTION_COUNTS, PlanTask

# `ppo_on_task`'s settings for the comparison with random search (tests/baselines/test_plan_ppo.py).
DEFAULT_CONFIG: dict[str, Any] = {
    "staged": False, "reward": "mfu", "infeasible_reward": -0.1, "n_steps": 128, "batch_size": 64,
    "n_epochs": 10, "learning_rate": 1e-3, "ent_coef": 0.0, "hidden": 64,
}
DEFAULT_BUDGET = 2048
# `train_plan_policy`'s settings, those of the saved `POLICY`.
TRAIN_CONFIG: dict[str, Any] = {
    "split": "train", "seed": 0, "timesteps": 250_000, "staged": False, "n_envs": 32, "n_steps": 64,
    "batch_size": 512, "n_epochs": 10, "learning_rate": 1e-3, "ent_coef": 0.01, "hidden": 128,
    "reward": "mfu", "infeasible_reward": -0.1,
}
POLICY = Path(__file__).with_name("plan_ppo_policy.zip")
# The held-out splits `compare_with_rules` reads by default, and the problems it takes of them.
HELD_OUT = ("test-sizes", "test-families")
HELD_OUT_SAMPLE = 60

# `PlanTask.degree_combos`' columns, in their order; the first six dimensions of `DIMENSION_NAMES`
# (tp, pp, vp, cp, ep, microbatch_size) are the same degrees in another order.
_COMBO_COLUMNS = ("tp", "pp", "cp", "vp", "ep", "microbatch_size")
_DEGREE_STAGES = len(_COMBO_COLUMNS)


class StagedMasks:
    """`ParallelPlanStagedEnv.action_masks` of one task, on arrays (the module docstring, "Speed").

    ``masks(stage, choice)`` is the mask of dimension ``stage`` given the value indices ``choice[:stage]``
    chosen so far: for a degree, the values some divisible combination with the chosen degrees has; for
    the schedule, the plain schedules where some such combination has one virtual stage a pipeline
    stage and the interleaved one where some has more; sequence parallelism where some has a tensor
    degree above 1; every ZeRO stage and recomputation (all False where no combination is left), padded
    to the staged env's action width. Masks are kept for each prefix of degrees."""

    def __init__(self, task: PlanTask) -> None:
        self.task = task
        columns = [_COMBO_COLUMNS.index(name) for name in DIMENSION_NAMES[:_DEGREE_STAGES]]
        self.codes = np.array([[DIMENSIONS[DIMENSION_NAMES[k]].index(combo[column])
                                for k, column in enumerate(columns)] for combo in task.degree_combos],
                              dtype=np.int64).reshape(-1, _DEGREE_STAGES)
        self._kept: dict[tuple[int, bytes], np.ndarray] = {}

    def __call__(self, stage: int, choice: np.ndarray) -> np.ndarray:
        prefix = np.asarray(choice[: min(stage, _DEGREE_STAGES)], dtype=np.int64)
        key = (stage, prefix.tobytes())
        mask = self._kept.get(key)
        if mask is None:
            mask = self._kept[key] = self._mask(stage, prefix)
        return mask.copy()

    def _mask(self, stage: int, prefix: np.ndarray) -> np.ndarray:
        mask = np.zeros(max(OPTION_COUNTS), dtype=bool)
        if stage >= len(DIMENSION_NAMES):
            return mask
        rows = self.codes[np.all(self.codes[:, : len(prefix)] == prefix, axis=1)]
        if len(rows) == 0:
            return mask
        name = DIMENSION_NAMES[stage]
        if stage < _DEGREE_STAGES:
            mask[np.unique(rows[:, stage])] = True
        elif name == "schedule":
            vp = rows[:, DIMENSION_NAMES.index("vp")]
            plain, interleaved = bool((vp == 0).any()), bool((vp > 0).any())
            mask[: OPTION_COUNTS[stage]] = [interleaved if value == "interleaved" else plain
                                             for value in DIMENSIONS[name]]
        elif name == "sequence_parallel":
            mask[0], mask[1] = True, bool((rows[:, DIMENSION_NAMES.index("tp")] > 0).any())
        else:  # ZeRO and recomputation: every value
            mask[: OPTION_COUNTS[stage]] = True
        return mask


class PlanRecorder(gym.Wrapper):
    """A plan env that keeps every plan it priced (``steps``: step seconds, inf where infeasible) and the
    fastest feasible one (``best``, ``best_step``), and answers ``action_masks()`` (the staged env's
    from `StagedMasks`, one per problem). Drawing from a dataset, it poses the first task it met of
    each problem again (the env's reset makes a new one, whose masks and layer prices
    `PlanTask` would compute anew: most of a step's time), the same problem and observation;
    ``tasks`` (id -> task) shares them between recorders."""

    def __init__(self, env: gym.Env, tasks: dict[str, PlanTask] | None = None,
                 log_reward: bool = False) -> None:
        super().__init__(env)
        self.log_reward = log_reward
        self.best: np.ndarray | None = None
        self.best_step = math.inf
        self.steps: list[float] = []
        self._staged: dict[str, StagedMasks] = {}
        self._tasks = {} if tasks is None else tasks

    def reset(self, **kwargs: Any):
        observation, info = self.env.reset(**kwargs)
        env = self.env.unwrapped
        if env.task_ids:  # drawing from a dataset: one task a problem, its masks and layer prices kept
            env.task = self._tasks.setdefault(env.task.id, env.task)
        return observation, info

    def step(self, action: Any):
        observation, reward, terminated, truncated, info = self.env.step(action)
        if terminated:
            step = float(info["step_s"]) if info["feasible"] else math.inf
            self.steps.append(step)
            if step < self.best_step or self.best is None:
                self.best, self.best_step = self.env.unwrapped.choice.copy(), step
            if self.log_reward and info["feasible"]:
                reward = math.log(float(info["mfu"]))
        return observation, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        env = self.env.unwrapped
        if not isinstance(env, ParallelPlanStagedEnv):
            return env.action_masks()
        masks = self._staged.get(env.task.id)
        if masks is None or masks.task is not env.task:
            masks = self._staged[env.task.id] = StagedMasks(env.task)
        return masks(env.stage, env.choice)


def plan_env(task: PlanTask | None = None, staged: bool = False, reward: str = "mfu",
             infeasible_reward: float = -0.1, dataset: str | None = None,
             tasks: dict[str, PlanTask] | None = None) -> PlanRecorder:
    """A `PlanRecorder` around `ParallelPlanStaged-v0` (``staged``) or `ParallelPlan-v0`, posed on
    ``task`` itself (its evaluations counted by it) or drawing from ``dataset`` (``plans-v1:<split>``;
    ``tasks``: `PlanRecorder`'s). ``reward``: the env's (``mfu``, ``neg_step``) or ``log_mfu``, the log
    of a feasible plan's MFU (``infeasible_reward`` otherwise; tried for training across problems, it did
    no better than ``mfu``)."""
    cls = ParallelPlanStagedEnv if staged else ParallelPlanEnv
    env = cls(reward="mfu" if reward == "log_mfu" else reward, infeasible_reward=infeasible_reward,
              dataset=dataset)
    if task is not None:
        env.task = task  # no dataset: every reset keeps the env's task
    return PlanRecorder(env, tasks, reward == "log_mfu")


def _maskable_ppo(env: Any, seed: int, n_steps: int, batch_size: int, n_epochs: int, learning_rate: float,
                  ent_coef: float, hidden: int) -> Any:
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.logger import Logger

    # gamma and lambda 1: the only reward is the plan's, at the episode's end
    model = MaskablePPO("MultiInputPolicy", env, learning_rate=learning_rate, n_steps=n_steps,
                        batch_size=batch_size, n_epochs=n_epochs, gamma=1.0, gae_lambda=1.0,
                        ent_coef=ent_coef, policy_kwargs={"net_arch": [hidden, hidden]}, seed=seed,
                        device="cpu")
    model.set_logger(Logger(folder=None, output_formats=[]))  # no log folders
    return model


def ppo_on_task(task: PlanTask, seed: int = 0, budget: int = DEFAULT_BUDGET, **config: Any) -> AgentResult:
    """Train MaskablePPO on ``task`` for ``budget`` evaluations (the module docstring); the fastest
    feasible plan priced. ``config``: keys of `DEFAULT_CONFIG` (``n_steps`` and ``batch_size`` in
    plans, whatever the env). ``info``: ``step_s`` (inf: none feasible) and ``steps``, every plan's step
    seconds in the order priced. Deterministic for a seed (SB3's ``seed=``, which also seeds the global
    generators of random, numpy and torch)."""
    unknown = set(config) - set(DEFAULT_CONFIG)
    if unknown:
        raise TypeError(f"ppo_on_task got unknown setting(s) {sorted(unknown)}; its settings: "
                        f"{', '.join(DEFAULT_CONFIG)}")
    if not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive integer, got {budget!r}")
    settings = {**DEFAULT_CONFIG, **config}
    env = plan_env(task, settings["staged"], settings["reward"], settings["infeasible_reward"])
    per_plan = len(DIMENSION_NAMES) if settings["staged"] else 1
    n_steps = min(int(settings["n_steps"]), budget)
    batch_size = min(int(settings["batch_size"]), n_steps)
    with intra_op_threads(1, "plan-ppo"):
        model = _maskable_ppo(env, seed, n_steps * per_plan, batch_size * per_plan, int(settings["n_epochs"]),
                              float(settings["learning_rate"]), float(settings["ent_coef"]),
                              int(settings["hidden"]))
        model.learn(total_timesteps=(budget // n_steps) * n_steps * per_plan)
        while len(env.steps) < budget:  # the plans left, short of a rollout: sampled, not trained on
            observation, _ = env.reset()
            done = False
            while not done:
                action, _ = model.predict(observation, action_masks=env.action_masks())
                observation, _, done, _, _ = env.step(action)
    return AgentResult(env.best, len(env.steps), {"step_s": env.best_step, "steps": list(env.steps)})


def plan_ppo(task: PlanTask, seed: int = 0, budget: int | None = None) -> AgentResult:
    """`ppo_on_task` with `DEFAULT_CONFIG`, in the plan agents' form (`baselines.plans`): trained on
    the task itself within ``budget`` evaluations (None: `DEFAULT_BUDGET`)."""
    result = ppo_on_task(task, seed, budget or DEFAULT_BUDGET)
    return AgentResult(result.placement, result.evaluations, {"step_s": result.info["step_s"]})


def train_plan_policy(split: str = "train", seed: int = 0, timesteps: int = TRAIN_CONFIG["timesteps"],
                      **config: Any) -> Any:
    """MaskablePPO trained on `ParallelPlanStaged-v0` drawing a problem of ``split`` of ``plans-v1`` at
    every reset, for ``timesteps`` steps (ten a plan) over ``n_envs`` envs; the model. ``config``: the
    other keys of `TRAIN_CONFIG`. Deterministic for a seed (one torch thread)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    settings = {**TRAIN_CONFIG, **config, "split": split, "seed": seed, "timesteps": timesteps}
    unknown = set(settings) - set(TRAIN_CONFIG)
    if unknown:
        raise TypeError(f"train_plan_policy got unknown setting(s) {sorted(unknown)}; its settings: "
                        f"{', '.join(TRAIN_CONFIG)}")
    dataset, tasks = f"plans-v1:{split}", {}

    def make() -> PlanRecorder:
        return plan_env(None, settings["staged"], settings["reward"], settings["infeasible_reward"], dataset,
                        tasks)

    vec_env = DummyVecEnv([make] * int(settings["n_envs"]))
    vec_env.seed(seed)
    with intra_op_threads(1, "plan-ppo"):
        model = _maskable_ppo(vec_env, seed, int(settings["n_steps"]), int(settings["batch_size"]),
                              int(settings["n_epochs"]), float(settings["learning_rate"]),
                              float(settings["ent_coef"]), int(settings["hidden"]))
        model.learn(total_timesteps=timesteps)
    return model


def load_policy(path: str | Path = POLICY) -> Any:
    """A policy saved by `train_plan_policy`'s script (default `POLICY`), on the CPU."""
    from sb3_contrib import MaskablePPO

    return MaskablePPO.load(str(path), device="cpu")


def policy_plan(model: Any, task: PlanTask, samples: int = 1, seed: int = 0) -> AgentResult:
    """The plan a trained policy gives ``task`` zero-shot: its greedy plan (the most likely value of
    each dimension in turn, within the staged env's masks) and, for ``samples`` above 1, ``samples - 1``
    plans sampled from it, each priced once; the fastest feasible (the greedy one where none is).
    ``info``: ``step_s`` (inf: none feasible) and ``greedy_step_s``. Deterministic for a seed."""
    import torch

    env = plan_env(task, staged=isinstance(model.action_space, gym.spaces.Discrete))
    with intra_op_threads(1, "plan-ppo"), torch.random.fork_rng():
        torch.manual_seed(seed)
        for k in range(samples):
            observation, _ = env.reset()
            done = False
            while not done:
                action, _ = model.predict(observation, action_masks=env.action_masks(), deterministic=k == 0)
                observation, _, done, _, _ = env.step(action)
    return AgentResult(env.best, len(env.steps), {"step_s": env.best_step, "greedy_step_s": env.steps[0]})


def held_out_ids(count: int = HELD_OUT_SAMPLE, splits: Sequence[str] = HELD_OUT) -> tuple[str, ...]:
    """``count`` problems evenly spaced over the problems of ``splits`` (in the dataset's order), all
    of them when there are fewer."""
    ids = tuple(task_id for split in splits for task_id in plan_dataset_ids(split))
    if count >= len(ids):
        return ids
    return tuple(ids[int(k)] for k in np.linspace(0, len(ids) - 1, count).round().astype(int))


def compare_with_rules(model: Any, ids: Sequence[str], samples: int = 1) -> dict[str, Any]:
    """For each problem of ``ids``: the policy's plan (`policy_plan`, ``samples`` evaluations) against
    the ``megatron`` agent's (up to 8). ``fraction``: the share of problems where the policy's plan is
    feasible and its step at most the rules'; ``rows``: ``(id, policy step, rules' step)``."""
    rows = []
    for task_id in ids:
        ours = policy_plan(model, plan_dataset_task(task_id), samples).info["step_s"]
        rules = megatron(plan_dataset_task(task_id)).info["step_s"]
        rows.append((task_id, ours, rules))
    wins = sum(math.isfinite(ours) and ours <= rules for _, ours, rules in rows)
    return {"fraction": wins / max(len(rows), 1), "wins": wins, "problems": len(rows), "rows": rows}


def main(argv: Sequence[str] | None = None) -> None:
    """Train the policy on the train split (`TRAIN_CONFIG`), save it (default `POLICY`) and print how
    it compares with the rules on the held-out sample."""
    parser = argparse.ArgumentParser(prog="python -m baselines.learning.plan_ppo", description=main.__doc__)
    parser.add_argument("--timesteps", type=int, default=TRAIN_CONFIG["timesteps"])
    parser.add_argument("--seed", type=int, default=TRAIN_CONFIG["seed"])
    parser.add_argument("--out", default=str(POLICY))
    parser.add_argument("--samples", type=int, default=1)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    model = train_plan_policy(seed=args.seed, timesteps=args.timesteps)
    trained = time.perf_counter() - start
    model.save(args.out)
    report = compare_with_rules(model, held_out_ids(), args.samples)
    print(f"trained {args.timesteps} steps in {trained:.0f} s; saved {args.out}; at least as fast as the "
          f"rules on {report['wins']}/{report['problems']} held-out problems ({report['fraction']:.0%})")


if __name__ == "__main__":
    main()
