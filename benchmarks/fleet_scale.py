#!/usr/bin/env python
"""Fleet scale curve: what a no-op site.yml, validate.yml and a check converge cost at 1, 8, 32 and 64 nodes.

    make images-all mirror venv collection
    .venv/bin/python -m pip install -r benchmarks/requirements.txt     # matplotlib, for the plot
    .venv/bin/python benchmarks/fleet_scale.py [--sizes 1,8,32,64] [--runs 3] [--check-runs 1] [--forks 16]
    .venv/bin/python benchmarks/fleet_scale.py --plot-only benchmarks/results/fleet-scale-DATE.json

The nodes are simulated Debian 13 GPU nodes (localhost/gpufleet/debian13-gpusim:
systemd as PID 1, the simulated NVML library, 8 x A100 40GB running the pinned
driver), declared and prepared as benchmarks/site_noop.sh declares its node
(benchmarks/_sim_stack.sh: every layer, installed from the local mirror on
loopback; the image has no kernel, so no DKMS build). One node is converged
with playbooks/site.yml, stopped and committed as an image; the fleet's nodes
are its clones, each booted, given its own sshd port and key and converged
once more (its first site.yml takes the fast path when the clone matches the
record the converge left, a full run otherwise; not timed). Sizes are
measured in ascending order, the fleet growing from one to the next.

At each size N, over the same N nodes and through the same connection (SSH
with pipelining, as fleets run Ansible; --transport podman: the
containers.podman connection), each run a new ansible-playbook:
  noop      playbooks/site.yml on the converged fleet: every host must report
            changed=0 and take the fast path (roles/fast_path)
  ping      a play that gathers facts and runs ansible.builtin.ping
            (noop and ping alternate, so load from other work hits both alike)
  validate  playbooks/validate.yml (judged on the controller, no node contact)
  check     playbooks/site.yml --check --skip-tags fast_path: every layer in
            check mode (a plain --check of an unchanged fleet takes the fast
            path, which is the noop run)
Each run is measured for wall time (the ansible-playbook process), controller
CPU (user + system of ansible-playbook and every process under it, from
getrusage(RUSAGE_CHILDREN) before and after) and peak controller memory (PSS
summed over the process tree, sampled from /proc as validate_fleet.py samples
it). SSH's ControlPersist masters leave the tree when they fork into the
background: the benchmark is their child subreaper during a run, so they stay
in the sampled tree, and it closes them after each run, so that their CPU is
counted and every run starts with new connections, on both sides alike.

Before the fleet grows, one idle clone's memory (anonymous, shmem and kernel
memory of its cgroup) and inotify instances are measured, and a size the
machine cannot hold (MemAvailable, fs.inotify.max_user_instances, free SSH
ports) is refused with the figures, before anything is timed. Every container
and the committed image are removed at the end, on failure and on Ctrl-C.

Writes benchmarks/results/fleet-scale-<date>.json (the machine: nproc,
memory, load, ansible-core, date; the node's cost; every run), renders the
plot from that file (--plot, default docs/fleet-scale.png) and prints a
Markdown table for README. Nothing is asserted about the figures (a script,
not a test); the runs themselves must succeed.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=wrong-import-position
from validate_fleet import pss, tree_memory

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RESULTS = ROOT / "benchmarks" / "results"
KINDS = ("noop", "ping", "validate", "check")
LABELS = {"noop": "no-op site.yml (fast path)", "ping": "ping + facts", "validate": "validate.yml", "check": "site.yml --check (every layer)"}
MIB = 2**20
# Headroom kept free besides the nodes: the controller's ansible-playbook and
# its forks (validate_fleet.py measured 270 MiB PSS at 200 hosts, 5 forks),
# and whatever else the machine runs.
CONTROLLER_RESERVE = 1536 * MIB
# A node's memory grows while it works (module runs, apt lists): the idle
# figure gets this margin before the fit check.
NODE_MARGIN = 1.25
PR_SET_CHILD_SUBREAPER = 36

PING = ROOT / "benchmarks" / "plays" / "ping-facts.yml"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)
FAST_PATH = "every layer is skipped"


class Refused(Exception):
    """A size the machine cannot hold, or a setting that cannot work: said before anything is timed."""


def stack(*args: str, env: dict[str, str]) -> None:
    """A function of benchmarks/_sim_stack.sh (with tests/harness/env.sh), as site_noop.sh calls them."""
    script = 'set -euo pipefail; . tests/harness/env.sh; . benchmarks/_sim_stack.sh; "$@"'
    result = subprocess.run(
        ["bash", "-c", script, "fleet_scale", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError("{0} failed:\n{1}".format(" ".join(args[:2]), result.stdout[-4000:]))


def podman(*args: str, check: bool = True) -> str:
    result = subprocess.run(["podman", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError("podman {0} failed: {1}".format(" ".join(args), result.stderr.strip()))
    return result.stdout.strip()


def set_subreaper(on: bool) -> None:
    """Orphans (SSH's ControlPersist masters) are re-parented to this process, not to init, while on."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def own_children() -> list[int]:
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/{0}/stat".format(entry), encoding="utf-8") as handle:
                if handle.read().rsplit(")", 1)[1].split()[1] == me:
                    found.append(int(entry))
        except OSError:
            continue
    return found


def close_orphans(control_dir: Path) -> None:
    """Close the run's SSH masters (they exit after their clients' work) and reap every adopted process."""
    for sock in sorted(control_dir.glob("*")) if control_dir.is_dir() else []:
        subprocess.run(
            ["ssh", "-o", "ControlPath={0}".format(sock), "-O", "exit", "gpufleet-bench"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
    deadline = time.monotonic() + 10
    while True:
        try:
            pid = os.waitpid(-1, os.WNOHANG)[0]
        except ChildProcessError:
            return
        if pid:
            continue
        if time.monotonic() > deadline:
            for child in own_children():
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
        time.sleep(0.05)


class Bench:
    """The work directory, the nodes and the committed image; all removed by cleanup()."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.golden = args.prefix + "golden"
        prefix = os.environ.get("GPUFLEET_IMAGE_PREFIX", "localhost/gpufleet")
        self.image = "{0}/fleet-scale-node:{1}".format(prefix, os.getpid())
        self.nodes: list[str] = []
        self.started: list[str] = []
        self.converged: list[str] = []
        self.image_made = False
        self.env = dict(
            os.environ,
            GPUFLEET_ROOT=str(ROOT),
            BENCH_TRANSPORT=args.transport,
            BENCH_SSH_PORT_BASE=str(args.ssh_port_base),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_COLLECTIONS_PATH=str(ROOT / "build" / "collections"),
            ANSIBLE_FORKS=str(args.forks),
            PATH="{0}{1}{2}".format(BIN, os.pathsep, os.environ.get("PATH", "")),
        )
        self.ports: dict[str, int] = {}

    def cleanup(self) -> None:
        names = [name for name in [self.golden, *self.started] if name]
        if names:
            podman("rm", "-f", "-t", "0", *names, check=False)
        if self.image_made:
            podman("rmi", "-f", self.image, check=False)

    # --- the golden node and its clones -------------------------------------------------

    def make_golden(self) -> float:
        """Converge one node (not timed against anything), stop it and commit it as the clones' image."""
        self.started.append(self.golden)
        stack("sim_stack_inventory", str(self.work), self.golden, env=self.env)
        stack("sim_stack_node", self.golden, str(self.work), env=self.env)
        start = time.monotonic()
        self.playbook_checked(["playbooks/site.yml", "-i", str(self.work / "hosts.yml")], "converge-golden")
        seconds = time.monotonic() - start
        if self.args.transport == "ssh":
            # Clones boot without sshd: each gets its own port before it starts (sim_stack_access).
            podman("exec", self.golden, "systemctl", "disable", "ssh.service")
        podman("stop", "-t", "30", self.golden)
        podman("commit", "-q", self.golden, self.image)
        self.image_made = True
        podman("rm", "-f", self.golden)
        self.started.remove(self.golden)
        return seconds

    def name(self, index: int) -> str:
        return "{0}{1:03d}".format(self.args.prefix, index + 1)

    def plan_inventory(self, total: int) -> None:
        """hosts.yml and group_vars for every node of the largest size, from _sim_stack.sh; the same
        work directory as the golden node's, so the declaration (verify_report_dir too) is the one
        its fingerprint recorded."""
        self.nodes = [self.name(index) for index in range(total)]
        env = dict(self.env, BENCH_SSH_PORT_BASE=str(self.args.ssh_port_base + 1))
        stack("sim_stack_inventory", str(self.work), *self.nodes, env=env)
        ports = self.work / "ssh-ports"
        if ports.exists():
            self.ports = {name: int(port) for name, port in (line.split() for line in ports.read_text().splitlines())}

    def inventory(self, size: int) -> Path:
        path = self.work / "hosts-{0}.yml".format(size)
        lines = ["all:", "  children:", "    gpu_nodes:", "      hosts:"]
        for node in self.nodes[:size]:
            lines.append("        {0}:".format(node))
            if node in self.ports:
                lines.append("          ansible_port: {0}".format(self.ports[node]))
        path.write_text("\n".join(lines) + "\n")
        return path

    def start_clone(self, node: str) -> None:
        self.started.append(node)
        subprocess.run([str(ROOT / "tests" / "harness" / "node.sh"), "up", node, self.image], cwd=ROOT, env=self.env, check=True, stdout=subprocess.DEVNULL)
        # The simulator's boot marker lives in /run, which a commit does not keep: this state is the boot's.
        podman("exec", node, "nvml-simctl", "mark-booted")
        if self.args.transport == "ssh":
            stack("sim_stack_access", node, str(self.work), env=self.env)

    def grow(self, size: int) -> float:
        """Start the clones up to SIZE and converge the new ones once (not timed against anything).

        A clone rarely matches its image's record: files the fingerprint knows by size and mtime
        (crictl) lose their sub-second mtime in the commit, and a boot unit the record saw inactive
        (gpufleet-mig.service) has run at the clone's boot. Its own converge records it anew."""
        for node in self.nodes[:size]:
            if node not in self.started:
                self.start_clone(node)
        new = [node for node in self.nodes[:size] if node not in self.converged]
        start = time.monotonic()
        if new:
            output = self.playbook_checked(["playbooks/site.yml", "-i", str(self.inventory(size)), "--limit", ",".join(new)], "converge-{0}".format(size))
            # Why a clone does not match its image's record (then it ran every layer): worth knowing.
            reasons = sorted(set(re.findall(r'every layer runs: ([^\'"\n]*)', output)))
            print(
                "{0} new node(s) converged in {1:.0f} s, {2} on the fast path{3}".format(
                    len(new), time.monotonic() - start, output.count(FAST_PATH), "; the others ran every layer: " + " | ".join(reasons) if reasons else ""
                ),
                flush=True,
            )
            self.converged.extend(new)
        return time.monotonic() - start

    # --- runs ----------------------------------------------------------------------------

    def playbook_checked(self, argv: list[str], log: str) -> str:
        result = subprocess.run(
            [str(BIN / "ansible-playbook"), *argv], cwd=ROOT, env=self.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
        )
        (self.work / (log + ".log")).write_text(result.stdout)
        if result.returncode != 0:
            raise RuntimeError("ansible-playbook {0} failed:\n{1}".format(" ".join(argv), result.stdout[-4000:]))
        close_orphans(self.work / "cp")
        return result.stdout

    def measure(self, argv: list[str], log: str) -> tuple[dict[str, float], str]:
        """One ansible-playbook run: wall seconds, controller CPU seconds, peak PSS and RSS of its tree."""
        peak = {"pss": 0, "rss": 0}
        me = os.getpid()
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                own_rss, rss_sum, pss_sum = tree_memory(me)
                # The tree from this process down (its adopted SSH masters included), less itself.
                own_pss = pss(me)
                peak["pss"] = max(peak["pss"], pss_sum - own_pss)
                peak["rss"] = max(peak["rss"], rss_sum - own_rss)
                done.wait(self.args.sample_ms / 1000)

        set_subreaper(True)
        try:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            sampler = threading.Thread(target=sample)
            start = time.monotonic()
            process = subprocess.Popen(
                [str(BIN / "ansible-playbook"), *argv], cwd=ROOT, env=self.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            sampler.start()
            try:
                output = process.communicate()[0]
            except BaseException:
                # Interrupted (SIGTERM reaches this process only): the play must not outlive its nodes.
                process.kill()
                process.wait()
                raise
            wall = time.monotonic() - start
            close_orphans(self.work / "cp")
            done.set()
            sampler.join()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        finally:
            done.set()
            set_subreaper(False)
        (self.work / (log + ".log")).write_text(output)
        if process.returncode != 0:
            raise RuntimeError("ansible-playbook {0} failed:\n{1}".format(" ".join(argv), output[-4000:]))
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return {
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "pss_peak_mib": round(peak["pss"] / MIB, 1),
            "rss_peak_mib": round(peak["rss"] / MIB, 1),
        }, output

    def run(self, kind: str, size: int, number: int) -> dict[str, float]:
        hosts = str(self.inventory(size))
        argv = {
            "noop": ["playbooks/site.yml", "-i", hosts],
            "ping": [str(PING), "-i", hosts],
            "validate": ["playbooks/validate.yml", "-i", hosts],
            "check": ["playbooks/site.yml", "-i", hosts, "--check", "--skip-tags", "fast_path"],
        }[kind]
        figures, output = self.measure(argv, "{0}-{1}-{2}".format(kind, size, number))
        recap = {host: [int(n) for n in numbers] for host, *numbers in RECAP.findall(output)}
        missing = [node for node in self.nodes[:size] if node not in recap]
        # validate.yml runs on the controller: its recap names the hosts too.
        if missing:
            raise RuntimeError("{0} run {1} at {2} nodes: no recap for {3}".format(kind, number, size, missing))
        bad = {host: numbers for host, numbers in recap.items() if numbers[2] or numbers[3]}
        if bad:
            raise RuntimeError("{0} run {1} at {2} nodes: unreachable or failed: {3}".format(kind, number, size, bad))
        figures["changed"] = sum(numbers[1] for numbers in recap.values())
        if kind == "noop":
            if figures["changed"]:
                raise RuntimeError(
                    "the no-op site.yml changed something at {0} nodes (see {1})".format(size, self.work / "noop-{0}-{1}.log".format(size, number))
                )
            skipped = output.count(FAST_PATH)
            if skipped != size:
                raise RuntimeError("the no-op site.yml took the fast path on {0} of {1} nodes".format(skipped, size))
        figures["cpu_s_per_host"] = round(figures["cpu_s"] / size, 3)
        return figures


# --- the machine and what one node costs ----------------------------------------------------


def meminfo() -> dict[str, int]:
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, value = line.split(":", 1)
        info[key] = int(value.split()[0]) * 1024
    return info


def machine() -> dict[str, object]:
    info = meminfo()
    version = subprocess.run([str(BIN / "ansible-playbook"), "--version"], stdout=subprocess.PIPE, text=True, check=True).stdout.splitlines()[0]
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "memory_total_mib": info["MemTotal"] // MIB,
        "memory_available_mib": info["MemAvailable"] // MIB,
        "load_average": Path("/proc/loadavg").read_text().split()[:3],
        "ansible_core": re.sub(r"^.*\[core (.*)\].*$", r"\1", version),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def node_cost(node: str) -> dict[str, float]:
    """An idle node's memory from its cgroup (what it cannot give back: anonymous, shmem, kernel; its
    page cache is reclaimable and largely the shared image's) and its inotify instances (a per-user
    limit: rootful containers are all root's)."""
    path = podman("inspect", "--format", "{{.State.CgroupPath}}", node)
    pid = podman("inspect", "--format", "{{.State.Pid}}", node)
    v1 = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
    if v1.is_dir():
        stat = dict(line.split() for line in (v1 / "memory.stat").read_text().splitlines())
        kernel = int((v1 / "memory.kmem.usage_in_bytes").read_text())
        held = int(stat["total_rss"]) + int(stat["total_shmem"]) + kernel
        working = int((v1 / "memory.usage_in_bytes").read_text()) - int(stat["total_inactive_file"])
    else:
        v2 = Path("/sys/fs/cgroup") / path.lstrip("/")
        stat = dict(line.split() for line in (v2 / "memory.stat").read_text().splitlines())
        kernel = int(stat.get("kernel", 0)) or sum(int(stat.get(k, 0)) for k in ("kernel_stack", "pagetables", "slab", "sock"))
        held = int(stat["anon"]) + int(stat["shmem"]) + kernel
        working = int((v2 / "memory.current").read_text()) - int(stat["inactive_file"])
    namespace = os.readlink("/proc/{0}/ns/pid".format(pid))
    inotify = sum(count_inotify(p) for p in pids() if pid_namespace(p) == namespace)
    return {"memory_held_mib": round(held / MIB, 1), "memory_working_set_mib": round(working / MIB, 1), "inotify_instances": inotify}


def pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def pid_namespace(pid: int) -> str:
    try:
        return os.readlink("/proc/{0}/ns/pid".format(pid))
    except OSError:
        return ""


def count_inotify(pid: int, uid: int | None = None) -> int:
    try:
        if uid is not None and os.stat("/proc/{0}".format(pid)).st_uid != uid:
            return 0
        fds = os.listdir("/proc/{0}/fd".format(pid))
    except OSError:
        return 0
    count = 0
    for fd in fds:
        try:
            count += os.readlink("/proc/{0}/fd/{1}".format(pid, fd)) == "anon_inode:inotify"
        except OSError:
            continue
    return count


def refuse_what_will_not_fit(bench: Bench, cost: dict[str, float], largest: int) -> None:
    """Every size up to LARGEST must fit with the nodes already running; else say what is short, and the fix."""
    new = largest - len(bench.started)
    problems = []
    need = int(new * cost["memory_held_mib"] * MIB * NODE_MARGIN + CONTROLLER_RESERVE)
    available = meminfo()["MemAvailable"]
    if need > available:
        per_node = cost["memory_held_mib"] * MIB * NODE_MARGIN
        fits = len(bench.started) + max(0, int((available - CONTROLLER_RESERVE) / per_node))
        problems.append(
            "memory: {0} more nodes need about {1:.1f} GiB ({0} x {2:.0f} MiB measured on an idle node, + {3:.0%}, "
            "+ {4:.1f} GiB for the controller) but {5:.1f} GiB is available: at most {6} nodes fit now; run with "
            "--sizes up to {6}, or on a machine with more free memory".format(
                new, need / 2**30, cost["memory_held_mib"], NODE_MARGIN - 1, CONTROLLER_RESERVE / 2**30, available / 2**30, fits
            )
        )
    limit = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    in_use = sum(count_inotify(pid, uid=0) for pid in pids())
    wanted = in_use + new * cost["inotify_instances"]
    if wanted > limit:
        problems.append(
            "inotify: {0} more nodes need {1} inotify instances ({2} each, measured; root holds {3} now) but "
            "fs.inotify.max_user_instances is {4}: their systemd would fail to boot. Raise it as root "
            "(sysctl -w fs.inotify.max_user_instances={5}) or run with --sizes up to {6}".format(
                new,
                new * cost["inotify_instances"],
                cost["inotify_instances"],
                in_use,
                limit,
                max(1024, wanted * 2),
                len(bench.started) + max(0, (limit - in_use) // max(1, int(cost["inotify_instances"]))),
            )
        )
    if problems:
        raise Refused("size {0} will not fit on this machine:\n  - {1}".format(largest, "\n  - ".join(problems)))


def refuse_taken_ports(args: argparse.Namespace, largest: int) -> None:
    if args.transport != "ssh":
        return
    taken = []
    for port in range(args.ssh_port_base, args.ssh_port_base + largest + 1):
        with socket.socket() as probe:
            probe.settimeout(0.2)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                taken.append(port)
    if taken:
        raise Refused(
            "127.0.0.1 ports {0} are taken (the nodes' sshd need {1}-{2}, one each): set --ssh-port-base to a free range".format(
                taken, args.ssh_port_base, args.ssh_port_base + largest
            )
        )


# --- results: JSON, table, plot ---------------------------------------------------------------


def summarise(runs: dict[str, list[dict[str, float]]], size: int) -> dict[str, object]:
    summary: dict[str, object] = {}
    for kind, figures in runs.items():
        if not figures:
            continue
        summary[kind] = {
            "wall_s": round(statistics.median(f["wall_s"] for f in figures), 2),
            "cpu_s_per_host": round(statistics.median(f["cpu_s"] for f in figures) / size, 3),
            "pss_peak_mib": max(f["pss_peak_mib"] for f in figures),
        }
    if "noop" in summary and "ping" in summary:
        summary["ratio_noop_ping"] = round(summary["noop"]["wall_s"] / summary["ping"]["wall_s"], 2)
        # Controller CPU moves much less than wall time with other work on the machine.
        summary["ratio_noop_ping_cpu"] = round(summary["noop"]["cpu_s_per_host"] / summary["ping"]["cpu_s_per_host"], 2)
    return summary


def table(data: dict) -> str:
    sizes = data["sizes"]
    head = (
        "| nodes | no-op site.yml s | ping + facts s | ratio | ratio of CPU | validate.yml s | --check s | "
        "CPU s/host (no-op / ping / validate / check) | peak PSS MiB (no-op / ping / validate / check) |"
    )
    lines = [head, "|---" * 9 + "|"]
    for size in sorted(sizes, key=int):
        s = sizes[size]["summary"]

        def cell(kind: str, key: str, fmt: str = "{0:.2f}") -> str:
            return fmt.format(s[kind][key]) if kind in s else "-"

        lines.append(
            "| {0} | {1} | {2} | {3} | {4} | {5} | {6} | {7} | {8} |".format(
                size,
                cell("noop", "wall_s"),
                cell("ping", "wall_s"),
                "**{0:.2f}**".format(s["ratio_noop_ping"]) if "ratio_noop_ping" in s else "-",
                "{0:.2f}".format(s["ratio_noop_ping_cpu"]) if "ratio_noop_ping_cpu" in s else "-",
                cell("validate", "wall_s"),
                cell("check", "wall_s"),
                " / ".join(cell(k, "cpu_s_per_host") for k in KINDS),
                " / ".join(cell(k, "pss_peak_mib", "{0:.0f}") for k in KINDS),
            )
        )
    growth = memory_growth(data)
    if growth:
        lines.append("")
        lines.append(
            "Peak controller memory per added node (PSS, between consecutive sizes): "
            + "; ".join("{0} {1}".format(LABELS[kind], ", ".join("{0}->{1}: {2:+.1f} MiB".format(*step) for step in steps)) for kind, steps in growth.items())
        )
    m = data["machine"]
    lines.append("")
    lines.append(
        "{0}, {1} CPUs, {2} MiB, ansible-core {3}, {4} forks, transport {5}; load average {6} at the start, {7} at the end.".format(
            m["date"][:10],
            m["nproc"],
            m["memory_total_mib"],
            m["ansible_core"],
            data["settings"]["forks"],
            data["settings"]["transport"],
            " ".join(m["load_average"]),
            " ".join(data["load_average_end"]),
        )
    )
    return "\n".join(lines)


def memory_growth(data: dict) -> dict[str, list[tuple[int, int, float]]]:
    sizes = sorted(data["sizes"], key=int)
    growth: dict[str, list[tuple[int, int, float]]] = {}
    for kind in KINDS:
        points = [(int(n), data["sizes"][n]["summary"][kind]["pss_peak_mib"]) for n in sizes if kind in data["sizes"][n]["summary"]]
        steps = [(a, b, (mb - ma) / (b - a)) for (a, ma), (b, mb) in zip(points, points[1:])]
        if steps:
            growth[kind] = steps
    return growth


def plot(data: dict, path: Path) -> None:
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel
    except ImportError:
        sys.exit(
            "the plot needs matplotlib: .venv/bin/python -m pip install -r benchmarks/requirements.txt, then --plot-only {0}".format(
                data.get("file", "THE_JSON_FILE")
            )
        )
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    sizes = sorted(data["sizes"], key=int)
    figure, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels = (
        (axes[0][0], "wall_s", "wall time, s (median; log scale)"),
        (axes[0][1], "cpu_s_per_host", "controller CPU, s per host (median)"),
        (axes[1][0], "pss_peak_mib", "peak controller memory, PSS MiB"),
    )
    for axis, key, title in panels:
        for kind in KINDS:
            points = [(int(n), data["sizes"][n]["summary"][kind][key]) for n in sizes if kind in data["sizes"][n]["summary"]]
            if points:
                axis.plot(*zip(*points), marker="o", label=LABELS[kind])
        axis.set_title(title)
        axis.set_xlabel("nodes")
        axis.set_xscale("log", base=2)
        axis.set_xticks([int(n) for n in sizes], [str(n) for n in sizes])
        axis.grid(True, alpha=0.3)
    # The check runs every layer: a log scale keeps the fast runs readable beside it.
    axes[0][0].set_yscale("log")
    axes[0][0].legend(fontsize=8)
    ratio = axes[1][1]
    points = [(int(n), data["sizes"][n]["summary"]["ratio_noop_ping"]) for n in sizes if "ratio_noop_ping" in data["sizes"][n]["summary"]]
    if points:
        ratio.plot(*zip(*points), marker="o", color="black", label="no-op / (ping + facts), wall time")
    points = [(int(n), data["sizes"][n]["summary"]["ratio_noop_ping_cpu"]) for n in sizes if "ratio_noop_ping_cpu" in data["sizes"][n]["summary"]]
    if points:
        ratio.plot(*zip(*points), marker="s", color="grey", linestyle=":", label="the same, controller CPU")
    ratio.axhline(1.5, color="red", linestyle="--", label="target at 64 nodes: 1.5")
    ratio.set_title("no-op site.yml / (ping + facts)")
    ratio.set_xlabel("nodes")
    ratio.set_xscale("log", base=2)
    ratio.set_xticks([int(n) for n in sizes], [str(n) for n in sizes])
    ratio.set_ylim(bottom=0)
    ratio.grid(True, alpha=0.3)
    ratio.legend(fontsize=8)
    m = data["machine"]
    figure.suptitle(
        "gpufleet.nvidia fleet scale: simulated Debian 13 nodes over {0}, {1} forks\n{2}, {3} CPUs, {4} GiB, ansible-core {5}, load average {6} -> {7}".format(
            data["settings"]["transport"],
            data["settings"]["forks"],
            m["date"][:10],
            m["nproc"],
            round(m["memory_total_mib"] / 1024),
            m["ansible_core"],
            " ".join(m["load_average"]),
            " ".join(data["load_average_end"]),
        ),
        fontsize=10,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def result_path() -> Path:
    today = datetime.date.today().isoformat()
    path = RESULTS / "fleet-scale-{0}.json".format(today)
    if path.exists():
        path = RESULTS / "fleet-scale-{0}-{1}.json".format(today, datetime.datetime.now().strftime("%H%M%S"))
    return path


# --- main ---------------------------------------------------------------------------------------


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError("--sizes {0!r}: expected node counts separated by commas, e.g. 1,8,32,64".format(text)) from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("--sizes {0!r}: every size must be at least 1".format(text))
    return sizes


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=parse_sizes, default=[1, 8, 32, 64], help="node counts (default 1,8,32,64)")
    parser.add_argument("--runs", type=int, default=3, help="runs of noop, ping and validate per size (default 3)")
    parser.add_argument("--check-runs", type=int, default=1, help="runs of the --check converge per size (default 1; 0 leaves it out)")
    parser.add_argument("--forks", type=int, default=16, help="ansible forks (default 16)")
    parser.add_argument(
        "--transport", choices=("ssh", "podman"), default="ssh", help="ssh: pipelining and ControlPersist, as fleets run (default); podman: containers.podman"
    )
    parser.add_argument("--ssh-port-base", type=int, default=2400, help="the nodes' sshd listen on 127.0.0.1, from this port up (default 2400)")
    parser.add_argument("--prefix", default="gpufleet-scale-", help="container name prefix (default gpufleet-scale-)")
    parser.add_argument("--sample-ms", type=int, default=50, help="memory sampling interval (default 50 ms)")
    parser.add_argument("--output", type=Path, help="the JSON file (default benchmarks/results/fleet-scale-DATE.json)")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "fleet-scale.png", help="the PNG file")
    parser.add_argument("--plot-only", type=Path, metavar="JSON", help="render the plot and table of a result file")
    args = parser.parse_args()
    if args.runs < 1 or args.check_runs < 0 or args.forks < 1:
        parser.error("--runs and --forks must be at least 1, --check-runs at least 0")
    if not 1024 <= args.ssh_port_base <= 65000:
        parser.error("--ssh-port-base {0}: expected a port from 1024 to 65000".format(args.ssh_port_base))
    return args


def benchmark(args: argparse.Namespace, bench: Bench) -> dict:
    largest = args.sizes[-1]
    refuse_taken_ports(args, largest)
    data: dict = {
        "settings": {
            "sizes": args.sizes,
            "runs": args.runs,
            "check_runs": args.check_runs,
            "forks": args.forks,
            "transport": args.transport,
            "sample_ms": args.sample_ms,
            "node_image": "localhost/gpufleet/debian13-gpusim (+ one converge, committed)",
        },
        "machine": machine(),
        "sizes": {},
    }
    print("converging the golden node ...", flush=True)
    data["golden_converge_s"] = round(bench.make_golden(), 1)
    bench.plan_inventory(largest)
    print("starting the first clone and measuring it idle ...", flush=True)
    bench.start_clone(bench.nodes[0])
    time.sleep(5)
    cost = node_cost(bench.nodes[0])
    data["node"] = cost
    print(
        "idle node: {0} MiB held (anonymous, shmem, kernel), {1} MiB working set, {2} inotify instances".format(
            cost["memory_held_mib"], cost["memory_working_set_mib"], cost["inotify_instances"]
        ),
        flush=True,
    )
    refuse_what_will_not_fit(bench, cost, largest)
    for size in args.sizes:
        refuse_what_will_not_fit(bench, cost, size)
        converge = bench.grow(size)
        runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
        for number in range(1, args.runs + 1):
            for kind in (("noop", "ping") if number % 2 else ("ping", "noop")) + ("validate",):
                runs[kind].append(bench.run(kind, size, number))
                print(
                    "{0:>3} nodes  {1:<8} run {2}: {3:7.2f} s  CPU {4:7.2f} s  peak PSS {5:6.0f} MiB".format(
                        size, kind, number, runs[kind][-1]["wall_s"], runs[kind][-1]["cpu_s"], runs[kind][-1]["pss_peak_mib"]
                    ),
                    flush=True,
                )
        for number in range(1, args.check_runs + 1):
            runs["check"].append(bench.run("check", size, number))
            print(
                "{0:>3} nodes  check    run {1}: {2:7.2f} s  CPU {3:7.2f} s  peak PSS {4:6.0f} MiB".format(
                    size, number, runs["check"][-1]["wall_s"], runs["check"][-1]["cpu_s"], runs["check"][-1]["pss_peak_mib"]
                ),
                flush=True,
            )
        data["sizes"][str(size)] = {
            "converge_new_nodes_s": round(converge, 1),
            "runs": runs,
            "summary": summarise(runs, size),
            "load_average": Path("/proc/loadavg").read_text().split()[:3],
        }
    data["load_average_end"] = Path("/proc/loadavg").read_text().split()[:3]
    return data


def main() -> int:
    args = arguments()
    if args.plot_only:
        data = json.loads(args.plot_only.read_text())
        # From the runs themselves, so that a file written by an older version renders the same columns.
        for size, entry in data["sizes"].items():
            entry["summary"] = summarise(entry["runs"], int(size))
        plot(data, args.plot)
        print(table(data))
        print("plot: {0}".format(args.plot))
        return 0

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt("signal {0}".format(signum))

    signal.signal(signal.SIGTERM, stop)
    work = Path(tempfile.mkdtemp(prefix="fleet-scale-"))
    bench = Bench(args, work)
    failed = True
    try:
        data = benchmark(args, bench)
        failed = False
    except Refused as refusal:
        print("refused: {0}".format(refusal), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: removing the nodes", file=sys.stderr)
        return 130
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print("failed: {0}".format(error), file=sys.stderr)
        return 1
    finally:
        # A second Ctrl-C or SIGTERM (timeout(1) signals the process group too) must not cut the clean-up short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        bench.cleanup()
        if failed:
            print("the runs' logs are kept in {0}".format(work), file=sys.stderr)
        else:
            shutil.rmtree(work)
    output = args.output or result_path()
    output.parent.mkdir(parents=True, exist_ok=True)
    data["file"] = str(output.relative_to(ROOT)) if output.is_relative_to(ROOT) else str(output)
    output.write_text(json.dumps(data, indent=1) + "\n")
    print("\ndata: {0}".format(output))
    plot(data, args.plot)
    print("plot: {0}\n".format(args.plot))
    print(table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
