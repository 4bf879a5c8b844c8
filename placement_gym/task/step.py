"""`Step`: what a task times, one frozen value: the objective, the optimizer, the precision, the
micro-batches, the recomputation and the tensor-parallel degree of the step, with the one parser and
the one formatter of the objective part of a task id (`placement_gym.task.ids`).

The objective part is ``train`` or ``inference``; a training step whose optimizer is not Adam, the
default, adds ``+`` and the optimizer (``train+sgd``, ``train+momentum``): the optimizer changes the
update ops and the memory. Inference has no optimizer. Then a precision other than ``fp32``, the
default, adds ``+bf16`` or ``+fp16`` (``train+bf16``, ``train+sgd+fp16``, ``inference+bf16``), a
training step with activation recomputation adds ``+rc`` (``train+bf16+rc``), a pipelined step of
M > 1 micro-batches adds ``+mb<M>`` (``train+mb4``, ``train+sgd+bf16+rc+mb8``, ``inference+mb2``), and a
step whose ops are split over tensor-parallel groups of T > 1 GPUs ends in ``+tp<T>``
(``train+bf16+mb4+tp8``). The options come in that order; a default (``+adam``, ``+fp32``, ``+mb1``,
no recomputation, ``+tp1``) is never written, so a suffix names its step one way only (`Step.suffix`,
`Step.from_suffix`).

Every function that compiles a task takes a step whole (``make_task(graph, cluster, step)``,
``get_task(graph, cluster, step)``, the envs' ``step=``): a `Step`, an objective (``"train_step"``,
``"inference"``) or a suffix (``"train+sgd+bf16"``), with keywords naming the step's fields
(``precision="bf16"``) replacing them (`as_step`). What an option means for the compiled task is the
compiler's (`placement_gym.task.compiled`)."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from placement_gym.common.untrusted import shown

# objective -> the objective part of a task id
OBJECTIVES: dict[str, str] = {"train_step": "train", "inference": "inference"}
DEFAULT_OBJECTIVE = "train_step"
# optimizer -> (state copies of the parameters, FLOPs per parameter element, bytes moved per parameter byte)
OPTIMIZERS: dict[str, tuple[int, float, float]] = {
    "adam": (2, 12.0, 7.0),
    "momentum": (1, 4.0, 5.0),
    "sgd": (0, 2.0, 3.0),
}
DEFAULT_OPTIMIZER = "adam"
# precision -> bytes per element of tensors and of the bytes ops move (`placement_gym.task.compiled`)
PRECISIONS: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2}
DEFAULT_PRECISION = "fp32"
# The most micro-batches of a pipelined step: GPipe's and Megatron-LM's runs use tens to hundreds; the cap
# keeps a mistyped count from compiling a task a thousand times too large before the allocation check.
MAX_MICROBATCHES = 1024
# The largest tensor-parallel group: the GPUs of one NVSwitch domain (8 in a DGX node; NVL72 racks hold 72).
MAX_TENSOR_PARALLEL = 72
# Separates the options of the step in a task id's objective part (``train+sgd+bf16+rc+mb4``).
OPTION_SEPARATOR = "+"
RECOMPUTE_MARK = "rc"
MICROBATCH_MARK = "mb"
TENSOR_PARALLEL_MARK = "tp"
# The options a call took by position after the objective before it took a step whole: still accepted
# there, with a DeprecationWarning (`step_of_call`).
POSITIONAL_OPTIONS: tuple[str, ...] = ("optimizer", "precision", "microbatches", "recompute")
# The options a suffix writes as a mark and a count.
_COUNT_MARKS = {"microbatches": MICROBATCH_MARK, "tensor_parallel": TENSOR_PARALLEL_MARK}
_OBJECTIVE_OF_SUFFIX = {suffix: name for name, suffix in OBJECTIVES.items()}
# Digits of the largest count an id can name (micro-batches, tensor-parallel degree) and more, so that a
# long run of digits is refused before it is converted.
_COUNT_DIGITS = len(str(max(MAX_MICROBATCHES, MAX_TENSOR_PARALLEL))) + 1


def _shown_repr(value: Any) -> str:
    """A value of any type as a message shows it: its ASCII repr, cut short."""
    text = ascii(value)
    return text if len(text) <= 60 else text[:60] + "..."


def _check_count(name: str, value: Any, most: int, one_means: str) -> int:
    """``value`` as an int from 1 to ``most``, or a one-line ValueError naming the field ``name``."""
    integer = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if not integer or not 1 <= value <= most:
        raise ValueError(f"{name} must be an integer from 1 to {most} (1: {one_means}), got "
                         f"{_shown_repr(value)}")
    return int(value)


def check_microbatches(microbatches: Any) -> int:
    """``microbatches`` as an int from 1 to `MAX_MICROBATCHES`, or a one-line ValueError."""
    return _check_count("microbatches", microbatches, MAX_MICROBATCHES, "no pipelining")


def check_tensor_parallel(degree: Any) -> int:
    """``degree`` as an int from 1 to `MAX_TENSOR_PARALLEL`, or a one-line ValueError."""
    return _check_count("tensor_parallel", degree, MAX_TENSOR_PARALLEL, "one device per op")


def _choice(what: str, value: Any, allowed: dict[str, Any]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"unknown {what} {_shown_repr(value)}; allowed: {', '.join(allowed)}")
    return value


@dataclass(frozen=True)
class Step:
    """The step a task times, checked when made (a one-line ValueError names the field and what it
    allows); equal steps compile equal tasks, and a step is hashable.

    - ``objective``: ``"train_step"`` (default) or ``"inference"`` (the id's ``"train"`` is taken for
      ``"train_step"``).
    - ``optimizer``: ``"adam"`` (default), ``"momentum"`` or ``"sgd"``: the update ops and optimizer
      state of a training step; another than the default with inference, which has no update op, is
      refused.
    - ``precision``: ``"fp32"`` (default), or ``"bf16"``/``"fp16"``: mixed precision, matrix products
      on the tensor cores, 2-byte activations, fp32 master weights.
    - ``microbatches``: the micro-batches of a pipelined step, 1 (default: none) to `MAX_MICROBATCHES`,
      each a copy of the graph at its own batch, in GPipe's fill-drain order.
    - ``recompute``: activation recomputation (training only; default False): the forward pass
      replayed segment by segment in the backward pass instead of keeping its activations.
    - ``tensor_parallel``: T, 1 (default: one device per op) to `MAX_TENSOR_PARALLEL`: the task's
      devices are the cluster's GPUs in groups of T (one node each), and each op is split over its
      group as Megatron-LM splits a layer, the collectives that needs timed as ops
      (`placement_gym.task.passes.tensor_parallel`, docs/cost_model.md, "Tensor parallelism over an
      op graph"). With micro-batches over groups this is a plan of tensor and pipeline degrees; 1 is
      one device per op, compiled exactly as before the field existed.

    Plans with data, expert and context degrees, schedules and ZeRO are priced per layer by
    `placement_gym.plans`.
    """

    objective: str = DEFAULT_OBJECTIVE
    optimizer: str = DEFAULT_OPTIMIZER
    precision: str = DEFAULT_PRECISION
    microbatches: int = 1
    recompute: bool = False
    tensor_parallel: int = 1

    def __post_init__(self) -> None:
        objective = self.objective
        if isinstance(objective, str):
            objective = _OBJECTIVE_OF_SUFFIX.get(objective, objective)
        objective = _choice("objective", objective, OBJECTIVES)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("precision", self.precision, PRECISIONS)
        microbatches = check_microbatches(self.microbatches)
        tensor_parallel = check_tensor_parallel(self.tensor_parallel)
        if not isinstance(self.recompute, (bool, np.bool_)):
            raise ValueError(f"recompute must be True or False, got {_shown_repr(self.recompute)}")
        for name, value in (("objective", objective), ("microbatches", microbatches),
                            ("recompute", bool(self.recompute)), ("tensor_parallel", tensor_parallel)):
            object.__setattr__(self, name, value)
        self.check_applies()

    def check_applies(self) -> None:
        """Refuse an option that does not apply to the objective with a one-line ValueError, rather than
        compile a task that silently drops it: inference has no update op, so neither an optimizer other
        than the default nor recomputation (nothing is kept for a backward pass). Micro-batches and
        precision apply to both objectives."""
        if self.objective != "inference":
            return
        if self.optimizer != DEFAULT_OPTIMIZER:
            raise ValueError(f"optimizer {shown(self.optimizer)} applies to a training step (objective "
                             "'train_step'), not to inference, which has no update op; leave optimizer out "
                             "for inference")
        if self.recompute:
            raise ValueError("recompute applies to a training step (objective 'train_step'), not to "
                             "inference")

    @property
    def is_training(self) -> bool:
        """Whether the step is a training step (backward and update ops), not inference."""
        return self.objective == "train_step"

    @property
    def update_optimizer(self) -> str | None:
        """The optimizer the step's update ops run; None for inference, which has none."""
        return self.optimizer if self.is_training else None

    @property
    def suffix(self) -> str:
        """The objective part of the step's task id (module docstring), such as ``train+sgd+bf16+rc+mb4``."""
        parts = [OBJECTIVES[self.objective]]
        if self.optimizer != DEFAULT_OPTIMIZER:
            parts.append(self.optimizer)
        if self.precision != DEFAULT_PRECISION:
            parts.append(self.precision)
        if self.recompute:
            parts.append(RECOMPUTE_MARK)
        if self.microbatches != 1:
            parts.append(f"{MICROBATCH_MARK}{self.microbatches}")
        if self.tensor_parallel != 1:
            parts.append(f"{TENSOR_PARALLEL_MARK}{self.tensor_parallel}")
        return OPTION_SEPARATOR.join(parts)

    @classmethod
    def from_suffix(cls, text: str) -> Step:
        """The step of a task id's objective part (module docstring), the inverse of `suffix`; a
        one-line ValueError for text that `suffix` never writes (an unknown or repeated option, options
        out of order, a default written out, an option that does not apply to the objective)."""
        if not isinstance(text, str):
            raise ValueError(f"the objective of a task id is a string, got {type(text).__name__}")
        head, *tokens = text.split(OPTION_SEPARATOR)
        options: dict[str, Any] = {}
        known = head in _OBJECTIVE_OF_SUFFIX
        for token in tokens:
            option = _option_of_token(token)
            known = known and option is not None
            if option is not None:
                options[option[0]] = option[1]
        if known and head == OBJECTIVES["inference"]:
            if "optimizer" in options:
                raise ValueError(f"only a training step has an optimizer ({OBJECTIVES['train_step']}"
                                 f"{OPTION_SEPARATOR}{options['optimizer']}), not {shown(head)}")
            if "recompute" in options:
                raise ValueError(f"only a training step recomputes activations, not {shown(head)}")
        step = None
        if known:
            try:
                step = cls(_OBJECTIVE_OF_SUFFIX[head], **options)
            except ValueError as error:
                raise ValueError(f"{shown(text)}: {error}") from None
        if step is None or step.suffix != text:
            raise ValueError(f"{shown(text, 80)} is not the objective of a task id: {_SUFFIX_FORMAT}")
        return step

    def departures(self) -> dict[str, Any]:
        """The fields that are not their defaults, by name, in field order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != f.default}

    def disagreements(self, other: Step) -> dict[str, Any]:
        """The fields this step sets (`departures`) to another value than ``other`` has: what a step
        given beside a compiled task contradicts of the task's."""
        return {name: value for name, value in self.departures().items() if getattr(other, name) != value}


STEP_OPTIONS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Step))
_SUFFIX_FORMAT = (
    f"that is {' or '.join(OBJECTIVES.values())}, then optionally {OPTION_SEPARATOR}<optimizer> "
    f"({' or '.join(o for o in OPTIMIZERS if o != DEFAULT_OPTIMIZER)}; {DEFAULT_OPTIMIZER} is the default, "
    f"training only), then optionally {OPTION_SEPARATOR}<precision> "
    f"({' or '.join(p for p in PRECISIONS if p != DEFAULT_PRECISION)}; {DEFAULT_PRECISION} is the default), "
    f"then optionally {OPTION_SEPARATOR}{RECOMPUTE_MARK} (activation recomputation, training only), then "
    f"optionally {OPTION_SEPARATOR}{MICROBATCH_MARK}<M> for M > 1 micro-batches, then optionally "
    f"{OPTION_SEPARATOR}{TENSOR_PARALLEL_MARK}<T> for tensor-parallel groups of T > 1 GPUs, such as "
    + OPTION_SEPARATOR.join(
        ("train", "sgd", "bf16", RECOMPUTE_MARK, f"{MICROBATCH_MARK}4", f"{TENSOR_PARALLEL_MARK}8"))
)


