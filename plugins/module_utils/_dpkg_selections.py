# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""dpkg run while another package manager may hold its locks, and dpkg's selections (hold, install) of a list of
packages set in one dpkg call: package_selections and apt_install."""

from __future__ import annotations

import os
import re
import time
import typing as t

# dpkg's answers while another dpkg or apt holds one of its locks: its frontend
# lock ("dpkg frontend lock was locked by /usr/bin/dpkg process with pid 1674"),
# its database lock ("dpkg database lock was locked by another process with pid 9")
# or, from older dpkg, "dpkg status database is locked by another process".
# A run killed in the middle of an install leaves its dpkg running on the node:
# the next run must wait for it, as apt-get waits with DPkg::Lock::Timeout.
_BUSY = re.compile(r"dpkg (?:frontend|database) lock (?:was|is) locked by (?P<holder>[^\n]*)|dpkg status database is locked by (?P<other>[^\n]*)")
_POLL_SECONDS = 1.0


def _lock_holder(admindir: str) -> str | None:
    """Who holds one of dpkg's locks in `admindir` ("pid 1674 (dpkg)"), read from /proc/locks, not by taking it:
    None when neither is held (or the kernel does not say)."""
    wanted = set()
    for name in ("lock-frontend", "lock"):
        try:
            stat = os.stat(os.path.join(admindir, name))
        except OSError:
            continue
        wanted.add("{0:02x}:{1:02x}:{2}".format(os.major(stat.st_dev), os.minor(stat.st_dev), stat.st_ino))
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            rows = handle.read().splitlines()
    except OSError:
        return None
    for row in rows:
        fields = row.split()
        # "1: POSIX  ADVISORY  WRITE 1674 00:2f:1234567 0 EOF" (a "->" marks a waiter)
        if len(fields) >= 6 and "->" not in fields and fields[5] in wanted:
            pid = fields[4]
            try:
                with open("/proc/{0}/comm".format(pid), encoding="utf-8", errors="replace") as handle:
                    return "pid {0} ({1})".format(pid, handle.read().strip())
            except OSError:
                return "pid {0}".format(pid)
    return None


def run_dpkg(
    module: t.Any, argv: list[str], deadline: float, data: str | None = None, environ: dict[str, str] | None = None
) -> tuple[int, str, str, str | None]:
    """dpkg with `argv` (after the program), asked again each second while another package manager holds one of its
    locks, until `deadline` (time.monotonic()). Returns (rc, stdout, stderr, busy): busy names the holder when a lock
    was still held at the deadline, else None."""
    dpkg = module.get_bin_path("dpkg", required=True)
    admindir = os.environ.get("DPKG_ADMINDIR") or "/var/lib/dpkg"
    while True:
        rc, out, err = 2, "", ""
        busy = _lock_holder(admindir)
        if busy is None:
            try:
                rc, out, err = module.run_command(
                    [dpkg] + argv, data=data, binary_data=data is not None, environ_update=dict(environ or {}, LC_ALL="C"), handle_exceptions=False
                )
            except BrokenPipeError:
                # dpkg found a lock taken since we looked, and quit before reading its input.
                busy = _lock_holder(admindir) or "another process"
            else:
                found = _BUSY.search(err) if rc != 0 else None
                busy = (found.group("holder") or found.group("other")).strip() if found else None
        if busy is None or time.monotonic() >= deadline:
            return rc, out, err, busy
        time.sleep(_POLL_SECONDS)


def busy_message(busy: str, lock_timeout: int) -> str:
    return (
        "dpkg is busy: its lock is held by {0} and was not released within lock_timeout={1} s. Another package "
        "manager is still working (a killed run's dpkg, unattended-upgrades): let it finish, or raise "
        "lock_timeout".format(busy, lock_timeout)
    )


def set_selections(module: t.Any, names: list[str], selection: str, current: t.Callable[[], dict[str, str]], lock_timeout: int = 120) -> None:
    """Set `names` to `selection` with one `dpkg --set-selections`, then check with `current()` (name -> selection,
    read afresh) that dpkg set every one; fails the module otherwise. While another package manager holds one of
    dpkg's locks, this waits (run_dpkg) until `lock_timeout` seconds have passed; then the task fails naming the
    holder."""
    data = "".join("{0} {1}\n".format(name, selection) for name in names)
    rc, out, err, busy = run_dpkg(module, ["--set-selections"], time.monotonic() + lock_timeout, data=data)
    if busy is not None:
        module.fail_json(msg=busy_message(busy, lock_timeout))
    if rc != 0 or err.strip():
        module.fail_json(msg="dpkg --set-selections failed: {0}".format(err.strip() or out.strip()), rc=rc, stderr=err)
    after = current()
    unset = [name for name in names if after.get(name) != selection]
    if unset:
        module.fail_json(msg="dpkg did not set {0} to {1}".format(", ".join(unset), selection))
