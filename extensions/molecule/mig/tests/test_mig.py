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

import configparser
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
from ansible_collections.gpufleet.nvidia.plugins.module_utils import _mig  # noqa: E402
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import mig_expected  # noqa: E402

with open(os.path.join(SCENARIO, "files", "mig-parted-config.yaml"), encoding="utf-8") as _handle:
    CONFIG = yaml.safe_load(_handle)
ENTRIES = _mig.parse_config(CONFIG)
SEQUENCE = ("mixed", "split", "all-disabled")
PLAN_TASK = "Plan the change against the GPUs (reads NVML, changes nothing)"
APPLY_TASK = "Apply the MIG layout"
FINISH_TASK = "Finish the layout on the reset GPUs"


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
files += ["/usr/local/lib/gpufleet/gpufleet_mig/" + n for n in ("__init__.py", "_nvml.py", "_mig.py", "_mig_profiles.py")]
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
    done = subprocess.run(["podman", "exec", name, "python3", "-c", OBSERVE], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def show(name: str) -> dict[str, t.Any]:
    return json.loads(subprocess.run(["podman", "exec", name, "nvml-simctl", "show"], stdout=subprocess.PIPE,
                                     check=True, universal_newlines=True).stdout)


def hosts() -> list[str]:
    out = subprocess.run(["ansible-inventory", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "--list"],
                         stdout=subprocess.PIPE, check=True, universal_newlines=True)
    return sorted(json.loads(out.stdout)["gpu_nodes"]["hosts"])


def quiet_ansible_cfg() -> str:
    """Molecule's ansible.cfg without its extra callbacks (they would print into the JSON on stdout)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(os.environ["ANSIBLE_CONFIG"])
    if parser.has_section("defaults"):
        parser.remove_option("defaults", "callbacks_enabled")
    path = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp"), "ansible-verify.cfg")
    with open(path, "w", encoding="utf-8") as handle:
        parser.write(handle)
    return path


def playbook(label: str, check: bool = False) -> dict[str, t.Any]:
    """Run label.yml (the role alone) on every node; the JSON callback's output."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=quiet_ansible_cfg(),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "build", "collections"))
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    cmd = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], os.path.join(SCENARIO, "label.yml"),
           "-e", "mig_label=" + label] + (["--check"] if check else [])
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                         check=False, timeout=600)
    try:
        return json.loads(out.stdout)
    except ValueError:
        raise AssertionError("ansible-playbook printed no JSON: {0}\n{1}".format(out.stdout, out.stderr)) from None


def task(run: dict[str, t.Any], name: str, host: str) -> dict[str, t.Any]:
    for play in run["plays"]:
        for item in play["tasks"]:
            if item["task"]["name"] == name and host in item["hosts"]:
                return item["hosts"][host]
    raise AssertionError("task {0!r} did not run on {1}".format(name, host))


