#!/usr/bin/env python
"""Count the calls a playbook run made to its nodes, per role and per task.

Reads the output of `ansible-playbook -vvv` over the SSH connection (as
count_calls.sh runs it) and counts one call per `SSH: EXEC` line: with
pipelining a module is one ssh command, so the count is the number of round
trips the run paid, whatever made them (a module, an action plugin's file
transfer, a become wrapper). Tasks decided on the controller (set_fact,
assert, a skipped task) make none and are not listed.

With --timed, the output of the same playbook on a node in the same state
with ansible.posix.profile_tasks (count_calls.sh PROFILE=1 runs both) gives
each task's time, and the run's time is split three ways: the package
installations (the tasks that ran gpufleet.nvidia.apt_install), the other
tasks that called the node, and the tasks decided on the controller.

    python3 benchmarks/calls_per_role.py converge.log [--tasks] [--timed timed.log]
"""

import argparse
import collections
import re
import sys

# A banner: a play's, a task's or a handler's with its name, or a recap's (PLAY RECAP; TASKS RECAP from profile_tasks).
BANNER = re.compile(r"^(?P<kind>PLAY|TASK|RUNNING HANDLER|PLAY RECAP|TASKS RECAP)(?: \[(?P<name>.*)\])? \*+$")
EXEC = re.compile(r"^<[^>]+> SSH: EXEC ")
# -vvv names the module file each call runs.
MODULE = re.compile(r"^Using module file .*/(?P<module>[^/]+)\.py$")
# The line profile_tasks prints under each banner: the previous task's time in
# parentheses, then the run's time so far.
ELAPSED = re.compile(r"\((?P<h>\d+):(?P<m>\d\d):(?P<s>\d\d(?:\.\d+)?)\)\s+\d+:\d\d:\d\d")
INSTALL_MODULE = "apt_install"


def _key(play, name):
    role, sep, title = name.partition(" : ")
    # A play's own task (facts.yml, record) is listed under its play.
    return (role.rpartition(".")[2], title) if sep else (f"play: {play}", name)


def count(lines):
    """(calls per (role, task) in run order, modules per (role, task)) from -vvv lines."""
    per_task = collections.OrderedDict()
    modules = collections.defaultdict(set)
    play = task = None
    for line in lines:
        banner = BANNER.match(line)
        if banner:
            if banner["kind"] == "PLAY":
                play = banner["name"]
            task = _key(play, banner["name"]) if banner["kind"] in ("TASK", "RUNNING HANDLER") else None
            continue
        if task is None:
            continue
        if EXEC.match(line):
            per_task[task] = per_task.get(task, 0) + 1
        match = MODULE.match(line)
        if match:
            modules[task].add(match["module"])
    return per_task, modules


def timings(lines):
    """Seconds per (role, task), summed over its runs, from profile_tasks' lines: the time under a banner is the
    previous task's, and the recap's banner closes the last one."""
    seconds = collections.OrderedDict()
    play = current = finished = None
    for line in lines:
        banner = BANNER.match(line)
        if banner and banner["kind"] == "PLAY":
            play = banner["name"]
        elif banner:
            finished, current = current, (_key(play, banner["name"]) if banner["kind"] in ("TASK", "RUNNING HANDLER") else None)
            continue
        elapsed = ELAPSED.search(line)
        if elapsed and finished is not None:
            seconds[finished] = seconds.get(finished, 0.0) + int(elapsed["h"]) * 3600 + int(elapsed["m"]) * 60 + float(elapsed["s"])
            finished = None
    return seconds


def split(calls, modules, seconds):
    """[(what, tasks, calls, seconds)]: installs, other tasks that called the node, tasks decided on the controller."""
    rows = {"package installations": [0, 0, 0.0], "other tasks that call the node": [0, 0, 0.0], "tasks decided on the controller": [0, 0, 0.0]}
    for key, spent in seconds.items():
        made = calls.get(key, 0)
        if INSTALL_MODULE in modules.get(key, ()):
            row = rows["package installations"]
        elif made:
            row = rows["other tasks that call the node"]
        else:
            row = rows["tasks decided on the controller"]
        row[0] += 1
        row[1] += made
        row[2] += spent
    return [(what, *values) for what, values in rows.items()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="output of ansible-playbook -vvv (ssh connection)")
    parser.add_argument("--tasks", action="store_true", help="list every task that made a call")
    parser.add_argument("--timed", metavar="LOG", help="output of the same run with ansible.posix.profile_tasks, without -vvv")
    args = parser.parse_args(argv)
    with open(args.log, encoding="utf-8", errors="replace") as handle:
        per_task, modules = count(handle.read().splitlines())
    per_role = collections.OrderedDict()
    for (role, _title), calls in per_task.items():
        per_role[role] = per_role.get(role, 0) + calls
    width = max([len(r) for r in per_role] + [4])
    for role, calls in per_role.items():
        print(f"{role:<{width}}  {calls:3d}")
        if args.tasks:
            for (task_role, title), task_calls in per_task.items():
                if task_role == role:
                    print(f"    {task_calls:2d}  {title}")
    print(f"{'total':<{width}}  {sum(per_role.values()):3d}")
    if args.timed:
        with open(args.timed, encoding="utf-8", errors="replace") as handle:
            seconds = timings(handle.read().splitlines())
        if not seconds:
            sys.exit(f"{args.timed}: no profile_tasks times (run with ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks)")
        print()
        print(f"{'where the time went':<32} {'tasks':>5} {'calls':>5} {'seconds':>8} {'ms a task':>9}")
        for what, tasks, calls, spent in split(per_task, modules, seconds):
            print(f"{what:<32} {tasks:5d} {calls:5d} {spent:8.1f} {spent * 1000 / max(tasks, 1):9.0f}")
        print(f"{'all tasks':<32} {len(seconds):5d} {sum(per_task.values()):5d} {sum(seconds.values()):8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
