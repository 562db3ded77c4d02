"""gpufleet.nvidia.driver on a Debian node: Debian's real packages from the local mirror.

The node is a systemd container with a Debian kernel installed; its running
kernel is the host's. Expectations are read from the inventory and the node.
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))

# pylint: disable=wrong-import-position
from driver_checks import (
    DKMS_MODULE,
    KERNEL_MODULE,
    KEYRING,
    NO_REBOOT_MARKER,
    NOUVEAU_FILE,
    PIN_FILE,
    SOURCES_FILE,
    UNATTENDED_FILE,
    driver_packages,
    expected_version,
    held,
    installed_kernels,
    installed_packages,
    upstream,
    variables,
)

FLAVOUR = "proprietary"  # both nodes: Debian 12 declares it, auto chooses it for the V100s
COMPUTE_SET = ["nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced"]


def test_the_exact_version_is_installed(host):
    version = expected_version(host)
    installed = installed_packages(host)
    missing = [p for p in COMPUTE_SET if p not in installed]
    assert not missing, "not installed: %s" % missing
    wrong = {p: installed[p] for p in COMPUTE_SET if p != "nvidia-persistenced" and upstream(installed[p]) != version}
    assert not wrong, "not at %s: %s" % (version, wrong)
    assert "nvidia-open-kernel-dkms" not in installed


def test_every_package_of_the_driver_is_held(host):
    version = expected_version(host)
    expected = set(driver_packages(host, version)) | {"nvidia-persistenced"}
    assert len(expected) > len(COMPUTE_SET), "the driver's dependencies were not found"
    assert expected <= held(host), "not held: %s" % sorted(expected - held(host))


def test_apt_is_pinned_to_the_version(host):
    version = expected_version(host)
    pin = host.file(PIN_FILE).content_string
    assert "Pin: version %s-*" % version in pin and "Pin-Priority: 1001" in pin
    policy = host.check_output("apt-cache policy nvidia-smi")
    installed_line = next(line for line in policy.splitlines() if line.strip().startswith("***"))
    assert upstream(installed_line.split()[1]) == version and installed_line.split()[2] == "1001", policy
    candidate = re.search(r"Candidate: (\S+)", policy).group(1)
    assert upstream(candidate) == version, policy


def test_the_repository_is_the_signed_local_mirror(host):
    sources = host.file(SOURCES_FILE).content_string
    mirror = "%s/%s" % (variables(host)["gpufleet_test_mirror_url"], variables(host)["test_mirror_repository"])
    assert "deb [signed-by=%s] %s " % (KEYRING, mirror) in sources
    assert host.file(KEYRING).is_file and host.file(KEYRING).mode == 0o644
    assert mirror in host.check_output("apt-cache policy nvidia-kernel-dkms")


def test_unattended_upgrades_leave_the_driver_alone(host):
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    patterns = re.findall(r'Unattended-Upgrade::Package-Blacklist:: "([^"]+)";', dump)
    assert patterns and host.file(UNATTENDED_FILE).exists
    # unattended-upgrades matches each entry as a regular expression from the package name's start.
    for package in driver_packages(host, expected_version(host)):
        assert any(re.match(p, package) for p in patterns), "%s is not blacklisted" % package


def test_nouveau_is_blacklisted_in_every_initramfs(host):
    content = host.file(NOUVEAU_FILE).content_string
    assert "blacklist nouveau" in content and "options nouveau modeset=0" in content
    for kernel in installed_kernels(host):
        listing = host.check_output("lsinitramfs /boot/initrd.img-%s", kernel)
        assert "etc/modprobe.d/gpufleet-blacklist-nouveau.conf" in listing, kernel


def test_the_persistence_daemon_is_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled


def test_every_installed_kernel_has_headers_and_the_module(host):
    version = expected_version(host)
    kernels = installed_kernels(host)
    assert kernels, "the test node has no installed kernel to build for"
    status = host.check_output("dkms status")
    for kernel in kernels:
        assert host.file("/lib/modules/%s/build/Makefile" % kernel).exists, "no headers for %s" % kernel
        assert "%s/%s, %s, x86_64: installed" % (DKMS_MODULE[FLAVOUR], version, kernel) in status, status
        module = host.check_output("modinfo -k %s -F version %s", kernel, KERNEL_MODULE)
        assert module == version, (kernel, module)


def test_the_headers_the_node_lacked_came_with_the_driver_in_one_apt_transaction(host):
    """apt's own history: the transaction that installed a kernel's headers also installed the DKMS package, so
    DKMS built from whichever postinst ran last, and the node paid for one resolution, one download and one round
    of triggers."""
    history = host.file("/var/log/apt/history.log").content_string
    transactions = [block for block in history.split("\n\n") if "Start-Date:" in block]
    checked = []
    for kernel in installed_kernels(host):
        headers = [block for block in transactions if re.search(r"^Install: .*\blinux-headers-%s:" % re.escape(kernel), block, re.MULTILINE)]
        if not headers:
            continue  # the image came with them
        checked.append(kernel)
        changes = " ".join(line for line in headers[0].splitlines() if line.startswith(("Install:", "Upgrade:", "Downgrade:")))
        assert re.search(r"\bnvidia(-open)?-kernel-dkms:", changes), (kernel, headers[0])
    assert checked, "no kernel's headers were installed by the role on this node: the check proved nothing"


def test_the_module_built_is_the_one_the_repository_ships(host):
    """One node builds the real NVIDIA module; the other the test ground's stand-in, unknown to the role."""
    for kernel in installed_kernels(host):
        fields = {field: host.check_output("modinfo -k %s -F %s %s", kernel, field, KERNEL_MODULE) for field in ("license", "alias", "description")}
        if variables(host)["test_module"] == "nvidia":
            # The real module: NVIDIA's licence and its PCI aliases (vendor 10DE, display class).
            assert fields["license"] == "NVIDIA", (kernel, fields["license"])
            assert "pci:v000010DEd" in fields["alias"], (kernel, fields["alias"][:200])
        else:
            assert "stand-in" in fields["description"] and not fields["alias"], (kernel, fields)


def test_the_running_kernel_is_left_alone(host):
    running = host.check_output("uname -r")
    assert running not in installed_kernels(host)
    assert not host.file("/lib/modules/%s" % running).exists


def test_a_reboot_is_reported_and_not_done(host):
    assert host.file(NO_REBOOT_MARKER).exists, "the node rebooted"
    assert host.file("/run/reboot-required").exists
    assert "nvidia-driver" in host.file("/run/reboot-required.pkgs").content_string
    # The simulated GPUs still run the old driver: that is why the reboot is required.
    nvml = host.ansible("gpufleet.nvidia.nvml_info", check=False)["nvml"]
    assert nvml["status"] == "ok" and nvml["driver_version"] != expected_version(host)


def test_the_simulated_nvml_stays_first_in_the_loader_path(host):
    libraries = [line.split("=>")[-1].strip() for line in host.check_output("ldconfig -p").splitlines() if "libnvidia-ml.so.1 " in line]
    assert libraries[0].startswith("/usr/local/lib/"), libraries
    assert host.package("libnvidia-ml1").is_installed
