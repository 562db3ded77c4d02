# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The node's NVIDIA PCI functions as GPU Feature Discovery reads them for its
vGPU labels (NVIDIA/k8s-device-plugin internal/vgpu/pciutil.go): every
function under /sys/bus/pci/devices whose vendor is NVIDIA's, with its class
and the start of its configuration space. Read on the node (node_reads_info's
nvidia_pci, and gpufleet-node-labels at boot); judged on either side by
_gfd_labels.vgpu_labels. Python 3.8 standard library only.
"""

from __future__ import annotations

import os
import typing as t

PCI_DEVICES_ROOT = "/sys/bus/pci/devices"
NVIDIA_VENDOR = "0x10de"
# The standard header and every capability in the list live in the first 256
# bytes; GFD refuses a shorter read (an unprivileged read of config gives 64).
CONFIG_BYTES = 256


def read_nvidia_functions(root: str = PCI_DEVICES_ROOT) -> dict[str, t.Any]:
    """{"devices": [{address, class, config (hex), config_length}], "error": None or why it stopped}.

    Like GFD, the first function that cannot be read ends the read with an error.
    """
    try:
        names = sorted(os.listdir(root))
    except OSError as error:
        return {"devices": [], "error": "unable to read PCI bus devices: {0}".format(error.strerror or error)}
    devices = []
    for address in names:
        path = os.path.join(root, address)
        try:
            with open(os.path.join(path, "vendor"), encoding="ascii", errors="replace") as handle:
                vendor = handle.read().strip()
            if vendor != NVIDIA_VENDOR:
                continue
            with open(os.path.join(path, "class"), encoding="ascii", errors="replace") as handle:
                pci_class = handle.read()[0:4]
            with open(os.path.join(path, "config"), "rb") as handle:
                config = handle.read(CONFIG_BYTES)
        except OSError as error:
            return {"devices": devices, "error": "unable to read PCI device {0}: {1}".format(address, error.strerror or error)}
        devices.append({"address": address, "class": pci_class, "config": config.hex(), "config_length": len(config)})
    return {"devices": devices, "error": None}
