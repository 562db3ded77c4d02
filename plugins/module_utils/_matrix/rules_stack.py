# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Rules: the container stack above the driver (container toolkit features and
CVE floors, CDI spec version, engine lifecycle and CDI support, the device
plugin's runtime, crictl skew, DRA minimums, fabric manager).
"""

from __future__ import annotations

import datetime
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    engines as _engines,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    kubernetes as _kubernetes,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    toolkit as _toolkit,
)

from .data import MatrixData
from .node import NodeView, finding
from .tables import CRICTL_GROUPS, CTK_CVE_FLOORS, CTK_FEATURES, DCGM_CVE_FLOORS, DEVICE_PLUGIN_CVE_FLOORS, ENGINE_CDI
from .versions import Driver, _month_end, _month_name, parse_version, version_text


class StackRules(MatrixData):
    """The rules about the container toolkit, engines, crictl, DRA and the fabric manager."""

    def _container_toolkit(self, view: NodeView) -> list[dict[str, str]]:
        if view.toolkit is None:
            return []
        found = []
        toolkit = version_text(view.toolkit)
        features = self.ctk_features(toolkit)
        if (view.cdi_wanted or view.cdi_managed) and not features["cdi_generate"]:
            found.append(
                finding(
                    "container_toolkit",
                    "error",
                    "cdi_generate",
                    "Container Toolkit {0} cannot generate CDI specifications (from 1.12.0)".format(toolkit),
                    "set container_toolkit_version to 1.12.0 or newer",
                    "container_toolkit",
                )
            )
        if view.engine == "containerd" and view.engine_version and view.engine_version >= (2,) and not features["containerd_config_v3"]:
            found.append(
                finding(
                    "container_toolkit",
                    "error",
                    "containerd_config_v3",
                    "containerd {0} uses config version 3, which Container Toolkit {1} does not support (from 1.17.4)".format(
                        version_text(view.engine_version), toolkit
                    ),
                    "set container_toolkit_version to 1.17.4 or newer",
                    "container_toolkit",
                )
            )
        if len(view.device_name_strategies) > 1 and (view.cdi_wanted or view.cdi_managed) and not features["device_name_strategies"]:
            first = [row[1] for row in CTK_FEATURES if row[0] == "device_name_strategies"][0]
            found.append(
                finding(
                    "container_toolkit",
                    "error",
                    "cdi_device_name_strategy",
                    "Container Toolkit {0} takes one --device-name-strategy; cdi_device_name_strategy lists {1} (several at once from {2})".format(
                        toolkit, ", ".join(view.device_name_strategies), first
                    ),
                    "set container_toolkit_version to {0} or newer, or give cdi_device_name_strategy one value".format(first),
                    "cdi",
                )
            )
        if view.cdi_managed and not features["cdi_refresh_units"]:
            found.append(
                finding(
                    "container_toolkit",
                    "info",
                    "cdi_refresh_units",
                    "Container Toolkit {0} has no nvidia-cdi-refresh units (from 1.18.0): the cdi role installs gpufleet-cdi-refresh.service instead".format(
                        toolkit
                    ),
                    "nothing to do; 1.18.0 or newer uses NVIDIA's own units",
                    "cdi",
                )
            )
        if view.engine in ("containerd", "crio") and not features["drop_in_configs"]:
            found.append(
                finding(
                    "container_toolkit",
                    "info",
                    "drop_in_configs",
                    "Container Toolkit {0} writes no {1} drop-in configs (from 1.18.0)".format(toolkit, view.engine),
                    "nothing to do: gpufleet writes its own drop-in",
                    "container_runtime",
                )
            )
        return found

    def _toolkit_cves(self, view: NodeView) -> list[dict[str, str]]:
        """One error per CVE the toolkit is below the fix of; each its own rule id."""
        if view.toolkit is None:
            return []
        toolkit = version_text(view.toolkit)
        open_cves = [row for row in CTK_CVE_FLOORS if view.toolkit < parse_version(row["fixed"])]
        if not open_cves:
            return []
        # One upgrade that closes every open CVE.
        target = max((row["fixed"] for row in open_cves), key=parse_version)
        subject = "container_toolkit_version" if view.target == "desired" else "Container Toolkit {0}".format(toolkit)
        return [
            finding(
                row["rule"],
                "error",
                subject,
                "Container Toolkit {0} is vulnerable to {1} ({2}); it is fixed in {3}".format(toolkit, row["cve"], row["what"], row["fixed"]),
                "set container_toolkit_version to {0} or newer; to accept this risk knowingly, add {1} to preflight_ignore_rules".format(target, row["rule"]),
                "container_toolkit",
                row["source"],
            )
            for row in open_cves
        ]

    def _dcgm_cves(self, view: NodeView) -> list[dict[str, str]]:
        """One error per CVE that the declared DCGM or dcgm-exporter is below the fix of."""
        found = []
        for row in DCGM_CVE_FLOORS:
            below = []
            if view.dcgm is not None and view.dcgm < parse_version(row["dcgm_fixed"]):
                below.append(("dcgm_version", "DCGM {0}".format(version_text(view.dcgm)), row["dcgm_fixed"]))
            if view.dcgm_exporter is not None and view.dcgm_exporter < parse_version(row["exporter_fixed"]):
                below.append(("dcgm_exporter_version", "dcgm-exporter {0}".format(version_text(view.dcgm_exporter)), row["exporter_fixed"]))
            if not below:
                continue
            found.append(
                finding(
                    row["rule"],
                    "error",
                    ", ".join(name for name, _what, _fixed in below),
                    "{0} vulnerable to {1} ({2}); fixed in DCGM {3} and dcgm-exporter {4} (the release {3}-{4})".format(
                        " and ".join(what for _name, what, _fixed in below) + (" are" if len(below) > 1 else " is"),
                        row["cve"],
                        row["what"],
                        row["dcgm_fixed"],
                        row["exporter_fixed"],
                    ),
                    "set {0}; to accept this risk knowingly, add {1} to preflight_ignore_rules".format(
                        " and ".join(
                            '{0}: "{1}"'.format(name, fixed if name == "dcgm_version" else "{0}-{1}".format(row["dcgm_fixed"], fixed))
                            for name, _what, fixed in below
                        ),
                        row["rule"],
                    ),
                    "dcgm",
                    row["source"],
                )
            )
        return found

    def _device_plugin_cves(self, view: NodeView) -> list[dict[str, str]]:
        """One error per CVE that the declared device plugin is below the fix of, where its strategy is exposed."""
        if view.device_plugin is None:
            return []
        found = []
        for row in DEVICE_PLUGIN_CVE_FLOORS:
            exposed = [strategy for strategy in view.device_list_strategies if strategy in row["strategies"]]
            if not exposed or view.device_plugin >= parse_version(row["fixed"]):
                continue
            found.append(
                finding(
                    row["rule"],
                    "error",
                    "device_plugin_version",
                    "the device plugin {0} with the {1} device-list strategy is vulnerable to {2} ({3}); it is fixed in {4}".format(
                        version_text(view.device_plugin), " and ".join(exposed), row["cve"], row["what"], row["fixed"]
                    ),
                    "run the device plugin {0} or newer (and declare it in device_plugin_version), or a device-list strategy other than {1}; "
                    "to accept this risk knowingly, add {2} to preflight_ignore_rules".format(row["fixed"], " and ".join(row["strategies"]), row["rule"]),
                    "device_plugin",
                    row["source"],
                )
            )
        return found

    def cdi_spec_version(self, toolkit: tuple[int, ...]) -> str | None:
        """The CDI specification version a toolkit writes by default (None: older than the table)."""
        spec = None
        for row in _toolkit.CTK_CDI_SPEC_VERSIONS:
            if toolkit >= parse_version(row["first"]):
                spec = row["spec"]
        return spec

    def _cdi_spec_version(self, view: NodeView) -> list[dict[str, str]]:
        if view.toolkit is None or not view.engine or view.engine_version is None:
            return []
        if not (view.cdi_wanted or view.cdi_managed):
            return []
        if self.engine_cdi(view.engine, view.engine_version) == "none":
            # No CDI at all: engine_cdi says so, and the nvidia runtime still injects GPUs.
            return []
        spec = self.cdi_spec_version(view.toolkit)
        rows = [row for row in _engines.CDI_SPEC_MIN_ENGINE if row["spec"] == spec and row["engine"] == view.engine]
        if not rows or view.engine_version >= parse_version(rows[0]["first"]):
            return []
        row = rows[0]
        writer = [r for r in _toolkit.CTK_CDI_SPEC_VERSIONS if r["spec"] == spec][0]
        floor = max((r["fixed"] for r in CTK_CVE_FLOORS), key=parse_version)
        # An older toolkit is a fix only while it is not below a security floor.
        older = (
            ", or set container_toolkit_version below {0} (and at least {1}, the security floor)".format(writer["first"], floor)
            if parse_version(floor) < parse_version(writer["first"])
            else ""
        )
        return [
            finding(
                "cdi_spec_version",
                "error",
                "{0} {1}".format(view.engine, version_text(view.engine_version)),
                "Container Toolkit {0} writes CDI specification {1}, which {2} {3} cannot read (from {4}); GPU containers would fail to start".format(
                    version_text(view.toolkit), spec, view.engine, version_text(view.engine_version), row["first"]
                ),
                "upgrade {0} to {1} or newer{2}, or have the spec written in the older version ({3})".format(
                    view.engine, row["first"], older, writer["workaround"]
                ),
                "container_runtime",
                row["source"],
            )
        ]

    def _engine_lifecycle(self, view: NodeView) -> list[dict[str, str]]:
        if not view.engine or view.engine_version is None:
            return []
        minor = version_text(view.engine_version[:2])
        lines = [row for row in _engines.ENGINE_EOL if row["engine"] == view.engine]
        rows = [row for row in lines if row["minor"] == minor]
        if not rows:
            return []
        row = rows[0]
        end = datetime.datetime.strptime(row["eol"], "%Y-%m-%d").date()
        extended = _month_end(row["extended"]) if row.get("extended") else None
        if (end - self.today).days > self.eol_warning_days:
            return []
        supported = [r["minor"] for r in lines if datetime.datetime.strptime(r["eol"], "%Y-%m-%d").date() > self.today]
        subject = "{0} {1}".format(view.engine, version_text(view.engine_version))
        fix = "upgrade {0} to a supported release line{1}".format(view.engine, " ({0})".format(", ".join(supported)) if supported else "")
        if end >= self.today:
            message = "{0} {1} reaches end of life on {2} ({3} days left)".format(view.engine, minor, row["eol"], (end - self.today).days)
            fix = "plan the upgrade: " + fix
        elif extended and extended >= self.today:
            message = "{0} {1} reached the end of its regular support on {2}; only a narrow extended support ({3}) runs until {4}".format(
                view.engine, minor, row["eol"], row.get("note") or "upstream", _month_name(row["extended"])
            )
        else:
            message = "{0} {1} reached end of life on {2}{3}: no more bug or security fixes".format(
                view.engine, minor, row["eol"], " (extended support ended in {0})".format(_month_name(row["extended"])) if extended else ""
            )
        return [finding("engine_lifecycle", "warning", subject, message, fix, "container_runtime", row["source"])]

    def _device_plugin_runtime(self, view: NodeView) -> list[dict[str, str]]:
        if view.nvidia_default_runtime is not False:
            return []
        found = []
        for row in _kubernetes.DEVICE_PLUGIN_STRATEGIES:
            if row["needs"] == "nvidia_runtime" and row["strategy"] in view.device_list_strategies:
                found.append(
                    finding(
                        "device_plugin_runtime",
                        "warning",
                        "device_plugin_device_list_strategy",
                        "device_plugin_device_list_strategy {0} hands GPUs over through NVIDIA_VISIBLE_DEVICES, which "
                        "only the nvidia runtime acts on, and container_runtime_set_default is false: GPU pods get no "
                        "GPU unless they select an nvidia RuntimeClass".format(row["strategy"]),
                        "set container_runtime_set_default: true, give the GPU pods runtimeClassName: nvidia, or use "
                        "device_plugin_device_list_strategy: cdi-cri with container_runtime_cdi: true",
                        "container_runtime",
                        row["source"],
                    )
                )
        return found

    def _device_plugin_cdi_cri(self, view: NodeView) -> list[dict[str, str]]:
        """cdi-cri needs a kubelet that passes CDI devices through the CRI, and an engine that reads them."""
        if "cdi-cri" not in view.device_list_strategies:
            return []
        rows = {row["component"]: row for row in _kubernetes.CDI_CRI_SUPPORT}
        found = []
        kubelet = rows["kubernetes"]
        if view.kubernetes is not None and view.kubernetes < parse_version(kubelet["first"]):
            gated = view.kubernetes >= parse_version(kubelet["gated"])
            found.append(
                finding(
                    "device_plugin_cdi_cri",
                    "warning" if gated else "error",
                    "device_plugin_device_list_strategy",
                    "the cdi-cri device-list strategy needs the kubelet to pass CDI devices through the CRI: Kubernetes {0} {1}".format(
                        version_text(view.kubernetes),
                        "does so only with the DevicePluginCDIDevices feature gate on (off by default until {0})".format(kubelet["first"])
                        if gated
                        else "cannot (from {0} on, with a feature gate; by default from {1})".format(kubelet["gated"], kubelet["first"]),
                    ),
                    "use device_plugin_device_list_strategy: cdi-annotations, or Kubernetes {0} or newer{1}".format(
                        kubelet["first"], " (or turn the kubelet's DevicePluginCDIDevices gate on)" if gated else ""
                    ),
                    "device_plugin",
                    kubelet["source"],
                )
            )
        engine = rows.get(view.engine or "")
        if engine and view.engine_version is not None and view.engine_version < parse_version(engine["first"]):
            found.append(
                finding(
                    "device_plugin_cdi_cri",
                    "error",
                    "device_plugin_device_list_strategy",
                    "the cdi-cri device-list strategy needs the engine to read CDI devices from the CRI: {0} {1} does not (from {2} on)".format(
                        view.engine, version_text(view.engine_version), engine["first"]
                    ),
                    "upgrade {0} to {1} or newer, or use device_plugin_device_list_strategy: cdi-annotations".format(view.engine, engine["first"]),
                    "device_plugin",
                    engine["source"],
                )
            )
        return found

    def _engine_cdi(self, view: NodeView) -> list[dict[str, str]]:
        if not view.engine or view.engine_version is None or not view.cdi_wanted:
            return []
        version = version_text(view.engine_version)
        support = self.engine_cdi(view.engine, view.engine_version)
        subject = "{0} {1}".format(view.engine, version)
        if support == "none":
            first = [v for v, level in ENGINE_CDI[view.engine] if level == "opt_in"][0]
            return [
                finding(
                    "engine_cdi",
                    "warning",
                    subject,
                    "{0} has no CDI support (from {1}); only the nvidia runtime can inject GPUs".format(subject, first),
                    "upgrade {0} to {1} or newer, or set container_runtime_cdi: false".format(view.engine, first),
                    "container_runtime",
                )
            ]
        if support == "unverified":
            return [
                finding(
                    "engine_cdi",
                    "warning",
                    subject,
                    "CDI support of {0} is unverified (CRI-O's first release with CDI is not confirmed; 1.24 is likely)".format(subject),
                    "use CRI-O 1.24 or newer",
                    "container_runtime",
                )
            ]
        if support == "opt_in":
            return [
                finding(
                    "engine_cdi",
                    "info",
                    subject,
                    "{0} supports CDI as an opt-in setting; it is on only where the runtime config enables it".format(subject),
                    "nothing to do: container_runtime_cdi enables it",
                    "container_runtime",
                )
            ]
        return []

    @staticmethod
    def crictl_group(minor: tuple[int, ...]) -> int | None:
        """The index of the CRICTL_GROUPS row a 1.x minor falls in; None below every group."""
        for index, (first, last) in enumerate(CRICTL_GROUPS):
            if minor >= first and (last is None or minor <= last):
                return index
        return None

    def _crictl_skew(self, view: NodeView) -> list[dict[str, str]]:
        if view.crictl is None or view.kubernetes is None:
            return []
        crictl, kubernetes = view.crictl[:2], view.kubernetes[:2]
        if crictl == kubernetes:
            return []
        subject = "crictl {0}".format(version_text(view.crictl))
        wanted = "v{0}.x".format(version_text(kubernetes))
        fix = 'use crictl {0} (or set crictl_version: "" to derive it)'.format(wanted)
        group = self.crictl_group(kubernetes)
        if group is not None and group == self.crictl_group(crictl):
            return [
                finding(
                    "crictl_skew",
                    "warning",
                    subject,
                    "crictl {0} works with Kubernetes {1}, but cri-tools recommends the same minor: CRI features of the newer one may not be supported".format(
                        version_text(view.crictl), version_text(kubernetes)
                    ),
                    fix,
                    "crictl",
                    _kubernetes.CRICTL_GROUPS[group]["source"],
                )
            ]
        if group is None:
            why = "Kubernetes {0} works only with its own cri-tools minor".format(version_text(kubernetes))
        else:
            first, last = CRICTL_GROUPS[group]
            why = "Kubernetes {0} works with cri-tools {1}".format(
                version_text(kubernetes),
                "{0} or newer".format(version_text(first)) if last is None else "{0} to {1}".format(version_text(first), version_text(last)),
            )
        return [
            finding(
                "crictl_skew",
                "error",
                subject,
                "crictl {0} is not compatible with Kubernetes {1}: {2}".format(version_text(view.crictl), version_text(kubernetes), why),
                fix,
                "crictl",
            )
        ]

    def _dra(self, view: NodeView) -> list[dict[str, str]]:
        """DRA_MINIMUMS rows that apply to the declared workflow, against the declared Kubernetes and driver."""
        if view.dra is None:
            return []
        wanted = {"gpus"} | ({"compute_domains"} if view.dra_compute_domains else set()) | ({"operator"} if view.dra == "operator" else set())
        found: list[dict[str, str]] = []
        for row in _kubernetes.DRA_MINIMUMS:
            if row["for"] not in wanted:
                continue
            if row["component"] == "kubernetes":
                found.extend(self._dra_kubernetes(view, row))
            elif view.driver is not None:
                found.extend(self._dra_driver(view.driver, row))
        return found

    @staticmethod
    def _dra_kubernetes(view: NodeView, row: dict[str, t.Any]) -> list[dict[str, str]]:
        def kubernetes(level: str, message: str, fix: str) -> list[dict[str, str]]:
            return [finding("dra", level, "kubernetes", message, fix, "crictl", row["source"])]

        minimum = parse_version(row["minimum"])
        release = view.kubernetes_release
        if release is None:
            return kubernetes(
                "warning",
                "DRA needs Kubernetes {0} or later, and no Kubernetes version is declared to check".format(row["minimum"]),
                'declare the cluster\'s release in crictl_kubernetes_version (e.g. "1.34.2")',
            )
        shown = version_text(release)
        if release[: len(minimum)] >= minimum:
            return []
        gates = parse_version(row["gates"]) if row["gates"] else None
        upgrade = "upgrade the cluster to Kubernetes {0} or later".format(row["minimum"])
        if len(release) < len(minimum) and release == minimum[: len(release)]:
            return kubernetes(
                "warning",
                "Kubernetes {0}: DRA needs {1} or later ({2}); the patch level is not declared".format(shown, row["minimum"], row["what"]),
                'declare the full release in crictl_kubernetes_version (e.g. "{0}") or {1}'.format(row["minimum"], upgrade),
            )
        # Gates rescue the release lines below the minimum's (1.32, 1.33), not 1.34.0/1.34.1.
        if gates is not None and gates <= release[:2] < minimum[:2]:
            return kubernetes(
                "warning",
                "Kubernetes {0} is below {1}: DRA works only with feature gates set by hand ({2})".format(shown, row["minimum"], row["what"]),
                "{0}, or enable the DynamicResourceAllocation feature gate and the resource.k8s.io beta APIs on every component".format(upgrade),
            )
        return kubernetes("error", "Kubernetes {0} is below {1}, the minimum of {2}".format(shown, row["minimum"], row["what"]), upgrade)

    @staticmethod
    def _dra_driver(driver: Driver, row: dict[str, t.Any]) -> list[dict[str, str]]:
        meets = driver.at_least(row["minimum"])
        if meets is True:
            return []
        fix = "pin driver_version to {0} or later (or driver_branch to a newer branch)".format(row["minimum"])
        if meets is None:
            return [
                finding(
                    "dra",
                    "warning",
                    "driver {0}".format(driver),
                    "driver branch {0} may be below {1}, the minimum {2}: the branch alone does not say which release".format(
                        driver, row["minimum"], row["what"]
                    ),
                    fix,
                    "driver",
                    row["source"],
                )
            ]
        return [
            finding(
                "dra",
                "error",
                "driver {0}".format(driver),
                "driver {0} is below {1}, the minimum {2}".format(driver, row["minimum"], row["what"]),
                fix,
                "driver",
                row["source"],
            )
        ]

    def _fabricmanager(self, view: NodeView) -> list[dict[str, str]]:
        if view.fabricmanager is None or view.driver is None or not view.driver.pinned:
            return []
        if view.fabricmanager == view.driver.version:
            return []
        return [
            finding(
                "fabricmanager",
                "error",
                "fabricmanager",
                "Fabric Manager {0} differs from driver {1}: Fabric Manager only starts at exactly the driver's version".format(
                    version_text(view.fabricmanager), view.driver
                ),
                "install Fabric Manager {0} (the driver role pins both together)".format(view.driver),
                "driver",
            )
        ]
