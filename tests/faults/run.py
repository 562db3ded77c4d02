"""The fault-injection suite: kill a fresh converge at named points, run site.yml again, and prove the node repaired.

    tests/faults/run.py                  apt busy, and the CI set of points (points.yml, `ci: true`)
    tests/faults/run.py --all            apt busy, and every point (about 45 minutes on two cores)
    tests/faults/run.py --only NAME ...  apt busy, and those points
    tests/faults/run.py --list [--all]   the points, with no node

Each point starts from the same prepared node image (a simulated Debian 13 GPU node, declared like the verify
scenario: every layer of site.yml from the signed local mirror, over SSH with pipelining, as fleets run). The
first run is a fresh converge that the callback plugin `gpufleet_kill_point` kills at the point's task: the
controller's whole process group (an AWX cancel), the node's sshd and SSH sessions (a network cut; sshd is started
again before the next run), or the node's container (power loss; it boots again before the next run). The second run is a plain `site.yml`.

A point is recovered when that second run passes and the node is the node a clean converge makes: the same
packages at the same versions, all fully installed, the same holds, the same files (by sha256) wherever the roles
write, the same running services, no failed unit, a passing verify report, and no lease or stopped-services journal
left behind. The reference is a clean converge of a fresh node from the same image, made first.

apt busy: that reference converge starts while another process holds apt's package-lists lock (as apt-daily and
cloud-init hold it on a new cloud VM); it must wait, and pass once the lock is released (dpkg's log shows when).

Writes tests/output/faults/: one log per run, results.json, and table.md (printed at the end).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "faults"
OUT = ROOT / "tests" / "output" / "faults"
NODE = os.environ.get("GPUFLEET_FAULTS_NODE", "gpufleet-faults-node")
# Not the benchmarks' ports (2222 and up) nor the mirror's.
PORT = os.environ.get("GPUFLEET_FAULTS_SSH_PORT", "2290")
BASE_IMAGE = "localhost/gpufleet-faults-base:latest"
RUN_TIMEOUT = 1200

# What the roles write, read whole (the fast path's watch list, fast_path/vars/main.yml), less what is volatile
# on a healthy node: the fingerprint record and reports carry times, the reboot markers come and go with packages.
VOLATILE = ("/run/reboot-required", "/run/reboot-required.pkgs")
# A backup a task keeps of a file it replaced (Ansible's `backup: true`) is named by pid and time.
BACKUP = re.compile(r"\.\d+\.\d{4}-\d\d-\d\d@\d\d:\d\d:\d\d~ ")


def stack(*lines: str) -> str:
    """A bash snippet run with the benchmarks' simulated stack (benchmarks/_sim_stack.sh) sourced."""
    env = "BENCH_PREFIX=gpufleet-faults- BENCH_SSH_PORT_BASE={0}".format(PORT)
    return "set -euo pipefail; export {0}; . tests/harness/env.sh; . benchmarks/_sim_stack.sh; {1}".format(env, "; ".join(lines))


def bash(script: str, log: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    run = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, check=False)
    if log:
        log.write_text(run.stdout + run.stderr)
    if check and run.returncode != 0:
        sys.exit("failed ({0}): {1}\n{2}{3}".format(run.returncode, script, run.stdout[-3000:], run.stderr[-3000:]))
    return run