def _option_of_token(token: str) -> tuple[str, Any] | None:
    """``(field, value)`` of one option of a suffix, None for a token that names none."""
    if token in OPTIMIZERS:
        return "optimizer", token
    if token in PRECISIONS:
        return "precision", token
    if token == RECOMPUTE_MARK:
        return "recompute", True
    for field, mark in _COUNT_MARKS.items():
        digits = token[len(mark):]
        if (token.startswith(mark) and digits.isascii() and digits.isdigit()
                and len(digits) <= _COUNT_DIGITS):
            return field, int(digits)
    return None


def as_step(step: Step | str | None = None, **options: Any) -> Step:
    """A `Step` from ``step`` (a `Step`; an objective, ``"train_step"`` or ``"inference"``; a task id's
    objective part such as ``"train+sgd+bf16"``; None: the default step) with the fields named by
    ``options`` (`STEP_OPTIONS`) replaced; a one-line ValueError for a value a step does not take."""
    if step is None:
        base = Step()
    elif isinstance(step, Step):
        base = step
    elif isinstance(step, str):
        if step in OBJECTIVES:
            base = Step(step)
        elif OPTION_SEPARATOR not in step and step not in OBJECTIVES.values():
            raise ValueError(f"unknown objective {_shown_repr(step)}; allowed: {', '.join(OBJECTIVES)}, or a "
                             f"task id's objective part such as 'train+sgd+bf16'")
        else:
            base = Step.from_suffix(step)
    else:
        raise ValueError(f"a step is a Step, an objective or a task id's objective such as "
                         f"'train+sgd+bf16', got {_shown_repr(step)} ({type(step).__name__})")
    return dataclasses.replace(base, **options) if options else base


