# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Kubernetes: which cri-tools (crictl) minors work with which Kubernetes
minors, what the NVIDIA device plugin's strategies need, and the DRA driver's
minimums."""

from __future__ import annotations

_CRI_TOOLS = "kubernetes-sigs/cri-tools@ba03eabc:README.md"

# cri-tools' compatibility matrix: a Kubernetes minor in [first, last] works
# with any cri-tools minor in the same group ("last": None = open-ended);
# Kubernetes minors older than every group need their own cri-tools minor.
# Within a group the README still recommends the same minor ("new features
# added to the CRI may not be fully supported if they diverge"): a warning.
CRICTL_GROUPS = (
    {"first": "1.27", "last": None, "source": _CRI_TOOLS, "checked": "2026-11-25"},
    {"first": "1.16", "last": "1.26", "source": _CRI_TOOLS, "checked": "2026-11-25"},
)

# The NVIDIA device plugin's device-list strategies and what each needs from
# the node. `envvar` hands GPUs over in NVIDIA_VISIBLE_DEVICES, which only the
# NVIDIA Container Runtime acts on: nvidia must be the engine's default
# runtime, or the GPU pods must select an nvidia RuntimeClass.
DEVICE_PLUGIN_STRATEGIES = (
    {
        "strategy": "envvar",
        "needs": "nvidia_runtime",
        "source": "NVIDIA/k8s-device-plugin@1b826acc:README.md (Prerequisites; deviceListStrategy)",
        "checked": "2026-11-25",
    },
)

# What NVIDIA's DRA driver for GPUs (k8s-dra-driver-gpu) needs. The standalone
# driver asks for Kubernetes 1.32 with DRA enabled; the GPU Operator's DRA
# workflow asks for Kubernetes 1.34.2 and GPU driver 580 or later.
DRA_MINIMUMS = (
    {
        "component": "kubernetes",
        "minimum": "1.32",
        "for": "k8s-dra-driver-gpu (DRA enabled)",
        "source": "NVIDIA/k8s-dra-driver-gpu@22407113:README.md",
        "checked": "2026-11-25",
    },
    {
        "component": "kubernetes",
        "minimum": "1.34.2",
        "for": "the GPU Operator's DRA workflow",
        "source": "NVIDIA/cloud-native-docs@52dcb7b8:gpu-operator/dra-intro-install.rst",
        "checked": "2026-11-25",
    },
    {
        "component": "driver",
        "minimum": "580",
        "for": "the GPU Operator's DRA workflow",
        "source": "NVIDIA/cloud-native-docs@52dcb7b8:gpu-operator/dra-intro-install.rst",
        "checked": "2026-11-25",
    },
)
