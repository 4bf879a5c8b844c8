"""Compiled segments: the ops of one forward unit of a real step as one function, compiled once.

With ``compile=`` (`placement_gym.real.executor.Executor`), every forward or replayed unit the plan
gives a device (`placement_gym.real.step_plan`), a maximal run of ops that waits for no other device,
becomes one Python function of the tensors it reads from outside: the ops' torch functions called in
order, the weights, data and constants it reads in place, returning the values read after it (or
kept: graph outputs, and in training what a backward differentiates). ``torch.compile`` turns it into
fused kernels once per run; on a GPU mode ``"reduce-overhead"`` also captures it as a CUDA graph
(its shapes are static). In a train step a unit is compiled only when its ops form one block (one
autograd graph and one backward call: AOTAutograd then compiles its backward too), which is every
forward unit of a one-device step; other units run op by op.

Modes (`COMPILE_MODES`): ``"inductor"`` (torch.compile's default), ``"reduce-overhead"`` (CUDA graphs
where it can), ``"max-autotune"`` (longer compilation, tuned kernels) and ``"aot_eager"`` (captures
and differentiates the graph but generates no code: a quick check of the capture, no speed-up).
Compilation is paid once per run (each placement), in its warm-up step.
"""

from __future__ import annotations

import itertools
import threading
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

COMPILE_MODES: tuple[str, ...] = ("inductor", "reduce-overhead", "max-autotune", "aot_eager")
# torch.compile keeps its compiled code per Python code object and gives up (runs eagerly) after a few
# recompilations of one: each segment gets a code object of its own (a numbered name).
_NUMBERS = itertools.count()
# Compiling is not meant to run in several threads at once: a segment's first call (its compilation)
# holds this lock. A unit never waits for another device inside, so holding it cannot deadlock.
_COMPILING = threading.Lock()


def check_compile(value: Any) -> str | None:
    """``value`` if it is None or one of `COMPILE_MODES`, else a ValueError naming them."""
    if value is None or (isinstance(value, str) and value in COMPILE_MODES):
        return value
    raise ValueError(f"compile must be None or one of {', '.join(COMPILE_MODES)}, got {value!r}")


@dataclass(frozen=True)
class Segment:
    """A compiled unit: ``function(*tensors)`` with ``tensors`` the values named by ``inputs`` ((value
    key, read mode) each, in order) returns the values named by ``outputs``."""

    function: Callable[..., tuple[Any, ...]]
    inputs: tuple[tuple[Any, int], ...]
    outputs: tuple[Any, ...]
    compiled: list[bool] = field(default_factory=lambda: [False])

    def __call__(self, *tensors: Any) -> tuple[Any, ...]:
        if self.compiled[0]:
            return self.function(*tensors)
        with _COMPILING:
            result = self.function(*tensors)
        self.compiled[0] = True
        return result


def build_segment(program: Any, entries: Sequence[tuple[Any, ...]], reads: dict[Any, int], kept: set[Any],
                  mode: str, direct: int) -> Segment:
    """The compiled function of a unit of ``program`` (`placement_gym.real.program.Program`) whose jobs
    are ``entries`` (the executor's compiled jobs: op, micro-batch, device, torch function, attributes,
    argument template, slots, outputs, last output read).
    ``reads``: per value, its reads in the whole step; ``kept``: the values that outlive their reads;
    ``direct``: the read mode of a value read as it is."""
    import torch

    from placement_gym.real.program import op_function, op_results

    produced = {key for entry in entries for _, key in entry[7]}
    inputs: list[tuple[Any, int]] = []
    inside: dict[Any, int] = {}
    for entry in entries:
        for _, key, read_mode in entry[6]:
            if key in produced and read_mode == direct:
                inside[key] = inside.get(key, 0) + 1
            elif (key, read_mode) not in inputs:
                inputs.append((key, read_mode))
    outputs = tuple(key for key in sorted(produced, key=str)
                    if key in kept or reads.get(key, 0) > inside.get(key, 0))
    position = {source: i for i, source in enumerate(inputs)}
    plan = [(entry[0], entry[3] or op_function(program, entry[0]), entry[4], entry[5],
             tuple((slot, position.get((key, read_mode)), key) for slot, key, read_mode in entry[6]),
             entry[7], entry[8]) for entry in entries]

    def segment(*tensors: Any) -> tuple[Any, ...]:
        values: dict[Any, Any] = {}
        for op, fn, attrs, template, slots, made, last_read in plan:
            args = list(template)
            for slot, index, key in slots:
                args[slot] = tensors[index] if index is not None else values[key]
            results = op_results(program, op, fn(args, attrs), last_read)
            for output, key in made:
                values[key] = results[output]
        return tuple(values[key] for key in outputs)

    name = f"segment_{next(_NUMBERS)}"
    own = types.FunctionType(segment.__code__.replace(co_name=name), segment.__globals__, name,
                             segment.__defaults__, segment.__closure__)
    if mode == "aot_eager":
        function = torch.compile(own, backend="aot_eager", dynamic=False)
    elif mode == "inductor":
        function = torch.compile(own, dynamic=False)
    else:
        function = torch.compile(own, mode=mode, dynamic=False)
    return Segment(function=function, inputs=tuple(inputs), outputs=outputs)
