# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpu_workload on CRI: the pod sandbox's life against a CRI runtime played by a crictl of our own.

The real engines run in the `workload` Molecule scenario; here a small crictl (and ctr) keeps CRI's state in a
file, with CRI's rules that matter to the check (a container needs a ready sandbox, container names are unique per
sandbox, an unknown handler or CDI device is refused, a removed sandbox takes its containers along), and logs every
call, so that what the module asks of the engine on success, failure and timeout can be counted.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import run_module

IMAGE = "site/cuda-probe:1.0"
LABEL = "gpufleet.nvidia/workload-check=true"
GPUS = ["GPU-0000", "GPU-0001"]

CRICTL = textwrap.dedent("""\
    import fcntl, json, os, sys, time, uuid
    here = os.path.dirname(os.path.abspath(__file__))
    args = sys.argv[1:]
    with open(os.path.join(here, "calls"), "a") as log:
        log.write(json.dumps([os.path.basename(sys.argv[0])] + args) + "\\n")
    if os.path.basename(sys.argv[0]) == "ctr":  # ctr -n k8s.io images ls -q name==REF
        print(args[-1].split("==", 1)[1])
        sys.exit(0)
    lock = open(os.path.join(here, "state.lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    path = os.path.join(here, "state.json")
    state = json.load(open(path)) if os.path.exists(path) else {"pods": {}, "containers": {}}
    def fail(reason):
        sys.stderr.write('level=fatal msg="rpc error: code = Unknown desc = %s"\\n' % reason)
        sys.exit(1)
    def save():
        json.dump(state, open(path, "w"))
    verb = args[0]
    if verb == "pods":
        name = args[args.index("--name") + 1].strip("^$") if "--name" in args else None
        for pod, info in state["pods"].items():
            if LABEL in info["labels"] and name in (None, info["name"]):
                print(pod)
    elif verb == "runp":
        handler = args[args.index("--runtime") + 1] if "--runtime" in args else ""
        if handler not in ("", "nvidia"):
            fail('failed to get sandbox runtime: no runtime for \\\\"%s\\\\" is configured' % handler)
        config = json.load(open(args[-1]))
        pod = uuid.uuid4().hex
        state["pods"][pod] = {"name": config["metadata"]["name"], "ready": True,
                              "labels": ["%s=%s" % kv for kv in config["labels"].items()]}
        save()
        print(pod)
    elif verb == "create":
        pod, config = args[1], json.load(open(args[2]))
        if not state["pods"].get(pod, {}).get("ready"):
            fail("sandbox %s is not ready" % pod)
        name = config["metadata"]["name"]
        if any(c["pod"] == pod and c["name"] == name for c in state["containers"].values()):
            fail("the container name %s is reserved" % name)
        devices = [d["name"] for d in config["CDI_devices"]]
        unknown = [d for d in devices if d not in ["nvidia.com/gpu=all"] + ["nvidia.com/gpu=" + g for g in GPUS]]
        if unknown:
            fail("CDI device injection failed: unresolvable CDI devices " + ", ".join(unknown))
        container = uuid.uuid4().hex
        state["containers"][container] = {"pod": pod, "name": name, "devices": devices, "running": False}
        save()
        print(container)
    elif verb == "start":
        state["containers"][args[1]]["running"] = True
        save()
    elif verb == "exec":  # exec --sync --timeout N ID ARGV...
        limit, container, argv = int(args[3]), state["containers"][args[4]], args[5:]
        lock.close()
        if argv[0] == "hang":
            time.sleep(limit)
            fail("command timeout %ds exceeded" % limit)
        if argv == ["nvidia-smi", "-L"]:
            for device in container["devices"]:
                for gpu in (GPUS if device.endswith("=all") else [device.split("=")[1]]):
                    print("GPU %d: Simulated GPU (UUID: %s)" % (GPUS.index(gpu), gpu))
        else:
            print("550.163.01")
    elif verb == "rm":
        state["containers"].pop(args[-1])
        save()
    elif verb == "stopp":
        state["pods"][args[1]]["ready"] = False
        save()
    elif verb == "rmp":
        state["pods"].pop(args[-1])
        state["containers"] = {c: i for c, i in state["containers"].items() if i["pod"] != args[-1]}
        save()
    """)


@pytest.fixture
def cri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory with crictl and ctr on PATH; `calls` logs their calls, `state.json` holds CRI's state."""
    source = "#!{0}\nLABEL = {1!r}\nGPUS = {2!r}\n{3}".format(sys.executable, LABEL, GPUS, CRICTL)
    for program in ("crictl", "ctr"):
        (tmp_path / program).write_text(source)
        (tmp_path / program).chmod(0o755)
    monkeypatch.setenv("PATH", "{0}:{1}".format(tmp_path, os.environ["PATH"]))
    return tmp_path


