"""Which entries' budgets are verified: the record of re-runs that reproduced, ``<leaderboard>/reruns.json``.

A runtime on the leaderboard is re-simulated from the submitted placement, so it needs no trust. The
number of evaluations an entry spent, which puts it in a budget track, cannot be re-simulated: only
running the algorithm again with the entry's seed and budget shows it (`rerun.rerun_submission`). An
entry's budget is **verified** when every file of the entry has a record here that

* names the file and the SHA-256 of its bytes (editing the file, even by one byte, drops the record), and
* lists at least one task, every one a task of the file (`record_problems`: a record naming another
  task is refused, not just ignored), whose re-run, with the agent an installed package provides
  through the entry-point group ``placement_gym.agents`` at the file's seed and budget, reproduced the
  file's placement bit for bit, its runtime, its evaluation count and its learning curve.

A file gets its record from ``placement-gym leaderboard validate --rerun FILE --record``, which writes it
only when the re-run reproduced. By default that re-runs every task of the file; ``--tasks`` names a
sample (the committed records re-ran each file's task of least recorded wall time, since
re-running every task of every entry takes about eleven CPU-hours on the development machine).

``placement-gym leaderboard reruns`` checks the records: every file hash, then a re-run of the recorded
tasks of one file per entry (`sample_per_entry`: drawn with a seed from the operating system's random
source, printed so that a run can be repeated with ``--seed``; a submitter can steer neither), or of
every record with ``--all``; ``--since REF`` also re-runs every record that is new or changed since the
records file of git revision REF (`records_at`, `changed_records`), which is how CI verifies a new
file's record before it counts. CI runs the sample of a third of the entries a day (``--part day/3``,
`entry_bucket`). The budget tracks rank only entries whose budget is verified; the others are shown in a
table of their own, labelled unverified (their runtimes are still re-simulated).

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
import random
import secrets
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from placement_gym.common.untrusted import (
    UntrustedFileError,
    inside,
    parse_json,
    path_text,
    read_bytes,
    shown,
    write_inside,
)

RECORDS_NAME = "reruns.json"
RECORDS_SCHEMA = 1
# A record per submission file: far below the submission limit even for thousands of entries.
MAX_RECORDS_BYTES = 4 * 2**20
# git reads an old records file at once; a minute means something is wrong with the checkout.
GIT_SECONDS = 60


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
    if not os.path.lexists(path):
        return {}
    raw = read_bytes(path, MAX_RECORDS_BYTES, "re-run records", follow_symlinks=False)
    return parse_records(raw, path_text(path))


def parse_records(raw: bytes, where: str) -> dict[str, RerunRecord]:
    """The records in the bytes of a records file (`read_records`); ``where`` names it in errors."""
    data = parse_json(raw, where, max_depth=4, max_bytes=MAX_RECORDS_BYTES)
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


def record_problems(records: dict[str, RerunRecord], files: dict[str, tuple[bytes, dict]]) -> list[str]:
    """Why records among ``records`` that match their file's bytes (``files``: {file name: (bytes,
    schema-checked submission)}) cannot stand: one that names a task the file does not hold (a re-run of
    it proves nothing about the file). One line each; [] when there is none."""
    problems = []
    for name, (raw, data) in sorted(files.items()):
        record = records.get(name)
        if record is None or record.sha256 != file_sha256(raw):
            continue
        foreign = [task for task in record.tasks if task not in data["results"]]
        if foreign:
            problems.append(f"{RECORDS_NAME}: the record of {shown(name)} names {len(foreign)} task(s) the "
                            f"file does not hold (first {shown(foreign[0])}); a record lists tasks of its "
                            "file that 'validate --rerun FILE --record' reproduced")
    return problems


class ForgedRecord(UntrustedFileError):
    """A record that matches its file's bytes but names a task the file does not hold."""


def verified_files(records: dict[str, RerunRecord], files: dict[str, tuple[bytes, dict]]) -> set[str]:
    """The names among ``files`` ({file name: (bytes, schema-checked submission)}) whose record matches
    their bytes. A matching record that names a task its file does not hold is refused (`ForgedRecord`,
    the first of `record_problems`): such a record was not made by a re-run of the file, and `render`
    publishes nothing beside it."""
    problems = record_problems(records, files)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ForgedRecord(f"{problems[0]}{more}")
    return {name for name, (raw, _) in files.items()
            if name in records and records[name].sha256 == file_sha256(raw)}


def new_seed() -> int:
    """A seed for `sample_per_entry` from the operating system's random source (`secrets`), which no file
    of the leaderboard can steer."""
    return secrets.randbelow(2**32)


def sample_per_entry(entries: dict[tuple, list[str]], records: dict[str, RerunRecord],
                     part: tuple[int, int] | None = None, seed: int = 0) -> list[str]:
    """One recorded file per entry (``entries``: {entry key: its file names}), drawn with ``seed``
    (`new_seed`: the same seed draws the same files). Entries with no record are left out. ``part``
    ``(k, n)``: only the entries in bucket ``k`` of ``n`` (`entry_bucket`), so that a check split over
    ``n`` runs still re-runs every entry once."""
    draw = random.Random(seed)
    chosen = []
    for key in sorted(entries, key=repr):
        names = sorted(n for n in entries[key] if n in records)
        if not names:
            continue
        pick = names[draw.randrange(len(names))]  # drawn for every entry: a part keeps the whole draw's
        if part is None or entry_bucket(key, part[1]) == part[0]:
            chosen.append(pick)
    return sorted(chosen)


def records_at(directory: str | Path, revision: str) -> dict[str, RerunRecord]:
    """The records of ``directory``'s records file as git revision ``revision`` holds it ({} when the
    revision has no such file). ValueError, one line, when git is missing, ``directory`` is not in a
    git checkout or the revision is unknown."""
    def git(*args: str) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(["git", "-C", str(directory), *args], capture_output=True,
                                  timeout=GIT_SECONDS, check=False)
        except FileNotFoundError:
            raise ValueError("--since needs git, which is not installed") from None
        except subprocess.TimeoutExpired:
            raise ValueError(f"--since: git took over {GIT_SECONDS} s to answer") from None

    if git("rev-parse", "--is-inside-work-tree").returncode != 0:
        raise ValueError(f"--since: {path_text(Path(directory))} is not in a git checkout")
    if revision.startswith("-") or git("rev-parse", "--verify", "--quiet",
                                       f"{revision}^{{commit}}").returncode != 0:
        raise ValueError(f"--since: {shown(revision)} is no commit of this git checkout")
    spec = f"{revision}:./{RECORDS_NAME}"  # ./: relative to the leaderboard folder, wherever it is
    if git("cat-file", "-e", spec).returncode != 0:
        return {}
    size = git("cat-file", "-s", spec)
    if size.returncode != 0 or int(size.stdout or 0) > MAX_RECORDS_BYTES:  # before reading it
        raise ValueError(f"--since: {RECORDS_NAME} of {shown(revision)} cannot be read or is over "
                         f"{MAX_RECORDS_BYTES:,} bytes")
    blob = git("cat-file", "blob", spec)
    if blob.returncode != 0:
        raise ValueError(f"--since: {RECORDS_NAME} of {shown(revision)} cannot be read")
    return parse_records(blob.stdout, f"{RECORDS_NAME} of {shown(revision)}")


def changed_records(before: dict[str, RerunRecord], now: dict[str, RerunRecord]) -> list[str]:
    """The names of the records of ``now`` that ``before`` lacks or holds otherwise."""
    return sorted(name for name, record in now.items() if before.get(name) != record)


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
