# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The run's state of a node: what one role read or left that the next role of the same run may plan from.

Held by the action plugins, never by the roles' YAML: nvml_info's shared read (`nvml`), node_runtime's state of
the node runtime (`runtime`), and run_state's `forget`, which a role calls after a change that makes one stale.

An action plugin can set a host fact, not a variable of the run alone (only set_fact can), and a fact can outlive
the run in a fact cache (AWX's fact storage, a jsonfile cache). So the fact carries the run it was read in, and a
read from any other run is not this run's: it is passed over as if absent. The run is the running ansible-playbook,
as the node lease names it (this_run).
"""

from __future__ import annotations

import getpass
import os
import socket
import typing as t

# The host fact; gpufleet_run_* names are outputs of a run, never part of the fast path's declaration.
FACT = "gpufleet_run_state"
KEYS = ("nvml", "runtime")


def process_started(pid: int) -> str:
    """When a process started (clock ticks after boot, /proc/<pid>/stat field 22), so that a reused pid is not taken
    for the process that had it; "" where /proc is not there to ask."""
    try:
        with open("/proc/{0}/stat".format(pid), encoding="ascii") as handle:
            # The command name (field 2) may hold spaces: count from the closing parenthesis.
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def this_run() -> dict[str, t.Any]:
    """The running ansible-playbook, as the lease names it: every worker of one run forks from it (its parent)."""
    pid = os.getppid()
    started = process_started(pid)
    controller = socket.gethostname()
    return {
        "run_id": "{0}:{1}:{2}".format(controller, pid, started or "?"),
        "controller": controller,
        "user": getpass.getuser(),
        "pid": pid,
        "pid_started": started,
        # AWX and AAP name the job in the environment of the run.
        "awx_job": os.environ.get("JOB_ID", ""),
    }


def _held(task_vars: t.Mapping[str, t.Any] | None, run_id: str) -> dict[str, t.Any]:
    """The state run `run_id` holds of the host: {} when there is none, or when the fact is another run's."""
    facts = (task_vars or {}).get("ansible_facts") or {}
    state = facts.get(FACT)
    if not isinstance(state, t.Mapping) or state.get("run") != run_id:
        return {}
    return {key: state.get(key) for key in KEYS}


def held(task_vars: t.Mapping[str, t.Any] | None, key: str) -> t.Any:
    """What this run holds under `key` (nvml, runtime), or None."""
    return _held(task_vars, this_run()["run_id"]).get(key)


def facts_with(task_vars: t.Mapping[str, t.Any] | None, **changes: t.Any) -> dict[str, t.Any]:
    """The result's ansible_facts that keep this run's state with `changes` (None forgets a key)."""
    unknown = sorted(set(changes) - set(KEYS))
    if unknown:
        raise ValueError("run state has no {0} (known: {1})".format(", ".join(unknown), ", ".join(KEYS)))
    run_id = this_run()["run_id"]
    state = {key: None for key in KEYS}
    state.update(_held(task_vars, run_id))
    state.update(changes)
    state["run"] = run_id
    return {FACT: state}
