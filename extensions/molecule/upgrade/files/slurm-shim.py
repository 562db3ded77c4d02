"""Stands in for Slurm's `sinfo` and `scontrol` on a test node (installed as
both names): keeps the node's state in /var/lib/upg-slurm/state, appends each
call to calls.jsonl, and, like a job that ends once its node is drained,
clears the simulated GPU processes a few seconds after a drain (a transient
systemd timer) and notes when in job-ended.

    sinfo --noheader --Node --nodes=NAME --format=%T      -> idle | drained
    sinfo --noheader --Node --nodes=NAME --format=%E      -> the drain's reason | none
    scontrol update NodeName=NAME State=DRAIN|RESUME [Reason=...]

As in Slurm, a drain keeps its reason until the node is resumed, and a
second drain replaces the reason (state/reason files).
"""

import json
import os
import subprocess
import sys
import time

HOME = "/var/lib/upg-slurm"
JOB_END_SECONDS = 6


def main() -> int:
    tool = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    os.makedirs(HOME, exist_ok=True)
    with open(os.path.join(HOME, "calls.jsonl"), "a") as log:
        log.write(json.dumps({"tool": tool, "argv": args, "time": time.time()}) + "\n")
    state_file = os.path.join(HOME, "state")
    state = open(state_file).read().strip() if os.path.exists(state_file) else "idle"
    reason_file = os.path.join(HOME, "reason")
    reason = open(reason_file).read().strip() if os.path.exists(reason_file) else "none"
    if tool == "sinfo":
        print(reason if "--format=%E" in args else state)
        return 0
    settings = dict(a.split("=", 1) for a in args[1:] if "=" in a)
    if tool != "scontrol" or args[:1] != ["update"] or "NodeName" not in settings:
        print("slurm shim: unsupported call {0} {1}".format(tool, args), file=sys.stderr)
        return 2
    wanted = settings.get("State", "").upper()
    if wanted == "DRAIN":
        state = "drained"
        reason = settings.get("Reason") or reason
        # AccuracySec: a transient timer may otherwise fire up to a minute late.
        subprocess.run(
            [
                "systemd-run",
                "--quiet",
                "--on-active={0}".format(JOB_END_SECONDS),
                "--timer-property=AccuracySec=100ms",
                "/bin/sh",
                "-c",
                "nvml-simctl process clear && date +%s.%N > {0}/job-ended".format(HOME),
            ],
            check=True,
        )
    elif wanted == "RESUME":
        state, reason = "idle", "none"
    else:
        print("slurm shim: unsupported State={0}".format(wanted), file=sys.stderr)
        return 2
    with open(state_file, "w") as handle:
        handle.write(state + "\n")
    with open(reason_file, "w") as handle:
        handle.write(reason + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
