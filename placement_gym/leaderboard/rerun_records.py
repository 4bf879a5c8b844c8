"""Which entries' budgets are verified: the record of re-runs that reproduced, ``<leaderboard>/reruns.json``.

A runtime on the leaderboard is re-simulated from the submitted placement, so it needs no trust. The
number of evaluations an entry spent, which puts it in a budget track, cannot be re-simulated: only
running the algorithm again with the entry's seed and budget shows it (`rerun.rerun_submission`). An
entry's budget is **verified** when every file of the entry has a record here that

* names the file and the SHA-256 of its bytes (editing the file, even by one byte, drops the record), and
* lists at least one task whose re-run, with the agent an installed package provides through the
  entry-point group ``placement_gym.agents`` at the file's seed and budget, reproduced the file's
  placement bit for bit, its runtime, its evaluation count and its learning curve.

A file gets its record from ``placement-gym leaderboard validate --rerun FILE --record``, which writes it
only when the re-run reproduced. By default that re-runs every task of the file; ``--tasks`` names a
sample (the committed records re-ran each file's task of least recorded wall time, since
re-running every task of every entry takes about eleven CPU-hours on the development machine).

``placement-gym leaderboard reruns`` checks the records: every file hash, then a re-run of the recorded
tasks of one file per entry (`sample_per_entry`: chosen by the hash of the entry's file hashes, so that
any new or changed file of an entry draws the sample again), or of every record with ``--all``. CI runs
the sample of a third of the entries a day (``--part day/3``, `entry_bucket`). The budget tracks rank
only entries whose budget is verified; the others are shown in a table of their own, labelled unverified
(their runtimes are still re-simulated).

A record also names the ``platform`` it was made on (`this_platform`: the CPU maker and architecture).
A learned agent trains with torch, whose float kernels (MKL's) take other paths on another maker's
CPU, so its re-run is bit for bit only on the platform of its record: on another one ``reruns``
reports a learned entry that does not reproduce as not comparable there, not as a failure (a
heuristic or search entry, numpy and the cost model only, must reproduce anywhere).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from placement_gym.common.untrusted import (
    UntrustedFileError,
    inside,
    path_text,
    read_json,
    shown,
    write_inside,
)

RECORDS_NAME = "reruns.json"
RECORDS_SCHEMA = 1
# A record per submission file: far below the submission limit even for thousands of entries.
MAX_RECORDS_BYTES = 4 * 2**20


@dataclass(frozen=True)
class RerunRecord:
    """One file's reproduced re-run: the SHA-256 of the file's bytes, the tasks re-run and the
    platform it ran on (`this_platform`)."""

    sha256: str
    tasks: tuple[str, ...]
    platform: str


def this_platform() -> str:
    """This machine's CPU maker and architecture, such as ``"GenuineIntel x86_64"`` (the ``vendor_id``
    of /proc/cpuinfo where there is one, else what `platform.processor` says)."""
    vendor = ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("vendor_id"):
                    vendor = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{vendor or platform.processor() or 'unknown'} {platform.machine()}".strip()


def file_sha256(raw: bytes) -> str:
    """The SHA-256 of a submission file's bytes, as a record stores it."""
    return hashlib.sha256(raw).hexdigest()


def read_records(directory: str | Path) -> dict[str, RerunRecord]:
    """The records of ``directory/reruns.json`` by file name ({} when there is no such file); raises
    `UntrustedFileError` naming the problem for a file that is malformed, a link or not a regular file."""
    path = inside(directory, RECORDS_NAME)
    where = path_text(path)
    if not os.path.lexists(path):
        return {}
    data = read_json(path, MAX_RECORDS_BYTES, "re-run records", max_depth=4, follow_symlinks=False)
    if not isinstance(data, dict) or data.get("schema") != RECORDS_SCHEMA or not isinstance(
            data.get("records"), dict):
        raise UntrustedFileError(f"{where}: expected {{\"schema\": {RECORDS_SCHEMA}, \"records\": "
                                 "{file: {\"sha256\": ..., \"tasks\": [...]}}}")
    records = {}
    for name, record in data["records"].items():
        if not (isinstance(record, dict) and set(record) == {"sha256", "tasks", "platform"}
                and isinstance(record["sha256"], str) and isinstance(record["tasks"], list)
                and record["tasks"] and all(isinstance(t, str) for t in record["tasks"])
                and isinstance(record["platform"], str) and record["platform"].isprintable()):
            raise UntrustedFileError(f"{where}: the record of {shown(name)} must be {{\"sha256\": a hex "
                                     "digest, \"tasks\": a non-empty list of task ids, \"platform\": the "
                                     "machine it ran on}")
        records[name] = RerunRecord(record["sha256"], tuple(record["tasks"]), record["platform"])
    return records


def write_record(directory: str | Path, name: str, raw: bytes, tasks: Iterable[str]) -> Path:
    """Record that the file ``name`` (whose bytes are ``raw``) reproduced on ``tasks``, replacing its
    previous record; returns the records file."""
    # Re-runs take minutes each and are run side by side: the folder's lock keeps their records.
    folder = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        records = read_records(directory)
        records[name] = RerunRecord(file_sha256(raw), tuple(sorted(tasks)), this_platform())
        rows = {n: {"sha256": r.sha256, "tasks": list(r.tasks), "platform": r.platform}
                for n, r in sorted(records.items())}
        text = json.dumps({"schema": RECORDS_SCHEMA, "records": rows}, indent=1) + "\n"
        return write_inside(directory, RECORDS_NAME, text)
    finally:
        os.close(folder)


def verified_files(records: dict[str, RerunRecord], files: dict[str, bytes]) -> set[str]:
    """The names among ``files`` ({file name: bytes}) whose record matches their bytes."""
    return {name for name, raw in files.items()
            if name in records and records[name].sha256 == file_sha256(raw)}


def sample_per_entry(entries: dict[tuple, list[str]], records: dict[str, RerunRecord],
                     part: tuple[int, int] | None = None) -> list[str]:
    """One recorded file per entry (``entries``: {entry key: its file names}), chosen by the hash of the
    entry's recorded file hashes: sorted by file name. Entries with no record are left out. ``part``
    ``(k, n)``: only the entries in bucket ``k`` of ``n`` (`entry_bucket`), so that a check split over
    ``n`` runs still re-runs every entry once."""
    chosen = []
    for key in sorted(entries, key=repr):
        if part is not None and entry_bucket(key, part[1]) != part[0]:
            continue
        names = sorted(n for n in entries[key] if n in records)
        if names:
            digest = hashlib.sha256("".join(records[n].sha256 for n in names).encode()).digest()
            chosen.append(names[int.from_bytes(digest[:8], "big") % len(names)])
    return sorted(chosen)


def entry_bucket(key: tuple, buckets: int) -> int:
    """The bucket of an entry (its key: track, algorithm, budget) among ``buckets``: the first 8 bytes of
    the SHA-256 of the key's repr, modulo ``buckets``; stable across runs, Python versions and machines."""
    return int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "big") % buckets


def parse_part(text: str) -> tuple[int, int]:
    """``"K/N"`` as ``(K, N)`` with ``0 <= K < N``; ``"day/N"``: K is the day (days since 1970-01-01
    UTC) modulo N. ValueError naming what is allowed otherwise."""
    try:
        first, second = text.split("/")
        buckets = int(second)
        bucket = int(time.time() // 86400) % buckets if first == "day" else int(first)
        if not 0 <= bucket < buckets:
            raise ValueError
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--part takes K/N with 0 <= K < N, or day/N, got {text!r}") from None
    return bucket, buckets
