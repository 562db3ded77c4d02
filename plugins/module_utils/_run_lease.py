# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""One run at a time on a node, and what a dead run left stopped (node side, standard library only).

Three things on the node, each with one job:
- NODE_LOCK, /run/lock/gpufleet.lock: a flock(2) held for the length of a short critical section. The boot units
  (gpufleet-mig, the CDI refresh, gpufleet-verify-boot) hold it while they work, through flock(1); a run holds it
  while it reads or writes the lease, so the first node call of a run waits for boot units still at work.
- LEASE_PATH, /var/lib/gpufleet/run-lease.json: which run owns the node (run id, controller, user, start time).
  A lease is not a held lock: an Ansible run is many short processes on the node, none of which lives for the whole
  run. It is taken by a run's first node call, given back by its last, and survives a reboot that the run itself
  asked for. A run that died keeps it until the next run proves it dead (the controller's action plugin: same
  controller, process gone) or an operator names it (gpufleet_lock_take_over).
- STOPPED_PATH, /var/lib/gpufleet/stopped-services.json: services a step stopped and has not started again yet. The
  step writes it (fsync'd) before it stops anything and removes it once they run again; a run killed in between
  leaves it, and the next run that takes the lease starts them.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
import typing as t

from ._durable import remove, write_json

NODE_LOCK = "/run/lock/gpufleet.lock"
LEASE_PATH = "/var/lib/gpufleet/run-lease.json"
STOPPED_PATH = "/var/lib/gpufleet/stopped-services.json"
# The lease names its holder with these fields; run_id is what makes two runs different.
HOLDER_FIELDS = ("run_id", "controller", "user", "pid", "pid_started", "awx_job", "started")
_POLL = 1.0
# Another run reads or writes the lease under the node lock for milliseconds: always worth waiting for, even by a
# caller that will not wait for the lease itself.
_LOCK_GRACE = 10.0

__all__ = ["HOLDER_FIELDS", "LEASE_PATH", "NODE_LOCK", "STOPPED_PATH", "LeaseBusy", "NodeLock", "RunLease", "StoppedServices"]


class LeaseBusy(Exception):
    """The node lock or the lease stayed with someone else until the deadline; holder says who (a lease), or is
    None (the node lock: a boot unit at work)."""

    def __init__(self, holder: dict[str, t.Any] | None) -> None:
        super().__init__("busy")
        self.holder = holder


def _read_json(path: str) -> t.Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        # Torn or unreadable: written by a run that died mid-write (write_json makes that unlikely). As good as none.
        return None


class NodeLock:
    """flock(2) on NODE_LOCK, the lock flock(1) takes in the boot units, waited for up to a deadline."""

    def __init__(self, path: str = NODE_LOCK) -> None:
        self.path = path
        self.descriptor: int | None = None

    def acquire(self, deadline: float) -> None:
        os.makedirs(os.path.dirname(self.path), mode=0o755, exist_ok=True)
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.descriptor = descriptor
                return
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(descriptor)
                    raise
            if time.monotonic() >= deadline:
                os.close(descriptor)
                raise LeaseBusy(None)
            time.sleep(_POLL / 20)

    def release(self) -> None:
        if self.descriptor is not None:
            os.close(self.descriptor)  # closing the last descriptor releases the flock
            self.descriptor = None


class RunLease:
    """The lease file, read and written only under the node lock."""

    def __init__(self, path: str = LEASE_PATH, lock_path: str = NODE_LOCK) -> None:
        self.path = path
        self.lock_path = lock_path

    def holder(self) -> dict[str, t.Any] | None:
        found = _read_json(self.path)
        return found if isinstance(found, dict) and found.get("run_id") else None

    def acquire(self, holder: dict[str, t.Any], wait: float, take_over: str = "") -> dict[str, t.Any]:
        """Take the lease for `holder`, waiting up to `wait` seconds for another run to give it back.

        Free, already ours, or held by the run named in `take_over`: taken at once. Returns {"previous": the
        holder taken over, or None; "waited_for": the run it waited for, or None; "waited": seconds}. Raises
        LeaseBusy naming the holder when the wait is over."""
        started = time.monotonic()
        deadline = started + max(0.0, wait)
        waited_for = None
        while True:
            lock = NodeLock(self.lock_path)
            lock.acquire(max(deadline, time.monotonic() + _LOCK_GRACE))
            try:
                current = self.holder()
                if current is None or current.get("run_id") in (holder["run_id"], take_over or None):
                    previous = current if current is not None and current.get("run_id") != holder["run_id"] else None
                    write_json(self.path, dict(holder, acquired=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
                    return {"previous": previous, "waited_for": waited_for, "waited": round(time.monotonic() - started)}
            finally:
                lock.release()
            if time.monotonic() >= deadline:
                raise LeaseBusy(current)
            waited_for = current
            time.sleep(_POLL)

    def release(self, run_id: str, wait: float) -> bool:
        """Give the lease back if `run_id` holds it; True when it did."""
        lock = NodeLock(self.lock_path)
        lock.acquire(time.monotonic() + wait)
        try:
            current = self.holder()
            if current is None or current.get("run_id") != run_id:
                return False
            remove(self.path)
            return True
        finally:
            lock.release()


class StoppedServices:
    """Services stopped around a step, journalled on the node so that a killed run's stops are undone by the next."""

    def __init__(self, run_command: t.Callable[..., tuple[int, str, str]], systemctl: str, path: str = STOPPED_PATH) -> None:
        self.run_command = run_command
        self.systemctl = systemctl
        self.path = path

    def journalled(self) -> list[str]:
        found = _read_json(self.path)
        names = found.get("services") if isinstance(found, dict) else None
        return [name for name in names if isinstance(name, str)] if isinstance(names, list) else []

    def active(self, names: t.Sequence[str]) -> list[str]:
        """Those of `names` that run now, in the order given."""
        running = []
        for name in names:
            rc, _out, _err = self.run_command([self.systemctl, "is-active", "--quiet", "--", name])
            if rc == 0:
                running.append(name)
        return running

    def stop(self, names: t.Sequence[str], why: str) -> list[str]:
        """Journal, then stop, those of `names` that run; returns them. The journal keeps any earlier entries."""
        running = self.active(names)
        if not running:
            return []
        stopped = list(dict.fromkeys(self.journalled() + running))
        write_json(self.path, {"services": stopped, "why": why, "pid": os.getpid(), "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, 0o644)
        for name in running:
            rc, _out, err = self.run_command([self.systemctl, "stop", "--", name])
            if rc != 0:
                raise RuntimeError("systemctl stop {0} failed: {1}".format(name, err.strip()))
        return running

    def start_all(self) -> tuple[list[str], list[str]]:
        """Start every journalled service (last stopped, first started); the journal goes once all run.
        Returns (started, failed with their errors)."""
        names = self.journalled()
        started, failed = [], []
        for name in reversed(names):
            rc, _out, err = self.run_command([self.systemctl, "start", "--", name])
            if rc == 0:
                started.append(name)
            else:
                failed.append("{0}: {1}".format(name, err.strip() or "exit {0}".format(rc)))
        if not failed:
            remove(self.path)
        return started, failed
