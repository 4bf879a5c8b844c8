"""Progress of a long command on stderr, so that stdout stays the command's answer (a table, JSON, a
summary line).

Library code prints nothing: it is handed a callback, ``progress(stage, done=0, total=None, item="")``
(``done`` of ``total`` steps of ``stage`` finished, ``item`` the one under way), and the command passes a
`Progress`. On a terminal a `Progress` draws a tqdm bar per stage when tqdm is installed (it comes with
the baselines extra). Otherwise, and whenever stderr is not a terminal (a CI log, a pipe), it writes one
line at least every `INTERVAL_S` seconds while a stage runs, also while a single step takes long (a
background thread writes it), and nothing for a command that ends sooner. Every line starts with the
elapsed time in brackets (`PROGRESS_LINE`), so that a reader of the stream can tell progress from the
command's own messages.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

# The longest a command stays silent: nothing silent for more than 3 s, less a margin for a thread
# woken late on a loaded machine.
INTERVAL_S = 2.5
PROGRESS_LINE = re.compile(r"^\[\d+ s\] ")
# What library functions take: ``progress(stage, done, total, item)`` (`Progress.__call__`).
ProgressCallback = Callable[..., None]


def is_progress_line(line: str) -> bool:
    """Whether ``line`` (of stderr) is a line a `Progress` wrote."""
    return PROGRESS_LINE.match(line) is not None


def _tqdm_class() -> Any:
    """tqdm's bar class, or None when tqdm is not installed (it is an optional dependency)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


class Progress:
    """Reports a command's stages on ``stream`` (default: stderr) as described in the module docstring;
    use it as a context manager, which stops its thread and closes its bar."""

    def __init__(self, stream: TextIO | None = None, interval: float | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.interval = INTERVAL_S if interval is None else interval
        self.started = self._last = time.monotonic()
        self._state: tuple[str, int, int | None, str] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        isatty = getattr(self.stream, "isatty", None)
        self._tqdm = _tqdm_class() if isatty is not None and isatty() else None
        self._bar: Any = None
        self._thread: threading.Thread | None = None
        if self.interval > 0:  # with no interval every call writes its line: nothing to tick
            thread = threading.Thread(target=self._tick, name="placement-gym progress", daemon=True)
            try:
                thread.start()
                self._thread = thread
            except RuntimeError:  # no thread to be had (a process at its limits): lines come with the calls
                pass

    def __call__(self, stage: str, done: int = 0, total: int | None = None, item: str = "") -> None:
        """``done`` of ``total`` steps of ``stage`` are finished (``total`` None: a stage not counted),
        ``item`` is under way; a new ``stage`` ends the one before."""
        with self._lock:
            if self._tqdm is not None:
                self._show_bar(stage, done, total, item)
            self._state = (stage, done, total, item)
            if self._tqdm is None and time.monotonic() - self._last >= self.interval:
                self._write_line()

    def _show_bar(self, stage: str, done: int, total: int | None, item: str) -> None:
        if self._bar is None or self._state is None or self._state[0] != stage:
            if self._bar is not None:
                self._bar.close()
            self._bar = self._tqdm(total=total, desc=stage, file=self.stream, dynamic_ncols=True, leave=False)
        self._bar.n = done
        self._bar.set_postfix_str(item, refresh=False)
        self._bar.refresh()

    def line(self) -> str:
        """The line that reports the current stage (empty before the first)."""
        if self._state is None:
            return ""
        stage, done, total, item = self._state
        count = "" if total is None else f": {done}/{total}"
        under_way = f" ({item})" if item else ""
        return f"[{time.monotonic() - self.started:.0f} s] {stage}{count}{under_way}"

    def _write_line(self) -> None:
        self.stream.write(self.line() + "\n")  # one write: a line of its own beside the command's prints
        self.stream.flush()
        self._last = time.monotonic()

    def _tick(self) -> None:
        # Wake when the next line is due (a fixed period would let a silence run to interval + period),
        # and at least each second to move a bar's elapsed time.
        while not self._stop.wait(min(1.0, max(0.01, self._last + self.interval - time.monotonic()))):
            with self._lock:
                if self._state is None:
                    continue
                if self._bar is not None:
                    self._bar.refresh()  # the elapsed time moves while one step takes long
                elif self._tqdm is None and time.monotonic() - self._last >= self.interval:
                    self._write_line()

    def close(self) -> None:
        """Stop the thread and close the bar (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
