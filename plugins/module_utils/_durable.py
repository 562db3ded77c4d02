# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Crash-safe writes of the files a node needs to boot (node side, standard library only).

A rename alone is atomic for readers but not durable: after a power loss the directory entry may point to a file
whose data never reached the disk (an empty unit, an empty CDI spec, a torn MIG config). So every write here is:
a temporary file beside the target, its data fsync'd, renamed over the target, then the directory fsync'd so the
rename itself survives. The modules that keep ansible's atomic_move (it keeps an existing file's owner and
SELinux context) call sync_file before it and sync_directory after it. The boot commands import this from the
node runtime."""

from __future__ import annotations

import json
import os
import tempfile
import typing as t

__all__ = ["remove", "sync_directory", "sync_file", "write_atomically", "write_json"]


def sync_file(handle: t.IO[t.Any]) -> None:
    """The data of an open file, down to the disk."""
    handle.flush()
    os.fsync(handle.fileno())


def sync_directory(directory: str) -> None:
    """The directory's entries (a rename, a new or removed file) down to the disk."""
    descriptor = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomically(path: str, data: bytes | str, mode: int = 0o644) -> None:
    """`data` at `path`, durably: readers see the old file or the new one, and so does the next boot."""
    directory, name = os.path.split(path)
    os.makedirs(directory or ".", mode=0o755, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix="." + name + ".", dir=directory or ".")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            os.fchmod(handle.fileno(), mode)
            sync_file(handle)
        os.replace(temporary, path)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise
    sync_directory(directory)


def write_json(path: str, data: t.Any, mode: int = 0o600) -> None:
    write_atomically(path, json.dumps(data, sort_keys=True, indent=1) + "\n", mode)


def remove(path: str) -> bool:
    """Remove `path` durably; False when it was not there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    sync_directory(os.path.dirname(path))
    return True
