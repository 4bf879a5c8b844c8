"""Reading and writing files that come from users: bounded, strict, and never through a link.

Every file the project reads from a user (a leaderboard submission, a cluster JSON file, a placement
file, a profile, the leaderboard's ``bounds.json``, an ONNX model) goes through `read_bytes` and, for
JSON, `parse_json` (or both at once, `read_json`):

* `read_bytes` reads only a **regular file**: a directory, a device such as ``/dev/zero``, a FIFO or a
  socket is refused before a byte is read (the file is opened without blocking and checked on the
  opened descriptor, so the check and the read see the same file). It reads at most ``limit + 1`` bytes
  whatever size the file claims, and refuses a file of more than ``limit`` bytes. A symbolic link is
  followed to a regular file by default (a user's own model or cluster may well be a link); with
  ``follow_symlinks=False`` a link is refused outright, which is how everything inside the leaderboard
  folder is read.
* `parse_json` reads UTF-8 JSON with every bound checked before or while parsing: nesting at most
  ``max_depth`` levels (counted in time linear in the text, before the recursive parser runs), no
  duplicate key in an object, no ``NaN`` or ``Infinity``, no number that overflows to infinity, no
  integer of more than ``max_int_digits`` digits. An error names the file and, where it can, the field
  (``devices[0].memory``).

Every problem is an `UntrustedFileError` (a ValueError) with a one-line message that names the file
and what is allowed; untrusted values in it are quoted with `shown` (ASCII, shortened), so that a
message never carries markup or terminal control sequences.

`inside` and `write_inside` keep the leaderboard commands inside their folder: a path below a root may
have no component that is a symbolic link and no ``..``, and a file is written atomically (a temporary
file in the same folder, then `os.replace`, which replaces a link itself rather than writing through
it; a link is refused before that anyway). The check alone would leave a gap (a folder swapped for a
link between the check and the write), so `write_inside` opens every folder below the root relative to
the one above it without following links and writes relative to that descriptor. A file-system failure
is an `OSError` naming the file; `os_error_text` makes it one line.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import re
import secrets
import stat
from itertools import accumulate
from pathlib import Path, PurePath
from typing import Any

# Far above what any JSON file of the project nests (a submission 4 levels, a cluster 4, a profile 3)
# and far below the depth at which Python's recursive JSON parser runs out of stack.
MAX_NESTING = 32
# 2**64 has 20 digits: no count or figure of the project's files needs more than 24; Python itself
# refuses to convert integers of more than 4,300 digits (with an error that names no file).
MAX_INT_DIGITS = 24
# protobuf cannot parse a serialized message of 2 GiB or more, so no loadable ONNX file is larger.
MAX_ONNX_BYTES = 2 * 2**30

# A string (closed or not: an unterminated one runs to the end), matched without backtracking, so that
# removing every string takes time linear in the text.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_FILE_KINDS = ((stat.S_ISDIR, "directory"), (stat.S_ISCHR, "character device"),
               (stat.S_ISBLK, "block device"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
               (stat.S_ISLNK, "symbolic link"))
# Opening a FIFO for reading would block until a writer comes, and opening a terminal could make it
# the process's controlling terminal; neither flag changes how a regular file is read.
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_BINARY", 0))
_READ_CHUNK = 2**20
# Folders below a root and temporary files are opened relative to their folder's descriptor and never
# through a link (`write_inside`).
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_TEMPORARY_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class UntrustedFileError(ValueError):
    """A file from a user that is refused: not a regular file, too large, or not strict, bounded JSON."""


def shown(value: Any, limit: int = 40) -> str:
    """An untrusted value as it may appear in a message: ASCII (escapes for anything else, so no
    terminal control sequence or markup survives it) and at most about ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    cut = text[:limit]
    return ascii(cut) + ("..." if len(text) > limit else "")


def path_text(path: str | os.PathLike) -> str:
    """A path as a message shows it: as it is when every character is printable, else as ASCII escapes
    (a file name from a pull request may hold terminal control sequences)."""
    text = os.fspath(path)
    text = text if isinstance(text, str) else os.fsdecode(text)
    return text if text.isprintable() else ascii(text)


def _kind(mode: int) -> str:
    return next((name for test, name in _FILE_KINDS if test(mode)), "special file")


# --- reading ---------------------------------------------------------------------------------------------

