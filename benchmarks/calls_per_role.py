#!/usr/bin/env python
"""Count the calls a playbook run made to its nodes, per role and per task.

Reads the output of `ansible-playbook -vvv` over the SSH connection (as
count_calls.sh runs it) and counts one call per `SSH: EXEC` line: with
pipelining a module is one ssh command, so the count is the number of round
trips the run paid, whatever made them (a module, an action plugin's file
transfer, a become wrapper). Tasks decided on the controller (set_fact,
assert, a skipped task) make none and are not listed.

    python3 benchmarks/calls_per_role.py converge.log [--tasks]
"""

import argparse
import collections
import re
import sys

TASK = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(?P<name>.*)\] \*+$")
PLAY = re.compile(r"^PLAY \[(?P<name>.*)\] \*+$")
EXEC = re.compile(r"^<[^>]+> SSH: EXEC ")


def count(lines):
    """(calls per (role, task) in run order, plays in order) from -vvv lines."""
    per_task = collections.OrderedDict()
    play = task = None
    for line in lines:
        match = PLAY.match(line)
        if match:
            play, task = match["name"], None
            continue
        match = TASK.match(line)
        if match:
            name = match["name"]
            role, sep, title = name.partition(" : ")
            # A play's own task (facts.yml, record) is listed under its play.
            key = (role.rpartition(".")[2], title) if sep else (f"play: {play}", name)
            task = key
            continue
        if task is not None and EXEC.match(line):
            per_task[task] = per_task.get(task, 0) + 1
    return per_task


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="output of ansible-playbook -vvv (ssh connection)")
    parser.add_argument("--tasks", action="store_true", help="list every task that made a call")
    args = parser.parse_args(argv)
    with open(args.log, encoding="utf-8", errors="replace") as handle:
        per_task = count(handle.read().splitlines())
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
