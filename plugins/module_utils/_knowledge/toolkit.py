# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA Container Toolkit: features by version, security floors (CVEs) and
the CDI specification version it writes."""

from __future__ import annotations

_REPO = "NVIDIA/nvidia-container-toolkit@"
_ISSUE = "secondary: issue 22's review of NVIDIA's security bulletins"

# (feature, first version, what it is); each row's source is the CHANGELOG.md
# of the tag that added it.
CTK_FEATURES = (
    {"feature": "cdi_generate", "first": "1.12.0", "what": "`nvidia-ctk cdi generate` writes CDI specifications",
     "source": _REPO + "v1.12.0:CHANGELOG.md", "checked": "2026-11-22"},
    {"feature": "cdi_mig_devices", "first": "1.12.0",
     "what": "MIG devices are included in generated CDI specifications",
     "source": "secondary: issue 22's review of " + _REPO + "v1.12.0:CHANGELOG.md", "checked": "2026-11-25"},
    {"feature": "runtime_configure_containerd", "first": "1.14.0",
     "what": "`nvidia-ctk runtime configure` edits containerd's config",
     "source": _REPO + "v1.14.0:CHANGELOG.md", "checked": "2026-11-22"},
    {"feature": "docker_cdi", "first": "1.15.0",
     "what": "`nvidia-ctk runtime configure --enable-cdi` for Docker (needs Docker >= 25)",
     "source": _REPO + "v1.15.0:CHANGELOG.md", "checked": "2026-11-22"},
    {"feature": "containerd_config_v3", "first": "1.17.4", "what": "containerd config version 3 (containerd 2.x)",
     "source": _REPO + "v1.17.4:CHANGELOG.md", "checked": "2026-11-22"},
    {"feature": "drop_in_configs", "first": "1.18.0", "what": "drop-in config files for containerd and CRI-O",
     "source": _REPO + "v1.18.0:CHANGELOG.md", "checked": "2026-11-22"},
    {"feature": "cdi_refresh_units", "first": "1.18.0", "what": "the nvidia-cdi-refresh.service/.path units",
     "source": _REPO + "v1.18.0:deployments/systemd", "checked": "2026-11-22"},
    {"feature": "jit_cdi_default", "first": "1.18.0", "what": "the nvidia runtime defaults to jit-cdi mode",
     "source": _REPO + "v1.18.0:CHANGELOG.md", "checked": "2026-11-22"},
    {"feature": "cdi_device_id", "first": "1.19.0", "what": "`nvidia-ctk cdi generate --device-id`",
     "source": _REPO + "v1.19.0:CHANGELOG.md", "checked": "2026-11-22"},
)

# Security floors: a toolkit below `fixed` is vulnerable to `cve`. Each floor
# is its own rule (`rule`), so a site can accept one known risk by its id
# (ignore_rules) and nothing else.
CTK_CVE_FLOORS = (
    {"cve": "CVE-2024-0132", "fixed": "1.16.2", "rule": "ctk_cve_2024_0132",
     "what": "a crafted container image can escape to the host (time-of-check time-of-use)",
     "source": _ISSUE, "checked": "2026-11-25"},
    {"cve": "CVE-2024-0134", "fixed": "1.17.0", "rule": "ctk_cve_2024_0134",
     "what": "a crafted container image can create unauthorized files on the host",
     "source": _ISSUE, "checked": "2026-11-25"},
    {"cve": "CVE-2024-0135", "fixed": "1.17.3", "rule": "ctk_cve_2024_0135",
     "what": "a crafted container image can modify a host binary", "source": _ISSUE, "checked": "2026-11-25"},
    {"cve": "CVE-2024-0136", "fixed": "1.17.3", "rule": "ctk_cve_2024_0136",
     "what": "a crafted container image can gain access to host libraries", "source": _ISSUE,
     "checked": "2026-11-25"},
    {"cve": "CVE-2024-0137", "fixed": "1.17.3", "rule": "ctk_cve_2024_0137",
     "what": "a crafted container image can reach the host's network namespace", "source": _ISSUE,
     "checked": "2026-11-25"},
    {"cve": "CVE-2025-23359", "fixed": "1.17.4", "rule": "ctk_cve_2025_23359",
     "what": "a crafted container image can escape to the host (time-of-check time-of-use, CVE-2024-0132 bypass)",
     "source": _ISSUE, "checked": "2026-11-25"},
    {"cve": "CVE-2025-23266", "fixed": "1.17.8", "rule": "ctk_cve_2025_23266",
     "what": "a crafted container image can run code as root on the host (enable-cuda-compat hook)",
     "source": _ISSUE, "checked": "2026-11-25"},
    {"cve": "CVE-2025-23267", "fixed": "1.17.8", "rule": "ctk_cve_2025_23267",
     "what": "a crafted container image can corrupt host files through a link (update-ldcache hook)",
     "source": _ISSUE, "checked": "2026-11-25"},
)

# The CDI specification version the toolkit writes by default, from `first`
# on; engines.CDI_SPEC_MIN_ENGINE says which engines read it.
CTK_CDI_SPEC_VERSIONS = (
    {"first": "1.19.0", "spec": "0.7.0",
     "source": "secondary: issue 22's review of the toolkit's known issues", "checked": "2026-11-25"},
)