def node(*argv: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", "exec", NODE, *argv], capture_output=True, text=True, check=check)


def log(message: str) -> None:
    print("[faults] " + message, flush=True)


def watch_paths() -> list[str]:
    paths = yaml.safe_load((ROOT / "roles" / "fast_path" / "vars" / "main.yml").read_text())["__fast_path_watch_paths"]
    return [p for p in paths if p not in VOLATILE]


# -- the node ----------------------------------------------------------------------------------------------------------


def prepare(work: Path) -> None:
    """The prepared node image: booted, simulated GPUs running the pinned driver, sshd with this run's key."""
    bash(stack("sim_stack_inventory {0} {1}".format(work, NODE), "sim_stack_node {0} {1}".format(NODE, work)), OUT / "prepare.log")
    subprocess.run(["podman", "commit", "--quiet", NODE, BASE_IMAGE], check=True, capture_output=True)
    subprocess.run(["podman", "rm", "-f", NODE], check=True, capture_output=True)


def fresh_node(work: Path) -> None:
    subprocess.run(["podman", "rm", "-f", NODE], check=False, capture_output=True)
    bash("tests/harness/node.sh up {0} {1}".format(NODE, BASE_IMAGE))
    wait_for_ssh(work)


def restart_node(work: Path) -> None:
    """After a power loss: the container is started again and boots (its /run is empty again, as after a boot)."""
    subprocess.run(["podman", "start", NODE], check=True, capture_output=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = node("systemctl", "is-system-running", "--wait").stdout.strip()
        if state in ("running", "degraded"):
            break
        time.sleep(1)
    wait_for_ssh(work)


def wait_for_ssh(work: Path) -> None:
    for _attempt in range(60):
        probe = subprocess.run(
            [
                "ssh",
                "-i",
                str(work / "id_ed25519"),
                "-p",
                PORT,
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "LogLevel=ERROR",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=5",
                "-o",
                "ControlMaster=no",
                "root@127.0.0.1",
                "true",
            ],
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return
        time.sleep(1)
    sys.exit("{0} does not answer ssh on port {1}".format(NODE, PORT))


def snapshot() -> dict:
    """The node as a clean converge should leave it, in one round trip. Python's bytecode caches are left out, as the
    fast path leaves them out: the boot units that run the node runtime after a reboot write them."""
    paths = " ".join(shlex.quote(p) for p in watch_paths())
    script = (
        r"""
echo '## packages'; dpkg-query -W -f '${Package} ${Version} ${Status}\n' | sort
echo '## dpkg audit'; dpkg --audit
echo '## holds'; apt-mark showhold | sort
echo '## files'; find %s -xdev -name __pycache__ -prune -o \( -type f -o -type l \) -print 2>/dev/null | sort | while read -r f; do
  if [ -L "$f" ]; then echo "$f -> $(readlink "$f")"; else echo "$f $(stat -c %%a "$f") $(sha256sum < "$f" | cut -c1-16)"; fi; done
echo '## running services'; systemctl list-units --type=service --state=running --plain --no-legend | awk '{print $1}' | sort
echo '## failed units'; systemctl list-units --state=failed --plain --no-legend | awk '{print $1}' | sort
echo '## left behind'; ls /var/lib/gpufleet/run-lease.json /var/lib/gpufleet/stopped-services.json 2>/dev/null || true
"""
        % paths
    )
    found = node("bash", "-c", script, check=True).stdout
    sections: dict[str, list[str]] = {}
    current = ""
    for line in found.splitlines():
        if line.startswith("## "):
            current = line[3:]
            sections[current] = []
        elif line.strip():
            sections[current].append(BACKUP.sub(".<backup>~ ", line))
    verify = node("cat", "/var/lib/gpufleet/verify.json")
    sections["verify"] = [json.loads(verify.stdout).get("status", "?") if verify.returncode == 0 else "no report"]
    return sections


def left_behind() -> list[str]:
    """What the killed run left for the next one to repair (the table shows that each point did some damage)."""
    script = r"""
test -e /var/lib/gpufleet/run-lease.json && echo lease
test -e /var/lib/gpufleet/stopped-services.json && echo stopped-services journal
test -n "$(dpkg --audit 2>&1)" && echo dpkg half-done
systemctl cat containerd.service >/dev/null 2>&1 && ! systemctl is-active --quiet containerd && echo containerd down
test -n "$(systemctl list-units --state=failed --plain --no-legend)" && echo failed units
true
"""
    return [line for line in node("bash", "-c", script).stdout.splitlines() if line]


def differences(reference: dict, found: dict) -> list[str]:
    out = []
    for section, expected in reference.items():
        if section == "verify":
            continue
        gone = sorted(set(expected) - set(found.get(section, [])))
        extra = sorted(set(found.get(section, [])) - set(expected))
        out += ["{0}: - {1}".format(section, line) for line in gone] + ["{0}: + {1}".format(section, line) for line in extra]
    if found["verify"][0] not in ("pass", "warn"):
        out.append("verify: " + found["verify"][0])
    return out


# -- runs --------------------------------------------------------------------------------------------------------------


def site(work: Path, logfile: Path, kill: dict | None = None, *extra: str) -> int:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(ROOT / "build" / "collections"))
    env["PATH"] = "{0}:{1}".format(Path(env.get("GPUFLEET_VENV", ROOT / ".venv")) / "bin", env["PATH"])
    if kill:
        env.update(
            ANSIBLE_CALLBACK_PLUGINS=str(HERE / "callback_plugins"),
            ANSIBLE_CALLBACKS_ENABLED="gpufleet_kill_point",
            GPUFLEET_KILL_TASK=kill["task"],
            GPUFLEET_KILL_AT=str(kill.get("at", "end")),
            GPUFLEET_KILL_ACTION=kill["action"],
            GPUFLEET_KILL_NODE=NODE,
            GPUFLEET_KILL_MARK=str(work / "reached.json"),
        )
    argv = ["ansible-playbook", "playbooks/site.yml", "-i", str(work / "hosts.yml"), "--limit", NODE, *extra]
    with logfile.open("w") as handle:
        # Its own process group: the controller kill takes the run's workers and ssh clients with it.
        run = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return run.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
            return -9


def one_point(work: Path, point: dict, reference: dict) -> dict:
    name = point["name"]
    fresh_node(work)
    (work / "reached.json").unlink(missing_ok=True)
    started = time.monotonic()
    killed_rc = site(work, OUT / "{0}.killed.log".format(name), point)
    reached = (work / "reached.json").exists()
    row = {
        "name": name,
        "layer": point["layer"],
        "task": point["task"],
        "at": point.get("at", "end"),
        "action": point["action"],
        "reached": reached,
        "killed_rc": killed_rc,
    }
    if point["action"] == "node":
        restart_node(work)
    elif point["action"] == "connection":
        # The cut ends: the node is reachable again.
        node("systemctl", "start", "ssh.service", check=True)
        wait_for_ssh(work)
    row["left"] = left_behind()
    rc = site(work, OUT / "{0}.rerun.log".format(name))
    found = snapshot()
    diff = differences(reference, found)
    row.update(
        rerun_rc=rc,
        verify=found["verify"][0],
        differences=diff,
        seconds=round(time.monotonic() - started),
        recovered=reached and killed_rc != 0 and rc == 0 and not diff,
    )
    return row


def reference_converge(work: Path) -> tuple[dict, dict]:
    """The reference: a clean converge of a fresh node. It is also the apt-busy test (one converge less): it starts
    while another process holds apt's lists lock for 30 s, as apt-daily and cloud-init hold it on a new cloud VM, and
    must wait and pass. The proof that it waited is dpkg's own log: its first install comes after the release."""
    fresh_node(work)
    holder = subprocess.Popen(
        [
            "podman",
            "exec",
            NODE,
            "python3",
            "-c",
            "import fcntl, time; f = open('/var/lib/apt/lists/lock', 'w'); fcntl.lockf(f, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(30); f.close(); print(time.time(), flush=True)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    started, since = time.monotonic(), int(time.time())
    rc = site(work, OUT / "reference.log")
    released = float(holder.communicate()[0].strip())
    if rc != 0:
        sys.exit("the reference converge failed: " + str(OUT / "reference.log"))
    # dpkg's log is in the node's local time, to the second (the node's clock is the host's).
    offset = datetime.datetime.strptime(node("date", "+%z").stdout.strip(), "%z").tzinfo
    installs = [
        int(datetime.datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S").replace(tzinfo=offset).timestamp())
        for line in node("cat", "/var/log/dpkg.log").stdout.splitlines()
        if " install " in line
    ]
    first_install = min((u for u in installs if u >= since), default=None)
    waited = first_install is not None and first_install >= int(released)
    reference = snapshot()
    if reference["verify"][0] not in ("pass", "warn") or reference["left behind"] or reference["failed units"]:
        sys.exit("the reference converge left a node that is not clean: {0}".format({k: reference[k] for k in ("verify", "left behind", "failed units")}))
    busy = {
        "name": "apt-busy",
        "rerun_rc": rc,
        "waited": waited,
        "differences": [],
        "verify": reference["verify"][0],
        "released": released,
        "first_install": first_install,
        "seconds": round(time.monotonic() - started),
        "recovered": rc == 0 and waited,
    }
    return reference, busy


def table(rows: list[dict]) -> str:
    lines = [
        "| # | point | layer | task | kill | action | reached | it left | run after | verify | node as a clean converge | recovered |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for number, row in enumerate((r for r in rows if r["name"] != "apt-busy"), 1):
        cells = [
            number,
            row["name"],
            row["layer"],
            row["task"].split(" : ")[-1],
            row["at"],
            row["action"],
            "yes" if row["reached"] else "NO",
            ", ".join(row["left"]) or "-",
            "rc {0}".format(row["rerun_rc"]),
            row["verify"],
            "yes" if not row["differences"] else "; ".join(row["differences"][:4]),
            "yes" if row["recovered"] else "NO",
        ]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    points = [r for r in rows if r["name"] != "apt-busy"]
    lines.append("")
    lines.append("{0}/{1} recovered".format(sum(r["recovered"] for r in points), len(points)))
    for row in rows:
        if row["name"] == "apt-busy":
            lines.append(
                "apt busy: the reference converge, started while apt's lists lock was held for 30 s: rc {0}; its first "
                "install came after the release: {1}".format(row["rerun_rc"], "yes" if row["waited"] else "NO")
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--all", action="store_true", help="every point, not only the CI set")
    parser.add_argument("--only", nargs="+", default=[], help="these points")
    parser.add_argument("--list", action="store_true")
    options = parser.parse_args()
    points = yaml.safe_load((HERE / "points.yml").read_text())["points"]
    unknown = set(options.only) - {p["name"] for p in points}
    if unknown:
        parser.error("no such point: " + ", ".join(sorted(unknown)))
    chosen = [p for p in points if p["name"] in options.only] if options.only else [p for p in points if options.all or p.get("ci")]
    if options.list:
        for point in chosen:
            print("{name:28} {layer:18} {action:10} {0:8} {task}".format(point.get("at", "end"), **point))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    work = OUT / "work"
    work.mkdir(exist_ok=True)
    started = time.monotonic()
    log("preparing the node image")
    prepare(work)
    log("the reference: a clean converge of a fresh node, started while apt's lists lock is held for 30 s")
    reference, busy = reference_converge(work)
    log("apt busy: {0}".format("waited for the lock, and passed" if busy["recovered"] else "DID NOT WAIT: " + json.dumps(busy)))
    rows = [busy]
    for point in chosen:
        log("{name}: {action} at {0} of '{task}'".format(point.get("at", "end"), **point))
        row = one_point(work, point, reference)
        rows.append(row)
        log(
            "{0}: {1} in {2} s{3}".format(
                point["name"],
                "recovered" if row["recovered"] else "NOT RECOVERED",
                row["seconds"],
                "" if row["recovered"] else " " + json.dumps({k: row[k] for k in ("reached", "killed_rc", "rerun_rc", "verify", "differences")}),
            )
        )
    subprocess.run(["podman", "rm", "-f", NODE], check=False, capture_output=True)
    (OUT / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    text = table(rows)
    (OUT / "table.md").write_text(text)
    print(text)
    log("{0} s in all".format(round(time.monotonic() - started)))
    return 0 if all(r["recovered"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
