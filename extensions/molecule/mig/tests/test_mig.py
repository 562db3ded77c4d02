"""The mig role on live simulated nodes: real systemd, real ansible-playbook runs, the simulator's own state.

Tests run in stages; each stage's session fixture acts on both nodes at once
(ansible-playbook over the Molecule inventory, `podman restart`) and records
what the tests check (one observation script per node), so a stage's tests
read the state of that stage even though pytest groups the tests by node.
Expected layouts come from the scenario's mig-parted file through the
collection's own config parser, checked against `nvml-simctl show`, so
nothing here is a hard-coded answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import typing as t
from collections import Counter

import pytest
import yaml

ROOT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd())
SCENARIO = os.path.join(ROOT, "extensions", "molecule", "mig")
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))

# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import config as mig_config
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import mig_expected

with open(os.path.join(SCENARIO, "files", "mig-parted-config.yaml"), encoding="utf-8") as _handle:
    CONFIG = yaml.safe_load(_handle)
ENTRIES = mig_config.parse_config(CONFIG)
SEQUENCE = ("mixed", "split", "all-disabled")


# --- observing a node ---------------------------------------------------------------------------
# Runs inside the node with its own python3; prints one JSON document.
OBSERVE = r"""
import json, os, subprocess

def run(*cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return done.returncode, done.stdout

def read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None

def props(unit, *names):
    out = run("systemctl", "show", unit, *["-p" + n for n in names])[1]
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

files = ["/etc/gpufleet/mig/config.json", "/etc/gpufleet/mig/gpufleet-mig.env", "/usr/local/sbin/gpufleet-mig"]
# The node runtime the command imports: the directory the role wrote into it.
runtime = ([line.split('"')[1] for line in (read("/usr/local/sbin/gpufleet-mig") or "").splitlines()
            if line.startswith("RUNTIME = ")] or [None])[0]
if runtime:
    files += [runtime + "/MANIFEST.json"]
    files += [runtime + "/gpufleet_runtime/" + n
              for n in ("__init__.py", "_nvml/__init__.py", "_nvml/session.py", "_mig/__init__.py", "_mig/run.py", "_mig/profiles.py")]
stats = {}
for path in files:
    try:
        st = os.stat(path)
        stats[path] = {"mode": st.st_mode & 0o7777, "uid": st.st_uid}
    except OSError:
        stats[path] = None
log = read("/var/lib/gpufleet-test/cdi-refresh.log")
print(json.dumps({
    "show": json.loads(run("nvml-simctl", "show")[1]),
    "config": read("/etc/gpufleet/mig/config.json"),
    "env": read("/etc/gpufleet/mig/gpufleet-mig.env"),
    "files": stats,
    "runtime": runtime,
    "runtimes": sorted(os.listdir("/usr/local/lib/gpufleet")) if os.path.isdir("/usr/local/lib/gpufleet") else [],
    "unit": props("gpufleet-mig.service", "ActiveState", "Result", "ExecMainStatus", "After", "Before", "Type",
                  "UnitFileState", "ActiveEnterTimestampMonotonic"),
    "dcgm": props("nvidia-dcgm.service", "ActiveState", "MainPID", "ExecMainStartTimestampMonotonic"),
    "exporter": props("dcgm-exporter.service", "ActiveState"),
    "dcgm_pid_at_prepare": (read("/var/lib/gpufleet-dcgm-pid") or "").strip(),
    "cdi_refreshes": len(log.split()) if log else 0,
    "assert_rc": run("/usr/local/sbin/gpufleet-mig", "assert")[0],
    "journal": run("journalctl", "-b", "-u", "gpufleet-mig.service", "--no-pager")[1],
    "booted_marker": os.path.exists("/run/nvml-sim/booted"),
}))
"""


def observe(name: str) -> dict[str, t.Any]:
    done = subprocess.run(
        ["podman", "exec", name, "python3", "-c", OBSERVE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def show(name: str) -> dict[str, t.Any]:
    return json.loads(subprocess.run(["podman", "exec", name, "nvml-simctl", "show"], stdout=subprocess.PIPE, check=True, text=True).stdout)


def hosts() -> list[str]:
    out = subprocess.run(["ansible-inventory", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "--list"], stdout=subprocess.PIPE, check=True, text=True)
    return sorted(json.loads(out.stdout)["gpu_nodes"]["hosts"])


def play(name: str) -> dict[str, dict[str, t.Any]]:
    """Run one of the scenario's verify playbooks on every node; the results file of each node."""
    out = subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], os.path.join(SCENARIO, "verify-{0}.yml".format(name))],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-6000:]
    results = {}
    for host in hosts():
        path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "mig-{0}-{1}.json".format(name, host))
        with open(path, encoding="utf-8") as handle:
            results[host] = json.load(handle)
    return results


