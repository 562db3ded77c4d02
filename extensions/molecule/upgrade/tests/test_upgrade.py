"""playbooks/upgrade.yml on three nodes, as Kubernetes, Slurm and the nodes saw it.

Converge rolled Container Toolkit 1.17.8 -> 1.20.1 one node at a time, with
upg-node3 cordoned in Kubernetes and drained in Slurm by someone else, and a
job on upg-node1's GPU that ends a few seconds after its drain. Kubernetes
is the test ground's real API server and controllers (tests/harness/kube.sh),
whose audit log records every request of the roll's identity; the tests read
the objects back from the API server, as someone else (site-operator). The
Slurm shim records every call. Then the cluster refuses a drain: a pod with
local storage stops the roll at once, and a PodDisruptionBudget makes it wait
and stop, naming the budget and the pod. The next test breaks upg-node2 and
rolls back to 1.17.8: the health gate stops the roll there, and the next
roll, once the node is fixed, resumes it. Last, upg-node1's GPU turns sick
after its update: a roll over upg-node1 and upg-node2 stops at upg-node1,
and upg-node2 is never touched.
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
from stack import kube_api, kube_core, scenario_playbook

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd()))
EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
KUBE = EPHEMERAL / "kube"
NODES = ["upg-node1", "upg-node2", "upg-node3"]
RECORD = "/var/lib/gpufleet/upgrade.json"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"


@functools.cache
def node(name: str):
    return testinfra.get_host("podman://" + name)


def name_of(host) -> str:
    return host.backend.get_hostname()


def kube_node(name: str) -> tuple[bool, dict]:
    """A Node's cordon and annotations, read back from the API server."""
    obj = kube_core().read_node(name)
    return bool(obj.spec.unschedulable), dict(obj.metadata.annotations or {})


def audit(since: float = 0.0) -> list[dict]:
    """The API server's record of the roll's requests (gpufleet-admin's), in order, answered; not check mode's
    dry runs, which keep nothing."""
    events = []
    for line in (KUBE / "audit.log").read_text().splitlines():
        event = json.loads(line)
        if event.get("stage") != "ResponseComplete" or "dryRun=" in event["requestURI"]:
            continue
        event["time"] = datetime.datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()
        if event["time"] >= since:
            events.append(event)
    return events


def succeeded(event: dict) -> bool:
    return event.get("responseStatus", {}).get("code", 500) < 300


def cordon_patches(name: str, since: float = 0.0) -> list[bool]:
    """The unschedulable values the roll PATCHed onto a node, in order."""
    return [
        e["requestObject"]["spec"]["unschedulable"]
        for e in audit(since)
        if e["verb"] == "patch"
        and e["objectRef"].get("resource") == "nodes"
        and e["objectRef"].get("name") == name
        and not e["objectRef"].get("subresource")
        and succeeded(e)
        and "unschedulable" in ((e.get("requestObject") or {}).get("spec") or {})
    ]


def evictions(since: float = 0.0, answered: int = 201) -> list[str]:
    """The pods the roll asked the eviction API to evict, with that answer (201: evicted, 429: refused)."""
    return [
        e["objectRef"]["namespace"] + "/" + e["objectRef"]["name"]
        for e in audit(since)
        if e["verb"] == "create" and e["objectRef"].get("subresource") == "eviction" and e.get("responseStatus", {}).get("code") == answered
    ]


def owner(pod: str) -> str:
    """The ReplicaSet or DaemonSet a pod's generated name came from (train-upg-node1-x7k2p: train-upg-node1)."""
    return pod.split("/")[-1].rsplit("-", 1)[0]


def touched(name: str, since: float) -> list[str]:
    """Every request of the roll about a node, or its pods, since a time."""
    return [
        "{0} {1}".format(e["verb"], e["requestURI"])
        for e in audit(since)
        if e["objectRef"].get("name") == name or name in e["requestURI"] or owner(e["objectRef"].get("name", "")) == "train-" + name
    ]


def training_pod(name: str) -> tuple[str, str | None]:
    """The phase of the training pod the ReplicaSet of a node keeps now (not one being deleted), and the node
    the scheduler bound it to."""
    pods = [p for p in kube_core().list_namespaced_pod("ml", label_selector="app=train,node=" + name).items if not p.metadata.deletion_timestamp]
    assert len(pods) == 1, [p.metadata.name for p in pods]
    return pods[0].status.phase, pods[0].spec.node_name


