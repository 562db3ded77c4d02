# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""NVIDIA Container Toolkit: features by version, security floors (CVEs) and
the CDI specification version it writes."""

from __future__ import annotations

_REPO = "NVIDIA/nvidia-container-toolkit@"
_PSIRT = "NVIDIA/product-security@dbb4ada0:"
_RELEASE_NOTES = "NVIDIA/cloud-native-docs@52dcb7b8:container-toolkit/release-notes.md"

# The tables below keep one row a line, as their sources' tables read: ruff format would spread
# every row over many lines.
# fmt: off

# (feature, first version, what it is); each row's source is the CHANGELOG.md
# of the tag that added it.
CTK_FEATURES = (
    {"feature": "cdi_generate", "first": "1.12.0", "what": "`nvidia-ctk cdi generate` writes CDI specifications",
     "source": _REPO + "v1.12.0:CHANGELOG.md", "checked": "2026-11-25"},
    {"feature": "cdi_mig_devices", "first": "1.12.0",
     "what": "MIG devices are included in generated CDI specifications",
     "source": _REPO + "v1.12.0:cmd/nvidia-ctk/cdi/generate/generate.go (VisitMigDevices; mig-device.go)",
     "checked": "2026-11-25"},
    {"feature": "device_name_strategies", "first": "1.15.0",
     "what": "several `--device-name-strategy` values at once (index, type-index and uuid each exist from 1.12.0)",
     "source": _REPO + "v1.15.0:CHANGELOG.md (v1.15.0-rc.4)", "checked": "2026-11-25"},
    {"feature": "runtime_configure_containerd", "first": "1.14.0",
     "what": "`nvidia-ctk runtime configure` edits containerd's config",
     "source": _REPO + "v1.14.0:CHANGELOG.md", "checked": "2026-11-25"},
    {"feature": "docker_cdi", "first": "1.15.0",
     "what": "`nvidia-ctk runtime configure --enable-cdi` for Docker (needs Docker >= 25)",
     "source": _REPO + "v1.15.0:CHANGELOG.md", "checked": "2026-11-25"},
    {"feature": "imex_channels", "first": "1.17.0",
     "what": "IMEX channels (multi-node NVLink) in the management CDI spec",
     "source": _REPO + "v1.17.0:CHANGELOG.md", "checked": "2026-11-25"},
    {"feature": "containerd_config_v3", "first": "1.17.4", "what": "containerd config version 3 (containerd 2.x)",
     "source": _REPO + "v1.17.4:CHANGELOG.md", "checked": "2026-11-25"},
    {"feature": "drop_in_configs", "first": "1.18.0", "what": "drop-in config files for containerd and CRI-O",
     "source": _REPO + "v1.18.0:CHANGELOG.md", "checked": "2026-11-25"},
    {"feature": "cdi_refresh_units", "first": "1.18.0", "what": "the nvidia-cdi-refresh.service/.path units",
     "source": _REPO + "v1.18.0:deployments/systemd", "checked": "2026-11-25"},
    {"feature": "jit_cdi_default", "first": "1.18.0", "what": "the nvidia runtime defaults to jit-cdi mode",
     "source": _REPO + "v1.18.0:CHANGELOG.md", "checked": "2026-11-25"},
    {"feature": "cdi_device_id", "first": "1.19.0", "what": "`nvidia-ctk cdi generate --device-id`",
     "source": _REPO + "v1.19.0:CHANGELOG.md", "checked": "2026-11-25"},
)

# Security floors: a toolkit below `fixed` is vulnerable to `cve`. Each floor
# is its own rule (`rule`), so a site can accept one known risk by its id
# (ignore_rules) and nothing else. Sources: NVIDIA PSIRT's own bulletins
# (NVIDIA/product-security, a_id = the bulletin's number) and the CVE records
# NVIDIA published as the CNA.
CTK_CVE_FLOORS = (
    {"cve": "CVE-2024-0132", "fixed": "1.16.2", "rule": "ctk_cve_2024_0132",
     "what": "a crafted container image can escape to the host through a time-of-check time-of-use race; CVSS 9.0",
     "source": _PSIRT + "2024/5582/5582.json (a_id 5582)", "checked": "2026-11-25"},
    {"cve": "CVE-2024-0133", "fixed": "1.16.2", "rule": "ctk_cve_2024_0133",
     "what": "a crafted container image can tamper with host data; CVSS 4.1",
     "source": _PSIRT + "2024/5582/5582.json (a_id 5582)", "checked": "2026-11-25"},
    {"cve": "CVE-2024-0134", "fixed": "1.17.0", "rule": "ctk_cve_2024_0134",
     "what": "a crafted container image can create unauthorized files on the host; CVSS 4.1",
     "source": _PSIRT + "2024/5585/5585.json (a_id 5585)", "checked": "2026-11-25"},
    # The bulletin fixes 0135-0137 in 1.17.1; the release notes list them under 1.17.3.
    {"cve": "CVE-2024-0135", "fixed": "1.17.1", "rule": "ctk_cve_2024_0135",
     "what": "a crafted container image can modify a host binary; CVSS 7.6",
     "source": _PSIRT + "2025/5599/5599.md (a_id 5599)", "checked": "2026-11-25"},
    {"cve": "CVE-2024-0136", "fixed": "1.17.1", "rule": "ctk_cve_2024_0136",
     "what": "improper isolation in a non-default configuration; CVSS 7.6",
     "source": _PSIRT + "2025/5599/5599.md (a_id 5599)", "checked": "2026-11-25"},
    {"cve": "CVE-2024-0137", "fixed": "1.17.1", "rule": "ctk_cve_2024_0137",
     "what": "improper isolation in a non-default configuration; CVSS 5.5",
     "source": _PSIRT + "2025/5599/5599.md (a_id 5599)", "checked": "2026-11-25"},
    {"cve": "CVE-2025-23359", "fixed": "1.17.4", "rule": "ctk_cve_2025_23359",
     "what": "a crafted container image can escape to the host through its CUDA compat libraries "
             "by a time-of-check time-of-use race; CVSS 8.3",
     "source": _PSIRT + "2025/5616/5616.json (a_id 5616)", "checked": "2026-11-25"},
    {"cve": "CVE-2025-23266", "fixed": "1.17.8", "rule": "ctk_cve_2025_23266",
     "what": "a crafted container image can run code with elevated privileges through the container hooks; "
             "CVSS 9.0",
     "source": _PSIRT + "2025/5659/5659.md (a_id 5659)", "checked": "2026-11-25"},
    {"cve": "CVE-2025-23267", "fixed": "1.17.8", "rule": "ctk_cve_2025_23267",
     "what": "the update-ldcache hook follows links out of the container; CVSS 8.5",
     "source": _PSIRT + "2025/5659/5659.md (a_id 5659)", "checked": "2026-11-25"},
    {"cve": "CVE-2026-24260", "fixed": "1.19.1", "rule": "ctk_cve_2026_24260",
     "what": "a time-of-check time-of-use race can lead to code execution, privilege escalation and data "
             "tampering; CVSS 8.5",
     "source": _PSIRT + "2026/5850/5850.json (a_id 5850)", "checked": "2026-11-25"},
)

# The CDI specification version the toolkit writes by default, from `first`
# on (the toolkit writes the lowest version its spec needs; additionalGids,
# working from 1.19.1, needs 0.7.0); engines.CDI_SPEC_MIN_ENGINE says which
# engines read it. `workaround`: how to keep writing the older version.
CTK_CDI_SPEC_VERSIONS = (
    {"first": "1.19.1", "spec": "0.7.0",
     "workaround": "nvidia-ctk cdi generate --feature-flag no-additional-gids-for-device-nodes",
     "source": _RELEASE_NOTES + " (1.19.1 known issue) ; NVIDIA/nvidia-container-toolkit#1860",
     "checked": "2026-11-25"},
)


# What decides which /dev/char/<major>:<minor> links the NVIDIA device nodes
# need, read in one `find` (the container_toolkit role reads it to create
# missing links, the verify role to judge them;
# plugin_utils/_verify.dev_char_missing parses it). `nvidia-ctk system
# create-dev-char-symlinks` links /dev/nvidia* and /dev/nvidia-caps/nvidia-*
# character devices by their device numbers (find cannot print those; stat
# can): "node <hex major>:<hex minor> <path>" and "link <major>:<minor> <target>".
DEV_CHAR_LISTING = {
    # /proc/devices too: only nodes of the majors the nvidia modules
    # registered are the driver's (as nvidia-ctk reads them).
    "value": ["find", "/dev", "/proc/devices", "-maxdepth", "2",
              "(", "-path", "/proc/devices", "-exec", "sed", "s/^/major /", "{}", "+", ")",
              "-o", "(", "-path", "/dev/nvidia*", "-name", "nvidia*", "-type", "c",
              "-exec", "stat", "--printf", "node %t:%T %n\\n", "{}", "+", ")",
              "-o", "(", "-path", "/dev/char/*", "-type", "l", "-printf", "link %f %l\\n", ")"],
    "source": _REPO + "v1.20.1:cmd/nvidia-ctk/system/create-dev-char-symlinks/existing.go",
    "checked": "2026-11-26",
}
# fmt: on
