"""playbooks/kernel_roll.yml on two Debian 12 nodes, as dpkg, DKMS and the kernel's module index saw it.

Converge rolled both nodes, one at a time, to the newest kernel bookworm-backports offers: Debian's real kernel
image and headers, the driver's DKMS module (the test ground's stand-in source, 535.261.03) really built against
them, and proven with modinfo before the kernel became the boot default. Containers run the host's kernel, so
the reboot was left to the node's owner and the roll said so. Then the first node's DKMS build breaks for that
kernel (a kernel hook writes an #error into the kernel's generated config header, before DKMS's own hook builds):
the kernel is removed again, the node keeps its old kernel as the boot default, and the roll stops there, the
second node untouched. Last, check mode says what it would stage and changes nothing.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import testinfra

# The scenarios' shared helpers (../../_shared/stack.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_shared"))

# pylint: disable=wrong-import-position
from stack import scenario_playbook

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd()))
NODES = ["kroll-node1", "kroll-node2"]
DRIVER = "535.261.03"
BREAK_HOOK = "00gpufleet-test-break-build"
# The hook runs for the image (postinst.d) and for the headers (header_postinst.d), before DKMS's own hooks
# (run-parts' order), and breaks only the kernel it is given: the one the roll stages.
BREAK_SCRIPT = """#!/bin/sh
header=/usr/src/linux-headers-$1/include/generated/autoconf.h
[ "$1" = "$(cat /etc/gpufleet-test-break-kernel)" ] && [ -f "$header" ] || exit 0
grep -q gpufleet-test "$header" || echo '#error "gpufleet-test: this kernel breaks the driver build"' >>"$header"
"""


@functools.cache
def node(name: str):
    return testinfra.get_host("podman://" + name)


def name_of(host) -> str:
    return host.backend.get_hostname()


def original_kernel(host) -> str:
    """The kernel the node had before the roll (prepare wrote it down)."""
    return host.file("/var/lib/gpufleet-test/kernel-before").content_string.strip()


def newest_backports_kernel(host) -> str:
    show = host.check_output("apt-cache -o APT::Default-Release=bookworm-backports show --no-all-versions linux-image-amd64")
    depends = next(line for line in show.splitlines() if line.startswith("Depends: "))
    return depends.split()[1].removeprefix("linux-image-")


def installed_kernels(host) -> list[str]:
    return sorted(f.removeprefix("vmlinuz-") for f in host.file("/boot").listdir() if f.startswith("vmlinuz-"))


def module_version(host, kernel: str) -> str:
    result = host.run("modinfo -k %s -F version nvidia-current", kernel)
    return result.stdout.strip() if result.rc == 0 else ""


def boot_default(host) -> str:
    """The kernel Debian's own symlinks name as the default (linux-update-symlinks: /vmlinuz), which boot loaders
    configured on the symlink boot."""
    return host.check_output("readlink /vmlinuz").removeprefix("boot/vmlinuz-")


def kernel_roll(*args: str):
    return scenario_playbook(ROOT / "playbooks" / "kernel_roll.yml", *args, timeout=900)


# -- after converge ------------------------------------------------------------------------------------------------


def test_each_node_has_the_new_kernel_with_the_driver_module_built_for_it(host):
    new = newest_backports_kernel(host)
    assert installed_kernels(host) == sorted([original_kernel(host), new])
    assert module_version(host, new) == DRIVER
    assert module_version(host, original_kernel(host)) == DRIVER
    assert host.package("linux-headers-" + new).is_installed
    # Debian's own tools agree: DKMS lists the module installed for the new kernel, and it is the boot default.
    assert "installed" in host.check_output("dkms status -k %s", new)
    assert boot_default(host) == new


def test_the_gate_judged_the_driver_and_the_health_after_the_roll(host):
    report = json.loads(host.file("/var/lib/gpufleet/verify.json").content_string)
    layers = {check["layer"]: check["status"] for check in report["checks"]}
    assert layers["driver"] == "pass", report["summary"]
    assert layers["health"] in ("pass", "warn"), report["summary"]


# -- a kernel DKMS cannot build the driver for -----------------------------------------------------------------------


def test_a_kernel_the_driver_does_not_build_for_stops_the_roll_and_is_never_the_default():
    first, second = node("kroll-node1"), node("kroll-node2")
    new = newest_backports_kernel(first)
    old = original_kernel(first)
    for host in (first, second):
        host.run_expect([0], "apt-get purge -y -q linux-image-%s linux-headers-%s", new, new)
        assert installed_kernels(host) == [old]
        assert boot_default(host) == old
    first.run_expect([0], "printf %s > /etc/gpufleet-test-break-kernel", new)
    for hooks in ("/etc/kernel/postinst.d", "/etc/kernel/header_postinst.d"):
        first.run_expect([0], "mkdir -p %s && printf '%%s' %s > %s/%s && chmod 0755 %s/%s", hooks, BREAK_SCRIPT, hooks, BREAK_HOOK, hooks, BREAK_HOOK)

    run = kernel_roll()
    out = " ".join(run.stdout.split())
    assert run.returncode != 0, run.stdout[-3000:]
    # The message names the kernel, the driver, and the build's failing line.
    assert "kernel {0} cannot carry the NVIDIA {1} module".format(new, DRIVER) in out, out[-3000:]
    assert "gpufleet-test: this kernel breaks the driver build" in out
    assert "the node keeps booting" in out
    assert "The node was not taken out of service" in out
    # kroll-node1 keeps its kernel as the boot default, with nothing of the new one left.
    assert installed_kernels(first) == [old]
    assert boot_default(first) == old
    assert not first.package("linux-image-" + new).is_installed
    assert not first.package("linux-headers-" + new).is_installed
    assert not first.file("/lib/modules/" + new).exists
    assert module_version(first, old) == DRIVER
    assert not first.file("/var/lib/gpufleet/upgrade.json").exists
    # The roll stopped there: kroll-node2 was not touched.
    assert "Not touched: kroll-node2." in out
    assert installed_kernels(second) == [old]
    assert not second.package("linux-headers-" + new).is_installed


def driver_check(host) -> dict:
    report = json.loads(host.file("/var/lib/gpufleet/verify.json").content_string)
    return next(check for check in report["checks"] if check["layer"] == "driver")


def test_a_kernel_installed_beside_the_roll_is_a_verify_finding_and_the_next_roll_removes_it():
    """What unattended-upgrades leaves when DKMS cannot build for the new kernel: installed, the boot default,
    without the module. Verify names it; the next roll tries to prove it, cannot, and removes it."""
    first = node("kroll-node1")
    new, old = newest_backports_kernel(first), original_kernel(first)
    install = first.run(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -t bookworm-backports linux-image-%s linux-headers-%s", new, new
    )
    # DKMS's build fails in the kernel's hooks: apt leaves the kernel unpacked, not configured.
    assert install.rc != 0 and "Errors were encountered while processing" in install.stdout, install.stdout[-2000:]
    assert installed_kernels(first) == sorted([old, new])
    assert boot_default(first) == new

    gate = scenario_playbook(Path(__file__).resolve().parents[1] / "gate.yml", "--limit", "kroll-node1")
    assert gate.returncode == 0, gate.stdout[-3000:]
    driver = driver_check(first)
    assert driver["status"] == "fail"
    assert [f["message"] for f in driver["findings"]] == [
        "installed kernel {0} has no NVIDIA module, the driver is {1}: a reboot into it leaves the GPUs without their driver".format(new, DRIVER)
    ]

    run = kernel_roll("--limit", "kroll-node1")
    out = " ".join(run.stdout.split())
    assert run.returncode != 0, run.stdout[-3000:]
    assert "kernel {0} cannot carry the NVIDIA {1} module".format(new, DRIVER) in out
    assert installed_kernels(first) == [old]
    assert boot_default(first) == old
    assert first.run("dpkg --audit").stdout.strip() == ""  # nothing half-configured is left

    gate = scenario_playbook(Path(__file__).resolve().parents[1] / "gate.yml", "--limit", "kroll-node1")
    assert driver_check(first)["status"] == "pass", gate.stdout[-3000:]


def test_check_mode_says_what_it_would_stage_and_changes_nothing():
    second = node("kroll-node2")
    new = newest_backports_kernel(second)
    run = kernel_roll("--check", "--diff", "--limit", "kroll-node2")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "stage kernel {0} (dkms), prove the NVIDIA {1} module for it".format(new, DRIVER) in " ".join(run.stdout.split())
    assert installed_kernels(second) == [original_kernel(second)]
    assert not second.package("linux-image-" + new).is_installed
