"""Bake without a GPU, then first boot on GPUs: what the first-boot units did.

`baked` is the baked node (Molecule's, converged by site.yml with
gpufleet_bake: true); `instance` is a container booted from the image that
side_effect.yml committed from it, on simulated GPUs. The instance is only
booted: nothing ran Ansible on it, so everything GPU-related found there is
the work of the units the roles installed in the bake. Both are reached
through podman directly (one exec per check, no Ansible round trip).
"""

from __future__ import annotations

import json

import pytest
import testinfra

BAKED = "bake-debian13"
FIRSTBOOT = "bake-firstboot-debian13"
DRIVER = "550.163.01"
SPEC = "/etc/cdi/nvidia.json"  # the cdi role's default format
BOOT_REPORT = "/var/lib/gpufleet/verify-boot.json"
UNITS = ("nvidia-persistenced.service", "gpufleet-mig.service", "gpufleet-cdi-refresh.service", "gpufleet-verify-boot.service")


@pytest.fixture(scope="module")
def baked():
    return testinfra.get_host("podman://" + BAKED)


@pytest.fixture(scope="module")
def instance():
    return testinfra.get_host("podman://" + FIRSTBOOT)


def sim_state(node) -> dict:
    return json.loads(node.check_output("nvml-simctl show"))


def unit(node, name: str) -> dict:
    out = node.check_output("systemctl show --property=ActiveState,Result,ExecMainStatus,UnitFileState " + name)
    return dict(line.split("=", 1) for line in out.splitlines())


# -- the bake ------------------------------------------------------------------


def test_bake_had_no_gpu_and_deferred_the_gpu_work(baked):
    assert not baked.file("/var/lib/nvml-sim").exists
    assert not baked.file("/usr/local/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists
    assert not baked.file("/proc/driver/nvidia").exists
    # The driver, toolkit, runtime and crictl are installed all the same.
    assert baked.package("libnvidia-ml1").version.startswith(DRIVER)
    assert baked.package("nvidia-kernel-dkms").version.startswith(DRIVER)
    assert baked.package("nvidia-container-toolkit-base").version.startswith("1.17.8")
    assert baked.file("/usr/local/bin/crictl").exists
    assert baked.service("containerd").is_enabled
    # No spec without a GPU: generating it is the refresh unit's job.
    assert not baked.file(SPEC).exists
    assert not baked.file(BOOT_REPORT).exists
    for name in UNITS:
        assert unit(baked, name)["UnitFileState"] == "enabled", name


def test_bake_report_defers_the_gpu_checks(baked):
    report = json.loads(baked.file("/var/lib/gpufleet/verify.json").content_string)
    checks = {c["layer"]: c for c in report["checks"]}
    for layer in ("driver", "cdi", "mig", "health"):
        assert checks[layer]["status"] == "deferred", checks[layer]
    for layer in ("container_toolkit", "container_runtime", "crictl"):
        assert checks[layer]["status"] == "pass", checks[layer]
    declaration = json.loads(baked.file("/etc/gpufleet/verify/boot.json").content_string)
    assert declaration["driver"] == {"version": DRIVER, "branch": "550"}
    assert declaration["cdi"] == {"spec": SPEC, "strategies": ["index", "uuid"]}
    assert declaration["mig"]["label"] == "all-disabled"
    assert declaration["persistence"] is True
    # The boot check judges the GPUs' health as the health layer would have.
    assert declaration["health"] == {
        "policy": {},
        "gpu_count": None,
        "kernel_log": "/dev/kmsg",
        "textfile": "/var/lib/prometheus/node-exporter/gpufleet-health.prom",
        "fabric_wait": 60,
        "persistenced": True,
        "fabricmanager": False,
    }


# -- the first boot ------------------------------------------------------------


def test_first_boot_units_succeeded(instance):
    failed = instance.check_output("systemctl list-units --failed --plain --no-legend")
    assert failed.strip() == "", failed
    for name in UNITS:
        state = unit(instance, name)
        assert state["Result"] == "success" and state["ExecMainStatus"] == "0", (name, state)
    assert unit(instance, "nvidia-persistenced.service")["ActiveState"] == "active"
    assert unit(instance, "gpufleet-mig.service")["ActiveState"] == "active"  # RemainAfterExit
    assert unit(instance, "gpufleet-verify-boot.service")["ActiveState"] == "active"


def test_persistence_mode_is_on(instance):
    # Off at power-on (firstboot/Containerfile.j2); nvidia-persistenced's unit turned it on.
    assert [g["persistence"] for g in sim_state(instance)["gpus"]] == [1] * 8


def test_mig_layout_was_applied(instance):
    # GPUs 0-3 power on with MIG on and 4 with an enable pending (applied by the boot):
    # the declared layout, all-disabled, was applied by gpufleet-mig.service.
    gpus = sim_state(instance)["gpus"]
    assert [(g["mig_current"], g["mig_pending"]) for g in gpus] == [(0, 0)] * 8
    journal = instance.check_output("journalctl --boot --unit gpufleet-mig.service --no-pager --output=cat")
    for index in range(5):
        assert "done: GPU {0}: disable MIG mode".format(index) in journal, journal


def test_cdi_spec_lists_the_simulated_gpus(instance):
    spec = instance.file(SPEC)
    assert spec.exists
    data = json.loads(spec.content_string)
    names = {d["name"] for d in data["devices"]}
    for gpu in sim_state(instance)["gpus"]:
        assert {str(gpu["index"]), gpu["uuid"]} <= names, gpu["index"]
    nodes = {n["path"] for d in data["devices"] for n in d["containerEdits"].get("deviceNodes", [])}
    assert "/dev/nvidia7" in nodes


def test_verify_boot_report_passes(instance):
    report = json.loads(instance.file(BOOT_REPORT).content_string)
    assert report["status"] == "pass", report
    assert report["boot_id"] == instance.file("/proc/sys/kernel/random/boot_id").content_string.strip()
    assert report["driver_version"] == DRIVER
    checks = {c["layer"]: c["status"] for c in report["checks"]}
    assert checks == {"driver": "pass", "persistence": "pass", "cdi": "pass", "mig": "pass", "health": "pass"}
    uuids = [g["uuid"] for g in sim_state(instance)["gpus"]]
    assert [g["uuid"] for g in report["gpus"]] == uuids


def test_verify_boot_finds_a_node_that_differs(instance):
    """The boot check is not a formality: the same command fails a GPU without persistence mode."""
    instance.check_output("nvml-simctl set persistence=0 --gpu 3")
    try:
        run = instance.run("gpufleet-verify-boot --report /tmp/verify-boot-test.json")
        assert run.rc == 1, run.stdout
        report = json.loads(instance.file("/tmp/verify-boot-test.json").content_string)
        persistence = next(c for c in report["checks"] if c["layer"] == "persistence")
        assert persistence["status"] == "fail"
        assert [f["subject"] for f in persistence["findings"]] == ["GPU 3"]
        assert "persistence mode off" in run.stdout
    finally:
        instance.check_output("nvml-simctl set persistence=1 --gpu 3")
