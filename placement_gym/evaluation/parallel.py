"""Independent jobs run in order, in this process or on Ray (the optional ``distributed`` extra).

`run_jobs` ``(fn, jobs, backend="serial" | "ray", address=None, workers=None, progress=None)`` calls
``fn(job)`` for every job and returns the results in job order. Each job carries everything it
depends on (names, budgets, its own seed), so a result does not depend on which process ran it or
when: the Ray run gives exactly the serial run's results. The dataset-wide ``evaluate --dataset``,
the best-known portfolio over many tasks (`baselines.portfolio.best_known_for_tasks`), the
pre-training of the GNN placers (`baselines.learning.generalize.pretrain`) and the evolution strategy
of `pretrained-list` (`baselines.learning.pretrained.pretrain`) run their jobs through it.

Where the jobs run (Ray does the cluster work; there is no home-made cluster code here):

* ``backend="serial"``: one after the other in this process.
* ``backend="ray"``, ``address=None``: the Ray instance this process already joined, else a local one
  started for the call (``workers`` CPUs, default every core; no dashboard, Ray's log lines kept
  from the terminal) and shut down at the end. Each job asks for one CPU, so at most ``workers`` run
  at once.
* ``address="auto"``: the cluster this node belongs to (``ray start --head`` on one machine,
  ``ray start --address=<head>:6379`` on the others, then run the command on one of them).
* ``address="ray://<head>:10001"``: Ray Client, from a machine outside the cluster.

``workers`` also caps the jobs in flight on an instance this call did not start (default: as many
as its CPUs take).
Every node needs ``placement_gym`` (and ``baselines`` for its agents) importable: installed, or
shipped with a ``runtime_env``. A job's exception is raised in the driver as it was raised in the
job (a ValueError stays a ValueError), the jobs not yet finished cancelled.

``fn`` is any callable that pickles: a module-level function, importable by name on every node,
travels as its name; a lambda or a closure travels pickled, with whatever it closes over. It is put
in Ray's object store once; what travels per job is the pickled job and the pickled result back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from placement_gym.common.extras import require

BACKENDS = ("serial", "ray")

Job = TypeVar("Job")
Result = TypeVar("Result")


def import_ray(purpose: str) -> Any:
    """The ``ray`` module, or an ImportError (`MissingExtraError`) naming the ``distributed`` extra."""
    return require("ray", purpose)


def connect_ray(ray: Any, address: str | None = None, num_cpus: int | None = None) -> bool:
    """Join Ray as `run_jobs` describes: nothing when this process already joined an instance, else
    a new local instance (``address=None``: ``num_cpus`` CPUs, default every core) or the cluster at
    ``address``. Returns whether this call connected (the caller then shuts Ray down)."""
    if address is not None and not (isinstance(address, str) and address.strip()):
        raise ValueError(
            f"address must be None, 'auto' or a Ray address such as 'ray://head:10001', got {address!r}"
        )
    if ray.is_initialized():
        return False
    # Ray writes INFO and WARNING lines (a local instance started, its token set up) to stderr; errors show.
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    if address is None:
        ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, **quiet)
    else:
        ray.init(address=address, **quiet)
    return True


def ray_error_message(error: BaseException) -> str:
    """The message of the exception a Ray task or actor raised, without Ray's wrapping."""
    cause = getattr(error, "cause", None)
    while cause is not None and getattr(cause, "cause", None) is not None:
        cause = cause.cause
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(error).strip().splitlines()[-1]


def check_backend(backend: str, address: str | None = None, workers: int | None = None) -> None:
    """ValueError unless ``backend`` is one of `BACKENDS`, ``workers`` None or a positive integer, and
    ``address`` and ``workers`` come with ``backend="ray"``."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if backend == "serial" and (address is not None or workers is not None):
        raise ValueError("address and workers choose where Ray runs the jobs: give them with backend='ray'")


def run_jobs(
    fn: Callable[[Job], Result],
    jobs: Iterable[Job],
    *,
    backend: str = "serial",
    address: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, Result], None] | None = None,
) -> list[Result]:
    """``[fn(job) for job in jobs]``, serial or on Ray (see the module docstring).

    ``progress(index, result)`` is called in the driver as each job ends: in job order when serial,
    in the order they finish on Ray."""
    check_backend(backend, address, workers)
    jobs = list(jobs)
    if backend == "serial":
        results = []
        for index, job in enumerate(jobs):
            results.append(fn(job))
            if progress is not None:
                progress(index, results[-1])
        return results
    ray = import_ray("run_jobs(backend='ray')")
    if not jobs:
        return []
    started = connect_ray(ray, address, workers)
    try:
        return _run_on_ray(ray, fn, jobs, workers, progress)
    finally:
        if started:
            ray.shutdown()


def call_job(fn: Callable[[Job], Result], job: Job) -> Result:
    """``fn(job)``: the remote function of `run_jobs`, so that ``fn`` may be any picklable callable
    (a builtin, a `functools.partial`, a bound method), not only a Python function."""
    return fn(job)


def _run_on_ray(ray: Any, fn: Callable, jobs: list, in_flight: int | None,
                progress: Callable[[int, Any], None] | None) -> list:
    remote = ray.remote(num_cpus=1, max_retries=0)(call_job)
    function = ray.put(fn)  # stored once; each job's call reads it from the object store
    results: list[Any] = [None] * len(jobs)
    waiting = list(enumerate(jobs))[::-1]  # popped from the end: job order
    running: dict[Any, int] = {}
    limit = in_flight or len(jobs)
    try:
        while waiting or running:
            while waiting and len(running) < limit:
                index, job = waiting.pop()
                running[remote.remote(function, job)] = index
            done, _ = ray.wait(list(running), num_returns=1)
            index = running.pop(done[0])
            try:
                results[index] = ray.get(done[0])
            except ray.exceptions.RayTaskError as error:
                cause = getattr(error, "cause", None)
                if isinstance(cause, Exception):
                    raise cause from None
                raise RuntimeError(f"job {index} failed on Ray: {ray_error_message(error)}") from None
            except ray.exceptions.RayError as error:
                raise RuntimeError(f"job {index} failed on Ray: {ray_error_message(error)}") from None
            if progress is not None:
                progress(index, results[index])
    finally:
        for ref in running:
            ray.cancel(ref, force=True)
    return results