def pods_on(name: str) -> dict[str, str]:
    """The pods bound to a node now, by owner, with their phase."""
    return {owner(p.metadata.name): p.status.phase for p in kube_core().list_pod_for_all_namespaces(field_selector="spec.nodeName=" + name).items}


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
    for name in ("upg-node1", "upg-node2"):
        assert cordon_patches(name) == [True, False], name
        unschedulable, annotations = kube_node(name)
        assert not unschedulable, name
        # The roll's mark went with its cordon.
        assert "gpufleet.nvidia/upgrade" not in annotations, name
    # Cordoned by someone else: drained, but never patched, and still cordoned.
    assert cordon_patches("upg-node3") == []
    assert kube_node("upg-node3")[0] is True
    # Every node's training pod was evicted through the eviction API; the DaemonSet's pods were left alone.
    assert sorted(owner(pod) for pod in evictions()) == ["train-" + n for n in NODES]
    assert evictions(answered=429) == []
    for name in NODES:
        assert pods_on(name)["device-plugin"] == "Running", name
    # The ReplicaSets' new pods run where the roll gave the node back, and wait where someone else's cordon stays.
    assert training_pod("upg-node1") == ("Running", "upg-node1")
    assert training_pod("upg-node2") == ("Running", "upg-node2")
    assert training_pod("upg-node3") == ("Pending", None)


def test_the_first_batch_was_given_back_before_the_second_was_drained():
    """Batches [1, 2]: upg-node1 alone, then upg-node2 and upg-node3 together."""
    events = [
        (e["objectRef"]["name"], e["requestObject"]["spec"]["unschedulable"])
        for e in audit()
        if e["verb"] == "patch" and e["objectRef"].get("resource") == "nodes" and "unschedulable" in ((e.get("requestObject") or {}).get("spec") or {})
    ]
    assert events[:2] == [("upg-node1", True), ("upg-node1", False)]
    assert sorted(events[2:]) == [("upg-node2", False), ("upg-node2", True)]
    assert events.index(("upg-node2", True)) < events.index(("upg-node2", False))
    evicted = [owner(pod) for pod in evictions()]
    assert evicted[0] == "train-upg-node1"
    assert sorted(evicted[1:]) == ["train-upg-node2", "train-upg-node3"]


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


# -- the cluster refuses a drain: the roll stops before the node changes ----------------------------------------


def apps():
    client, api = kube_api()
    return client.AppsV1Api(api), client.PolicyV1Api(api)


def wait_for(what: str, check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.5)


