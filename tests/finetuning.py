"""The fine-tuning property every pre-trained placer shares (`baselines.learning.pretrained.finetune_from`),
checked through the agent as registered."""

from __future__ import annotations

from baselines.registry import run_agent
from placement_gym.cost_model import simulate
from placement_gym.task.compiled import Task


def assert_finetuning_stays_in_budget_and_keeps_the_zero_shot(task: Task, agent: str,
                                                               zero_shot_budget: int | None) -> None:
    """At 100 evaluations ``agent`` spends at most 100 (as the task counts them), ends feasible and no
    slower than its own zero-shot placement at ``zero_shot_budget``, and places the same twice."""
    zero = simulate(task, run_agent(task, agent, 0, zero_shot_budget).placement)
    before = task.evaluations
    result = run_agent(task, agent, 0, 100)
    assert result.evaluations <= 100 and task.evaluations - before <= 100
    tuned = simulate(task, result.placement)
    assert tuned.feasible and tuned.runtime <= zero.runtime
    assert run_agent(task, agent, 0, 100).placement.tolist() == result.placement.tolist()
