"""playbooks/upgrade.yml on three nodes, as Kubernetes, Slurm and the nodes saw it.

Converge rolled Container Toolkit 1.17.8 -> 1.20.1 one node at a time, with
upg-node3 cordoned in Kubernetes and drained in Slurm by someone else, and a
job on upg-node1's GPU that ends a few seconds after its drain. The fake API
server (files/fake_kube_api.py) records every request; the Slurm shim every
call. The last test breaks upg-node2 and rolls back to 1.17.8: the health
gate stops the roll there, and the next roll, once the node is fixed,
resumes it. Last, upg-node1's GPU turns sick after its update: a roll over
upg-node1 and upg-node2 stops at upg-node1, and upg-node2 is never touched.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testinfra

# The scenarios' shared helpers (../../_shared/stack.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_shared"))

# pylint: disable=wrong-import-position
from stack import scenario_playbook

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd()))
EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
KUBE_STATE = EPHEMERAL / "kube" / "state.json"
NODES = ["upg-node1", "upg-node2", "upg-node3"]
RECORD = "/var/lib/gpufleet/upgrade.json"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"


@functools.cache
def node(name: str):
    return testinfra.get_host("podman://" + name)


def name_of(host) -> str:
    return host.backend.get_hostname()


def kube() -> dict:
    return json.loads(KUBE_STATE.read_text())


def node_patches(state: dict) -> list[dict]:
    """The PATCHes of nodes that set unschedulable, in order; not check mode's dry runs, which keep nothing."""
    return [
        r
        for r in state["requests"]
        if r["method"] == "PATCH" and r["path"].startswith("/api/v1/nodes/") and "dryRun" not in r["query"] and "unschedulable" in (r["body"].get("spec") or {})
    ]


def cordon_patches(state: dict, name: str, since: float = 0.0) -> list[bool]:
    """The unschedulable values PATCHed onto a node, in order."""
    return [r["body"]["spec"]["unschedulable"] for r in node_patches(state) if r["path"] == "/api/v1/nodes/" + name and r["time"] >= since]


def touched(state: dict, name: str, since: float) -> list[str]:
    """Every request about a node (or its pods) since a time."""
    return [
        "{0} {1}?{2}".format(r["method"], r["path"], r["query"])
        for r in state["requests"]
        if r["time"] >= since and (r["path"].endswith("/" + name) or name in r["path"] or name in r["query"])
    ]


def slurm_calls(name: str) -> list[dict]:
    text = node(name).file("/var/lib/upg-slurm/calls.jsonl").content_string
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def slurm_updates(name: str, since: float = 0.0) -> list[str]:
    return [[a for a in c["argv"] if a.startswith("State=")][0] for c in slurm_calls(name) if c["tool"] == "scontrol" and c["time"] >= since]


def toolkit(name: str) -> tuple[str, str]:
    out = node(name).check_output("dpkg-query -W -f='${Version} ${db:Status-Abbrev}' nvidia-container-toolkit-base")
    version, status = out.split()
    return version, status


def upgrade(*args: str) -> subprocess.CompletedProcess:
    return scenario_playbook(ROOT / "playbooks" / "upgrade.yml", *args, timeout=900)


# -- after converge ------------------------------------------------------------------------------------------------


def test_every_node_runs_the_new_toolkit_held_and_passes_verify(host):
    assert toolkit(name_of(host)) == ("1.20.1-1", "hi")
    report = json.loads(host.file("/var/lib/gpufleet/verify.json").content_string)
    assert report["status"] in ("pass", "warn"), report["summary"]
    assert {c["layer"]: c["status"] for c in report["checks"]}["container_toolkit"] == "pass"
    assert not host.file(RECORD).exists  # the roll finished: nothing left to resume


def test_kubernetes_gives_back_only_what_the_roll_cordoned():
    state = kube()
    for name in ("upg-node1", "upg-node2"):
        assert cordon_patches(state, name) == [True, False], name
        assert not state["nodes"][name].get("unschedulable"), name
        # The roll's mark went with its cordon.
        assert not state["nodes"][name].get("annotations"), name
    # Cordoned by someone else: drained, but never patched, and still cordoned.
    assert cordon_patches(state, "upg-node3") == []
    assert state["nodes"]["upg-node3"]["unschedulable"] is True
    # Every node's Deployment pod was evicted; the DaemonSet pods were left alone.
    assert sorted(p["name"] for p in state["evicted"]) == ["train-" + n for n in NODES]
    assert sorted(p["name"] for p in state["pods"]) == ["device-plugin-" + n for n in NODES]