def check(devices: list[list[str]], **extra: object) -> dict:
    args = {
        "engine": "containerd",
        "runtime_handler": "nvidia",
        "image": IMAGE,
        "driver_version": "550.163.01",
        "devices": [{"cdi": cdi, "gpus": GPUS if cdi == ["nvidia.com/gpu=all"] else [cdi[0].split("=")[1]]} for cdi in devices],
    }
    args.update(extra)
    outcome = run_module("gpu_workload", args)
    assert outcome["kind"] == "exit", outcome
    return outcome["result"]


def calls(cri: Path, verb: str) -> list[list[str]]:
    return [call for call in map(json.loads, (cri / "calls").read_text().splitlines()) if call[0] == "crictl" and call[1] == verb]


def left(cri: Path) -> dict:
    """What CRI holds now (nothing was ever made: no state yet)."""
    state = cri / "state.json"
    return json.loads(state.read_text()) if state.exists() else {"pods": {}, "containers": {}}


EVERY = [["nvidia.com/gpu=all"], ["nvidia.com/gpu=GPU-0000"], ["nvidia.com/gpu=GPU-0001"]] * 3


def test_the_containers_of_a_check_share_one_pod_sandbox(cri: Path) -> None:
    result = check(EVERY)
    assert [run["status"] for run in result["runs"]] == ["pass"] * 9, result["runs"]
    assert len(calls(cri, "runp")) == 1 and calls(cri, "runp")[0][2:4] == ["--runtime", "nvidia"]
    pod = calls(cri, "stopp")[0][-1]
    assert {call[2] for call in calls(cri, "create")} == {pod} and len(calls(cri, "create")) == 9
    # The sandbox takes its containers along: one stopp and one rmp, no removal per container.
    assert calls(cri, "rm") == []
    assert [call[-1] for call in calls(cri, "rmp")] == [pod]
    assert left(cri) == {"pods": {}, "containers": {}}


def test_a_sandbox_the_handler_cannot_run_fails_every_container_and_starts_none(cri: Path) -> None:
    result = check(EVERY[:3], runtime_handler="gone")
    for run in result["runs"]:
        assert run["status"] == "fail"
        assert run["error"] == ('crictl runp (the pod sandbox) failed: failed to get sandbox runtime: no runtime for "gone" is configured')
    assert calls(cri, "create") == [] and left(cri)["pods"] == {}


def test_a_container_that_fails_leaves_the_others_and_the_sandbox_to_their_fate(cri: Path) -> None:
    result = check(EVERY[:2] + [["nvidia.com/gpu=GPU-0009"]])
    assert [run["status"] for run in result["runs"]] == ["pass", "pass", "fail"]
    assert result["runs"][2]["error"] == (
        "crictl create (the GPU container) failed: CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=GPU-0009"
    )
    assert len(calls(cri, "runp")) == 1 and len(calls(cri, "rmp")) == 1
    assert left(cri) == {"pods": {}, "containers": {}}


def test_a_check_command_past_its_time_limit_is_cleaned_up(cri: Path) -> None:
    result = check(EVERY[:2], command=["hang"], timeout=1)
    for run in result["runs"]:
        assert run["status"] == "fail" and run["timed_out"], run
        assert "did not finish within the time limit of 1 s" in run["error"]
    assert calls(cri, "rm") == [] and len(calls(cri, "rmp")) == 1
    assert left(cri) == {"pods": {}, "containers": {}}


def test_the_leftovers_of_an_interrupted_check_go_first(cri: Path) -> None:
    state = {
        "pods": {"old": {"name": "gpufleet-workload-old", "ready": True, "labels": [LABEL]}, "theirs": {"name": "web", "ready": True, "labels": ["app=web"]}},
        "containers": {"c1": {"pod": "old", "name": "probe", "devices": [], "running": True}},
    }
    (cri / "state.json").write_text(json.dumps(state))
    result = check(EVERY[:1])
    assert result["leftovers_removed"] == 1 and result["runs"][0]["status"] == "pass"
    assert list(left(cri)["pods"]) == ["theirs"] and left(cri)["containers"] == {}


def test_an_image_on_the_node_needs_no_archive(cri: Path) -> None:
    """verify fetches the archive only when the check says the image is missing."""
    result = check(EVERY[:1], image_archive=str(cri / "not-downloaded.oci.tar"))
    assert result["image"]["present"] and not result["image"]["error"] and not result["changed"]
    assert result["runs"][0]["status"] == "pass"


def test_the_first_container_of_each_image_reads_the_driver_version(cri: Path) -> None:
    result = check(EVERY[:3])
    assert [run["driver_version"] for run in result["runs"]] == ["550.163.01", None, None]
    drivers = [call for call in calls(cri, "exec") if "--query-gpu=driver_version" in call]
    assert len(drivers) == 1
    result = check(EVERY[:1], driver_version="535.0")
    assert result["runs"][0]["error"] == "the container reports driver 550.163.01, the host runs 535.0"
