# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The driver check's judgement of the loaded driver: the pinned version, else the declared branch."""

from __future__ import annotations

from .remedies import Remedies
from .result import finding


def version_findings(loaded: str, pinned: str, branch: str, remedies: Remedies) -> list[dict[str, str]]:
    """A loaded driver (NVML's driver_version) against driver_version, or, with none pinned, driver_branch."""
    if pinned and loaded != pinned:
        return [finding("driver", "driver_version", "loaded driver {0} differs from the pinned driver_version {1}".format(loaded, pinned), remedies.driver)]
    if not pinned and branch and loaded.split(".", maxsplit=1)[0] != branch:
        return [finding("driver", "driver_branch", "loaded driver {0} is not in the declared branch R{1}".format(loaded, branch), remedies.driver)]
    return []


def kernels_without_module(listing: str | None, expected: str) -> list[dict[str, str]]:
    """One finding per installed kernel whose NVIDIA module is missing or not `expected`, from lines of
    `<kernel release><TAB><module version, empty when none>` (verify's `kernel_modules` read of /boot and modinfo).
    Such a kernel is what a kernel update that DKMS could not build for leaves behind: the next reboot into it, as
    the newest kernel the boot default, brings the node up without its GPUs."""
    found = []
    for line in (listing or "").splitlines():
        release, _tab, version = line.partition("\t")
        release, version = release.strip(), version.strip()
        if not release or version == expected:
            continue
        found.append(
            finding(
                "driver",
                "kernel " + release,
                "installed kernel {0} has {1} NVIDIA module, the driver is {2}: a reboot into it leaves the GPUs without their driver".format(
                    release, "no" if not version else "the " + version, expected
                ),
                "roll it with playbooks/kernel_roll.yml (which proves the module or removes the kernel), or remove it; "
                "with its headers installed, the driver layer builds the module (--tags driver)",
            )
        )
    return found


def summary(loaded: str, gpu_count: object, flavour: str | None = None) -> str:
    return "driver {0} loaded{1}, {2} GPU(s)".format(loaded, " ({0} modules)".format(flavour) if flavour else "", gpu_count)
