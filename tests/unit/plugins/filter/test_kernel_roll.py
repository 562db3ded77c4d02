"""The kernel roll's filters: settings, the kernel offered, the node's plan and the proof.

The node reads are shaped as driver_info returns them (DriverStateReader.read), and apt-cache's output is
Debian's own (bookworm with bookworm-backports, as the kernel_roll scenario's nodes see it)."""

from __future__ import annotations

import copy

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.kernel_roll import (
    kernel_roll_plan,
    kernel_roll_proof,
    kernel_roll_release,
    kernel_roll_settings_errors,
)
from ansible_collections.gpufleet.nvidia.plugins.filter.upgrade import upgrade_plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import drivers

OLD, NEW = "6.1.0-57-amd64", "6.12.95+deb12-amd64"
DECLARATION = {
    "release": NEW,
    "metapackage": "linux-image-amd64",
    "suite": "bookworm-backports",
    "image_prefix": "linux-image-",
    "headers_prefix": "linux-headers-",
}
SETTINGS = {
    "kernel_roll_release": "",
    "kernel_roll_metapackage": "linux-image-amd64",
    "kernel_roll_suite": "",
    "kernel_roll_image_prefix": "linux-image-",
    "kernel_roll_headers_prefix": "linux-headers-",
}
SHOW = """Package: linux-image-amd64
Source: linux-signed-amd64 (6.12.95+1~bpo12+1)
Version: 6.12.95-1~bpo12+1
Depends: linux-image-6.12.95+deb12-amd64 (= 6.12.95-1~bpo12+1)
Description: Linux for 64-bit PCs (meta-package)
"""
POLICY = """linux-headers-6.12.95+deb12-amd64:
  Installed: (none)
  Candidate: 6.12.95-1~bpo12+1
  Version table:
     6.12.95-1~bpo12+1 100
linux-image-6.12.95+deb12-amd64:
  Installed: (none)
  Candidate: 6.12.95-1~bpo12+1
  Version table:
     6.12.95-1~bpo12+1 100
"""


def driver(running: str = OLD, staged: dict | None = None, dkms: bool = True, secure_boot: bool = False, **changes) -> dict:
    """driver_info's result: the driver's DKMS module for the running kernel, `NEW` staged as given."""
    kernel = {"release": OLD, "running": running == OLD, "headers": True, "module": "nvidia-current", "module_version": "535.261.03", "modules_absent": []}
    result = {
        "package_manager": "apt",
        "packages": [{"name": "nvidia-kernel-dkms", "version": "535.261.03-1", "held": True, "configured": True}],
        "kernels": {
            "running": running,
            "running_installed": running == OLD,
            "installed": [kernel],
            "running_sig_key": "AA:BB" if secure_boot else None,
            "staged": [dict({"release": NEW, "bootable": False, "headers": False, "module": None, "module_version": None, "sig_key": None}, **(staged or {}))],
        },
        "dkms": [{"module": "nvidia-current", "version": "535.261.03", "kernel": OLD, "arch": "x86_64", "state": "installed"}] if dkms else None,
        "secure_boot": {"enabled": secure_boot},
        "container": None,
    }
    result.update(changes)
    return result


PROVEN = {"bootable": True, "headers": True, "module": "nvidia-current", "module_version": "535.261.03"}


def test_settings_name_each_bad_variable_and_the_kernel_too_old_for_the_branch():
    assert kernel_roll_settings_errors(SETTINGS, "580", drivers.KERNEL_MINIMUM["value"]) == []
    assert kernel_roll_settings_errors(dict(SETTINGS, kernel_roll_release=NEW), "580", drivers.KERNEL_MINIMUM["value"]) == []
    errors = kernel_roll_settings_errors(
        dict(SETTINGS, kernel_roll_release="latest", kernel_roll_metapackage="", kernel_roll_suite="bad suite"), "580", drivers.KERNEL_MINIMUM["value"]
    )
    assert [e.split(":", 1)[0] for e in errors] == ["kernel_roll_release", "kernel_roll_metapackage", "kernel_roll_suite"]
    assert "uname -r" in errors[0]
    (old,) = kernel_roll_settings_errors(dict(SETTINGS, kernel_roll_release="4.14.0-1-amd64"), "580", drivers.KERNEL_MINIMUM["value"])
    assert "older than Linux 4.15, the oldest kernel NVIDIA's R580 modules support" in old
    # A branch before the one whose README was read is not judged.
    assert kernel_roll_settings_errors(dict(SETTINGS, kernel_roll_release="4.14.0-1-amd64"), "535", drivers.KERNEL_MINIMUM["value"]) == []


