#!/usr/bin/env python
"""playbooks/validate.yml over a fleet of simulated hosts vs an ansible.builtin.ping play over the same hosts.

    make venv collection
    .venv/bin/python benchmarks/validate_fleet.py [--hosts 200] [--runs 3] [--forks 5]

Generates an inventory of N hosts (`ansible_connection: local`, distinct
names) spread over the example fleet's tiers with its group_vars, so every
host is judged like a real fleet's (MIG config and label on the inference
tier, the version matrix everywhere). Times both playbooks - the whole
`ansible-playbook` run, start-up included - and reports the median of the
runs, their ratio, and the controller's peak memory, sampled every 20 ms
from /proc: the resident set size (RSS) of the ansible-playbook process, and
over the whole process tree (its forks and the module processes they start)
the proportional set size (PSS, shared pages split among the processes that
share them; forks share most of theirs) and, for comparison, the plain sum
of RSS, which counts shared pages once per process. Nothing is asserted (a
script, not a test).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "inventory" / "examples" / "fleet"
TIERS = (("training", 0.5), ("inference", 0.3), ("dev", 0.2))
PAGE = os.sysconf("SC_PAGE_SIZE")

PING = ROOT / "benchmarks" / "plays" / "ping.yml"


def inventory(work: Path, hosts: int) -> Path:
    """The example fleet's group_vars and files, with N local hosts spread over its tiers."""
    # The examples' files sit beside the inventories (the fleet's group_vars
    # read them from {{ inventory_dir }}/../files): the same layout here.
    shutil.copytree(ROOT / "inventory" / "examples" / "files", work / "files")
    work = work / "inv"
    work.mkdir()
    shutil.copytree(FLEET / "group_vars", work / "group_vars")
    lines = ["---", "all:", "  children:", "    gpu_nodes:", "      children:"]
    start = 0
    for index, (tier, share) in enumerate(TIERS):
        count = hosts - start if index == len(TIERS) - 1 else round(hosts * share)
        lines += ["        {0}:".format(tier), "          hosts:"]
        for number in range(start, start + count):
            lines.append("            bench-{0}-{1:03d}:".format(tier, number + 1))
        start += count
    path = work / "hosts.yml"
    path.write_text("\n".join(lines) + "\n")
    # host_vars, to win over the fleet's group_vars (ssh, /usr/bin/python3).
    host_vars = work / "host_vars"
    host_vars.mkdir()
    for name in [line.strip().rstrip(":") for line in lines if line.startswith("            bench-")]:
        (host_vars / (name + ".yml")).write_text("ansible_connection: local\nansible_python_interpreter: {0}\n".format(sys.executable))
    return path


def pss(pid: int) -> int:
    """Proportional set size: shared pages (forks share most of theirs) split among their users."""
    try:
        with open("/proc/{0}/smaps_rollup".format(pid), encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_memory(pid: int) -> tuple[int, int, int]:
    """RSS of pid alone, and RSS and PSS summed over pid and every descendant, in bytes."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/{0}/stat".format(entry), encoding="utf-8") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # Fields after the command: state, ppid, ...; rss (in pages) is the 24th field of the line.
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = int(fields[21]) * PAGE
    members, todo = [], [pid]
    while todo:
        current = todo.pop()
        members.append(current)
        todo.extend(children.get(current, []))
    return rss.get(pid, 0), sum(rss.get(m, 0) for m in members), sum(pss(m) for m in members)


def measure(command: list[str], env: dict[str, str]) -> dict[str, float]:
    peak = {"main": 0, "rss": 0, "pss": 0}
    # CPU time of the whole process tree (ansible-playbook, its forks, their module processes): the children this
    # script has waited for, which the run's descendants are once each has been reaped by its parent.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for key, value in zip(("main", "rss", "pss"), tree_memory(process.pid)):
                peak[key] = max(peak[key], value)
            done.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    output = process.communicate()[0].decode()
    elapsed = time.monotonic() - start
    done.set()
    sampler.join()
    if process.returncode != 0:
        sys.exit("{0} failed:\n{1}".format(" ".join(command[:2]), output[-4000:]))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": elapsed, "cpu": cpu, **{key: value / 2**20 for key, value in peak.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--forks", type=int, default=5)
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / "build" / "collections"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORKS=str(args.forks),
        PATH="{0}{1}{2}".format(bin_dir, os.pathsep, os.environ.get("PATH", "")),
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        hosts = inventory(work, args.hosts)
        plays = {
            "validate": [str(bin_dir / "ansible-playbook"), "playbooks/validate.yml", "-i", str(hosts)],
            "ping": [str(bin_dir / "ansible-playbook"), str(PING), "-i", str(hosts)],
        }
        results: dict[str, list[dict[str, float]]] = {name: [] for name in plays}
        for run in range(args.runs):
            for name, command in plays.items():
                results[name].append(measure(command, env))
                print(
                    "run {0}: {1:<8} {2:6.1f} s  cpu {3:6.1f} s  load {4}".format(
                        run + 1, name, results[name][-1]["seconds"], results[name][-1]["cpu"], Path("/proc/loadavg").read_text().split()[0]
                    ),
                    flush=True,
                )
    median = {name: statistics.median(r["seconds"] for r in runs) for name, runs in results.items()}
    print()
    print(
        "{0} hosts, {1} forks, {2} CPU(s), load average {3}".format(
            args.hosts, args.forks, os.cpu_count(), " ".join(Path("/proc/loadavg").read_text().split()[:3])
        )
    )
    for name, runs in results.items():
        print(
            "{0:<8} median {1:6.1f} s; peak memory: ansible-playbook RSS {2:.0f} MiB; with its forks and "
            "module processes PSS {3:.0f} MiB (RSS summed {4:.0f} MiB)".format(
                name, median[name], *(max(r[key] for r in runs) for key in ("main", "pss", "rss"))
            )
        )
    print("validate / ping: {0:.2f}".format(median["validate"] / median["ping"]))
    cpu = {name: statistics.median(r["cpu"] for r in runs) for name, runs in results.items()}
    print(
        "CPU-seconds (process tree) median: validate {0:.1f}, ping {1:.1f}, ratio {2:.2f}".format(cpu["validate"], cpu["ping"], cpu["validate"] / cpu["ping"])
    )


if __name__ == "__main__":
    main()
