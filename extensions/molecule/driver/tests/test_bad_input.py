"""A bad declaration fails before anything changes, and says which variable to fix.

Each case runs the scenario's converge playbook on a converged node with one
bad variable; the node (apt configuration, packages, holds, DKMS) must be
exactly as before.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# pylint: disable=wrong-import-position
from driver_checks import run_converge, snapshot

CASES = [
    # (node, extra vars, what the message must say)
    ("driver-debian12", {"driver_branch": "58O"}, 'driver_branch "58O" is not a driver branch'),
    ("driver-debian12", {"driver_version": "535.999.99"}, "driver_version 535.999.99 is not offered"),
    # The V100s NVML lists run only the proprietary modules.
    ("driver-debian13", {"driver_kernel_module": "open"}, "driver_kernel_module: open cannot drive"),
    # No driver loaded: the declared models decide; Blackwell runs only the open modules.
    (
        "driver-debian13",
        {"driver_kernel_module": "proprietary", "driver_gpu_models": ["B200"]},
        "driver_kernel_module: proprietary cannot drive B200 (blackwell)",
    ),
]


@pytest.mark.parametrize("node,extra_vars,message", CASES, ids=[str(c[1]) for c in CASES])
def test_bad_declaration_fails_before_any_change(host, node, extra_vars, message):
    if host.backend.get_hostname() != node:
        pytest.skip("case for %s" % node)
    unloaded = "driver_gpu_models" in extra_vars
    if unloaded:
        host.check_output("nvml-simctl set driver_loaded=0")
    try:
        before = snapshot(host)
        result = run_converge(node, extra_vars)
        after = snapshot(host)
    finally:
        if unloaded:
            host.check_output("nvml-simctl set driver_loaded=1")
    assert result.returncode != 0, result.stdout[-2000:]
    assert message in result.stdout, result.stdout[-3000:]
    assert "changed=0" in result.stdout
    assert before == after
