"""A job's files as the side that owns them opens them: never through a link, never in a
folder someone else controls.

A job directory lives in its user's folders, which that user (and their trainer) may change at
any time, and which other users may try to prepare in advance. So this side, which runs as the
job's owner (the personal server, a user's server in shared mode, the CLI), opens them with
these rules (docs/security.md):

* every folder from ``/`` down to the one written in is owned by this account or by root, and
  only sticky folders (``/tmp``) above it may be writable by others; symbolic links on the way
  are followed only when owned by this account or root;
* a directory for a new job is created here, and refused if it exists already;
* files are written whole through a fresh temporary file (``O_EXCL``) renamed over the name,
  so a link planted under that name is replaced, never followed;
* files are read with ``O_NOFOLLOW`` and only when they are regular files.

The shared scheduler itself opens none of them (``launcher.starts_processes``). Standard
library only: the REST client reads logs with it too.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import secrets
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW
#: Most symbolic links followed on the way to one folder (as the kernel's own limit).
MAX_LINKS = 40


class UnsafePath(PermissionError):
    """A path this side refuses to use; the message says why and what to do."""


def _who(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _private_group(gid: int, uid: int) -> bool:
    """Whether ``gid`` is ``uid``'s own group (a user-private group: same name, no members
    but the user), so that group write access gives nobody else anything."""
    try:
        user, group = pwd.getpwuid(uid).pw_name, grp.getgrgid(gid)
    except KeyError:
        return False
    return group.gr_name == user and set(group.gr_mem) <= {user}


def _check_folder(st: os.stat_result, where: str, last: bool) -> None:
    """Refuse a folder someone other than this account (or root) owns or may change."""
    me = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{where} is not a folder: remove it, or choose another job root")
    if st.st_uid not in (me, 0):
        raise UnsafePath(
            f"{where} belongs to {_who(st.st_uid)}, not to {_who(me)}: job files are only "
            "written in folders you (or root) own; remove it (or ask its owner to), or set "
            "c.SchedulerService.job_root to a folder of your own"
        )
    others = st.st_mode & 0o002 or (st.st_mode & 0o020 and not _private_group(st.st_gid, st.st_uid))
    if others and (last or not st.st_mode & stat.S_ISVTX):
        raise UnsafePath(
            f"{where} is writable by other users: run `chmod go-w {where}`, or set "
            "c.SchedulerService.job_root to a folder only you can write"
        )


def open_folder(path: str | os.PathLike, create: bool = False, fresh: bool = False) -> int:
    """A descriptor of the folder ``path``, every folder on the way checked (see above).

    ``create`` makes the missing folders (mode 0700); ``fresh`` also requires this call to
    create the last one (a new job's directory): an existing one is refused. Raises
    ``UnsafePath`` (a PermissionError), or FileNotFoundError without ``create``.
    """
    target = os.path.abspath(os.fspath(path))
    parts = [p for p in target.split("/") if p]
    fd = os.open("/", _DIR)
    try:
        _check_folder(os.fstat(fd), "/", not parts)
        walked: list[str] = []
        links, i = 0, 0
        while i < len(parts):
            name, last = parts[i], i == len(parts) - 1
            where = "/" + "/".join([*walked, name])
            made = False
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=fd)
                    made = True
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if last and fresh and not made:
                raise UnsafePath(
                    f"{where} exists already: a new job's directory is created by the side "
                    "that writes its files; remove it, or submit the job again"
                )
            if stat.S_ISLNK(st.st_mode):
                if st.st_uid not in (os.geteuid(), 0):
                    raise UnsafePath(
                        f"{where} is a symbolic link owned by {_who(st.st_uid)}: not followed; "
                        "remove it, or set c.SchedulerService.job_root to a folder of your own"
                    )
                links += 1
                if links > MAX_LINKS:
                    raise UnsafePath(f"{target}: too many symbolic links on the way")
                resolved = os.path.normpath(
                    os.path.join("/" + "/".join(walked), os.readlink(name, dir_fd=fd))
                )
                parts = [p for p in resolved.split("/") if p] + parts[i + 1 :]
                os.close(fd)
                fd = os.open("/", _DIR)
                walked, i = [], 0
                continue
            _check_folder(st, where, last)
            try:
                child = os.open(name, _DIR | _NOFOLLOW, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(f"{where} changed while it was checked: try again") from None
                raise
            os.close(fd)
            fd = child
            _check_folder(os.fstat(fd), where, last)
            walked.append(name)
            i += 1
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def folder(path: str | os.PathLike, create: bool = False, fresh: bool = False) -> Iterator[int]:
    """``open_folder`` as a context: the descriptor is closed at the end."""
    fd = open_folder(path, create=create, fresh=fresh)
    try:
        yield fd
    finally:
        os.close(fd)


def write_file(dir_fd: int, name: str, data: bytes, mode: int = 0o600) -> None:
    """Write ``name`` in the folder ``dir_fd`` whole or not at all: a new temporary file
    (``O_EXCL``: never an existing one, nor a link) with exactly ``mode`` (whatever the
    umask), fsync, renamed over ``name`` (which replaces a link planted there instead of
    following it)."""
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def open_append(dir_fd: int, name: str, mode: int = 0o600) -> int:
    """A descriptor appending to the regular file ``name`` of ``dir_fd`` (created if missing),
    never through a link."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePath(f"{name} is a symbolic link: remove it from the job dir") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"{name} is not a regular file: remove it from the job dir")
    os.set_blocking(fd, True)
    return fd


def read_regular(folder_path: str | os.PathLike, name: str, max_bytes: int) -> bytes | None:
    """The last ``max_bytes`` of the regular file ``name`` in ``folder_path``; None when
    either is missing. Neither the folder nor the file is opened through a link, nor a file
    that is not a regular one (a FIFO would block, a device is no log): ``UnsafePath``."""
    try:
        dir_fd = os.open(folder_path, _DIR | _NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(f"{folder_path} is not a folder but a link or a file") from None
        raise
    try:
        try:
            fd = os.open(
                name, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
            )
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafePath(f"{name} is a symbolic link") from None
            raise
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise UnsafePath(f"{name} is not a regular file")
            if st.st_nlink > 1:
                raise UnsafePath(f"{name} has other hard links")
            f.seek(max(st.st_size - max_bytes, 0))
            return f.read(max_bytes)
    finally:
        os.close(dir_fd)


def _is(path: str | os.PathLike, kind: Callable[[int], bool]) -> bool:
    path = Path(path)
    try:
        dir_fd = os.open(path.parent, _DIR | _NOFOLLOW)
    except OSError:
        return False
    try:
        return kind(os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
    finally:
        os.close(dir_fd)


def is_regular(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file itself (not a link to one) in a folder that is not a
    link either."""
    return _is(path, stat.S_ISREG)


def is_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder itself (not a link to one) in a folder that is not a link
    either."""
    return _is(path, stat.S_ISDIR)


#: The most of a log read back (its end).
MAX_LOG_BYTES = 256 * 1024


def tail(folder_path: str | os.PathLike, name: str, lines: int) -> str:
    """The last ``lines`` lines of a log (all of its last 256 KiB when ``lines`` <= 0); a log
    that is a link or not a regular file reads as one line saying so, never as its target.
    PermissionError when this account may not read it."""
    try:
        raw = read_regular(folder_path, name, MAX_LOG_BYTES)
    except UnsafePath as e:
        return f"[{e}: not read; logs are read only from regular files in the job dir]"
    if raw is None:
        return ""
    data = raw.decode(errors="replace")
    return "\n".join(data.splitlines()[-lines:]) if lines > 0 else data


def read_logs(job_dir: str, lines: int, files: Mapping[str, str]) -> dict[str, str]:
    """The end of each log of ``files`` ({name: file in the job dir})."""
    return {key: tail(job_dir, file, lines) for key, file in files.items()}
