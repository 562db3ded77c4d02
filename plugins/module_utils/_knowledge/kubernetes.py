# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

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

# The device plugin's cdi-cri strategy hands CDI device names to the kubelet,
# which passes them to the engine in the CRI's CDIDevices field (KEP-4009,
# feature gate DevicePluginCDIDevices): the kubelet from the release where the
# gate is on by default (beta), the engine from the release that reads the field.
_KEP_4009 = "kubernetes/enhancements@3a8eb26:keps/sig-node/4009-add-cdi-devices-to-device-plugin-api/kep.yaml"
CDI_CRI_SUPPORT = (
    {
        "component": "kubernetes",
        "gated": "1.28",
        "first": "1.29",
        "stable": "1.31",
        "source": _KEP_4009 + " (alpha v1.28, beta v1.29, stable v1.31)",
        "checked": "2026-11-29",
    },
    {
        "component": "containerd",
        "first": "1.7.2",
        "source": "containerd/containerd#8519 (the backport of #8252 to release/1.7; v1.7.2's notes: \"CDI: Use CRI "
        'Config.CDIDevices field for CDI injection") ; kubernetes/kubernetes#126435',
        "checked": "2026-11-29",
    },
    {
        "component": "crio",
        "first": "1.28.0",
        "source": 'kubernetes/kubernetes#125210 ("CRI-O started using it in v1.28.0", cri-o/cri-o#6944)',
        "checked": "2026-11-29",
    },
)

# Security floors of the NVIDIA device plugin, each its own rule id. Bulletin
# 5659 (the Container Toolkit's CVE-2025-23266/23267) names the device plugin
# too: up to 0.17.2, only when its device-list strategy is cdi-annotations or
# cdi-cri (the plugin then runs the toolkit's CDI hooks itself).
_PSIRT_5659 = "NVIDIA/product-security@dbb4ada:2025/5659/5659.md (a_id 5659, rev 2.0.0 2025-08-12)"
DEVICE_PLUGIN_CVE_FLOORS = (
    {
        "cve": "CVE-2025-23266",
        "rule": "device_plugin_cve_2025_23266",
        "fixed": "0.17.3",
        "strategies": ("cdi-annotations", "cdi-cri"),
        "what": "a crafted container image can run code with elevated privileges through the CDI hooks; CVSS 9.0",
        "source": _PSIRT_5659,
        "checked": "2026-11-29",
    },
    {
        "cve": "CVE-2025-23267",
        "rule": "device_plugin_cve_2025_23267",
        "fixed": "0.17.3",
        "strategies": ("cdi-annotations", "cdi-cri"),
        "what": "the update-ldcache hook follows links out of the container; CVSS 8.5",
        "source": _PSIRT_5659,
        "checked": "2026-11-29",
    },
)

_DRA_PREREQUISITES = "NVIDIA/k8s-dra-driver-gpu@22407113:docs/prerequisites.md"
_OPERATOR_DRA = "NVIDIA/cloud-native-docs@52dcb7b8:gpu-operator/dra-intro-install.rst (Prerequisites)"