def test_a_drain_the_cluster_refuses_stops_the_roll_before_the_node_changes():
    """On upg-node1, someone else runs a pod with local storage (an emptyDir), protected by a PodDisruptionBudget
    that allows no disruption. A roll to 1.17.8 stops at once on the pod with local storage; with
    upgrade_kubernetes_drain_options.delete_emptydir_data, the roll evicts the training pod, asks to evict that pod
    too (k8s_drain asks for pods with local storage last), and waits for the budget, then stops naming it and the
    pod. The toolkit never changes; the node stays cordoned with the roll's
    mark and its record, and once the budget is gone the next roll (back at 1.20.1, the node's declaration) gives
    the node back."""
    appsv1, policy = apps()
    scratch = {
        "metadata": {"name": "scratch-upg-node1", "namespace": "ml"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "scratch"}},
            "template": {
                "metadata": {"labels": {"app": "scratch"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": "upg-node1"},
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "scratch", "image": "scratch", "volumeMounts": [{"name": "tmp", "mountPath": "/scratch"}]}],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }
    budget = {"metadata": {"name": "scratch-upg-node1", "namespace": "ml"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "scratch"}}}}
    appsv1.create_namespaced_replica_set("ml", scratch)
    policy.create_namespaced_pod_disruption_budget("ml", budget)
    wait_for("the scratch pod to run", lambda: pods_on("upg-node1").get("scratch-upg-node1") == "Running")
    # The disruption controller computes what the budget allows, as in a cluster.
    wait_for("the budget's status", lambda: policy.read_namespaced_pod_disruption_budget("scratch-upg-node1", "ml").status.current_healthy == 1)
    try:
        start = time.time()
        run = upgrade("--limit", "upg-node1", "-e", "container_toolkit_version=1.17.8")
        assert run.returncode != 0, run.stdout
        out = " ".join(run.stdout.split())
        refused = "Kubernetes node upg-node1 was not drained: Pod deletion errors: cannot delete Pods with local storage: ml/scratch-upg-node1-"
        assert refused in out, run.stdout[-5000:]
        assert "set upgrade_kubernetes_drain_options.delete_emptydir_data to true" in out
        assert evictions(start) == [] and evictions(start, 429) == []  # refused before any eviction

        start = time.time()
        options = {"upgrade_kubernetes_drain_options": {"ignore_daemonsets": True, "delete_emptydir_data": True, "wait_sleep": 1}}
        run = upgrade("--limit", "upg-node1", "-e", "container_toolkit_version=1.17.8", "-e", "upgrade_kubernetes_drain_timeout=5", "-e", json.dumps(options))
        assert run.returncode != 0, run.stdout
        out = " ".join(run.stdout.split())
        waited = "did not drain within upgrade_kubernetes_drain_timeout (5 s): the eviction API refuses to evict pod ml/scratch-upg-node1-"
        assert waited in out, run.stdout[-5000:]
        assert "which PodDisruptionBudget ml/scratch-upg-node1 protects (it needs 1 healthy pods and has 1)" in out
        assert "the node is left cordoned with the upgrade's mark" in out
        assert "local storage" not in out
        # The training pod went; the pod with local storage was asked for, as the option says, again and again, and stayed.
        assert {owner(pod) for pod in evictions(start)} == {"train-upg-node1"}
        assert {owner(pod) for pod in evictions(start, 429)} == {"scratch-upg-node1"}
        assert len(evictions(start, 429)) >= 3, evictions(start, 429)
        assert pods_on("upg-node1").get("scratch-upg-node1") == "Running"
        assert toolkit("upg-node1")[0] == "1.20.1-1"
        unschedulable, annotations = kube_node("upg-node1")
        assert unschedulable and annotations.get("gpufleet.nvidia/upgrade") == "cordoned"
        assert node("upg-node1").file(RECORD).exists
    finally:
        policy.delete_namespaced_pod_disruption_budget("scratch-upg-node1", "ml")
        # No garbage collector runs here: the ReplicaSet's pods go by scaling it to none first.
        appsv1.patch_namespaced_replica_set_scale("scratch-upg-node1", "ml", {"spec": {"replicas": 0}})
        wait_for("the scratch pods to go", lambda: "scratch-upg-node1" not in pods_on("upg-node1"))
        appsv1.delete_namespaced_replica_set("scratch-upg-node1", "ml")

    start = time.time()
    run = upgrade("--limit", "upg-node1")
    assert run.returncode == 0, run.stdout[-5000:]
    assert cordon_patches("upg-node1", start) == [False]
    assert "gpufleet.nvidia/upgrade" not in kube_node("upg-node1")[1]
    assert not node("upg-node1").file(RECORD).exists
    assert node("upg-node1").file("/var/lib/upg-slurm/state").content_string.strip() == "idle"
    wait_for("the training pod to run again", lambda: training_pod("upg-node1") == ("Running", "upg-node1"))


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

    # upg-node1: rolled back and given back, though its batch-mate failed.
    assert toolkit("upg-node1")[0] == "1.17.8-1"
    assert cordon_patches("upg-node1", start) == [True, False]
    assert slurm_updates("upg-node1", start) == ["State=DRAIN", "State=RESUME"]
    # upg-node2: changed, failed its gate, left out of service with its record.
    assert toolkit("upg-node2")[0] == "1.17.8-1"
    assert cordon_patches("upg-node2", start) == [True]
    unschedulable, annotations = kube_node("upg-node2")
    assert unschedulable is True
    assert annotations.get("gpufleet.nvidia/upgrade") == "cordoned"
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
    assert touched("upg-node3", start) == []
    assert [c for c in slurm_calls("upg-node3") if c["time"] >= start] == []

    # While the roll is stopped, the Slurm health guard drains upg-node2 again, with its own reason (a job's
    # Prolog found a critical GPU): that drain is the guard's now, and the roll must not wipe it (issue 37).
    guard_reason = "gpufleet health: GPU /dev/nvidia0 (PCI 0000:00:1e.0, Slurm index 0) is critical: xid: Xid 79"
    node("upg-node2").check_output("scontrol update NodeName=upg-node2 State=DRAIN 'Reason=%s'" % guard_reason)

    # upg-node2 is fixed (above): the next roll resumes it and finishes the fleet.
    start = time.time()
    run = upgrade("-e", "container_toolkit_version=1.17.8", "-e", "upgrade_serial=100%")
    assert run.returncode == 0, run.stdout[-5000:]
    assert touched("upg-node1", start) == []  # at its declaration: not drained again
    assert cordon_patches("upg-node2", start) == [False]  # cordoned, with its mark, by the stopped roll: given back
    assert "gpufleet.nvidia/upgrade" not in kube_node("upg-node2")[1]
    # Drained with the guard's reason, no longer the roll's: left drained, the reason kept, and said so.
    assert slurm_updates("upg-node2", start) == []
    assert node("upg-node2").file("/var/lib/upg-slurm/state").content_string.strip() == "drained"
    assert node("upg-node2").file("/var/lib/upg-slurm/reason").content_string.strip() == guard_reason
    kept = "drained in Slurm with the reason '{0}', not the upgrade's 'gpufleet.nvidia upgrade': left drained".format(guard_reason)
    assert kept in " ".join(run.stdout.split()), run.stdout[-5000:]
    assert not node("upg-node2").file(RECORD).exists
    assert toolkit("upg-node3")[0] == "1.17.8-1"
    assert cordon_patches("upg-node3", start) == []  # someone else's cordon stays
    assert kube_node("upg-node3")[0] is True
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

    # upg-node1: updated, then stopped by its gate, out of service with its record.
    assert toolkit("upg-node1")[0] == "1.20.1-1"
    assert cordon_patches("upg-node1", start) == [True]
    assert slurm_updates("upg-node1", start) == ["State=DRAIN"]
    assert sick.file(RECORD).exists
    # upg-node2: the roll never reached it.
    assert toolkit("upg-node2")[0] == "1.17.8-1"
    assert touched("upg-node2", start) == []
    assert [c for c in slurm_calls("upg-node2") if c["time"] >= start] == []
