"""Reading and writing the small files of `attnlab watch` without trusting what is at a path: a FIFO
where a file belongs would block an open() for ever, a directory or a device would fail or never end.
"""
from __future__ import annotations

import os
import stat


class NotRegular(OSError):
    """A path that holds something other than a regular file; the message says what."""


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """An O_RDONLY descriptor of the regular file at `path` and its stat. Opening with O_NONBLOCK never
    waits for a FIFO's writer; the type is checked on the descriptor, so a file replaced between a
    look and the open cannot slip through. Raises FileNotFoundError, NotRegular or another OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(f"{path} is {kind_of(st.st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_regular(path: str, limit: int) -> bytes:
    """The contents of the regular file at `path`. Raises what open_regular raises, and ValueError for
    a file longer than `limit` bytes."""
    fd, st = open_regular(path)
    try:
        if st.st_size > limit:
            raise ValueError(f"{path} holds {st.st_size} bytes, more than the {limit} read")
        data = os.read(fd, limit + 1)
        if len(data) > limit:
            raise ValueError(f"{path} grew past the {limit} bytes read")
        return data
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes) -> None:
    """Replaces `path` with `data` (a temporary beside it, fsync, rename): a reader sees the old file or
    the new one, never half of one. Raises OSError."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
