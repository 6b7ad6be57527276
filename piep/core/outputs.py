"""Outputs written whole, whatever happens to the process that writes them.

* A file goes to a temporary of its own beside it (created with O_EXCL and O_NOFOLLOW:
  never through a planted symlink), is flushed to the disk, then renamed over the
  target; a target that is a symlink is written through (the link stays).
* A folder (a report, a predictor) is written into a staging folder beside it and
  switched in by one rename (an exchange where the old one exists), so a reader finds
  the old folder or the new one, never a mix. What the old one holds that the new does
  not (a figure of an earlier report, a file of the user's) is carried over (hard links).
  A folder piep did not write (not empty, without the command's own file) is refused.
* A set of outputs (a plan and its figure) is staged whole and committed under a journal
  written before the first rename: a run killed between two renames is completed by the
  next (`recover`).
* An output is claimed (an fcntl lock) before the work that makes it: a second piep that
  would write it is refused in one line instead of mixing its files in.
* What a killed run left beside an output (temporaries, staging folders) is removed by
  the next run that writes there.

Only `piep.core.artifacts` uses this module; everything else writes through it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from piep.core.errors import OutputError

# a leftover beside an output: .NAME.PID-TOKEN.piep-KIND
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{8}\.piep-(?P<kind>tmp|new|old)"
                       r"(?:\.[^.]*)?$")
Opener = Callable[[Path, str], object]


def _staged(target: Path, kind: str) -> Path:
    """A name beside `target` for this process's `kind` of leftover (tmp, new, old); a
    file's keeps the target's suffix (a figure's format is read from it)."""
    ext = target.suffix if kind == "tmp" else ""
    return target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.piep-{kind}"
                            f"{ext}")


def pid_alive(pid: int) -> bool:
    """Whether a process of that id runs (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    """A file, a symlink (not what it points to) or a folder tree; gone already is fine."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass


_CLEANED: set[str] = set()  # folders whose leftovers this process removed already


def clean_beside(target: Path) -> None:
    """Remove what runs that died left beside `target` (their temporaries and staging
    folders); a folder a run had moved aside to switch in a new one, where none came,
    goes back in place. Once per folder and process."""
    parent = target.parent
    key = str(parent.resolve()) if parent.exists() else None
    if key is None or key in _CLEANED:
        return
    _CLEANED.add(key)
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        m = _LEFTOVER.match(name)
        if not m or int(m["pid"]) == os.getpid() or pid_alive(int(m["pid"])):
            continue
        path, home = parent / name, parent / m["name"]
        try:
            if m["kind"] == "old" and not os.path.lexists(home):
                os.rename(path, home)  # the switch died halfway: the old folder stays
            else:
                _remove(path)
        except OSError:
            pass


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _beside(target: Path | str, kind: str) -> tuple[Path, Path]:
    """(the output, a name beside it for this process's `kind` of staging): a symlink is
    written through (its target), its folder made, what dead runs left there cleaned."""
    target = Path(target)
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_beside(target)
    return target, _staged(target, kind)