def test_the_release_is_the_declared_one_or_the_metapackages_newest():
    assert kernel_roll_release("", DECLARATION) == NEW
    assert kernel_roll_release(SHOW, dict(DECLARATION, release="")) == NEW
    assert kernel_roll_release("Package: linux-image-amd64\nDepends: firmware-linux-free\n", dict(DECLARATION, release="")) == ""


def test_a_new_kernel_is_staged_with_its_headers_and_proven_before_the_reboot():
    first = kernel_roll_plan(driver(), DECLARATION)
    assert first["ask"] == ["linux-headers-" + NEW, "linux-image-" + NEW]
    plan = kernel_roll_plan(driver(), DECLARATION, POLICY)
    assert plan["error"] == ""
    assert (plan["needed"], plan["stage"], plan["install_image"], plan["reboot"]) == (True, True, True, True)
    assert plan["module_packages"] == ["linux-headers-" + NEW] and plan["expected_module"] == "535.261.03"
    assert plan["remove_on_failure"] == ["linux-headers-" + NEW, "linux-image-" + NEW]
    # The upgrade roll takes its findings as the kernel layer's: the node is pending.
    assert upgrade_plan([{"layer": "kernel", "findings": plan["findings"]}], ["kernel"])["pending_layers"] == ["kernel"]


def test_a_proven_installed_kernel_needs_only_the_reboot_and_a_container_needs_nothing():
    plan = kernel_roll_plan(driver(staged=PROVEN), DECLARATION, "")
    assert (plan["needed"], plan["stage"], plan["reboot"]) == (True, False, True)
    contained = driver(running="6.18.44-host", staged=PROVEN, container="podman")
    plan = kernel_roll_plan(contained, DECLARATION, "", "a container (podman)")
    assert (plan["needed"], plan["reboot_required"], plan["findings"]) == (False, True, [])
    assert "the reboot into it is not ours" in plan["summary"]
    # The new kernel installed beside the roll, without the module (a failed DKMS build in its hook): staged again.
    installed = driver(running="6.18.44-host", staged={"bootable": True, "headers": True}, container="podman")
    installed["kernels"]["installed"].append({"release": NEW, "running": False, "headers": True, "module": None, "module_version": None})
    plan = kernel_roll_plan(installed, DECLARATION, POLICY, "a container (podman)")
    assert plan["error"] == "" and (plan["needed"], plan["stage"], plan["install_image"]) == (True, True, False)
    assert plan["expected_module"] == "535.261.03" and plan["remove_on_failure"] == ["linux-headers-" + NEW, "linux-image-" + NEW]
    # The running kernel is the declared one: nothing to do.
    assert kernel_roll_plan(driver(running=NEW), DECLARATION, "")["needed"] is False


def test_a_kernel_without_headers_or_module_package_offered_is_refused_before_anything_changes():
    policy = POLICY.replace("  Candidate: 6.12.95-1~bpo12+1\n  Version table:\n     6.12.95-1~bpo12+1 100\nlinux-image", "  Candidate: (none)\nlinux-image", 1)
    plan = kernel_roll_plan(driver(), DECLARATION, policy)
    assert "offer no linux-headers-{0} for kernel {0} in bookworm-backports".format(NEW) in plan["error"]
    assert "which keeps " + OLD in plan["error"]
    # Ubuntu's precompiled modules: the package of the new kernel, named after the running kernel's.
    ubuntu = driver(dkms=False, packages=[{"name": "linux-modules-nvidia-580-server-open-" + OLD, "version": "6.1.0-57.1"}])
    plan = kernel_roll_plan(ubuntu, DECLARATION, "linux-image-{0}:\n  Installed: (none)\n  Candidate: 1\n".format(NEW))
    assert plan["build"] == "precompiled"
    assert "no linux-modules-nvidia-580-server-open-" + NEW in plan["error"]
    assert "after some days" in plan["error"]