def wanted(label: str, gpu: dict[str, t.Any]) -> Counter | None:
    """MIG devices the label asks of a simulated GPU; None: MIG disabled."""
    for entry in ENTRIES[label]:
        if entry.selects(gpu["index"], gpu["pci_device_id"], gpu["pci_subsystem_id"]):
            return Counter(dict(entry.mig_devices)) if entry.mig_enabled else None
    raise AssertionError("label {0} does not select GPU {1}".format(label, gpu["index"]))


def assert_label_applied(label: str, state: dict[str, t.Any]) -> None:
    for gpu in state["gpus"]:
        want = wanted(label, gpu)
        assert (gpu["mig_current"], gpu["mig_pending"]) == ((1, 1) if want is not None else (0, 0)), gpu["index"]
        assert mig_expected.device_counts(gpu) == (want or Counter()), (label, gpu["index"])
        assert mig_expected.check_layout(gpu) == [], (label, gpu["index"])


def wait_until_booted(name: str) -> None:
    """systemd's startup (and so the oneshot boot unit) is over; retries while D-Bus is not up yet."""
    deadline, state = time.time() + 240, ""
    while time.time() < deadline:
        done = subprocess.run(
            ["podman", "exec", name, "systemctl", "is-system-running", "--wait"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
        )
        state = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        if state in ("running", "degraded"):
            break
        time.sleep(1)
    failed = subprocess.run(["podman", "exec", name, "systemctl", "--failed", "--no-pager"], stdout=subprocess.PIPE, text=True, check=False).stdout
    assert state == "running", "{0} booted into {1!r}:\n{2}".format(name, state, failed)


# --- stage 1: after converge (all-balanced from the mig-parted file) ------------------------------
@pytest.fixture(scope="session")
def converged() -> dict[str, dict[str, t.Any]]:
    return {name: observe(name) for name in hosts()}


def test_converge_applied_the_label(host: t.Any, converged: dict[str, t.Any]) -> None:
    assert_label_applied("all-balanced", converged[host.backend.host]["show"])


def test_the_gpu_that_needed_a_reset_was_reset(host: t.Any, converged: dict[str, t.Any]) -> None:
    index = host.ansible.get_variables()["mig_test_reset_gpu"]
    gpu = converged[host.backend.host]["show"]["gpus"][index]
    assert gpu["mig_toggle"] == "reboot"  # SetMigMode answered RESET_REQUIRED for it
    assert mig_expected.device_counts(gpu) == wanted("all-balanced", gpu)


def test_config_label_and_applier_are_installed(host: t.Any, converged: dict[str, t.Any]) -> None:
    seen = converged[host.backend.host]
    assert json.loads(seen["config"]) == CONFIG  # the mig-parted file, unchanged
    assert {"GPUFLEET_MIG_LABEL=all-balanced", "GPUFLEET_MIG_RESET=yes", "GPUFLEET_MIG_CONFIG=/etc/gpufleet/mig/config.json"} <= set(seen["env"].splitlines())
    for path, stat in seen["files"].items():
        assert stat is not None, path
        assert (stat["mode"], stat["uid"]) == (0o755 if path.endswith("gpufleet-mig") else 0o644, 0), path
    assert seen["assert_rc"] == 0  # gpufleet-mig assert: the node has the label
    # One runtime version, the one the command imports; no private copy beside it.
    assert seen["runtime"] and seen["runtimes"] == [os.path.basename(seen["runtime"])], seen["runtimes"]


def test_boot_unit_is_enabled_and_ordered(host: t.Any, converged: dict[str, t.Any]) -> None:
    unit = converged[host.backend.host]["unit"]
    assert (unit["UnitFileState"], unit["Type"]) == ("enabled", "oneshot")
    assert {"nvidia-persistenced.service", "nvidia-fabricmanager.service"} <= set(unit["After"].split())
    assert {"kubelet.service", "containerd.service", "nvidia-dcgm.service", "gpufleet-cdi-refresh.service", "nvidia-cdi-refresh.service"} <= set(
        unit["Before"].split()
    )


def test_running_clients_were_restarted_stopped_ones_left_alone(host: t.Any, converged: dict[str, t.Any]) -> None:
    seen = converged[host.backend.host]
    assert seen["dcgm"]["ActiveState"] == "active"
    assert seen["dcgm"]["MainPID"] != seen["dcgm_pid_at_prepare"]  # stopped and started again
    assert seen["exporter"]["ActiveState"] == "inactive"  # it did not run, so it was not started


def test_cdi_was_refreshed_once(host: t.Any, converged: dict[str, t.Any]) -> None:
    assert converged[host.backend.host]["cdi_refreshes"] == 1  # converge changed the layout; idempotence did not


# --- stage 2: a reboot (container restart) ----------------------------------------------------
@pytest.fixture(scope="session")
def rebooted(converged: dict[str, t.Any]) -> dict[str, dict[str, t.Any]]:
    del converged  # observed first
    names = hosts()
    for proc in [subprocess.Popen(["podman", "restart", name], stdout=subprocess.DEVNULL) for name in names]:
        assert proc.wait(timeout=120) == 0
    for name in names:
        wait_until_booted(name)
    return {name: observe(name) for name in names}


def test_reboot_restores_the_layout(host: t.Any, rebooted: dict[str, t.Any]) -> None:
    seen = rebooted[host.backend.host]
    assert seen["booted_marker"]  # the simulator applied a boot: every instance was dropped
    assert (seen["unit"]["ActiveState"], seen["unit"]["Result"], seen["unit"]["ExecMainStatus"]) == ("active", "success", "0")
    assert "done: GPU 0: create" in seen["journal"]
    assert_label_applied("all-balanced", seen["show"])


def test_the_boot_unit_ran_before_the_gpu_clients(host: t.Any, rebooted: dict[str, t.Any]) -> None:
    seen = rebooted[host.backend.host]
    assert int(seen["unit"]["ActiveEnterTimestampMonotonic"]) <= int(seen["dcgm"]["ExecMainStartTimestampMonotonic"])


# --- stage 3: mixed -> split -> all-disabled: check-mode plan, apply (role), apply again, assert ------
@pytest.fixture(scope="session")
def sequence(rebooted: dict[str, t.Any]) -> dict[str, dict[str, t.Any]]:
    del rebooted
    return play("sequence")


@pytest.mark.parametrize("label", SEQUENCE)
def test_sequence_check_mode_changes_nothing(host: t.Any, sequence: dict[str, t.Any], label: str) -> None:
    step = sequence[host.backend.host][label]
    assert step["check"]["changed"] is True
    assert step["unchanged"] == step["before"]


@pytest.mark.parametrize("label", SEQUENCE)
def test_sequence_apply_does_what_check_mode_planned(host: t.Any, sequence: dict[str, t.Any], label: str) -> None:
    step = sequence[host.backend.host][label]
    planned = ["GPU {0}: {1}".format(p["index"], s) for p in step["check"]["plan"] for s in p["steps"]]
    assert step["done"] == planned
    assert_label_applied(label, step["after"]["show"])


@pytest.mark.parametrize("label", SEQUENCE)
def test_sequence_is_idempotent_and_asserted(host: t.Any, sequence: dict[str, t.Any], label: str) -> None:
    step = sequence[host.backend.host][label]
    assert (step["again"]["changed"], step["again"]["done"], step["again"]["reset_gpus"]) == (False, [], [])
    assert step["asserted"]["differences"] == []


@pytest.mark.parametrize("label", SEQUENCE)
def test_sequence_refreshed_cdi_and_restarted_clients(host: t.Any, sequence: dict[str, t.Any], label: str) -> None:
    seen = sequence[host.backend.host][label]["after"]
    # converge + one per applied label so far; never for check mode or a run without changes
    assert seen["cdi_refreshes"] == 1 + SEQUENCE.index(label) + 1
    assert (seen["dcgm"], seen["exporter"]) == ("active", "inactive")
    assert seen["env"].splitlines()[-2:] == ["GPUFLEET_MIG_LABEL=" + label, "GPUFLEET_MIG_RESET=yes"]


def test_split_kept_and_recut_an_instance(host: t.Any, sequence: dict[str, t.Any]) -> None:
    """mixed gave GPUs 4-5 two 3g instances; split keeps one and cuts it into 1c compute instances."""
    step = sequence[host.backend.host]["split"]
    assert [len(step["check"]["plan"][i]["recompute"]) for i in (4, 5)] == [1, 1]
    kept = {gi["id"] for gi in step["before"]["gpus"][4]["gis"]} & {gi["id"] for gi in step["after"]["show"]["gpus"][4]["gis"]}
    assert len(kept) == 1


# --- stage 4: NVML fails on the third create; stage 5: a client still attached ----------------------
@pytest.fixture(scope="session")
def faults(sequence: dict[str, t.Any]) -> dict[str, dict[str, t.Any]]:
    del sequence  # runs after it: every GPU has MIG off now
    return play("faults")


def test_failure_names_what_was_done_and_not(host: t.Any, faults: dict[str, t.Any]) -> None:
    seen = faults[host.backend.host]
    result = seen["failed"]
    assert result["failed"]
    assert len([step for step in result["done"] if ": create " in step]) == 2
    assert result["not_done"][0].startswith("GPU 0: create") and result["not_done"][-1].startswith("GPU 7: create")
    assert result["msg"].startswith(result["not_done"][0] + " failed: nvmlDeviceCreateGpuInstanceWithPlacement: Unknown Error (NVML_ERROR_UNKNOWN)")
    assert "Run again to converge" in result["msg"]
    gpus = seen["partial"]["gpus"]
    assert len(gpus[0]["gis"]) == 2 and all(g["gis"] == [] for g in gpus[1:])
    assert seen["dcgm_after_failure"] == "active"  # the role started the clients it had stopped


def test_rerun_after_failure_converges(host: t.Any, faults: dict[str, t.Any]) -> None:
    seen = faults[host.backend.host]
    # The same creates; a GPU whose mode change waited for a reset is created after the reset.
    assert sorted(s for s in seen["rerun_done"] if ": create " in s) == sorted(s for s in seen["failed"]["not_done"] if ": create " in s)
    assert_label_applied("all-balanced", seen["converged"])


def test_attached_clients_are_named_and_nothing_changes(host: t.Any, faults: dict[str, t.Any]) -> None:
    seen = faults[host.backend.host]
    gpu = seen["attached"]["gpus"][1]
    (process,) = gpu["processes"]
    assert seen["blocked"]["failed"]
    assert seen["blocked"]["msg"] == (
        "GPU clients are still attached, so nothing was changed. Stop them (for services, list them in "
        "mig_gpu_clients) and run again: GPU 1 (NVIDIA A100-SXM4-40GB) ({0}): pid 4242 (not visible here, GPU "
        "instance {1} / compute instance 0, 1024 MiB)".format(gpu["uuid"], process["gi"])
    )
    assert seen["untouched"] == seen["attached"]


# --- stage 6: issue 25's reproduction: a process on a GPU waiting for its reset -------------------
@pytest.fixture(scope="session")
def reset_case(faults: dict[str, t.Any]) -> dict[str, dict[str, t.Any]]:
    del faults  # runs after it
    return play("reset")


def test_a_process_on_a_gpu_waiting_for_its_reset_refuses_before_any_reset(host: t.Any, reset_case: dict[str, t.Any]) -> None:
    seen = reset_case[host.backend.host]
    assert [(g["mig_current"], g["mig_pending"]) for g in seen["requested"]["gpus"]] == [(0, 1)] * 8
    refused = seen["refused"]
    assert refused["failed"]
    assert refused["msg"].startswith("GPU clients are still attached, so nothing was changed.")
    assert "GPU 2 (NVIDIA A100-SXM4-40GB)" in refused["msg"] and "pid 4343" in refused["msg"]
    # No GPU was reset, so none is in MIG mode without its layout.
    assert seen["after_refusal"]["gpus"] == seen["requested"]["gpus"]


def test_then_all_eight_are_reset_in_one_call_and_finished(host: t.Any, reset_case: dict[str, t.Any]) -> None:
    seen = reset_case[host.backend.host]
    assert seen["finish"]["reset"]["gpus"] == list(range(8))
    assert seen["finish"]["reset_gpus"] == []
    assert_label_applied("all-balanced", seen["finished"])


def test_the_reboot_waits_for_the_boot_units(host):
    """The reboot's test_command (the driver's and this role's): true on a booted node, false while a boot unit holds
    the node lock, as gpufleet-mig.service does while it partitions the GPUs after a reboot."""
    booted_test = yaml.safe_load(open(os.path.join(ROOT, "roles", "mig", "vars", "main.yml")))["__mig_booted_test"]
    driver_test = yaml.safe_load(open(os.path.join(ROOT, "roles", "driver", "vars", "main.yml")))["__driver_booted_test"]
    assert booted_test == driver_test
    assert host.run(booted_test).rc == 0
    holding = host.run("(flock /run/lock/gpufleet.lock sleep 5 >/dev/null 2>&1 &); sleep 0.5; " + booted_test)
    assert holding.rc != 0, holding.stdout
