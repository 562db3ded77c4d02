# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Slurm: how its gpu/nvml plugin names GPU and MIG GRES types, which files a
MIG GRES holds, and where cgroup.conf's ConstrainDevices is read.

The slurm_gres role writes explicit gres.conf lines with the names Slurm's
own NVML autodetection gives (AutoDetect=nvml), so that a node's slurm.conf
Gres= line is the same whichever way gres.conf is written, and a site can
switch between the two without renaming its partitions' GRES."""

from __future__ import annotations

_GPU_NVML = "SchedMD/slurm@284c3b95:src/plugins/gpu/nvml/gpu_nvml.c"
_GPU_COMMON = "SchedMD/slurm@284c3b95:src/plugins/gpu/common/gpu_common.c"

# A whole GPU's Type: NVML's device name (nvmlDeviceGetName), lower-cased,
# spaces turned into underscores (gpu_common_underscorify_tolower), nothing
# else: "NVIDIA A100-SXM4-40GB" -> "nvidia_a100-sxm4-40gb".
GPU_TYPE_NAME = {
    "value": {"from": "nvmlDeviceGetName", "lower": True, "space": "_"},
    "source": _GPU_NVML + " (_nvml_get_device_name, _get_system_gpu_list_nvml); " + _GPU_COMMON + " (gpu_common_underscorify_tolower)",
    "checked": "2026-11-26",
}

# A MIG device's Type: its GPU's Type cut at the first "-", then the MIG
# device's own NVML name (same lower/underscore rule) from "mig_" on, less
# the "mig": "NVIDIA A100-SXM4-40GB MIG 3g.20gb" on an "NVIDIA
# A100-SXM4-40GB" -> "nvidia_a100" + "_3g.20gb". A GPU name without "-"
# ("NVIDIA H100 80GB HBM3") is kept whole: "nvidia_h100_80gb_hbm3_1g.10gb".
# The plugin falls back to "_[<c>c.]<g>g.<GiB rounded up>gb" from the MIG
# device's attributes only when the name has no "mig_".
MIG_TYPE_NAME = {
    "value": {"gpu_type_cut_at": "-", "mig_name_from": "mig_", "drop": "mig"},
    "source": _GPU_NVML + " (_get_system_gpu_list_nvml: tmp_device_name cut at '-'; _handle_mig: strstr(device_name, \"mig_\") + 3)",
    "checked": "2026-11-26",
}

# A MIG GRES holds the parent GPU's device file and the two capability
# device files of its GPU and compute instance, whose minors the driver lists
# in /proc/driver/nvidia-caps/mig-minors ("gpu<minor>/gi<gi>/access <n>",
# "gpu<minor>/gi<gi>/ci<ci>/access <n>"). Written by hand they go in
# MultipleFiles= ("File" is for GPUs without MIG).
MIG_GRES_FILES = {
    "value": {
        "files": ["/dev/nvidia{gpu_minor}", "/dev/nvidia-caps/nvidia-cap{gi_minor}", "/dev/nvidia-caps/nvidia-cap{ci_minor}"],
        "minors_file": "/proc/driver/nvidia-caps/mig-minors",
        "keyword": "MultipleFiles",
    },
    "source": _GPU_NVML + " (_handle_mig, _nvml_get_mig_minor_numbers); SchedMD/slurm@284c3b95:doc/man/man5/gres.conf.5 (MultipleFiles)",
    "checked": "2026-11-26",
}

# cgroup.conf has no Include directive (slurm.conf has one), so another
# tool's cgroup.conf is shared line by line; ConstrainDevices defaults to no.
CGROUP_CONSTRAIN_DEVICES = {
    "value": {"key": "ConstrainDevices", "default": "no", "include": False},
    "source": "SchedMD/slurm@284c3b95:doc/man/man5/cgroup.conf.5 (ConstrainDevices); SchedMD/slurm@284c3b95:src/common/cgroup.c",
    "checked": "2026-11-26",
}

# Debian ships the gpu/nvml plugin (AutoDetect=nvml) apart from slurmd, in
# contrib (it needs the non-free libnvidia-ml): slurm-wlm-nvml-plugin.
# Without it AutoDetect=nvml falls back to gpu/generic and finds no GPU.
# slurmd dlopens libnvidia-ml.so, then libnvidia-ml.so.1 (src/interfaces/gpu.c).
DEBIAN_NVML_PLUGIN = (
    {
        "suite": "trixie",
        "component": "contrib",
        "package": "slurm-wlm-nvml-plugin",
        "version": "24.11.5-2",
        "slurmd": "24.11.5-4+deb13u1",
        "source": "https://packages.debian.org/trixie/slurm-wlm-nvml-plugin",
        "checked": "2026-11-26",
    },
)

