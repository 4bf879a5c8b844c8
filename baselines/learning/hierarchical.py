"""`hierarchical`: Mirhoseini et al. (ICLR 2018), "A Hierarchical Model for Device Placement".

Two networks trained jointly with policy gradient (docs/references.md):

* *Grouper*: a feed-forward network (two layers, tanh) over each forward op's input row
  (`baselines.learning.seq2seq.node_inputs`: op features, mean neighbour features) with a softmax
  over ``n_groups`` groups; one group is sampled per op.
* *Placer*: the seq2seq LSTM with attention of `pg` (`Seq2SeqPlacer`) over the group embeddings,
  in group-index order; a group's input row is the mean input row of its member ops and
  log1p(members) / log1p(forward ops). An empty group gets a zero row (its device is irrelevant).

Training: one iteration draws ``grouper_samples`` groupings and ``placer_samples`` placements per
grouping (the paper's unit is 1 grouping x 4 placements; several units per update batch the
encoder and decoder, and give the grouper a gradient: see below); every op's device is its group's.
Reward ``-sqrt(runtime / best single-device runtime)`` as `pg` (Mirhoseini et al. 2017's reward,
made task-free; out of memory counts as ``oom_runtime_factor`` = 10 x the best single device). Baseline per
batch: each placement's advantage is its reward minus the batch's mean reward, and the loss is
REINFORCE on the joint action, ``-advantage x (log p(grouping) + log p(placement | grouping))``,
averaged over the batch. With one grouping per batch its log-probability would get a zero
gradient (the advantages sum to zero), so ``grouper_samples`` must be at least 2. The gradients of
the grouper and of the placer are clipped separately (their log-probabilities sum over very
different numbers of terms: ops vs groups); one Adam optimiser.

Choices that are not the paper's, measured on one seed of inception_v3/k80x4 at 3,000 evaluations:
the grouper's logits are its network's output plus a fixed prior, ``-position_prior x (n_groups x
topological position - group - 1/2)^2`` (`position_logits`), so that an untrained grouper makes
groups of contiguous stretches of the topological order rather than random sets of ops (whose
mean features all look alike, leaving the placer nothing to tell groups apart by: it settled on
one device, 0.97 x the best single device, against 0.90 with the prior); the placer gets an
entropy bonus (``entropy_coef`` 0.1) as `pg`; ``learning_rate`` 3e-3.

Group count (a choice): the paper uses up to min(256, 20 x devices) groups on graphs of 80,000
ops; on 2 CPU cores the default is ``n_groups`` = 32 (never more than the forward ops), enough to
express 2-8-way placements of the bundled graphs while a decoding stays short.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from baselines.learning.agent import LearnedAgent
from baselines.learning.options import check_number
from baselines.learning.seq2seq import (
    MAX_GRAD_NORM,
    Seq2SeqPlacer,
    input_width,
    node_inputs,
    sample_categorical,
)
from baselines.learning.trainer import register_learned
from placement_gym.envs.rewards import DEFAULT_OOM_RUNTIME_FACTOR, OomPenalty
from placement_gym.evaluation.budget import Budget
from placement_gym.task.compiled import Task

DEFAULT_GROUPS = 32


class Grouper(nn.Module):
    """Feed-forward grouper: op input rows ``(n_ops, width)`` -> group logits ``(n_ops, n_groups)``."""

    def __init__(self, width: int, n_groups: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(width, hidden), nn.Tanh(),
            nn.Linear(hidden, hidden), nn.Tanh(),
            nn.Linear(hidden, n_groups),
        )

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.net(inputs)


def group_inputs(op_inputs: torch.Tensor, groups: np.ndarray, n_groups: int) -> torch.Tensor:
    """Placer input rows of sampled groupings: ``groups`` ``(samples, n_ops)`` (a group per op)
    -> ``(samples, n_groups, width + 1)``: the mean op row of each group's members, then
    log1p(members) / log1p(n_ops); zero rows for empty groups."""
    samples, n_ops = groups.shape
    flat = torch.from_numpy((groups + n_groups * np.arange(samples)[:, None]).reshape(-1))
    sums = torch.zeros(samples * n_groups, op_inputs.shape[1])
    sums.index_add_(0, flat, op_inputs.repeat(samples, 1))
    counts = torch.bincount(flat, minlength=samples * n_groups).to(sums.dtype)[:, None]
    means = sums / counts.clamp(min=1)
    size = torch.log1p(counts) / float(np.log1p(n_ops))
    return torch.cat([means, size], dim=1).reshape(samples, n_groups, -1)


def position_logits(n_ops: int, n_groups: int, strength: float) -> np.ndarray:
    """The grouper's fixed prior ``(n_ops, n_groups)`` float32: ``-strength x (n_groups x
    position - group - 1/2)^2``, position = (topological index + 1/2) / n_ops, so that with an untrained
    grouper an op most likely joins the group of its stretch of the topological order."""
    position = (np.arange(n_ops)[:, None] + 0.5) / n_ops  # op centres: no ties at stretch edges
    distance = n_groups * position - np.arange(n_groups)[None, :] - 0.5
    return (-strength * distance**2).astype(np.float32)


@register_learned
class HierarchicalPlacer(LearnedAgent):
    """Grouper + seq2seq placer trained jointly with REINFORCE (see the module docstring).

    Options: ``n_groups`` (None: min(32, forward ops)); ``hidden`` (64) placer LSTM width;
    ``grouper_hidden`` (64); ``grouper_samples`` (4, >= 2) groupings per iteration;
    ``placer_samples`` (4) placements per grouping; ``learning_rate`` (3e-3) Adam step; ``entropy_coef``
    (0.1) bonus on the placer's mean per-step entropy; ``position_prior`` (2.0) strength of the
    grouper's fixed positional prior (0: none); ``oom_runtime_factor`` (10.0)."""

    name = "hierarchical"
    checkpointed = ("grouper", "placer", "optimizer")

    def __init__(
        self,
        task: Task,
        seed: int = 0,
        n_groups: int | None = None,
        hidden: int = 64,
        grouper_hidden: int = 64,
        grouper_samples: int = 4,
        placer_samples: int = 4,
        learning_rate: float = 3e-3,
        entropy_coef: float = 0.1,
        position_prior: float = 2.0,
        oom_runtime_factor: float = DEFAULT_OOM_RUNTIME_FACTOR,
        **config: Any,
    ) -> None:
        super().__init__(task, seed, **config)
        n_groups = min(DEFAULT_GROUPS, task.n_forward) if n_groups is None else n_groups
        check_number("n_groups", n_groups, 1, integer=True)
        for key, value in (("hidden", hidden), ("grouper_hidden", grouper_hidden),
                           ("placer_samples", placer_samples)):
            check_number(key, value, 1, integer=True)
        check_number("grouper_samples", grouper_samples, 1, integer=True)
        if grouper_samples < 2:
            raise ValueError(
                f"grouper_samples must be >= 2 (with one grouping per batch the batch-mean baseline gives "
                f"the grouper no gradient), got {grouper_samples!r}"
            )
        check_number("learning_rate", learning_rate, 0, open_low=True)
        check_number("entropy_coef", entropy_coef, 0)
        check_number("oom_runtime_factor", oom_runtime_factor, 1)
        self.n_groups = int(n_groups)
        self.grouper_samples, self.placer_samples = int(grouper_samples), int(placer_samples)
        self.entropy_coef, self.oom_runtime_factor = float(entropy_coef), float(oom_runtime_factor)
        self.oom_penalty = OomPenalty(oom_runtime_factor=self.oom_runtime_factor)
        check_number("position_prior", position_prior, 0)
        self.op_inputs = torch.from_numpy(node_inputs(task))
        self.prior = torch.from_numpy(position_logits(task.n_forward, self.n_groups, float(position_prior)))
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.grouper = Grouper(input_width(), self.n_groups, int(grouper_hidden))
            self.placer = Seq2SeqPlacer(input_width() + 1, task.n_devices, int(hidden))
        parameters = list(self.grouper.parameters()) + list(self.placer.parameters())
        self.optimizer = torch.optim.Adam(parameters, lr=float(learning_rate))
        from placement_gym.cost_model import single_device

        # the task's fixed reference runtime (the evaluator's best_single_runtime), not a search step
        self.best_single = float(single_device(task).runtime)

    def iteration(self, evaluator: Budget) -> dict[str, float]:
        size = min(self.grouper_samples * self.placer_samples, evaluator.remaining)
        n_groupings = -(-size // self.placer_samples)
        grouping_of_row = np.arange(size) // self.placer_samples
        # sample: groupings (a group per op), then placements of each grouping's groups
        with torch.no_grad():
            probs = torch.softmax(self.group_logits(), dim=-1)
        n_ops = self.task.n_forward
        uniforms = torch.from_numpy(self.rng.random(n_groupings * n_ops).astype(np.float32))
        groups = sample_categorical(probs.repeat(n_groupings, 1), uniforms).numpy()
        groups = groups.reshape(n_groupings, n_ops)
        inputs = group_inputs(self.op_inputs, groups, self.n_groups)
        row_index = torch.from_numpy(grouping_of_row)
        with torch.no_grad():
            encoded, (h, c) = self.placer.encode(inputs)
            actions = self.placer.sample(
                encoded[row_index], (h[:, row_index], c[:, row_index]), self.rng.random((size, self.n_groups))
            )
        placements = np.take_along_axis(actions, groups[grouping_of_row], axis=1)
        runtimes, feasible = evaluator.evaluate(placements)
        rewards = self.oom_penalty.neg_sqrt_relative_runtimes(runtimes, feasible, self.best_single)
        advantages = torch.from_numpy((rewards - rewards.mean()).astype(np.float32))
        # log-probabilities with gradients
        op_log_probs = torch.log_softmax(self.group_logits(), dim=-1)
        grouping_log_prob = op_log_probs.gather(1, torch.from_numpy(groups.T)).sum(dim=0)  # (n_groupings,)
        encoded, (h, c) = self.placer.encode(inputs)
        placer_log_probs, entropy, _ = self.placer.evaluate_actions(
            encoded[row_index], (h[:, row_index], c[:, row_index]), torch.from_numpy(actions)
        )
        joint = grouping_log_prob[row_index] + placer_log_probs.sum(dim=1)
        loss = -(advantages * joint).mean() - self.entropy_coef * entropy.mean()
        self.optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.grouper.parameters(), MAX_GRAD_NORM)
        nn.utils.clip_grad_norm_(self.placer.parameters(), MAX_GRAD_NORM)
        self.optimizer.step()
        used = np.bincount(groups.reshape(-1) + self.n_groups * np.repeat(np.arange(n_groupings), n_ops))
        return {
            "loss": float(loss.detach()),
            "mean_reward": float(rewards.mean()),
            "groups_used": float(np.count_nonzero(used) / n_groupings),
        }

    def group_logits(self) -> torch.Tensor:
        """Group logits of every op ``(n_ops, n_groups)``: the grouper's output plus the fixed
        positional prior."""
        return self.grouper(self.op_inputs) + self.prior
