# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""What a finding tells the reader to do, where the answer depends on where the check ran.

The judgement is one; the repair is not. After an Ansible run the fix is the
layer's role; at the first boot of a baked image (gpufleet-verify-boot) it is
the node's own units, or a rebuilt image.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Remedies:
    driver: str  # the loaded driver is not the declared one
    cdi: str  # the CDI spec is missing, unreadable or stale
    mig: str  # the MIG layout is not applied (after "<what to do on GPU n>: ")
    kernel_log: str  # the kernel log could not be read
    services: str  # systemd did not answer
    policy: str  # the health policy is invalid


# Each remedy as (after a run, at boot): the two words for one problem side by side.
_REMEDIES = {
    "driver": (
        "run the driver layer, then reboot if it reports a reboot is required",
        "rebuild the image with the declared driver, or reboot into it",
    ),
    "cdi": (
        "regenerate the spec: run the cdi layer or restart its refresh unit",
        "regenerate the spec: systemctl restart nvidia-cdi-refresh.service (or gpufleet-cdi-refresh.service)",
    ),
    "mig": (
        "run the mig layer (--tags mig)",
        "systemctl restart gpufleet-mig.service (journalctl -u gpufleet-mig.service says why it did not apply)",
    ),
    "kernel_log": ("set verify_health_kernel_log to a readable kernel log (/dev/kmsg needs root)", "run the check as root"),
    "services": ("run verify where systemd manages the node", "run the check from its systemd unit"),
    "policy": ("fix verify_health_policy", "fix verify_health_policy and rebuild the image"),
}

RUN = Remedies(**{problem: words[0] for problem, words in _REMEDIES.items()})
BOOT = Remedies(**{problem: words[1] for problem, words in _REMEDIES.items()})