def test_the_first_batch_was_given_back_before_the_second_was_drained():
    """Batches [1, 2]: upg-node1 alone, then upg-node2 and upg-node3 together."""
    state = kube()
    events = [(r["path"].rsplit("/", 1)[1], r["body"]["spec"]["unschedulable"]) for r in node_patches(state)]
    assert events[:2] == [("upg-node1", True), ("upg-node1", False)]
    assert sorted(events[2:]) == [("upg-node2", False), ("upg-node2", True)]
    assert events.index(("upg-node2", True)) < events.index(("upg-node2", False))
    evictions = [r["path"].split("/")[6] for r in state["requests"] if r["path"].endswith("/eviction")]
    assert evictions[0] == "train-upg-node1"
    assert sorted(evictions[1:]) == ["train-upg-node2", "train-upg-node3"]


def test_slurm_resumes_only_what_the_roll_drained(host):
    name = name_of(host)
    state = host.file("/var/lib/upg-slurm/state").content_string.strip()
    if name == "upg-node3":
        assert slurm_updates(name) == []
        assert state == "drained"
    else:
        assert slurm_updates(name) == ["State=DRAIN", "State=RESUME"]
        assert state == "idle"
    assert host.file("/var/lib/upg-slurm/reason").content_string.strip() == ("fan replacement" if name == "upg-node3" else "none")
    drain = [c for c in slurm_calls(name) if c["tool"] == "scontrol"][:1]
    assert all("Reason=gpufleet.nvidia upgrade" in c["argv"] for c in drain)


def test_the_toolkit_changed_only_after_the_gpu_job_ended(host):
    if name_of(host) != "upg-node1":
        pytest.skip("the GPU job ran on upg-node1")
    assert host.check_output("nvml-simctl process list").strip() == ""
    ended = float(host.file("/var/lib/upg-slurm/job-ended").content_string)
    drained = [c["time"] for c in slurm_calls("upg-node1") if c["tool"] == "scontrol"][0]
    assert ended - drained >= 5  # the job outlived the drain by the shim's delay
    line = [entry for entry in host.file("/var/log/dpkg.log").content_string.splitlines() if " upgrade nvidia-container-toolkit-base:" in entry][-1]
    changed = datetime.datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S").timestamp()
    assert changed >= int(ended), (line, ended)


# -- a failed health gate stops the roll; the next roll resumes it --------------------------------------------------


def test_failed_gate_stops_the_roll_and_the_next_roll_resumes_it():
    """Batches [2, 1]: upg-node2 fails its gate beside upg-node1, which still finishes; upg-node3 waits."""
    start = time.time()
    broken = node("upg-node2")
    broken.check_output("cp -p {0} {0}.upgrade-test && printf 'version = 2\\n' > {0}".format(CONTAINERD_CONFIG))
    try:
        run = upgrade("-e", "container_toolkit_version=1.17.8", "-e", '{"upgrade_serial": [2, 1]}')
    finally:
        broken.check_output("mv {0}.upgrade-test {0}".format(CONTAINERD_CONFIG))
    assert run.returncode != 0, run.stdout
    out = " ".join(run.stdout.split())
    assert 'upg-node2: the upgrade failed at "Fail when a finding reaches verify_fail_on"' in out, run.stdout[-5000:]
    assert "has no `nvidia` runtime" in out
    assert "The node is left cordoned in Kubernetes and drained in Slurm for a person to look at" in out
    assert "Not touched: upg-node3." in out

    state = kube()
    # upg-node1: rolled back and given back, though its batch-mate failed.
    assert toolkit("upg-node1")[0] == "1.17.8-1"
    assert cordon_patches(state, "upg-node1", start) == [True, False]
    assert slurm_updates("upg-node1", start) == ["State=DRAIN", "State=RESUME"]
    # upg-node2: changed, failed its gate, left out of service with its record.
    assert toolkit("upg-node2")[0] == "1.17.8-1"
    assert cordon_patches(state, "upg-node2", start) == [True]
    assert state["nodes"]["upg-node2"]["unschedulable"] is True
    assert state["nodes"]["upg-node2"]["annotations"] == {"gpufleet.nvidia/upgrade": "cordoned"}
    assert slurm_updates("upg-node2", start) == ["State=DRAIN"]
    record = json.loads(node("upg-node2").file(RECORD).content_string)
    assert record == {
        "kubernetes_cordoned": True,
        "kubernetes_node": "upg-node2",
        "layers": ["container_toolkit"],
        "slurm_drained": True,
        "slurm_node": "upg-node2",
    }
    # upg-node3: the roll never reached it.
    assert toolkit("upg-node3")[0] == "1.20.1-1"
    assert touched(state, "upg-node3", start) == []
    assert [c for c in slurm_calls("upg-node3") if c["time"] >= start] == []

    # While the roll is stopped, the Slurm health guard drains upg-node2 again, with its own reason (a job's
    # Prolog found a critical GPU): that drain is the guard's now, and the roll must not wipe it (issue 37).
    guard_reason = "gpufleet health: GPU /dev/nvidia0 (PCI 0000:00:1e.0, Slurm index 0) is critical: xid: Xid 79"
    node("upg-node2").check_output("scontrol update NodeName=upg-node2 State=DRAIN 'Reason=%s'" % guard_reason)

    # upg-node2 is fixed (above): the next roll resumes it and finishes the fleet.
    start = time.time()
    run = upgrade("-e", "container_toolkit_version=1.17.8", "-e", "upgrade_serial=100%")
    assert run.returncode == 0, run.stdout[-5000:]
    state = kube()
    assert touched(state, "upg-node1", start) == []  # at its declaration: not drained again
    assert cordon_patches(state, "upg-node2", start) == [False]  # cordoned, with its mark, by the stopped roll: given back
    assert not state["nodes"]["upg-node2"].get("annotations")
    # Drained with the guard's reason, no longer the roll's: left drained, the reason kept, and said so.
    assert slurm_updates("upg-node2", start) == []
    assert node("upg-node2").file("/var/lib/upg-slurm/state").content_string.strip() == "drained"
    assert node("upg-node2").file("/var/lib/upg-slurm/reason").content_string.strip() == guard_reason
    kept = "drained in Slurm with the reason '{0}', not the upgrade's 'gpufleet.nvidia upgrade': left drained".format(guard_reason)
    assert kept in " ".join(run.stdout.split()), run.stdout[-5000:]
    assert not node("upg-node2").file(RECORD).exists
    assert toolkit("upg-node3")[0] == "1.17.8-1"
    assert cordon_patches(state, "upg-node3", start) == []  # someone else's cordon stays
    assert state["nodes"]["upg-node3"]["unschedulable"] is True
    assert slurm_updates("upg-node3", start) == []