def done_steps(run: dict[str, t.Any], host: str) -> list[str]:
    """What a role run changed: the apply, then (after GPU resets) the finish."""
    finish = task(run, FINISH_TASK, host)
    return task(run, APPLY_TASK, host)["done"] + (finish.get("done", []) if not finish.get("skipped") else [])


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
        done = subprocess.run(["podman", "exec", name, "systemctl", "is-system-running", "--wait"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
        state = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        if state in ("running", "degraded"):
            break
        time.sleep(1)
    failed = subprocess.run(["podman", "exec", name, "systemctl", "--failed", "--no-pager"], stdout=subprocess.PIPE,
                            universal_newlines=True, check=False).stdout
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
    assert {"GPUFLEET_MIG_LABEL=all-balanced", "GPUFLEET_MIG_RESET=yes",
            "GPUFLEET_MIG_CONFIG=/etc/gpufleet/mig/config.json"} <= set(seen["env"].splitlines())
    for path, stat in seen["files"].items():
        assert stat is not None, path
        assert (stat["mode"], stat["uid"]) == (0o755 if path.endswith("gpufleet-mig") else 0o644, 0), path
    assert seen["assert_rc"] == 0  # gpufleet-mig assert: the node has the label


def test_boot_unit_is_enabled_and_ordered(host: t.Any, converged: dict[str, t.Any]) -> None:
    unit = converged[host.backend.host]["unit"]
    assert (unit["UnitFileState"], unit["Type"]) == ("enabled", "oneshot")
    assert {"nvidia-persistenced.service", "nvidia-fabricmanager.service"} <= set(unit["After"].split())
    assert {"kubelet.service", "containerd.service", "nvidia-dcgm.service", "gpufleet-cdi-refresh.service",
            "nvidia-cdi-refresh.service"} <= set(unit["Before"].split())


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
    assert (seen["unit"]["ActiveState"], seen["unit"]["Result"], seen["unit"]["ExecMainStatus"]) == \
        ("active", "success", "0")
    assert "done: GPU 0: create" in seen["journal"]
    assert_label_applied("all-balanced", seen["show"])


def test_the_boot_unit_ran_before_the_gpu_clients(host: t.Any, rebooted: dict[str, t.Any]) -> None:
    seen = rebooted[host.backend.host]
    assert int(seen["unit"]["ActiveEnterTimestampMonotonic"]) <= int(seen["dcgm"]["ExecMainStartTimestampMonotonic"])


# --- stage 3: mixed -> split -> all-disabled, each: --check, apply, apply again ---------------------
@pytest.fixture(scope="session")
def sequence(rebooted: dict[str, t.Any]) -> dict[str, dict[str, t.Any]]:
    del rebooted
    runs: dict[str, dict[str, t.Any]] = {}
    for label in SEQUENCE:
        before = {name: show(name) for name in hosts()}
        check = playbook(label, check=True)
        unchanged = {name: show(name) for name in hosts()}
        apply = playbook(label)
        after = {name: observe(name) for name in hosts()}
        again = playbook(label)
        runs[label] = dict(before=before, check=check, unchanged=unchanged, apply=apply, after=after, again=again)
    return runs


@pytest.mark.parametrize("label", SEQUENCE)
def test_sequence_check_mode_changes_nothing(host: t.Any, sequence: dict[str, t.Any], label: str) -> None:
    run, name = sequence[label], host.backend.host
    assert run["check"]["stats"][name]["failures"] == 0
    assert run["unchanged"][name] == run["before"][name]


@pytest.mark.parametrize("label", SEQUENCE)
def test_sequence_apply_does_what_check_mode_planned(host: t.Any, sequence: dict[str, t.Any], label: str) -> None:
    run, name = sequence[label], host.backend.host
    assert run["apply"]["stats"][name]["failures"] == 0, task(run["apply"], APPLY_TASK, name).get("msg")
    planned = task(run["check"], APPLY_TASK, name)["plan"]
    done = done_steps(run["apply"], name)
    assert done == ["GPU {0}: {1}".format(p["index"], step) for p in planned for step in p["steps"]]
    assert_label_applied(label, run["after"][name]["show"])


@pytest.mark.parametrize("label", SEQUENCE)
def test_sequence_is_idempotent(host: t.Any, sequence: dict[str, t.Any], label: str) -> None:
    run, name = sequence[label], host.backend.host
    stats = run["again"]["stats"][name]
    assert (stats["changed"], stats["failures"]) == (0, 0)
    assert task(run["again"], PLAN_TASK, name)["plan"]


@pytest.mark.parametrize("label", SEQUENCE)
def test_sequence_refreshed_cdi_and_restarted_clients(host: t.Any, sequence: dict[str, t.Any], label: str) -> None:
    seen = sequence[label]["after"][host.backend.host]
    # converge + one per applied label so far; never for check mode or a run without changes
    assert seen["cdi_refreshes"] == 1 + SEQUENCE.index(label) + 1
    assert (seen["dcgm"]["ActiveState"], seen["exporter"]["ActiveState"]) == ("active", "inactive")
    assert seen["env"].splitlines()[-2:] == ["GPUFLEET_MIG_LABEL=" + label, "GPUFLEET_MIG_RESET=yes"]


def test_split_kept_and_recut_an_instance(host: t.Any, sequence: dict[str, t.Any]) -> None:
    """mixed gave GPUs 4-5 two 3g instances; split keeps one and cuts it into 1c compute instances."""
    run, name = sequence["split"], host.backend.host
    plan = task(run["check"], APPLY_TASK, name)["plan"]
    assert [len(plan[i]["recompute"]) for i in (4, 5)] == [1, 1]
    kept = {gi["id"] for gi in run["before"][name]["gpus"][4]["gis"]} & \
        {gi["id"] for gi in run["after"][name]["show"]["gpus"][4]["gis"]}
    assert len(kept) == 1


# --- stage 4: NVML fails on the third create -------------------------------------------------
@pytest.fixture(scope="session")
def fault(sequence: dict[str, t.Any]) -> dict[str, t.Any]:
    del sequence  # runs after it: every GPU has MIG off now
    for name in hosts():
        subprocess.run(["podman", "exec", name, "nvml-simctl", "fault", "add",
                        "nvmlDeviceCreateGpuInstanceWithPlacement", "UNKNOWN", "--skip", "2", "--once"], check=True)
    failed = playbook("all-balanced")
    partial = {name: observe(name) for name in hosts()}
    rerun = playbook("all-balanced")
    after = {name: show(name) for name in hosts()}
    again = playbook("all-balanced")
    return dict(failed=failed, partial=partial, rerun=rerun, after=after, again=again)


def test_failure_names_what_was_done_and_not(host: t.Any, fault: dict[str, t.Any]) -> None:
    name = host.backend.host
    result = task(fault["failed"], APPLY_TASK, name)
    assert result["failed"] and fault["failed"]["stats"][name]["failures"] == 1
    assert [step for step in result["done"] if ": create " in step] and \
        len([step for step in result["done"] if ": create " in step]) == 2
    assert result["not_done"][0].startswith("GPU 0: create") and result["not_done"][-1].startswith("GPU 7: create")
    assert result["msg"].startswith(result["not_done"][0] + " failed: nvmlDeviceCreateGpuInstanceWithPlacement: "
                                    "Unknown Error (NVML_ERROR_UNKNOWN)")
    assert "Run again to converge" in result["msg"]
    gpus = fault["partial"][name]["show"]["gpus"]
    assert len(gpus[0]["gis"]) == 2 and all(g["gis"] == [] for g in gpus[1:])


def test_failure_restarted_the_clients(host: t.Any, fault: dict[str, t.Any]) -> None:
    assert fault["partial"][host.backend.host]["dcgm"]["ActiveState"] == "active"


def test_rerun_after_failure_converges(host: t.Any, fault: dict[str, t.Any]) -> None:
    name = host.backend.host
    done = done_steps(fault["rerun"], name)
    not_done = task(fault["failed"], APPLY_TASK, name)["not_done"]
    assert [s for s in done if ": create " in s] == [s for s in not_done if ": create " in s]
    assert_label_applied("all-balanced", fault["after"][name])
    assert fault["again"]["stats"][name]["changed"] == 0


# --- stage 5: a client still attached ------------------------------------------------------------
@pytest.fixture(scope="session")
def attached(fault: dict[str, t.Any]) -> dict[str, t.Any]:
    del fault
    where = {}
    for name in hosts():
        gpu = show(name)["gpus"][1]
        three = next(gi for gi in gpu["gis"] if gi["profile_name"].startswith("3g."))
        subprocess.run(["podman", "exec", name, "nvml-simctl", "process", "add", "--gpu", "1", "--pid", "4242",
                        "--used-memory", "1GiB", "--gi", str(three["id"]), "--ci", "0", "--name", "python3"],
                       check=True)
        where[name] = three["id"]
    before = {name: show(name) for name in hosts()}
    blocked = playbook("mixed")
    after = {name: observe(name) for name in hosts()}
    for name in hosts():
        subprocess.run(["podman", "exec", name, "nvml-simctl", "process", "clear"], check=True)
    return dict(where=where, before=before, blocked=blocked, after=after)


def test_attached_clients_are_named_and_nothing_changes(host: t.Any, attached: dict[str, t.Any]) -> None:
    name = host.backend.host
    result = task(attached["blocked"], APPLY_TASK, name)
    uuid = attached["before"][name]["gpus"][1]["uuid"]
    assert result["failed"]
    assert result["msg"] == (
        "GPU clients are still attached, so nothing was changed. Stop them (for services, list them in "
        "mig_gpu_clients) and run again: GPU 1 (NVIDIA A100-SXM4-40GB) ({0}): pid 4242 (not visible here, GPU "
        "instance {1} / compute instance 0, 1024 MiB)".format(uuid, attached["where"][name]))
    assert attached["after"][name]["show"] == attached["before"][name]
    assert attached["after"][name]["dcgm"]["ActiveState"] == "active"
