# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""GPU health: the Xid catalog, the driver's recovery actions, the kernel-log
line formats and the thresholds the health judgement starts from.

Read by plugins/module_utils/_verify/health.py (the judgement: verify's health layer,
the upgrade gate, the fleet report and gpufleet-verify-boot on the node, so
Python 3.8+, standard library only). verify_health_policy overrides the
defaults XID_CATALOG's severities and HEALTH_THRESHOLDS give.

`status`: "V" read in the cited source itself; "S" read through a
transcription of the cited source (the catalog page is one large table the
reference search returns in parts); "U" a choice of this collection with its
reason, not a fact of the source.
"""

from __future__ import annotations

import typing as t

_CATALOG = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
_NVERROR_H = "NVIDIA/open-gpu-kernel-modules@90eb10774f1c:src/common/sdk/nvidia/inc/nverror.h"
_DEVICE_PLUGIN = "NVIDIA/k8s-device-plugin@1b826acc6af3:internal/rm/health.go"
_GKE = "GoogleCloudPlatform/container-engine-accelerators@992db8125755:pkg/gpu/nvidia/health_check/health_checker.go"
_NVML_H = "NVIDIA/go-nvml@2f9e261fe40a:gen/nvml/nvml.h"
_A100_MEM = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/user-visible-statistics.html"
_KERNEL_RC = "NVIDIA/open-gpu-kernel-modules@e8113f665d93:src/nvidia/src/kernel/gpu/rc/kernel_rc.c"
_OSINIT = "NVIDIA/open-gpu-kernel-modules@448d5cc65624:src/nvidia/arch/nvalloc/unix/src/osinit.c"
_SMI = "https://docs.nvidia.com/deploy/nvidia-smi/index.html"

# The tables below keep one row a line, as their sources' tables read: ruff format would spread
# every row over many lines.
# fmt: off

# Xids the judgement knows by name. `mnemonic` is the driver's define;
# `catalog_action` NVIDIA's "Resolution Bucket (Immediate Action)";
# `severity` the default: "ignore" for the device plugin's application-error
# list (the GPU stays healthy: the application must restart), "critical" for
# GKE's list, "warn" for every other Xid (verify_health_policy's xid_ignore /
# xid_critical move them). `action` is what a finding asks for unless
# the driver's recovery action (RECOVERY_ACTIONS) says otherwise: the catalog's
# RESET_GPU -> reset_gpu, RESTART_BM (restart the bare-metal node) -> reboot,
# failures of the GPU's own repair (64) -> drain_and_repair, RESTART_APP and
# IGNORE -> none. An Xid not in this table is judged like a "warn" row with
# action none and its number in the message.
XID_CATALOG: tuple[dict[str, t.Any], ...] = (
    {"xid": 13, "mnemonic": "ROBUST_CHANNEL_GR_EXCEPTION", "meaning": "Graphics Engine Exception",
     "catalog_action": "RESTART_APP", "severity": "ignore", "action": "none", "status": "V",
     "source": _DEVICE_PLUGIN + " ; " + _CATALOG, "checked": "2026-11-26"},
    {"xid": 31, "mnemonic": "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "meaning": "GPU memory page fault",
     "catalog_action": "RESTART_APP", "severity": "ignore", "action": "none", "status": "S",
     "source": _DEVICE_PLUGIN + " ; " + _NVERROR_H + " ; " + _CATALOG, "checked": "2026-11-29"},
    {"xid": 43, "mnemonic": "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "meaning": "GPU stopped processing",
     "catalog_action": "IGNORE", "severity": "ignore", "action": "none", "status": "S",
     "source": _DEVICE_PLUGIN + " ; " + _NVERROR_H + " ; " + _CATALOG, "checked": "2026-11-29"},
    {"xid": 45, "mnemonic": "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "meaning": "Preemptive cleanup, due to previous errors",
     "catalog_action": "WORKFLOW_XID_45", "severity": "ignore", "action": "none", "status": "S",
     "source": _DEVICE_PLUGIN + " ; " + _NVERROR_H + " ; " + _CATALOG, "checked": "2026-11-29"},
    {"xid": 68, "mnemonic": "ROBUST_CHANNEL_NVDEC0_ERROR", "meaning": "Video processor exception",
     "catalog_action": None, "severity": "ignore", "action": "none", "status": "V",
     "source": _DEVICE_PLUGIN + " ; " + _NVERROR_H, "checked": "2026-11-26"},
    # The device plugin's list skips 109 as an application's error, but NVIDIA's
    # catalog (from R570) asks for a GPU reset: a warning that asks for one.
    {"xid": 109, "mnemonic": "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "meaning": "Context Switch Timeout Error",
     "catalog_action": "RESET_GPU", "severity": "warn", "action": "reset_gpu", "status": "S",
     "source": _CATALOG + " ; " + _DEVICE_PLUGIN, "checked": "2026-11-29"},
    {"xid": 48, "mnemonic": "ROBUST_CHANNEL_GPU_ECC_DBE", "meaning": "Double-bit (uncorrectable) ECC error",
     "catalog_action": "WORKFLOW_XID_48", "severity": "critical", "action": "reset_gpu", "status": "S",
     "source": _GKE + " ; " + _NVERROR_H + " ; " + _A100_MEM + " ; " + _CATALOG, "checked": "2026-11-29"},
    {"xid": 63, "mnemonic": "INFOROM_DRAM_RETIREMENT_EVENT",
     "meaning": "GPU memory remapping event (recorded; takes effect at the next GPU reset)",
     "catalog_action": "IGNORE", "severity": "critical", "action": "reset_gpu", "status": "S",
     "source": _GKE + " ; " + _NVERROR_H + " ; " + _A100_MEM + " ; " + _CATALOG, "checked": "2026-11-29"},
    {"xid": 64, "mnemonic": "INFOROM_DRAM_RETIREMENT_FAILURE",
     "meaning": "GPU memory remapping failure",
     "catalog_action": "RESET_GPU", "severity": "critical", "action": "drain_and_repair", "status": "S",
     "source": _GKE + " ; " + _NVERROR_H + " ; " + _A100_MEM + " ; " + _CATALOG, "checked": "2026-11-29"},
    {"xid": 74, "mnemonic": "NVLINK_ERROR", "meaning": "NVLink error",
     "catalog_action": "WORKFLOW_NVLINK_ERR", "severity": "warn", "action": "reset_gpu", "status": "S",
     "source": _NVERROR_H + " ; " + _CATALOG, "checked": "2026-11-26"},
    {"xid": 79, "mnemonic": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "meaning": "GPU has fallen off the bus",
     "catalog_action": "RESTART_BM", "severity": "critical", "action": "reboot", "status": "S",
     "source": _GKE + " ; " + _NVERROR_H + " ; " + _CATALOG, "checked": "2026-11-26"},
    {"xid": 92, "mnemonic": "EXCESSIVE_SBE_INTERRUPTS", "meaning": "High single-bit ECC error rate",
     "catalog_action": "IGNORE", "severity": "warn", "action": "none", "status": "S",
     "source": _NVERROR_H + " ; " + _CATALOG, "checked": "2026-11-26"},
    {"xid": 94, "mnemonic": "ROBUST_CHANNEL_CONTAINED_ERROR", "meaning": "Contained memory error",
     "catalog_action": "RESTART_APP", "severity": "warn", "action": "none", "status": "S",
     "source": _NVERROR_H + " ; " + _A100_MEM, "checked": "2026-11-26"},
    {"xid": 95, "mnemonic": "ROBUST_CHANNEL_UNCONTAINED_ERROR", "meaning": "Uncontained memory error",
     "catalog_action": "RESET_GPU", "severity": "warn", "action": "reset_gpu", "status": "S",
     "source": _NVERROR_H + " ; " + _A100_MEM, "checked": "2026-11-26"},
    {"xid": 119, "mnemonic": "GSP_RPC_TIMEOUT", "meaning": "GSP RPC timeout",
     "catalog_action": "RESET_GPU", "severity": "critical", "action": "reset_gpu", "status": "S",
     "source": _GKE + " ; " + _NVERROR_H + " ; " + _CATALOG, "checked": "2026-11-26"},
    {"xid": 120, "mnemonic": "GSP_ERROR", "meaning": "GSP error",
     "catalog_action": "RESET_GPU", "severity": "critical", "action": "reset_gpu", "status": "S",
     "source": _GKE + " ; " + _NVERROR_H + " ; " + _CATALOG, "checked": "2026-11-26"},
    {"xid": 121, "mnemonic": "C2C_ERROR", "meaning": "C2C (chip-to-chip) link error",
     "catalog_action": "IGNORE", "severity": "warn", "action": "none", "status": "S",
     "source": _NVERROR_H + " ; " + _CATALOG, "checked": "2026-11-26"},
    # GKE lists 123; the catalog's row for it was not read, so its action is
    # the conservative reset of the other firmware-channel failures (119/120).
    {"xid": 123, "mnemonic": "SPI_PMU_RPC_WRITE_FAIL", "meaning": "SPI PMU RPC write failure",
     "catalog_action": None, "severity": "critical", "action": "reset_gpu", "status": "U",
     "source": _GKE + " ; " + _NVERROR_H, "checked": "2026-11-26"},
    {"xid": 140, "mnemonic": "UNRECOVERABLE_ECC_ERROR_ESCAPE", "meaning": "ECC unrecovered error",
     "catalog_action": "RESET_GPU", "severity": "critical", "action": "reset_gpu", "status": "S",
     "source": _GKE + " ; " + _CATALOG, "checked": "2026-11-26"},
    # The driver's recovery action changed; the NVML field
    # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION carries the action itself (the
    # recovery_action check), so the Xid alone only warns.
    {"xid": 154, "mnemonic": "GPU_RECOVERY_ACTION_CHANGED", "meaning": "GPU recovery action changed",
     "catalog_action": "XID_154", "severity": "warn", "action": "none", "status": "S",
     "source": _CATALOG, "checked": "2026-11-26"},
)

# nvmlDeviceGpuRecoveryAction_t, the value of field
# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (230), and the finding's action for
# it. `driver_says` is the header's own comment. Drain P2P (3) and Drain and
# Reset (4) both mean "stop sending work here first": drain_and_repair. 5
# (recover the IMEX domain) spans several nodes; a node reboot is the part
# this node can do.
RECOVERY_ACTIONS: tuple[dict[str, t.Any], ...] = (
    {"value": 0, "name": "NVML_GPU_RECOVERY_ACTION_NONE", "driver_says": "No action needed", "action": "none",
     "source": _NVML_H, "checked": "2026-11-26"},
    {"value": 1, "name": "NVML_GPU_RECOVERY_ACTION_GPU_RESET", "driver_says": "Reset Gpu", "action": "reset_gpu",
     "source": _NVML_H, "checked": "2026-11-26"},
    {"value": 2, "name": "NVML_GPU_RECOVERY_ACTION_NODE_REBOOT", "driver_says": "Reboot Node", "action": "reboot",
     "source": _NVML_H, "checked": "2026-11-26"},
    {"value": 3, "name": "NVML_GPU_RECOVERY_ACTION_DRAIN_P2P", "driver_says": "Drain P2P",
     "action": "drain_and_repair", "source": _NVML_H, "checked": "2026-11-26"},
    {"value": 4, "name": "NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET", "driver_says": "Drain P2P and Reset Gpu",
     "action": "drain_and_repair", "source": _NVML_H, "checked": "2026-11-26"},
    {"value": 5, "name": "NVML_GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN", "driver_says": "Recover IMEX Domain",
     "action": "reboot", "source": _NVML_H, "checked": "2026-11-26"},
)

# The kernel-log lines the judgement reads (fixtures of the unit tests).
# The Xid line carries domain:bus:device without the function; MIG GPUs add
# " GPU-I:%02u" (and " GPU-CI:%02u"); without a process the pid/name part is
# absent. Older drivers printed "Xid (0000:01:00)" without "PCI:" and
# "GPU at 0000:01:00.0 has fallen off the bus." with no Xid.
KERNEL_LOG_FORMATS: tuple[dict[str, t.Any], ...] = (
    {"name": "xid", "format": "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s%s",
     "example": "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     "source": _KERNEL_RC + " ; leptonai/gpud@3abba8476b77:components/accelerator/nvidia/sxid/README.md",
     "checked": "2026-11-26"},
    {"name": "xid_no_process", "format": "NVRM: Xid (PCI:%04x:%02x:%02x): %d, %s%s",
     "example": "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
     "source": _KERNEL_RC + " ; https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151",
     "checked": "2026-11-26"},
    {"name": "xid_mig", "format": "NVRM: Xid (PCI:%04x:%02x:%02x GPU-I:%02u): %d, pid=%s, name=%s, %s%s",
     "example": "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). "
                "RST: No, D-RST: No",
     "source": _KERNEL_RC + " ; " + _A100_MEM, "checked": "2026-11-26"},
    {"name": "fallen_off_bus", "format": "NVRM: GPU %04x:%02x:%02x.%x: GPU has fallen off the bus.",
     "example": "NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.",
     "source": _OSINIT + " ; leptonai/gpud@3abba8476b77:components/accelerator/nvidia/sxid/README.md",
     "checked": "2026-11-26"},
    {"name": "fallen_off_bus_legacy", "format": "NVRM: GPU at %04x:%02x:%02x.%x has fallen off the bus.",
     "example": "NVRM: GPU at 0000:01:00.0 has fallen off the bus.",
     "source": "secondary: https://pastebin.com/xJaypMZt (a 2017-era driver's log)", "checked": "2026-11-26"},
    {"name": "kmsg_record", "format": "<priority>,<sequence>,<microseconds>,<flags>[,...];<message>",
     "example": "4,1234,5678901,-;NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus.",
     "source": "https://www.kernel.org/doc/Documentation/ABI/testing/dev-kmsg", "checked": "2026-11-26"},
)

# The defaults of the checks' thresholds and severities, each with why.
# Severity "ignore" makes no finding; the metrics still carry the values.
HEALTH_THRESHOLDS: tuple[dict[str, t.Any], ...] = (
    {"variable": "pcie_gen", "default": "ignore", "status": "S",
     "why": "nvidia-smi: the current link generation and width 'may be reduced when the GPU is not in use'; an "
            "idle GPU drops its link generation to save power, so gen below max on an idle node is normal",
     "source": _SMI + " ; secondary: https://baaz.dev/blog/understanding-power-management-in-gpu-via-pcie",
     "checked": "2026-11-26"},
    {"variable": "pcie_width", "default": "critical", "status": "U",
     "why": "a data-center GPU trained below its maximum width (x16 -> x8/x4) is a seating, riser or slot fault "
            "that halves host bandwidth; nvidia-smi allows width to drop at idle too, so a fleet that sees it on "
            "healthy GPUs sets verify_health_policy: {pcie_width: warn}",
     "source": _SMI, "checked": "2026-11-26"},
    {"variable": "remap_pending", "default": "warn", "status": "V",
     "why": "a row marked for remapping takes effect at the next GPU reset; the GPU works meanwhile",
     "source": _A100_MEM, "checked": "2026-11-26"},
    {"variable": "remap_failure", "default": "critical", "status": "V",
     "why": "the GPU could not remap a row: its memory can no longer repair itself",
     "source": _A100_MEM, "checked": "2026-11-26"},
    {"variable": "ecc_uncorrected_volatile", "default": "critical", "status": "U",
     "why": "an uncorrectable error since the driver loaded means data was lost on this GPU this boot",
     "source": _NVML_H, "checked": "2026-11-26"},
    {"variable": "ecc_uncorrected_aggregate", "default": "warn", "status": "U",
     "why": "uncorrectable errors over the GPU's life (InfoROM) are history; remapping/retirement handles them",
     "source": _NVML_H, "checked": "2026-11-26"},
    {"variable": "ecc_corrected_volatile_max", "default": 1000, "status": "U",
     "why": "corrected errors were fixed by ECC; only a high count since driver load points at degrading memory "
            "(the driver's own signal is Xid 92, high single-bit error rate)",
     "source": _CATALOG, "checked": "2026-11-26"},
    {"variable": "retired_pages_max", "default": 60, "status": "U",
     "why": "pre-Ampere GPUs retire pages instead of remapping rows; NVIDIA's page-retirement guidance puts the "
            "point to replace the GPU at about 60 retired pages (the number was not re-read for this table)",
     "source": "https://docs.nvidia.com/deploy/dynamic-page-retirement/index.html", "checked": "2026-11-26"},
    {"variable": "temperature_margin_c", "default": 5, "status": "U",
     "why": "within a few degrees of the slowdown threshold the GPU is about to throttle",
     "source": _NVML_H, "checked": "2026-11-26"},
    {"variable": "pcie_replay_max", "default": 1000, "status": "U",
     "why": "PCIe replays are link-level retries; a count in the thousands points at a marginal link",
     "source": _NVML_H, "checked": "2026-11-26"},
)


# The driver daemons' states, in one call: `systemctl show` prints one block
# of KEY=value lines per unit; a unit that is not installed reads
# LoadState=not-found. Read by the verify role (node_reads_info) and by
# gpufleet-verify-boot, judged by _verify/health.service_states.
SERVICE_STATES_COMMAND = {
    "value": ["systemctl", "show", "--property=Id,LoadState,ActiveState,UnitFileState",
              "nvidia-persistenced.service", "nvidia-fabricmanager.service"],
    "source": "https://www.freedesktop.org/software/systemd/man/latest/systemctl.html#show%20PATTERN%E2%80%A6%7CJOB%E2%80%A6",
    "checked": "2026-11-26",
}
# fmt: on