# -- a node that comes out of its update sick stops the roll before the next node ---------------------------------


def test_a_node_sick_after_its_update_stops_the_roll_and_the_next_node_is_untouched():
    """Two nodes, one at a time: upg-node1's GPU reports an uncorrectable ECC error once its packages changed.

    A dpkg hook on upg-node1 injects the error after the roll's package step (as a GPU that fails under the new
    stack would), so the node is healthy when the roll drains it and sick at its gate. The health layer fails
    the gate with the GPU and the action named; upg-node2, the next batch, is never reached."""
    sick = node("upg-node1")
    hook = "/etc/apt/apt.conf.d/99-upgrade-test-sick-gpu"
    rule = 'DPkg::Post-Invoke {"nvml-simctl inject ecc-burst --gpu 0 --uncorrected 2 && rm -f ' + hook + '";};'
    sick.check_output("printf '%s\\n' '" + rule + "' > " + hook)
    start = time.time()
    try:
        run = upgrade("--limit", "upg-node1,upg-node2", "-e", "container_toolkit_version=1.20.1", "-e", "upgrade_serial=1")
        sick_report = json.loads(sick.file("/var/lib/gpufleet/verify.json").content_string)
    finally:
        sick.run("rm -f " + hook)
        sick.check_output("nvml-simctl inject clear --gpu 0")
    assert run.returncode != 0, run.stdout
    out = " ".join(run.stdout.split())
    assert 'upg-node1: the upgrade failed at "Fail when a finding reaches verify_fail_on"' in out, run.stdout[-5000:]
    assert "Not touched: upg-node2." in out, run.stdout[-5000:]
    health = {c["layer"]: c for c in sick_report["checks"]}["health"]
    assert health["status"] == "fail", health
    ecc = [f for f in health["findings"] if f["severity"] == "error"]
    assert ecc and all("GPU 0" in f["message"] for f in ecc), health["findings"]
    assert any("uncorrectable ECC" in f["message"] or "uncorrected" in f["message"] for f in ecc), ecc

    state = kube()
    # upg-node1: updated, then stopped by its gate, out of service with its record.
    assert toolkit("upg-node1")[0] == "1.20.1-1"
    assert cordon_patches(state, "upg-node1", start) == [True]
    assert slurm_updates("upg-node1", start) == ["State=DRAIN"]
    assert sick.file(RECORD).exists
    # upg-node2: the roll never reached it.
    assert toolkit("upg-node2")[0] == "1.17.8-1"
    assert touched(state, "upg-node2", start) == []
    assert [c for c in slurm_calls("upg-node2") if c["time"] >= start] == []