# What NVIDIA's DRA driver for GPUs (k8s-dra-driver-gpu, now developed as
# kubernetes-sigs/dra-driver-nvidia-gpu) needs from the cluster and the node.
# The repository's prerequisites page is the authority for the standalone
# driver: Kubernetes 1.34.2 or later, or 1.32/1.33 with the
# DynamicResourceAllocation feature gate (and the resource.k8s.io beta APIs)
# switched on by hand; GPU driver 565 for GPU allocation, 570.158.01 for
# ComputeDomains (its IMEXDaemonsWithDNSNames gate, on by default, needs it).
# Its README still says "Kubernetes 1.32 or newer, with DRA enabled", which
# is the same floor said more loosely. The GPU Operator's managed DRA
# workflow (GPUCluster) asks for more: Kubernetes 1.34.2 and driver 580.
# `gates` is the highest release line below `minimum` where the feature gates
# make DRA work ("" where no such line exists).
DRA_MINIMUMS = (
    {
        "component": "kubernetes",
        "minimum": "1.34.2",
        "gates": "1.32",
        "for": "gpus",
        "what": "Kubernetes with DRA on by default; 1.32 and 1.33 need the DynamicResourceAllocation feature gate on "
        "kube-apiserver, kube-controller-manager, kube-scheduler and kubelet, and the resource.k8s.io/v1beta1 API "
        "(v1beta2 too on 1.33)",
        "source": _DRA_PREREQUISITES,
        "checked": "2026-11-26",
    },
    {
        "component": "driver",
        "minimum": "565",
        "gates": "",
        "for": "gpus",
        "what": "GPU driver for GPU allocation",
        "source": _DRA_PREREQUISITES,
        "checked": "2026-11-26",
    },
    {
        "component": "driver",
        "minimum": "570.158.01",
        "gates": "",
        "for": "compute_domains",
        "what": "GPU driver for ComputeDomains (the IMEXDaemonsWithDNSNames feature gate, on by default)",
        "source": _DRA_PREREQUISITES + " (ComputeDomains additional prerequisites)",
        "checked": "2026-11-26",
    },
    {
        "component": "kubernetes",
        "minimum": "1.34.2",
        "gates": "",
        "for": "operator",
        "what": "Kubernetes for the GPU Operator's DRA workflow (GPUCluster)",
        "source": _OPERATOR_DRA,
        "checked": "2026-11-26",
    },
    {
        "component": "driver",
        "minimum": "580",
        "gates": "",
        "for": "operator",
        "what": "GPU driver for the GPU Operator's DRA workflow (GPUCluster)",
        "source": _OPERATOR_DRA,
        "checked": "2026-11-26",
    },
)

# What the DRA driver's kubelet plugins look for on the node when the driver
# is installed on the host (nvidiaDriverRoot: /, the chart's default): the
# driver root itself, then these directories, for libnvidia-ml.so.1 and
# nvidia-smi (symlinks resolved); the CDI specs it writes go to /var/run/cdi
# (its --cdi-root default), so the engine must read that directory.
DRA_DRIVER_ROOT = {
    "value": {
        "root": "/",
        "libraries": ["/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu"],
        "library": "libnvidia-ml.so.1",
        "binaries": ["/opt/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"],
        "binary": "nvidia-smi",
    },
    "source": "NVIDIA/k8s-dra-driver-gpu@22407113:cmd/gpu-kubelet-plugin/root.go ; deployments/helm/dra-driver-nvidia-gpu/values.yaml (nvidiaDriverRoot)",
    "checked": "2026-11-26",
}
DRA_CDI_ROOT = {
    "value": "/var/run/cdi",
    "source": "NVIDIA/k8s-dra-driver-gpu@22407113:cmd/compute-domain-kubelet-plugin/cdi.go (defaultCDIRoot)",
    "checked": "2026-11-26",
}
# nvidia-cdi-hook: where the Container Toolkit's packages put it, and where
# the GPU Operator's toolkit container installs it (toolkit.installDir). The
# CDI specs name it by its host path, and the engine runs it on the host.
DRA_CDI_HOOK_PATHS = {
    "value": ["/usr/bin/nvidia-cdi-hook", "/usr/local/nvidia/toolkit/nvidia-cdi-hook"],
    "source": "NVIDIA/k8s-dra-driver-gpu@22407113:deployments/helm/dra-driver-nvidia-gpu/values.yaml (nvidiaCDIHookPath) ; "
    "NVIDIA/gpu-operator@a22dbf67:deployments/gpu-operator/values.yaml (toolkit.installDir)",
    "checked": "2026-11-26",
}
# Host IMEX and the DRA driver's own IMEX daemons (ComputeDomains) clash: on a
# host-installed driver nvidia-imex.service must be disabled and masked.
DRA_IMEX_UNIT = {
    "value": {"unit": "nvidia-imex.service", "config": "/etc/nvidia-imex/nodes_config.cfg"},
    "source": _DRA_PREREQUISITES
    + " ; "
    + _OPERATOR_DRA.replace("(Prerequisites)", "(ComputeDomain prerequisites)")
    + " ; NVIDIA/k8s-dra-driver-gpu@22407113:templates/compute-domain-daemon-config.tmpl.cfg (IMEX_NODE_CONFIG_FILE default)",
    "checked": "2026-11-26",
}