@pytest.mark.parametrize(
    ("node", "why"),
    [
        (driver(package_manager="dnf"), "installs kernels with apt"),
        (
            driver(kernels={"running": OLD, "running_installed": True, "staged": [], "installed": [{"release": OLD, "running": True, "module_version": None}]}),
            "the running kernel 6.1.0-57-amd64 has no NVIDIA module",
        ),
        (driver(dkms=False), "neither from DKMS nor from a linux-modules-nvidia package"),
    ],
)
def test_a_node_that_cannot_prove_any_kernel_is_refused_by_name(node, why):
    assert why in kernel_roll_plan(node, DECLARATION, POLICY)["error"]


def test_the_metapackage_offering_nothing_is_named():
    plan = kernel_roll_plan(driver(), dict(DECLARATION, release=""), POLICY)
    assert plan["error"].startswith("kernel_roll_metapackage linux-image-amd64 offers no kernel image in bookworm-backports")


def test_the_proof_names_the_kernel_the_failing_build_line_and_what_the_node_keeps():
    plan = kernel_roll_plan(driver(), DECLARATION, POLICY)
    assert kernel_roll_proof(driver(staged=PROVEN), plan) == ""
    make_log = (
        "DKMS make.log for nvidia-current-535.261.03\n  CC [M]  nvidia.o\n"
        './include/generated/autoconf.h:3400:2: error: #error "gpufleet-test: this kernel breaks the driver build"\n'
        "make[2]: *** [scripts/Makefile.build:243: nvidia.o] Error 1\n"
    )
    message = kernel_roll_proof(driver(), plan, make_log, "", plan["remove_on_failure"])
    assert message.startswith("kernel {0} cannot carry the NVIDIA 535.261.03 module: kernel {0} has no NVIDIA module".format(NEW))
    assert "autoconf.h:3400:2: error: #error" in message and "CC [M]" not in message
    assert "removed again: linux-headers-{0}, linux-image-{0}".format(NEW) in message
    assert "the node keeps booting {0} and stays in service".format(OLD) in message
    assert kernel_roll_proof(driver(), plan, "", "apt-get install failed: E: Sub-process returned an error", []).count("apt-get install failed") == 1
    assert kernel_roll_proof(driver(), plan, reason_only=True) == "kernel {0} has no NVIDIA module, the node's driver is 535.261.03".format(NEW)
    other = kernel_roll_proof(driver(staged=dict(PROVEN, module_version="550.163.01")), plan, reason_only=True)
    assert "has the 550.163.01 NVIDIA module" in other


def test_under_secure_boot_the_module_must_be_signed_with_the_running_modules_key():
    plan = kernel_roll_plan(driver(secure_boot=True), DECLARATION, POLICY)
    signed = dict(PROVEN, sig_key="AA:BB")
    assert kernel_roll_proof(driver(staged=signed, secure_boot=True), plan) == ""
    unsigned = kernel_roll_proof(driver(staged=PROVEN, secure_boot=True), plan, reason_only=True)
    assert "Secure Boot is on" in unsigned and "not signed" in unsigned
    other = kernel_roll_proof(driver(staged=dict(PROVEN, sig_key="EE:FF"), secure_boot=True), plan, reason_only=True)
    assert "signed with key EE:FF" in other and "(AA:BB)" in other


def test_bad_input_is_named():
    with pytest.raises(AnsibleFilterError, match="kernel_roll_plan: expected driver_info"):
        kernel_roll_plan("nope", DECLARATION)
    unread = copy.deepcopy(driver())
    unread["kernels"]["staged"] = []
    with pytest.raises(AnsibleFilterError, match="was not asked for the staged kernel"):
        kernel_roll_plan(unread, DECLARATION, POLICY)