def create_new(path: Path, mode: str):
    """A new file at `path`, opened for writing: never one that exists, never through a
    symlink (O_EXCL | O_NOFOLLOW)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    return os.fdopen(os.open(path, flags, 0o666), mode)


def write_file(path: Path, content: str | bytes, opener: Opener = create_new) -> Path:
    """`content` at `path`, atomically (temporary beside it, fsync, rename, fsync of the
    folder); returns the path written (a symlink's target)."""
    path, tmp = _beside(path, "tmp")
    try:
        with opener(tmp, "wb" if isinstance(content, bytes) else "w") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise
    _fsync_dir(path.parent)
    return path


# --- folders and sets of outputs ----------------------------------------------------------
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2); False where it cannot."""
    import ctypes  # (only when a folder is switched: not at every command's start)
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_cwd = -100
    if fn(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    if ctypes.get_errno() in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(b))


def _switch_in(staged: Path, target: Path) -> None:
    """The staged folder in place of `target` (created, or swapped with the old one,
    which is then removed)."""
    if not os.path.lexists(target):
        os.rename(staged, target)
    elif _exchange(staged, target):
        _fsync_dir(target.parent)
        _remove(staged)  # the old folder, now at the staging name
        return
    else:  # no exchange here: the old folder aside, the new in (`clean_beside` undoes half)
        old = _staged(target, "old")
        os.rename(target, old)
        os.rename(staged, target)
        _fsync_dir(target.parent)
        _remove(old)
        return
    _fsync_dir(target.parent)


def check_folder(folder: Path, signature: str, what: str = "") -> None:
    """Refuse (one line) to replace a folder piep did not write: a file, or a folder that
    is not empty and does not hold `signature` (the file a previous run of the same
    command wrote). `what`: the flag it was given by."""
    name = f"{what} {folder}".strip()
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{name} is a file; give a folder")
    try:
        found = sorted(os.listdir(folder))
    except FileNotFoundError:
        return
    if found and signature not in found:
        raise OutputError(f"{name} holds files piep did not write ({', '.join(found[:3])}"
                          f"{', ...' if len(found) > 3 else ''}); give a new or empty folder, "
                          f"or one a previous run of this command wrote")


def _carry_over(old: Path, new: Path) -> None:
    """Into the staged folder `new`, what the folder `old` holds that `new` does not (files
    hard-linked where the file system allows, else copied; folders merged)."""
    for name in os.listdir(old):
        src, dst = old / name, new / name
        if src.is_dir() and not src.is_symlink():
            if not os.path.lexists(dst):
                shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
            elif dst.is_dir() and not dst.is_symlink():
                _carry_over(src, dst)
        elif not os.path.lexists(dst):
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            else:
                _link_or_copy(src, dst)


def _link_or_copy(src, dst) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@dataclass
class _Unit:
    kind: str            # "file" or "folder"
    target: Path
    staged: Path
    inode: int = 0       # a folder: its staging folder's inode (a switch done, or not)


@dataclass
class Outputs:
    """Outputs staged together and committed all at once (`commit`) or not at all
    (`abort`). `journal`: a folder for the journal of a commit of several outputs (None:
    no journal: a kill between their renames leaves the renames done so far)."""
    journal: Path | None = None
    units: list[_Unit] = field(default_factory=list)

    def folder(self, target: Path | str, signature: str) -> Path:
        """A staging folder to write the folder `target` into; `signature`: the file of
        it that marks an output of the same command (an existing folder without it, and
        not empty, is refused: piep does not replace what it did not write)."""
        check_folder(Path(os.path.realpath(target)), signature)  # (a link written through)
        target, staged = _beside(target, "new")
        os.mkdir(staged)
        self.units.append(_Unit("folder", target, staged, os.stat(staged).st_ino))
        return staged

    def file(self, target: Path | str) -> Path:
        """A staged name for the file `target` (reserved: created empty), to write to."""
        target, staged = _beside(target, "tmp")
        create_new(staged, "w").close()
        self.units.append(_Unit("file", target, staged))
        return staged

    def commit(self) -> None:
        """Every staged output in place, under a journal where there are several (a folder
        first gets what its old self holds and it does not)."""
        for u in self.units:
            if u.kind == "folder" and os.path.isdir(u.target):
                _carry_over(u.target, u.staged)
        journal = self._journal() if len(self.units) > 1 else None
        for u in self.units:
            apply(u)
        if journal is not None:
            _remove(journal)
        self.units = []

    def abort(self) -> None:
        """Nothing of the staged outputs stays."""
        for u in self.units:
            _remove(u.staged)
        self.units = []

    def _journal(self) -> Path | None:
        """The commit's journal (its units, this process), on the disk before any rename."""
        if self.journal is None:
            return None
        try:
            self.journal.mkdir(parents=True, exist_ok=True)
            doc = {"pid": os.getpid(),
                   "units": [{"kind": u.kind, "target": str(u.target), "staged": str(u.staged),
                              "inode": u.inode} for u in self.units]}
            return write_file(self.journal / f"{os.getpid()}-{secrets.token_hex(4)}.json",
                              json.dumps(doc))
        except OSError:  # no journal where none can be written: the renames still run
            return None


def apply(u: _Unit) -> None:
    """One staged output in place (again, after a kill: what is done already is kept)."""
    if u.kind == "file":
        if os.path.lexists(u.staged):
            os.replace(u.staged, u.target)
            _fsync_dir(u.target.parent)
        return
    if os.path.isdir(u.target) and os.stat(u.target).st_ino == u.inode:
        _remove(u.staged)  # switched in already: what is left at the staging name is old
    elif os.path.isdir(u.staged) and os.stat(u.staged).st_ino == u.inode:
        _switch_in(u.staged, u.target)


def recover(journal: Path) -> None:
    """Complete the commits that runs killed between their renames left journalled."""
    try:
        names = sorted(os.listdir(journal))
    except OSError:
        return
    for name in names:
        path = journal / name
        try:
            doc = json.loads(path.read_text())
            if pid_alive(int(doc["pid"])) and int(doc["pid"]) != os.getpid():
                continue
            for u in doc["units"]:
                apply(_Unit(u["kind"], Path(u["target"]), Path(u["staged"]),
                            inode=int(u.get("inode", 0))))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        _remove(path)


# --- claims ---------------------------------------------------------------------------------
_CLAIMS: dict[str, int] = {}  # output path -> the open lock file that claims it


def _lock_dir() -> Path | None:
    """This user's folder of output locks (None where none can be made safely)."""
    import tempfile  # (only when an output is claimed)
    folder = Path(tempfile.gettempdir()) / f"piep-locks-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return None
    return folder if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() else None


def claim(path: Path | str) -> None:
    """Hold the lock of an output until `release_claims` (or the process ends): a second
    piep claiming the same path is refused in one line."""
    import fcntl
    key = os.path.realpath(path)
    if key in _CLAIMS:
        return
    folder = _lock_dir()
    if folder is None:
        return
    lock = folder / f"{hashlib.sha1(key.encode()).hexdigest()[:24]}.lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise OutputError(f"{path}: another piep (pid {holder}) is writing it; wait for it to "
                          f"end, or write elsewhere") from None
    except OSError:
        os.close(fd)
        return
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    _CLAIMS[key] = fd


def release_claims() -> None:
    """Give up every output this process claimed."""
    while _CLAIMS:
        os.close(_CLAIMS.popitem()[1])