# slurmd runs the Prolog as root before a job's first step on the node, with
# no search path; a non-zero exit drains the node and requeues the job (held
# unless SchedulerParameters=nohold_on_prolog_fail). Prolog= may be given on
# several lines, or as a glob ("/etc/slurm/prolog.d/*", run z-a), so a
# site's own Prolog stays beside ours. Its output is not kept.
PROLOG = {
    "value": {
        "key": "Prolog",
        "runs_as": "root",
        "on_failure": ["node DRAIN", "job requeued (held)"],
        "several": ["one Prolog= per line", "glob"],
        "search_path": False,
        "output_kept": False,
    },
    "source": "SchedMD/slurm@284c3b95:doc/man/man5/slurm.conf.5 (Prolog; PROLOG AND EPILOG SCRIPTS; FILE AND DIRECTORY PERMISSIONS); "
    "https://slurm.schedmd.com/prolog_epilog.html (Failure Handling)",
    "checked": "2026-11-26",
}

# What the Prolog is told: SLURM_JOB_GPUS holds the indexes of slurmd's GPU
# device list (gres_device->index), not NVML indexes or /dev/nvidia minors.
# slurmd numbers that list in the order of its merged GRES records: grouped by
# slurm.conf's Gres= types, in gres.conf order within a type; with
# AutoDetect, sorted by File then Links (PCI order). A record of one GRES
# (a GPU, or a MIG device's MultipleFiles) is one index, a record of n GPUs
# one per File. `slurmd -G` prints those records in that order (it sets
# DebugFlags=Gres, so each line carries File=). SLURM_CONF and SLURMD_NODENAME
# are in the Prolog's environment too.
PROLOG_GPU_INDEX = {
    "value": {
        "variable": "SLURM_JOB_GPUS",
        "is": "slurmd gres_device index",
        "order_from": "slurmd -G",
        "also_set": ["SLURM_CONF", "SLURMD_NODENAME", "SLURM_JOB_ID"],
    },
    "source": "SchedMD/slurm@284c3b95:src/plugins/gres/common/gres_common.c (gres_common_prep_set_env); "
    "src/interfaces/gres.c (_merge_config, gres_node_config_load, _log_gres_slurmd_conf); "
    "src/plugins/gres/gpu/gres_gpu.c (_merge_system_gres_conf); src/plugins/prep/script/prep_script_slurmd.c; "
    "src/slurmd/slurmd/slurmd.c (_print_gres)",
    "checked": "2026-11-26",
}

# slurmctld drains a node whose Prolog failed with the reason "Prolog error"
# only if the node is not drained already: a Prolog that drains the node with
# its own reason first (scontrol update State=DRAIN Reason=...) keeps it.
PROLOG_DRAIN_REASON = {
    "value": {"reason": "Prolog error", "kept_if_already_drained": True},
    "source": "SchedMD/slurm@284c3b95:src/slurmctld/node_mgr.c (validate_node_specs: ESLURMD_PROLOG_FAILED)",
    "checked": "2026-11-26",
}

# The driver's per-GPU file, /proc/driver/nvidia/gpus/<PCI bus id>/information,
# gives each GPU's "Device Minor" (the N of /dev/nvidiaN) and "Bus Location":
# how the guard goes from a GRES device file to the health report's bus id.
DRIVER_GPU_INFORMATION = {
    "value": {"glob": "/proc/driver/nvidia/gpus/*/information", "fields": ["Device Minor", "Bus Location", "GPU UUID"]},
    "source": "NVIDIA/open-gpu-kernel-modules@1739a20e:kernel-open/nvidia/nv-procfs.c (nv_procfs_read_gpu_info)",
    "checked": "2026-11-26",
}

# One script can be Prolog= and Epilog=: slurmd sets SLURM_SCRIPT_CONTEXT to
# prolog_slurmd or epilog_slurmd (since 20.02; Debian 13 ships 24.11), and
# passes the job's GRES environment (SLURM_JOB_GPUS) to both. A failing
# Epilog drains the node too.
PROLOG_EPILOG_CONTEXT = {
    "value": {"variable": "SLURM_SCRIPT_CONTEXT", "prolog": "prolog_slurmd", "epilog": "epilog_slurmd", "since": "20.02"},
    "source": "SchedMD/slurm@284c3b95:src/plugins/prep/script/prep_script_slurmd.c (_build_env); "
    "src/slurmd/slurmd/req.c (_rpc_terminate_job: gres_g_prep_set_env); "
    "https://slurm.schedmd.com/prolog_epilog.html (SLURM_SCRIPT_CONTEXT; Failure Handling)",
    "checked": "2026-11-26",
}

# The ids of the GPU instances behind a MIG GRES's capability files: the
# driver's mig-minors names each as gpu<minor>/gi<GPU instance id>/access
# <cap minor>, the GPU instance id NVML reports.
MIG_GPU_INSTANCE_MINORS = {
    "value": {"line": "gpu<minor>/gi<gi>/access <cap minor>", "gi_is": "NVML GPU instance id"},
    "source": "NVIDIA/nvidia-container-toolkit@d34b3046:internal/nvcaps/nvcaps.go (NewGPUInstanceCap); "
    "internal/platform-support/dgpu/nvml.go (newNvmlMigDiscoverer)",
    "checked": "2026-11-26",
}
