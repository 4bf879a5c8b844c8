"""The one-line error of a misspelled name (graph, cluster, agent...), with a guess at what was meant."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# The longest name an error message repeats in full (every bundled or preset name is far shorter).
MAX_SHOWN_NAME = 80


def did_you_mean(name: object, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` that ``name`` was most likely meant to be, or None: the same letters
    apart from case, ``_`` and ``-``, else difflib's closest match (ratio at least 0.6, 0.5 for a name
    of at most three letters; ties go to the first in ``choices``)."""
    if not isinstance(name, str) or not name:
        return None
    options = [choice for choice in dict.fromkeys(choices) if isinstance(choice, str) and choice != name]

    # A typed name differs most often by separators or case (inceptionv3, Inception-V3): compare
    # those folded away first, since difflib alone may rank another name with more shared letters first.
    def fold(text: str) -> str:
        return text.lower().replace("_", "").replace("-", "")

    folded = [choice for choice in options if fold(choice) == fold(name)]
    if folded:
        return folded[0]
    # One wrong letter of a two- or three-letter name (pq for pg) is a ratio of 0.5 to 0.67: a
    # lower cutoff for those, difflib's 0.6 for the rest.
    cutoff = 0.5 if len(name) <= 3 else 0.6
    close = difflib.get_close_matches(name, options, n=max(len(options), 1), cutoff=cutoff)
    if not close:
        return None
    # difflib breaks ties by the larger string (gnmt8 before gnmt2); the listed order reads better.
    score = difflib.SequenceMatcher(None, name, close[0]).ratio()
    tied = {c for c in close if difflib.SequenceMatcher(None, name, c).ratio() == score}
    return next(choice for choice in options if choice in tied)


def unknown_name(what: str, name: object, choices: Iterable[str], allowed: str | None = None) -> str:
    """The one-line error of every misspelled graph, cluster or agent name:
    ``unknown graph 'inceptionv3'; did you mean 'inception_v3'? allowed: ...``. ``allowed`` says what
    is accepted (default: ``choices``, comma separated)."""
    choices = list(choices)
    # A name of thousands of characters (a stranger's input) is neither compared nor echoed whole.
    long = isinstance(name, str) and len(name) > MAX_SHOWN_NAME
    guess = None if long else did_you_mean(name, choices)
    hint = f"; did you mean {guess!r}?" if guess is not None else ";"
    quoted = f"{name[:MAX_SHOWN_NAME]!r}... ({len(name):,} characters)" if long else repr(name)
    return f"unknown {what} {quoted}{hint} allowed: {', '.join(choices) if allowed is None else allowed}"


# The names the task builders (`placement_gym.task.named`) take beyond the loaders' own; the loaders'
# errors, a layer below the datasets, cannot list them, so the task builders add them.
DATASET_GRAPH_NAMES = "a dataset graph '<dataset>:<graph id>' (synthetic-v1:regal-17; placement-gym datasets)"
FAMILY_CLUSTER_NAMES = "a family cluster 'random-v1:<k>' (random-v1:3)"


def also_allowed(error: ValueError, what: str, more: str) -> ValueError:
    """``error`` (of its own type) with ``more`` added to what its ``allowed:`` list accepts when it
    is `unknown_name`'s error of a ``what``; ``error`` itself otherwise (a file that would not load)."""
    message = str(error)
    if not message.startswith(f"unknown {what} ") or "allowed: " not in message:
        return error
    return type(error)(f"{message}, or {more}")
