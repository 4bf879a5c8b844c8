"""The parameter update of a real train step: what the update op ``f.update`` of a `Task` runs.

One optimizer per task (`placement_gym.task.compiled.OPTIMIZERS`: ``adam``, ``momentum``, ``sgd``), written
out with in-place torch ops on the parameter's own tensors, so that each parameter's state tensors
are created on the parameter's device and the update's work (and time) is spent there, as the cost
model charges it to the update op's device. The maths is that of ``torch.optim.Adam`` and
``torch.optim.SGD`` with their default settings (no weight decay, no dampening, no Nesterov):

* ``adam``: ``m = b1 m + (1 - b1) g``; ``v = b2 v + (1 - b2) g^2``;
  ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`` at step ``t = 1, 2, ...``
  (state: ``m`` and ``v``, the cost model's two state copies of the parameters);
* ``momentum``: ``u = mu u + g``; ``p -= lr u`` (state: the velocity ``u``);
* ``sgd``: ``p -= lr g`` (no state).

`apply_update` writes the maths out (the reference the tests hold torch to); `torch_optimizer` is what
the executor and the profile run: torch's own optimizer with the same settings over the parameters
of one update, with its fused kernel (one kernel for all of them) where torch has one for their device
and type, else its default implementation.

torch is imported only by `torch_optimizer` and `optimizer_state`: the other functions take the
tensors they work on.
"""

from __future__ import annotations

from typing import Any

from placement_gym.task.compiled import OPTIMIZERS

# torch.optim.Adam's defaults.
ADAM_BETAS: tuple[float, float] = (0.9, 0.999)
ADAM_EPS = 1e-8
# The usual momentum coefficient (torch.optim.SGD has none by default; 0.9 is the common choice).
MOMENTUM = 0.9
# Names of each optimizer's state tensors per parameter, in the order `new_state` returns them.
STATE_TENSORS: dict[str, tuple[str, ...]] = {
    "adam": ("exp_avg", "exp_avg_sq"),
    "momentum": ("velocity",),
    "sgd": (),
}


def check_optimizer(optimizer: Any) -> str:
    """``optimizer`` if it is one the cost model knows (`placement_gym.task.compiled.OPTIMIZERS`), else a
    ValueError naming them."""
    if not isinstance(optimizer, str) or optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
    return optimizer


def new_state(optimizer: str, weight: Any) -> dict[str, Any]:
    """Fresh state of ``optimizer`` for one parameter: zero tensors shaped, typed and placed like
    ``weight`` (so on the parameter's device), named as in `STATE_TENSORS`."""
    import torch

    return {name: torch.zeros_like(weight, memory_format=torch.preserve_format).detach()
            for name in STATE_TENSORS[check_optimizer(optimizer)]}


# torch's names of each optimizer's state tensors -> ours (`STATE_TENSORS`).
_TORCH_STATE_NAMES = {"exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq", "momentum_buffer": "velocity"}


def torch_optimizer(optimizer: str, parameters: list[Any], lr: float) -> Any:
    """torch's optimizer of ``optimizer`` (settings as in the module docstring) over ``parameters``
    (leaf tensors on one device, updated in place from their ``.grad``), fused where torch can."""
    import torch

    settings: dict[str, Any] = {"lr": lr}
    if check_optimizer(optimizer) == "adam":
        kind, settings = torch.optim.Adam, {**settings, "betas": ADAM_BETAS, "eps": ADAM_EPS}
    else:
        kind = torch.optim.SGD
        if optimizer == "momentum":
            settings["momentum"] = MOMENTUM
    try:
        return kind(parameters, fused=True, **settings)
    except (RuntimeError, ValueError):  # no fused kernel for this device or type
        return kind(parameters, **settings)


def optimizer_state(torch_opt: Any, parameter: Any) -> dict[str, Any]:
    """The state tensors `torch_optimizer`'s optimizer keeps for ``parameter``, by our names
    (`STATE_TENSORS`; empty before its first update and for SGD)."""
    state = torch_opt.state.get(parameter, {})
    return {ours: state[theirs] for theirs, ours in _TORCH_STATE_NAMES.items() if theirs in state}


def apply_update(optimizer: str, weight: Any, grad: Any, state: dict[str, Any], step: int, lr: float) -> None:
    """Update ``weight`` in place with its gradient ``grad`` and its ``state`` (from `new_state`, on
    the same device; updated in place). ``step``: this update's number, 1 for the first (Adam's bias
    correction needs it). Call under ``torch.no_grad()``."""
    if optimizer == "sgd":
        weight.add_(grad, alpha=-lr)
    elif optimizer == "momentum":
        velocity = state["velocity"]
        velocity.mul_(MOMENTUM).add_(grad)
        weight.add_(velocity, alpha=-lr)
    elif optimizer == "adam":
        if step < 1:
            raise ValueError(f"step must be >= 1 (the first update is step 1), got {step}")
        beta1, beta2 = ADAM_BETAS
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        correction1 = 1.0 - beta1**step
        correction2_sqrt = (1.0 - beta2**step) ** 0.5
        denominator = (exp_avg_sq.sqrt() / correction2_sqrt).add_(ADAM_EPS)
        weight.addcdiv_(exp_avg, denominator, value=-lr / correction1)
    else:
        check_optimizer(optimizer)
