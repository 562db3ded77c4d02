# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The boot units take the node lock that a run's first node call and its MIG apply wait for: the same path as
module_utils/_run_lease.NODE_LOCK, through flock(1), around the whole command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils._run_lease import NODE_LOCK

ROOT = Path(__file__).resolve().parents[3]
BOOT_UNITS = (
    "roles/mig/templates/gpufleet-mig.service.j2",
    "roles/cdi/templates/gpufleet-cdi-refresh.service.j2",
    "roles/verify/templates/gpufleet-verify-boot.service.j2",
)


@pytest.mark.parametrize("unit", BOOT_UNITS)
def test_the_boot_unit_runs_under_the_node_lock(unit: str) -> None:
    starts = re.findall(r"^ExecStart=(.*)$", (ROOT / unit).read_text(), re.MULTILINE)
    assert len(starts) == 1, starts
    # The command is a list of words that gpufleet.nvidia.systemd_exec joins: flock and the lock come first.
    words = re.match(r"""\{\{ \(?\[(["'])/usr/bin/flock\1, (["'])([^"']+)\2[,\]]""", starts[0])
    assert words is not None and words.group(3) == NODE_LOCK, starts[0]
