# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""NVIDIA DCGM 4 and dcgm-exporter: package names, the CUDA flavour rule,
the repository layout, the health watch systems and the exporter's flags.

Read by the dcgm role's plan (plugins/plugin_utils/_dcgm.py) and, through the
gpufleet.nvidia.knowledge lookup, by the role. Standard library only.
"""

from __future__ import annotations

import typing as t

_INSTALL = "https://docs.nvidia.com/datacenter/dcgm/latest/installation.html"
_GETTING_STARTED = "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html"
# The DCGM 4.5.2 package set as a distribution lists it from NVIDIA's CUDA
# repository (Amazon Linux 2023 release notes, 2026-03-02 AMI): one package
# list naming every datacenter-gpu-manager-4-* flavour of one release.
_AL2023_LIST = "secondary: amazonlinux/amazon-linux-2023 release notes, AMI 2023.10.20260302 (NVIDIA CUDA repository packages)"

# The packages of a DCGM 4 install, in install order. `flavour`: "" for the
# packages every install has, "cuda" for the ones named after the CUDA major
# (<name>-cuda<major>). `proprietary`: only with dcgm_proprietary (the
# closed-source parts: NVVS's proprietary plugins and the multi-node tests).
DCGM_PACKAGES: tuple[dict[str, t.Any], ...] = (
    {
        "package": "datacenter-gpu-manager-4-core",
        "flavour": "",
        "proprietary": False,
        "note": "nv-hostengine, dcgmi, the libraries and the nvidia-dcgm.service unit; the CUDA packages depend on it",
        "source": _INSTALL,
        "checked": "2026-11-26",
    },
    {
        "package": "datacenter-gpu-manager-4-cuda{major}",
        "flavour": "cuda",
        "proprietary": False,
        "note": "the CUDA-dependent parts (diagnostic plugins) built for one CUDA major; the install guide installs "
        "datacenter-gpu-manager-4-cuda${CUDA_VERSION} with CUDA_VERSION the major nvidia-smi reports",
        "source": _INSTALL,
        "checked": "2026-11-26",
    },
    {
        "package": "datacenter-gpu-manager-4-proprietary",
        "flavour": "",
        "proprietary": True,
        "note": "proprietary components; named in the same package list as the core for 4.5.2",
        "source": _AL2023_LIST,
        "checked": "2026-11-26",
    },
    {
        "package": "datacenter-gpu-manager-4-proprietary-cuda{major}",
        "flavour": "cuda",
        "proprietary": True,
        "note": "proprietary components built for one CUDA major",
        "source": _AL2023_LIST,
        "checked": "2026-11-26",
    },
)

# The CUDA majors DCGM 4 builds its -cuda<major> packages for, with the first
# DCGM release that has them. The rule (install guide): the flavour is the
# CUDA major of the driver (nvidia-smi's "CUDA Version"), so the packages
# follow the driver: a driver upgrade across a CUDA major changes the flavour.
DCGM_CUDA_FLAVOURS: tuple[dict[str, t.Any], ...] = (
    {"major": 11, "since": "4.0.0", "source": _INSTALL, "checked": "2026-11-26"},
    {"major": 12, "since": "4.0.0", "source": _INSTALL, "checked": "2026-11-26"},
    {
        "major": 13,
        "since": "4.3.0",
        "source": "secondary: datacenter-gpu-manager-4-cuda13 noted as 'DCGM 4.3.x+' in a public bundle script; present for 4.5.2 in " + _AL2023_LIST,
        "checked": "2026-11-26",
    },
)

# Package versions as the repositories spell them: apt carries epoch 1 (the
# CUDA repository's datacenter-gpu-manager entries are "1:<version>"), and
# both package formats the packaging revision "-1" (4.5.2-1 in the rpm list).
DCGM_PACKAGE_VERSION: dict[str, t.Any] = {
    "value": {"apt": "1:{version}-1", "dnf": "{version}-1"},
    "source": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/Packages (Version: 1:3.3.6); " + _AL2023_LIST + " (4.5.2-1)",
    "checked": "2026-11-26",
}

# The systemd unit the core package ships for nv-hostengine; the install
# guide starts it with `systemctl --now enable nvidia-dcgm`.
DCGM_SERVICE: dict[str, t.Any] = {"value": "nvidia-dcgm", "source": _INSTALL, "checked": "2026-11-26"}

# NVIDIA's CUDA repository: <url>/<distro>/<arch>/, a flat apt repository
# (`deb [signed-by=...] <url>/<distro>/<arch>/ /`) or a dnf repository. The
# distributions DCGM 4 supports (getting started, "Supported Linux
# Distributions"), by Ansible's distribution and major version.
DCGM_REPO_DISTROS: tuple[dict[str, t.Any], ...] = (
    {"distribution": "Debian", "major": "12", "repo": "debian12", "source": _GETTING_STARTED, "checked": "2026-11-26"},
    {"distribution": "Ubuntu", "major": "22", "repo": "ubuntu2204", "source": _GETTING_STARTED, "checked": "2026-11-26"},
    {"distribution": "Ubuntu", "major": "24", "repo": "ubuntu2404", "source": _GETTING_STARTED, "checked": "2026-11-26"},
    {"distribution": "RedHat", "major": "8", "repo": "rhel8", "source": _GETTING_STARTED, "checked": "2026-11-26"},
    {"distribution": "RedHat", "major": "9", "repo": "rhel9", "source": _GETTING_STARTED, "checked": "2026-11-26"},
    {"distribution": "RedHat", "major": "10", "repo": "rhel10", "source": _GETTING_STARTED, "checked": "2026-11-26"},
    {"distribution": "Rocky", "major": "8", "repo": "rhel8", "source": _GETTING_STARTED, "checked": "2026-11-26"},
    {"distribution": "Rocky", "major": "9", "repo": "rhel9", "source": _GETTING_STARTED, "checked": "2026-11-26"},
    {"distribution": "Rocky", "major": "10", "repo": "rhel10", "source": _GETTING_STARTED, "checked": "2026-11-26"},
)
DCGM_REPO_ARCHES: dict[str, t.Any] = {
    "value": {"x86_64": "x86_64", "aarch64": "sbsa"},
    "source": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa/Packages (arm64 packages under sbsa)",
    "checked": "2026-11-26",
}

# `dcgmi health --set` letters. dcgmi's default is "pm"; "a" is every system.
DCGM_HEALTH_SYSTEMS: dict[str, t.Any] = {
    "value": {"a": "all", "p": "PCIe", "m": "memory", "i": "infoROM", "t": "thermal and power", "n": "NVLink"},
    "source": "NVIDIA/DCGM@master:dcgmi/main_dcgmi.cpp (health --set help text)",
    "checked": "2026-11-26",
}

# dcgm-exporter's flags and defaults that the role sets.
DCGM_EXPORTER_FLAGS: dict[str, t.Any] = {
    "value": {
        "collectors": "--collectors",
        "collectors_default": "/etc/dcgm-exporter/default-counters.csv",
        "address": "--address",
        "address_default": ":9400",
        "kubernetes": "--kubernetes",
        "pod_resources_socket": "--pod-resources-kubelet-socket",
        "pod_resources_socket_default": "/var/lib/kubelet/pod-resources/kubelet.sock",
        "hpc_job_mapping_dir": "--hpc-job-mapping-dir",
        "remote_hostengine": "--remote-hostengine-info",
        "remote_hostengine_default": "localhost:5555",
    },
    "source": "NVIDIA/dcgm-exporter@main:pkg/cmd/app.go (NewApp: c.Flags)",
    "checked": "2026-11-26",
}

# dcgm-exporter ships as a container image and as source; NVIDIA publishes no
# binary tarball or Debian package of it. Hosts get a binary built from the
# release tag (`make binary`) and published on the site's mirror with its
# .sha256, like the other release binaries of the collection.
DCGM_EXPORTER_DISTRIBUTION: dict[str, t.Any] = {
    "value": "container image and source only; no release binaries, no distribution package",
    "source": "https://github.com/NVIDIA/dcgm-exporter (README: 'Quickstart' runs the image; 'Building from Source')",
    "checked": "2026-11-26",
}

# What dcgm-exporter reads in --hpc-job-mapping-dir on every scrape: the
# regular files whose names are a GPU id ("<gpu>"; from 4.5.3-4.8.2 also
# "<gpu>.<GPU instance id>", the key a MIG device's metrics are looked up by,
# while a whole GPU's metrics keep "<gpu>"), each line a job id that becomes
# an hpc_job label on a copy of that GPU's metrics. Other names (dotfiles, a
# lock file) and directories are skipped. Before 4.3.1-4.4.0 an empty file
# dropped its GPU's metrics; since, it is ignored. A file removed between the
# exporter's directory listing and its open fails that scrape's transform.
DCGM_EXPORTER_HPC_JOB_MAPPING: dict[str, t.Any] = {
    "value": {
        "file_name": "<gpu id>",
        "mig_file_name": "<gpu id>.<GPU instance id>",
        "mig_file_name_since": "4.5.3-4.8.2",
        "line": "one job id, becomes the hpc_job label",
        "gpu_id_is": "the gpu= label: DCGM's GPU id",
        "mig_gpu_instance_id_is": "NVML's GPU instance id (DCGM NvmlInstanceId)",
        "empty_file_drops_metrics_before": "4.3.1-4.4.0",
    },
    "source": "NVIDIA/dcgm-exporter@d5e5f510:internal/pkg/transformation/hpc.go (Process, getGPUFiles, validGPUFile; "
    "MIG key from 2623f7a, empty-file check from fe52755); internal/pkg/collector/gpu_collector.go (GPU, GPUInstanceID)",
    "checked": "2026-11-26",
}

# DCGM's GPU id: nv-hostengine's first attach numbers the GPUs it gets from
# NVML by NVML index (nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2);
# a re-attach matches them by UUID and keeps their ids, appending new GPUs.
# NVML's index order is PCI bus id order (what nvidia-smi shows, and CUDA
# with CUDA_DEVICE_ORDER=PCI_BUS_ID), not promised across reboots, so the
# Slurm Prolog ranks the driver's /proc/driver/nvidia/gpus by bus id when the
# job starts instead of keeping a number from a converge.
DCGM_GPU_ID: dict[str, t.Any] = {
    "value": {"is": "NVML index at nv-hostengine's first attach", "kept_by": "uuid", "node_side": "rank by PCI bus id"},
    "source": "NVIDIA/DCGM@72fa3fea:dcgmlib/src/DcgmCacheManager.cpp (AttachGpus: detectedGpus[i].gpuId = i; "
    "MergeNewlyDetectedGpuList); dcgmlib/src/NvmlTaskRunner.cpp (GetSafeNvmlHandlesImpl); "
    "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html (nvmlDeviceGetHandleByIndex_v2: order not "
    "consistent between reboots); https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html (CUDA_DEVICE_ORDER)",
    "checked": "2026-11-26",
}

# Security floors of DCGM and dcgm-exporter, each its own rule id (a site can
# accept one by its id in preflight_ignore_rules). The bulletin lists DCGM up
# to 4.5.2 and dcgm-exporter "up to 4.8.2" as affected, and 4.8.2 as the
# update: its release is the tag 4.5.3-4.8.2 (NVIDIA/dcgm-exporter@691c927,
# which turns the /debug/pprof endpoints off unless --enable-pprof).
_PSIRT_5857 = "NVIDIA/product-security@dbb4ada:2026/5857/5857.md (a_id 5857, published 2026-07-28)"
DCGM_CVE_FLOORS: tuple[dict[str, t.Any], ...] = (
    {
        "cve": "CVE-2026-47483",
        "rule": "dcgm_cve_2026_47483",
        "dcgm_fixed": "4.5.3",
        "exporter_fixed": "4.8.2",
        "what": "unauthenticated requests to the /debug/pprof endpoints exhaust the node's resources; CVSS 8.2",
        "source": _PSIRT_5857 + " ; NVIDIA/dcgm-exporter@691c927 (tag 4.5.3-4.8.2)",
        "checked": "2026-11-29",
    },
)
