"""`stopped_after`: stop a learned agent's training as a kill would, once it has used some evaluations
(for the tests of resumed runs)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from baselines.learning.agent import get_learned


@contextmanager
def stopped_after(agent: str, evaluations: int) -> Iterator[None]:
    """Within the block, a training iteration of ``agent`` that starts with ``evaluations`` or more
    used raises KeyboardInterrupt (no clean-up runs, as with a kill); the block expects it."""
    cls = get_learned(agent)
    original = cls.iteration

    def iteration(self, evaluator):
        if evaluator.used >= evaluations:
            raise KeyboardInterrupt
        return original(self, evaluator)

    cls.iteration = iteration
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        cls.iteration = original