def read_bytes(path: str | os.PathLike, limit: int, what: str, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; ``what`` names the kind of file
    in messages (``"cluster file"``). Refuses with `UntrustedFileError` anything that is not a regular
    file, a file of more than ``limit`` bytes (reading at most ``limit + 1``, whatever size the file
    claims) and, with ``follow_symlinks=False``, a symbolic link."""
    name = f"{what} {path_text(path)}"
    flags = _OPEN_FLAGS
    if not follow_symlinks:
        if os.path.islink(path):
            raise UntrustedFileError(f"{name} cannot be read: it is a symbolic link; only a regular file "
                                     "that is not a link is read here")
        flags |= getattr(os, "O_NOFOLLOW", 0)  # closes the gap between the check and the open
    try:
        descriptor = os.open(path, flags)
    except FileNotFoundError:
        raise UntrustedFileError(f"{name} does not exist") from None
    except OSError as error:
        raise UntrustedFileError(f"{name} cannot be read: {error.strerror or error}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise UntrustedFileError(f"{name} cannot be read: it is a {_kind(status.st_mode)}, not a regular "
                                     "file")
        if status.st_size > limit:
            raise UntrustedFileError(f"{name} is {status.st_size:,} bytes; at most {limit:,} are allowed")
        chunks, total = [], 0
        while total <= limit:  # the file may have grown since fstat: never read past limit + 1
            chunk = os.read(descriptor, min(limit + 1 - total, max(status.st_size + 1 - total, _READ_CHUNK)))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as error:
        raise UntrustedFileError(f"{name} cannot be read: {error.strerror or error}") from None
    finally:
        os.close(descriptor)
    if total > limit:
        raise UntrustedFileError(f"{name} is more than {limit:,} bytes; at most {limit:,} are allowed")
    return b"".join(chunks)


def json_depth(text: str) -> int:
    """How deep objects and arrays nest in the JSON ``text`` (brackets inside strings do not count),
    found in time linear in its length and without recursing, so that a hostile file can neither
    exhaust the parser's recursion nor make this check slow. An unterminated string runs to the end."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)


class _Refused:
    """Stands in, while parsing, for a number that is refused; the parse goes on so that the error can
    name the field (`_first_refused`)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _DuplicateKeys(dict):
    """An object that gave a key more than once (with the first such key)."""

    key: str


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    # JSON lets a later key silently replace an earlier one: a reader of the file would see one value
    # and the program use another.
    data = dict(pairs)
    if len(data) == len(pairs):
        return data
    duplicated = _DuplicateKeys(data)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            duplicated.key = key
            break
        seen.add(key)
    return duplicated


def _field_name(path: tuple) -> str:
    return "".join(f"[{part}]" if isinstance(part, int)
                   else (("." if i else "") + part if _PLAIN_KEY.fullmatch(part) else f"[{shown(part)}]")
                   for i, part in enumerate(path))


def _first_refused(data: Any) -> str | None:
    """The reason, with the field it is about, of the first refused value of ``data`` in document order."""
    stack = [((), data)]
    while stack:
        path, value = stack.pop()
        field = f"field {_field_name(path)}: " if path else ""
        if isinstance(value, _Refused):
            return field + value.reason
        if isinstance(value, _DuplicateKeys):
            within = f"object {_field_name(path)}" if path else "the top-level object"
            return f"duplicate key {shown(value.key)} in {within}: every key of an object must be unique"
        if isinstance(value, dict):
            stack.extend(reversed([((*path, key), item) for key, item in value.items()]))
        elif isinstance(value, list):
            stack.extend(reversed([((*path, i), item) for i, item in enumerate(value)]))
    return None


def parse_json(source: bytes | str, where: str, *, max_depth: int = MAX_NESTING,
               max_int_digits: int = MAX_INT_DIGITS, max_bytes: int | None = None) -> Any:
    """Parse the UTF-8 JSON ``source`` strictly (module docstring): at most ``max_bytes`` long (bytes, or
    characters when ``source`` is text; None: no limit), nesting at most ``max_depth`` levels, no
    duplicate key, no NaN or infinite number, integers of at most ``max_int_digits`` digits. Raises
    `UntrustedFileError` starting with ``where`` (the file) and naming the field where it can."""
    if max_bytes is not None and len(source) > max_bytes:
        raise UntrustedFileError(f"{where}: file is {len(source):,} bytes; at most {max_bytes:,} are allowed")
    if isinstance(source, str):
        text = source
    else:
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as error:
            raise UntrustedFileError(f"{where}: not UTF-8 text (byte {error.start}); the file must be UTF-8 "
                                     "JSON") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise UntrustedFileError(f"{where}: JSON nests {depth} levels deep; at most {max_depth} are allowed")
    refused = False

    def refuse(reason: str) -> _Refused:
        nonlocal refused
        refused = True
        return _Refused(reason)

    def constant(name: str) -> Any:
        return refuse(f"{name} is not allowed (not finite): every number must be finite")

    def number(text: str) -> Any:
        value = float(text)
        if math.isfinite(value):
            return value
        return refuse(f"number {shown(text, 20)} is out of range (not finite): every number must be finite")

    def integer(text: str) -> Any:
        # Checked on the digits, before int() runs: see MAX_INT_DIGITS.
        if len(text.lstrip("-")) > max_int_digits:
            return refuse(f"integer {shown(text, 20)} has more than {max_int_digits} digits")
        return int(text)

    def keys(pairs: list[tuple[str, Any]]) -> dict:
        nonlocal refused
        data = _unique_keys(pairs)
        refused = refused or isinstance(data, _DuplicateKeys)
        return data

    try:
        data = json.loads(text, parse_constant=constant, parse_float=number, parse_int=integer,
                          object_pairs_hook=keys)
    except json.JSONDecodeError as error:
        raise UntrustedFileError(
            f"{where}: not valid JSON ({error.msg}: line {error.lineno}, column {error.colno})"
        ) from None
    except (ValueError, RecursionError) as error:  # a last guard: the bounds above should prevent these
        raise UntrustedFileError(f"{where}: not readable JSON ({type(error).__name__})") from None
    if refused:
        # A refused value can only be missing from the result when a duplicate key dropped it, and then
        # the object with that key is found instead.
        raise UntrustedFileError(f"{where}: {_first_refused(data) or 'a value is refused'}")
    return data


def read_json(path: str | os.PathLike, limit: int, what: str, *, max_depth: int = MAX_NESTING,
              max_int_digits: int = MAX_INT_DIGITS, follow_symlinks: bool = True) -> Any:
    """`read_bytes` then `parse_json`: the strictly parsed JSON of the regular file ``path`` of at most
    ``limit`` bytes; `UntrustedFileError` naming the file (and the field) otherwise."""
    raw = read_bytes(path, limit, what, follow_symlinks=follow_symlinks)
    return parse_json(raw, path_text(path), max_depth=max_depth, max_int_digits=max_int_digits)


# --- staying inside a folder --------------------------------------------------------------------------------

def inside(root: str | os.PathLike, relative: str | PurePath) -> Path:
    """``root / relative`` (``root`` resolved), refused with `UntrustedFileError` when ``relative`` is
    absolute or holds ``..``, or when any component of it that exists is a symbolic link: whatever is
    read or written there then stays inside ``root``. The part of the path that does not exist yet is
    not checked (there is nothing to follow)."""
    base = Path(root).resolve()
    parts = PurePath(relative).parts
    if PurePath(relative).is_absolute() or ".." in parts or not parts:
        raise UntrustedFileError(f"{path_text(relative)} is not a path inside {path_text(base)}")
    path = base
    for part in parts:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):  # nothing there (below a file: nothing either)
            break
        if stat.S_ISLNK(mode):
            raise UntrustedFileError(f"{path_text(path)} is a symbolic link; inside {path_text(base)} only "
                                     "regular files and folders are read or written")
    return base.joinpath(*parts)


def os_error_text(error: OSError) -> str:
    """A one-line message of a file-system error: ``<path>: <reason>`` (``No space left on device``,
    ``Read-only file system``, ``Not a directory``), or the error's own text when it names no file."""
    reason = error.strerror or str(error) or type(error).__name__
    if error.filename is None:
        return " ".join(reason.split())
    names = path_text(error.filename)
    if error.filename2 is not None:
        names += f" -> {path_text(error.filename2)}"
    return f"{names}: {' '.join(reason.split())}"


def _refuse_non_folder(parent: int, name: str, path: Path) -> None:
    """Raise `UntrustedFileError` when ``name`` (in the folder ``parent``) is a link or not a folder."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise UntrustedFileError(f"{path_text(path)} is a symbolic link; a folder below the one written into "
                                 "is never followed through a link")
    if not stat.S_ISDIR(mode):
        raise UntrustedFileError(f"{path_text(path)} is a {_kind(mode)}, not a folder")


def _open_child(parent: int, name: str, path: Path) -> int:
    """A descriptor of the folder ``name`` in the folder ``parent`` (``path``, for messages), opened
    without following a link: a component swapped for a link after any check is refused, not followed
    out of the root."""
    try:
        return os.open(name, _FOLDER_FLAGS, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            _refuse_non_folder(parent, name, path)
        raise


def _child_folder(parent: int, name: str, path: Path) -> int:
    """`_open_child`, making the folder first when it is missing."""
    try:
        return _open_child(parent, name, path)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):  # made meanwhile, by a command beside this one
            os.mkdir(name, 0o777, dir_fd=parent)
    return _open_child(parent, name, path)


def _folder_inside(base: Path, parts: tuple[str, ...]) -> int:
    """A descriptor of ``base / parts``, each component below ``base`` opened relative to the one above
    it (`_child_folder`); ``base`` itself is made when missing."""
    if os.path.lexists(base) and not os.path.isdir(base):  # a file, a dangling link
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(base))
    os.makedirs(base, exist_ok=True)
    descriptor = os.open(base, _FOLDER_FLAGS & ~_NOFOLLOW)  # the root is the caller's: it may be a link
    path = base
    try:
        for part in parts:
            path = path / part
            child = _child_folder(descriptor, part, path)
            os.close(descriptor)
            descriptor = child
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _temporary_file(folder: int, name: str) -> tuple[str, int]:
    """A new file ``.<name>.<random>.tmp`` in ``folder``, created exclusively (never an existing file or
    a link), with its descriptor open for writing."""
    for _ in range(100):
        temporary = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return temporary, os.open(temporary, _TEMPORARY_FLAGS, 0o600, dir_fd=folder)
        except FileExistsError:
            continue
    raise OSError(errno.EAGAIN, "no free temporary file name", name)


def _replace_in(folder: int, name: str, path: Path, data: bytes, exclusive: bool) -> None:
    """Write ``data`` to ``name`` in ``folder`` (``path``, for messages) atomically: a temporary file in
    the same folder, renamed over the name (which replaces a link itself, never writing through it);
    the temporary file is removed when anything fails or the command is interrupted."""
    try:
        existing: int | None = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing):
        raise UntrustedFileError(f"{path_text(path)} is a {_kind(existing)}; only a regular file is replaced")
    if existing is not None and exclusive:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
    temporary, descriptor = _temporary_file(folder, name)
    try:
        try:
            os.fchmod(descriptor, 0o644 if existing is None else stat.S_IMODE(existing))
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view):]
        finally:
            os.close(descriptor)  # a delayed write error (a full disk) may show only here
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise


def write_inside(root: str | os.PathLike, relative: str | PurePath, data: bytes | str, *,
                 exclusive: bool = False, lock: bool = False) -> Path:
    """Write ``data`` (text as UTF-8) to ``root / relative`` atomically, creating the folders it needs;
    returns the path. Refused (`UntrustedFileError`) when a component is a symbolic link or leaves
    ``root``, and when the target exists but is not a regular file. A new file gets mode 0o644, a
    replaced one keeps its mode.

    Every folder below ``root`` is opened relative to the one above it without following a link, and
    the file is created and renamed relative to its folder's descriptor: a folder swapped for a link
    while this runs is refused, never written through. With ``exclusive``, a target that exists is a
    `FileExistsError`; with ``lock``, the folder of the target is locked (``flock``) from that check to
    the rename, so that two writers of one folder (two ``submit``) take turns. A file-system failure (a
    full or read-only disk, a component that is a file) is an `OSError` naming the target; nothing is
    left of the temporary file then."""
    path = inside(root, relative)
    parts = PurePath(relative).parts
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        folder = _folder_inside(Path(root).resolve(), parts[:-1])
        try:
            if lock:
                fcntl.flock(folder, fcntl.LOCK_EX)  # released when the descriptor closes
            _replace_in(folder, parts[-1], path, raw, exclusive)
        finally:
            os.close(folder)
    except OSError as error:
        if error.errno is None or (error.filename is not None and os.path.isabs(os.fsdecode(error.filename))):
            raise
        # Named after the target: a name relative to a folder's descriptor (the temporary file's, a
        # folder's) alone would not say where.
        raise OSError(error.errno, error.strerror, str(path)) from None
    return path
