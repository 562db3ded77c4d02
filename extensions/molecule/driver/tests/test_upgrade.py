"""The one-variable upgrade: 535.216.03 (bookworm-backports) -> 535.261.03 (bookworm), holds back in place.

Only the node that declares test_upgrade_from (Debian 12) was upgraded.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# pylint: disable=wrong-import-position
from driver_checks import (
    PIN_FILE,
    driver_packages,
    held,
    installed_kernels,
    installed_packages,
    run_converge,
    snapshot,
    upstream,
    variables,
)


@pytest.fixture(autouse=True)
def upgraded_node(host):
    if "test_upgrade_from" not in variables(host):
        pytest.skip("this node was installed fresh, not upgraded")


def test_the_new_version_replaced_the_old_one(host):
    new, old = variables(host)["driver_version"], variables(host)["test_upgrade_from"]
    installed = installed_packages(host)
    assert upstream(installed["nvidia-kernel-dkms"]) == new
    assert "bpo12" not in installed["nvidia-kernel-dkms"]
    assert not driver_packages(host, old), "left at %s: %s" % (old, driver_packages(host, old))


def test_the_holds_are_back_in_place(host):
    new = variables(host)["driver_version"]
    expected = set(driver_packages(host, new)) | {"nvidia-persistenced"}
    assert "nvidia-kernel-dkms" in expected and expected <= held(host), sorted(expected - held(host))


def test_the_pin_follows_the_new_version(host):
    new, old = variables(host)["driver_version"], variables(host)["test_upgrade_from"]
    pin = host.file(PIN_FILE).content_string
    assert "Pin: version %s-*" % new in pin and old not in pin


def test_dkms_rebuilt_the_module_for_every_kernel(host):
    new, old = variables(host)["driver_version"], variables(host)["test_upgrade_from"]
    status = host.check_output("dkms status")
    assert old not in status, status
    for kernel in installed_kernels(host):
        assert "nvidia-current/%s, %s, x86_64: installed" % (new, kernel) in status, status
        assert host.check_output("modinfo -k %s -F version nvidia-current", kernel) == new


def test_the_node_still_reports_its_reboot(host):
    assert host.file("/run/gpufleet-test-no-reboot").exists, "the node rebooted"
    assert host.file("/run/reboot-required").exists


def test_a_driver_that_fails_to_build_is_rolled_back(host):
    """A real DKMS build failure, in seconds.

    Debian 12's open modules do not build against its current kernel; the
    stand-in repository's open-module package fails to compile the same way,
    on purpose. Switching to it must fail with the DKMS error and leave the
    node exactly as it was: the proprietary driver installed, held, pinned,
    with its module.
    """
    new = variables(host)["driver_version"]
    before = snapshot(host)
    result = run_converge(host.backend.get_hostname(), {"driver_kernel_module": "open"})
    after = snapshot(host)
    assert result.returncode != 0
    assert "Installing the NVIDIA driver %s (open kernel modules) failed" % new in result.stdout, result.stdout[-3000:]
    assert "Rolled back to %s" % new in result.stdout
    assert "End of the DKMS build log" in result.stdout
    assert before == after
    assert "nvidia-open-kernel-dkms" not in installed_packages(host)
    for kernel in installed_kernels(host):
        assert host.check_output("modinfo -k %s -F version nvidia-current", kernel) == new
