# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Building the NodeView: declarations (desired) and facts (installed: NVML,
packages, versions) normalised into what the rules read, with the findings
about the declarations themselves.
"""

from __future__ import annotations

import re
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._gfd_labels import vgpu_guest

from .data import MatrixData
from .node import PACKAGE_NAMES, Gpu, NodeView, finding, package_version
from .tables import ARCHITECTURE_NAMES, DRA_WORKFLOWS, ENGINES, MatrixError
from .versions import Driver, _words, driver_branch, parse_version


class ViewBuilder(MatrixData):
    """The tables, and the normalisation of one node's declarations and facts."""

    # -- building the view --------------------------------------------------------
    def gpu_from_name(self, name: str, label: str) -> Gpu:
        text = str(name).strip()
        if text.lower() in ARCHITECTURE_NAMES:
            return Gpu(label, text, text.lower(), None, None)
        model = self.model_for(text)
        if model is None:
            return Gpu(label, text, "unknown", None, None)
        return Gpu(label, text, model["architecture"], model, model.get("mig"))

    def gpus_from_nvml(self, nvml: dict[str, t.Any]) -> list[Gpu]:
        gpus = []
        for fact in nvml.get("gpus") or []:
            name = fact.get("name") or "GPU {0}".format(fact.get("index"))
            model = self.model_for(name)
            architecture = fact.get("architecture") or "unknown"
            if architecture not in ARCHITECTURE_NAMES and model:
                architecture = model["architecture"]
            mig = fact.get("mig") or {}
            pci = fact.get("pci") or {}
            gpus.append(
                Gpu(
                    "GPU {0} ({1})".format(fact.get("index"), name),
                    name,
                    architecture,
                    model,
                    bool(mig.get("capable")),
                    pci.get("device_id"),
                    fact.get("index"),
                )
            )
        return gpus

    def view(
        self,
        desired: dict[str, t.Any] | None = None,
        installed: dict[str, t.Any] | None = None,
        cuda_versions: t.Iterable[str] = (),
        target: str = "desired",
        cuda_compat: bool = False,
    ) -> tuple[NodeView, list[dict[str, str]]]:
        """Normalise declarations and facts; return the view and declaration findings."""
        desired = desired or {}
        installed = installed or {}
        nvml = installed.get("nvml") or {}
        packages = installed.get("packages") or {}
        versions = installed.get("versions") or {}
        view = NodeView()
        view.target = target
        # Declared, or (judging a node) a cuda-compat package is installed.
        view.cuda_compat = bool(cuda_compat) or (target == "installed" and bool(package_version(packages, PACKAGE_NAMES["cuda_compat"])))
        found: list[dict[str, str]] = []

        def bad(subject: str, message: str, fix: str, layer: str) -> None:
            found.append(finding("declaration", "error", subject, message, fix, layer))

        def one_of(subject: str, value: t.Any, allowed: t.Sequence[str], fix: str, layer: str) -> bool:
            if value in allowed:
                return True
            bad(subject, "{0} '{1}' is not one of {2}".format(subject, value, ", ".join(allowed)), fix, layer)
            return False

        def version_of(subject: str, value: t.Any, fix: str, layer: str) -> tuple[int, ...] | None:
            if value in (None, ""):
                return None
            try:
                return parse_version(value)
            except MatrixError:
                bad(subject, "{0} '{1}' is not a version".format(subject, value), fix, layer)
                return None

        view.vgpu_guest = bool(vgpu_guest(installed.get("nvidia_pci")))
        # GPUs: NVML facts when a driver answers, else the declared models.
        if nvml.get("status") == "ok" and nvml.get("gpus"):
            view.gpus = self.gpus_from_nvml(nvml)
            view.gpu_source = "nvml"
        elif desired.get("driver_gpu_models"):
            view.gpus = [self.gpu_from_name(name, "declared GPU '{0}'".format(name)) for name in desired["driver_gpu_models"]]
            view.gpu_source = "declared"
        for gpu in view.gpus:
            if gpu.architecture == "unknown":
                found.append(
                    finding(
                        "gpu_model",
                        "warning",
                        gpu.label,
                        "{0}: the matrix does not know this GPU's architecture, so no architecture rule checks it".format(gpu.label),
                        "add it to the matrix tables (gpu_models: [{{model: ..., architecture: ...}}]) or name an architecture ({0})".format(
                            ", ".join(ARCHITECTURE_NAMES)
                        ),
                        "driver",
                    )
                )

        for cuda in cuda_versions or []:
            if not re.fullmatch(r"^\d+\.\d+(\.\d+)?$", str(cuda).strip()):
                bad(
                    "cuda_versions",
                    "CUDA version '{0}' is not major.minor[.patch]".format(cuda),
                    'list the CUDA versions of your images like "12.4" or "12.4.1"',
                    "driver",
                )
            else:
                view.cuda_versions.append(str(cuda).strip())

        if target == "desired":
            self._desired_driver(view, desired, bad)
            view.toolkit = version_of(
                "container_toolkit_version",
                desired.get("container_toolkit_version"),
                'set container_toolkit_version to a release such as "1.20.1"',
                "container_toolkit",
            )
            view.crictl = version_of(
                "crictl_version",
                desired.get("crictl_version"),
                'set crictl_version like "v1.33.0", or "" to derive it from crictl_kubernetes_version',
                "crictl",
            )
            view.dcgm = version_of("dcgm_version", desired.get("dcgm_version"), 'set dcgm_version to a release such as "4.5.3"', "dcgm")
            if desired.get("dcgm_exporter", True) and desired.get("dcgm_exporter_version"):
                view.dcgm_exporter = version_of(
                    "dcgm_exporter_version",
                    str(desired["dcgm_exporter_version"]).rsplit("-", 1)[-1],
                    'set dcgm_exporter_version to a release tag such as "4.5.3-4.8.2"',
                    "dcgm",
                )
            view.device_plugin = version_of(
                "device_plugin_version", desired.get("device_plugin_version"), 'set device_plugin_version to a release such as "v0.19.0"', "device_plugin"
            )
        else:
            loaded = nvml.get("driver_version") if nvml.get("status") == "ok" else None
            loaded = loaded or versions.get("driver")
            if loaded:
                view.driver = Driver(version=loaded)
            view.driver_state = "present" if view.driver else "absent"
            view.kernel_module = versions.get("kernel_module") or None
            view.toolkit = version_of(
                "container_toolkit", versions.get("container_toolkit") or package_version(packages, PACKAGE_NAMES["container_toolkit"]), "", "container_toolkit"
            )
            view.crictl = version_of("crictl", versions.get("crictl") or package_version(packages, PACKAGE_NAMES["crictl"]), "", "crictl")
            view.fabricmanager = version_of(
                "fabricmanager", versions.get("fabricmanager") or package_version(packages, PACKAGE_NAMES["fabricmanager"]), "", "driver"
            )

        engine = desired.get("container_runtime_engine")
        if engine and one_of("container_runtime_engine", engine, ENGINES, "use containerd, docker or crio", "container_runtime"):
            view.engine = engine
            view.engine_version = version_of(engine, versions.get(engine) or package_version(packages, PACKAGE_NAMES[engine]), "", "container_runtime")
        view.cdi_wanted = bool(desired.get("container_runtime_cdi"))
        view.cdi_managed = bool(desired.get("cdi_spec_dir"))
        view.device_name_strategies = _words(desired.get("cdi_device_name_strategy"))
        view.device_list_strategies = _words(desired.get("device_plugin_device_list_strategy"))
        if desired.get("container_runtime_set_default") is not None:
            view.nvidia_default_runtime = bool(desired["container_runtime_set_default"])

        kubernetes = desired.get("crictl_kubernetes_version")
        if kubernetes not in (None, ""):
            parts = version_of("crictl_kubernetes_version", kubernetes, 'set crictl_kubernetes_version to the cluster\'s minor, e.g. "1.33"', "crictl")
            if parts is not None:
                if len(parts) < 2 or parts[0] != 1:
                    bad(
                        "crictl_kubernetes_version",
                        "crictl_kubernetes_version '{0}' is not a Kubernetes 1.x minor".format(kubernetes),
                        'set crictl_kubernetes_version to the cluster\'s minor, e.g. "1.33"',
                        "crictl",
                    )
                else:
                    view.kubernetes = parts[:2]
                    view.kubernetes_release = parts

        dra = desired.get("gpufleet_dra")
        if dra not in (None, "") and one_of(
            "gpufleet_dra",
            dra,
            DRA_WORKFLOWS,
            'set gpufleet_dra to "driver" (NVIDIA\'s DRA driver chart), "operator" (the GPU Operator\'s GPUCluster) or "" (no DRA)',
            "driver",
        ):
            view.dra = str(dra)
            view.dra_compute_domains = bool(desired.get("gpufleet_dra_compute_domains"))

        if desired.get("mig_label"):
            view.mig_label = str(desired["mig_label"])
            config = desired.get("mig_config")
            view.mig_config = config if isinstance(config, dict) and config else None
        return view, found

    @staticmethod
    def _desired_driver(view: NodeView, desired: dict[str, t.Any], bad: t.Callable[..., None]) -> None:
        view.driver_state = desired.get("driver_state") or "present"
        if view.driver_state not in ("present", "absent"):
            bad("driver_state", "driver_state '{0}' is not present or absent".format(view.driver_state), "set driver_state to present or absent", "driver")
        module = desired.get("driver_kernel_module")
        if module:
            if module not in ("auto", "open", "proprietary"):
                bad(
                    "driver_kernel_module",
                    "driver_kernel_module '{0}' is not auto, open or proprietary".format(module),
                    "set driver_kernel_module to auto, open or proprietary",
                    "driver",
                )
            else:
                view.kernel_module = module
        version = str(desired.get("driver_version") or "").strip()
        branch = str(desired.get("driver_branch") or "").strip()
        fix_version = 'set driver_version to a full release such as "580.95.05", or "" to follow driver_branch'
        fix_branch = 'set driver_branch to a branch number such as "580"'
        ok = True
        if version and not re.fullmatch(r"^\d{3}\.\d+(\.\d+)?$", version):
            bad("driver_version", "driver_version '{0}' is not a driver release (NNN.NN[.NN])".format(version), fix_version, "driver")
            ok = False
        if branch and not re.fullmatch(r"^\d{3}$", branch):
            bad("driver_branch", "driver_branch '{0}' is not a branch number (three digits)".format(branch), fix_branch, "driver")
            ok = False
        # As in the driver role, an exact driver_version decides the branch;
        # driver_branch (often just the role default) then plays no part.
        if ok and view.driver_state == "present" and (version or branch):
            view.driver = Driver(version=version or None, branch=driver_branch(version) if version else branch)