def step_of_call(caller: str, step: Step | str | None, positional: tuple[Any, ...],
                 options: dict[str, Any], inference_ignores: tuple[str, ...] = ()) -> Step:
    """The step of a call ``caller(..., step, *positional, **options)``: ``positional`` are the options
    such calls took by position after the objective (`POSITIONAL_OPTIONS`, deprecated: a
    DeprecationWarning names the replacement), ``options`` keywords naming a step's fields (`as_step`).
    ``inference_ignores``: options left out when the step is inference, for a caller documented to
    ignore them there. A TypeError for too many positional arguments, an option given twice or a
    keyword that names no field, as Python words its own."""
    if len(positional) > len(POSITIONAL_OPTIONS):
        raise TypeError(f"{caller}() takes at most {len(POSITIONAL_OPTIONS) + 1} step arguments after the "
                        f"cluster ({len(positional) + 1} given)")
    options = dict(options)
    if positional:
        names = POSITIONAL_OPTIONS[:len(positional)]
        warnings.warn(
            f"{caller}(): passing {', '.join(names)} by position is deprecated; pass the step whole "
            f"({caller}(graph, cluster, Step(...)), placement_gym.task.step.Step) or them by keyword",
            DeprecationWarning, stacklevel=3,
        )
        for name, value in zip(names, positional):
            if name in options:
                raise TypeError(f"{caller}() got multiple values for argument {name!r}")
            options[name] = value
    unknown = next((name for name in options if name not in STEP_OPTIONS), None)
    if unknown is not None:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown!r}; a step's options are "
                        f"{', '.join(STEP_OPTIONS)} (placement_gym.task.step.Step)")
    if inference_ignores:
        objective = Step(options["objective"]) if "objective" in options else as_step(step)
        if not objective.is_training:
            options = {name: value for name, value in options.items() if name not in inference_ignores}
    return as_step(step, **options)
