# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""One node as the rules see it: its GPUs (Gpu), the normalised declarations
and facts (NodeView, package_version), and the findings the rules return
(finding, worst, fails).
"""

from __future__ import annotations

import re
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _findings
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge.packages import version_packages

from .tables import SOURCES
from .versions import Driver, version_text


def _normalise_name(name: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", name.lower()).split())


class Gpu:
    """One GPU: from NVML facts (authoritative) or a declared model name."""

    def __init__(
        self,
        label: str,
        name: str,
        architecture: str,
        model: dict[str, t.Any] | None,
        mig_capable: bool | None,
        pci_device_id: str | None = None,
        index: int | None = None,
    ) -> None:
        self.label = label
        self.name = name
        self.architecture = architecture
        self.model = model
        self.mig_capable = mig_capable
        self.pci_device_id = pci_device_id
        self.index = index

    @property
    def grace(self) -> bool:
        return bool(self.model and self.model.get("grace"))

    @property
    def model_key(self) -> str | None:
        return self.model["model"] if self.model else None

    def as_dict(self) -> dict[str, t.Any]:
        return {
            "label": self.label,
            "name": self.name,
            "architecture": self.architecture,
            "model": self.model_key,
            "grace": self.grace,
            "mig_capable": self.mig_capable,
        }


# =============================================================================
# Findings
# =============================================================================


def finding(rule: str, severity: str, subject: str, message: str, fix: str, layer: str, source: str | None = None) -> dict[str, str]:
    """A rule's finding; its source is the rule's unless one is given."""
    return _findings.finding(rule, severity, layer, subject, message, fix, source if source is not None else SOURCES.get(rule, ""))


# =============================================================================
# The node as the rules see it
# =============================================================================


class NodeView:
    """Everything the rules judge, normalised from declarations and facts.

    Built by ``Matrix.view()``; each attribute is None when not declared or
    not known, and the rules that need it do not fire.
    """

    def __init__(self) -> None:
        self.target = "desired"
        self.driver: Driver | None = None
        self.driver_state = "present"
        self.kernel_module: str | None = None
        self.gpus: list[Gpu] = []
        self.gpu_source = "none"
        # A vGPU guest (GFD's vGPU rule on the node's PCI functions): its vGPUs narrow the kernel-module flavours.
        self.vgpu_guest = False
        self.cuda_versions: list[str] = []
        self.cuda_compat = False
        self.toolkit: tuple[int, ...] | None = None
        self.engine: str | None = None
        self.engine_version: tuple[int, ...] | None = None
        self.cdi_wanted = False
        self.cdi_managed = False
        self.device_name_strategies: list[str] = []
        self.device_list_strategies: list[str] = []
        self.nvidia_default_runtime: bool | None = None
        self.crictl: tuple[int, ...] | None = None
        self.kubernetes: tuple[int, ...] | None = None
        # DRA (gpufleet_dra): the Kubernetes release as declared (with its
        # patch level, when given: DRA's floor is a patch release).
        self.kubernetes_release: tuple[int, ...] | None = None
        self.dra: str | None = None
        self.dra_compute_domains = False
        self.fabricmanager: tuple[int, ...] | None = None
        # DCGM, the exporter's own version (the part after '-' of its tag
        # 4.5.3-4.8.2) where it is deployed, and the device plugin the cluster
        # runs: declared only (their security floors).
        self.dcgm: tuple[int, ...] | None = None
        self.dcgm_exporter: tuple[int, ...] | None = None
        self.device_plugin: tuple[int, ...] | None = None
        self.mig_label: str | None = None
        self.mig_config: dict[str, t.Any] | None = None

    def as_dict(self) -> dict[str, t.Any]:
        def text(version: tuple[int, ...] | None) -> str | None:
            return version_text(version) if version else None

        return {
            "target": self.target,
            "driver": str(self.driver) if self.driver else None,
            "driver_branch": str(self.driver.branch) if self.driver else None,
            "driver_state": self.driver_state,
            "kernel_module": self.kernel_module,
            "gpus": [gpu.as_dict() for gpu in self.gpus],
            "gpu_source": self.gpu_source,
            "cuda_versions": list(self.cuda_versions),
            "cuda_compat": self.cuda_compat,
            "container_toolkit": text(self.toolkit),
            "engine": self.engine,
            "engine_version": text(self.engine_version),
            "cdi": self.cdi_wanted,
            "device_list_strategies": list(self.device_list_strategies),
            "crictl": text(self.crictl),
            "kubernetes": text(self.kubernetes),
            "dra": self.dra,
            "fabricmanager": text(self.fabricmanager),
            "mig_label": self.mig_label,
        }


# Package names whose versions the "installed" view reads (Debian/Ubuntu and
# RHEL spellings); a name ending in "*" is a prefix. Kept in the knowledge base.
PACKAGE_NAMES: dict[str, tuple[str, ...]] = version_packages()


def package_version(packages: dict[str, t.Any] | None, names: t.Iterable[str]) -> str | None:
    """The version of the first installed package among `names` (package_facts shape)."""
    if not packages:
        return None
    for name in names:
        if name.endswith("*"):
            matches = sorted(key for key in packages if key.startswith(name[:-1]))
        else:
            matches = [name] if name in packages else []
        for match in matches:
            entries = packages[match]
            entry = entries[0] if isinstance(entries, list) and entries else entries
            if isinstance(entry, dict) and entry.get("version"):
                return str(entry["version"])
    return None
