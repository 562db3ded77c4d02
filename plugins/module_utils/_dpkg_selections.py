# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""dpkg's selections (hold, install) of a list of packages, set in one dpkg call: package_selections and apt_install."""

from __future__ import annotations

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


def set_selections(module: t.Any, names: list[str], selection: str, current: t.Callable[[], dict[str, str]], lock_timeout: int = 120) -> None:
    """Set `names` to `selection` with one `dpkg --set-selections`, then check with `current()` (name -> selection,
    read afresh) that dpkg set every one; fails the module otherwise. While another package manager holds one of
    dpkg's locks, dpkg is asked again until `lock_timeout` seconds have passed; then the task fails naming it."""
    dpkg = module.get_bin_path("dpkg", required=True)
    deadline = time.monotonic() + lock_timeout
    while True:
        rc, out, err = module.run_command(
            [dpkg, "--set-selections"], data="".join("{0} {1}\n".format(name, selection) for name in names), binary_data=True, environ_update={"LC_ALL": "C"}
        )
        busy = _BUSY.search(err) if rc != 0 else None
        if busy is None or time.monotonic() >= deadline:
            break
        time.sleep(_POLL_SECONDS)
    if busy is not None:
        module.fail_json(
            msg="dpkg is busy: its lock is held by {0} and was not released within lock_timeout={1} s. Another package "
            "manager is still working (a killed run's dpkg, unattended-upgrades): let it finish, or raise "
            "lock_timeout".format((busy.group("holder") or busy.group("other")).strip(), lock_timeout),
            rc=rc,
            stderr=err,
        )
    if rc != 0 or err.strip():
        module.fail_json(msg="dpkg --set-selections failed: {0}".format(err.strip() or out.strip()), rc=rc, stderr=err)
    after = current()
    unset = [name for name in names if after.get(name) != selection]
    if unset:
        module.fail_json(msg="dpkg did not set {0} to {1}".format(", ".join(unset), selection))
