# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Rules: the driver itself (branch lifecycle, security floors, architecture
support, product floors, kernel-module flavour) and MIG.
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import (
    drivers as _drivers,
)

from .data import MatrixData
from .node import Gpu, NodeView, finding
from .tables import ARCHITECTURE_NAMES, BRANCH_TYPES, OPEN_MODULES_DEFAULT_BRANCH
from .versions import Driver, _month_name, driver_branch, driver_branch_int, open_modules_first_branch, parse_version, version_text


class DriverRules(MatrixData):
    """The rules about the driver branch, its kernel module and MIG."""

    def _branch_lifecycle(self, view: NodeView) -> list[dict[str, str]]:
        if view.driver is None:
            return []
        branch = str(view.driver.branch)
        status = self.branch_status(branch)
        subject = "R{0}".format(branch)
        if status["type"] is None:
            return [
                finding(
                    "branch_lifecycle",
                    "warning",
                    subject,
                    "driver branch R{0} is not in the lifecycle table, so its support status is unknown".format(branch),
                    "check https://docs.nvidia.com/datacenter/tesla/drivers/ and add it to the matrix tables "
                    '(branches: [{branch: "' + branch + '", type: ..., eol: ...}]), or use a listed branch',
                    "driver",
                )
            ]
        found = []
        kind = BRANCH_TYPES.get(status["type"], status["type"])
        supported = self._supported_branches()
        move = "move to a supported branch ({0})".format(", ".join(supported)) if supported else "move to a supported branch"
        if status["status"] == "eol":
            when = " in {0}".format(_month_name(status["eol"])) if status["eol"] not in (None, "ended") else ""
            found.append(
                finding(
                    "branch_lifecycle",
                    "warning",
                    subject,
                    "driver branch R{0} ({1}) reached end of life{2}: no more bug or security fixes".format(branch, kind, when),
                    move,
                    "driver",
                )
            )
        elif status["status"] == "near_eol":
            found.append(
                finding(
                    "branch_lifecycle",
                    "warning",
                    subject,
                    "driver branch R{0} ({1}) reaches end of life in {2} ({3} days left)".format(branch, kind, _month_name(status["eol"]), status["days_left"]),
                    "plan the upgrade: " + move,
                    "driver",
                )
            )
        elif status["status"] == "unknown":
            found.append(
                finding(
                    "branch_lifecycle",
                    "warning",
                    subject,
                    "driver branch R{0} ({1}): end of life not verified; {2}".format(branch, kind, status["note"] or "no support matrix read lists its date"),
                    "check https://docs.nvidia.com/datacenter/tesla/drivers/ ; " + move,
                    "driver",
                )
            )
        if status["type"] == "NFB" and status["status"] != "eol":
            found.append(
                finding(
                    "branch_lifecycle",
                    "info",
                    subject,
                    "driver branch R{0} is a {1} (about a quarter of support); production fleets usually run a Production or Long Term Support branch".format(
                        branch, kind
                    ),
                    "use a Production or Long Term Support branch unless you need this branch's features",
                    "driver",
                )
            )
        return found

    def _driver_security(self, view: NodeView) -> list[dict[str, str]]:
        """A warning when the driver lacks a security fix its own branch has had since.

        A warning, not an error: fleets pin drivers they have validated, and
        the fix is a patch release of the same branch. Branch-only
        declarations install the branch's newest release and pass.
        """
        if view.driver is None or view.driver.version is None:
            return []
        branch = str(view.driver.branch)
        open_rows = [row for row in _drivers.DRIVER_SECURITY_BULLETINS if branch in row["fixed"] and view.driver.version < parse_version(row["fixed"][branch])]
        if not open_rows:
            return []
        target = max((row["fixed"][branch] for row in open_rows), key=parse_version)
        driver = version_text(view.driver.version)
        subject = "driver_version" if view.target == "desired" else "driver {0}".format(driver)
        bulletins = ", ".join("{0} ({1})".format(row["bulletin"], row["published"]) for row in open_rows)
        return [
            finding(
                "driver_security",
                "warning",
                subject,
                "driver {0} lacks the fixes of NVIDIA security bulletin(s) {1} for R{2}; the newest fixed R{2} release is {3}".format(
                    driver, bulletins, branch, target
                ),
                "set driver_version to {0} or newer (or leave it empty to take the branch's newest)".format(target),
                "driver",
                open_rows[-1]["source"],
            )
        ]

    def _supported_branches(self) -> list[str]:
        names = []
        for branch in sorted(self.branches, key=int):
            status = self.branch_status(branch)
            if status["status"] == "supported" and status["type"] in ("PB", "LTSB"):
                names.append("R{0} {1}".format(branch, status["type"]))
        return names

    def _architecture_branch(self, view: NodeView) -> list[dict[str, str]]:
        driver = view.driver
        if driver is None:
            return []
        found = []
        for architecture in sorted({gpu.architecture for gpu in view.gpus if gpu.architecture in ARCHITECTURE_NAMES}, key=self.architecture_index):
            labels = ", ".join(gpu.label for gpu in view.gpus if gpu.architecture == architecture)
            first, last = self.architecture_support(architecture)
            if last is not None and driver.branch > int(last):
                found.append(
                    finding(
                        "architecture_branch",
                        "error",
                        architecture,
                        "driver {0} does not support {1} GPUs ({2}): R{3} is the last branch for {1}".format(driver, architecture.capitalize(), labels, last),
                        'use driver branch R{0} (set driver_branch: "{0}")'.format(last),
                        "driver",
                    )
                )
            elif first is not None:
                ok = driver.at_least(first)
                if ok is False:
                    found.append(
                        finding(
                            "architecture_branch",
                            "error",
                            architecture,
                            "driver {0} predates {1} GPUs ({2}): they need {3} or newer".format(driver, architecture.capitalize(), labels, first),
                            "use a driver of branch {0} or newer".format(driver_branch(first)),
                            "driver",
                        )
                    )
                elif ok is None:
                    found.append(
                        finding(
                            "architecture_branch",
                            "info",
                            architecture,
                            "{0} GPUs need driver {1} or newer; only {2} releases from {1} on qualify".format(architecture.capitalize(), first, driver),
                            "pin driver_version to {0} or newer to be sure".format(first),
                            "driver",
                        )
                    )
        found.extend(self._product_floors(view))
        return found

    def product_floor(self, model: dict[str, t.Any], driver: Driver | None = None) -> str | None:
        """A GPU product's own driver floor, above its architecture's (None where it has none).

        A product named first by a release of each of several branches (min_driver_by_branch)
        has the floor of the driver's branch; a branch not listed takes the next listed one's
        (it never named the product); every release of a branch above them all qualifies.
        """
        floors = [model["min_driver"]] if model.get("min_driver") else []
        by_branch = model.get("min_driver_by_branch") or {}
        if by_branch:
            branches = sorted(by_branch, key=int)
            later = [branch for branch in branches if driver is None or int(branch) >= driver.branch]
            if later:
                floors.append(by_branch[later[0]])
        if model.get("first_cuda"):
            floor = self.min_driver(model["first_cuda"])
            if floor:
                floors.append(floor)
        return max(floors, key=parse_version) if floors else None

    def _product_floors(self, view: NodeView) -> list[dict[str, str]]:
        driver = view.driver
        found = []
        seen = set()
        for gpu in view.gpus:
            if not gpu.model or gpu.model_key in seen:
                continue
            seen.add(gpu.model_key)
            floor = self.product_floor(gpu.model, driver)
            if floor is None:
                continue
            labels = ", ".join(g.label for g in view.gpus if g.model_key == gpu.model_key)
            ok = driver.at_least(floor)
            unverified = gpu.model.get("floor_status") == "U"
            if ok is False:
                found.append(
                    finding(
                        "architecture_branch",
                        "warning" if unverified else "error",
                        gpu.model_key,
                        "driver {0} predates {1} ({2}): it needs {3} or newer{4}".format(
                            driver, gpu.model_key.upper(), labels, floor, " (unverified floor: a warning only)" if unverified else ""
                        ),
                        "use driver {0} or newer (branch {1} or newer)".format(floor, driver_branch(floor)),
                        "driver",
                        gpu.model.get("source"),
                    )
                )
            elif ok is None:
                found.append(
                    finding(
                        "architecture_branch",
                        "info",
                        gpu.model_key,
                        "{0} needs driver {1} or newer; only {2} releases from {1} on qualify".format(gpu.model_key.upper(), floor, driver),
                        "pin driver_version to {0} or newer to be sure".format(floor),
                        "driver",
                        gpu.model.get("source"),
                    )
                )
        return found

    def _kernel_module(self, view: NodeView) -> list[dict[str, str]]:
        if view.driver is None or not view.gpus:
            return []
        requested = view.kernel_module or "auto"
        branch = driver_branch_int(view.driver)
        choice, reasons = self.kernel_module_for(view.gpus, requested, branch, view.vgpu_guest)
        if choice.problem == "open_too_old":
            return [
                finding(
                    "kernel_module",
                    "error",
                    "driver_kernel_module" if requested == "open" else "driver_branch",
                    "driver {0} has no open kernel modules: {1}".format(view.driver, "; ".join(reasons)),
                    "use driver branch R{0} or newer{1}".format(
                        open_modules_first_branch(view.vgpu_guest),
                        ", or driver_kernel_module: proprietary where the GPUs allow it" if requested == "open" else "",
                    ),
                    "driver",
                )
            ]
        if choice.flavour is None and choice.problem in ("mixed", "refused"):
            if requested == "auto":
                return [
                    finding(
                        "kernel_module",
                        "error",
                        "driver_kernel_module",
                        "no kernel module flavour suits every GPU on this host: {0}".format("; ".join(reasons)),
                        "split these GPUs across hosts; one driver cannot serve both",
                        "driver",
                    )
                ]
            other = "open" if requested == "proprietary" else "proprietary"
            return [
                finding(
                    "kernel_module",
                    "error",
                    "driver_kernel_module",
                    "driver_kernel_module is {0}, but {1}".format(requested, "; ".join(reasons)),
                    "set driver_kernel_module: {0} (or auto)".format(other),
                    "driver",
                )
            ]
        if (
            requested == "proprietary"
            and branch >= int(OPEN_MODULES_DEFAULT_BRANCH)
            and self.kernel_module_for(view.gpus, "auto", branch, view.vgpu_guest)[0].flavour == "open"
        ):
            return [
                finding(
                    "kernel_module",
                    "info",
                    "driver_kernel_module",
                    "from R{0} on the open modules are NVIDIA's default and suggested flavour for these GPUs".format(OPEN_MODULES_DEFAULT_BRANCH),
                    "consider driver_kernel_module: open (or auto)",
                    "driver",
                )
            ]
        return []

    def _mig_gpus(self, view: NodeView) -> list[Gpu]:
        """GPUs the declared MIG label enables MIG on (all GPUs if the config is not at hand)."""
        if not view.mig_label:
            return []
        config = view.mig_config
        entries = None
        if config:
            entries = (config.get("mig-configs") or {}).get(view.mig_label)
        if not isinstance(entries, list):
            return list(view.gpus)
        chosen = []
        for gpu in view.gpus:
            for entry in entries:
                if not isinstance(entry, dict) or not entry.get("mig-enabled"):
                    continue
                devices = entry.get("devices", "all")
                if devices != "all" and gpu.index is not None and gpu.index not in (devices or []):
                    continue
                filters = entry.get("device-filter")
                if filters and gpu.pci_device_id:
                    wanted = [str(f).upper() for f in (filters if isinstance(filters, list) else [filters])]
                    if gpu.pci_device_id.upper() not in wanted:
                        continue
                chosen.append(gpu)
                break
        return chosen

    def _mig(self, view: NodeView) -> list[dict[str, str]]:
        found = []
        for gpu in self._mig_gpus(view):
            if gpu.mig_capable is False:
                found.append(
                    finding(
                        "mig_supported",
                        "error",
                        gpu.label,
                        "MIG label '{0}' enables MIG on {1}, which does not support MIG".format(view.mig_label, gpu.label),
                        'select these GPUs out of the label (devices / device-filter) or set mig_label: ""',
                        "mig",
                    )
                )
                continue
            minimum = gpu.model.get("mig_min_driver") if gpu.model else None
            if not minimum or view.driver is None:
                continue
            ok = view.driver.at_least(minimum)
            if ok is False:
                found.append(
                    finding(
                        "mig_driver",
                        "error",
                        gpu.label,
                        "MIG on {0} needs driver {1} or newer; the driver is {2}".format(gpu.label, minimum, view.driver),
                        "use driver {0} or newer".format(minimum),
                        "mig",
                    )
                )
            elif ok is None:
                found.append(
                    finding(
                        "mig_driver",
                        "info",
                        gpu.label,
                        "MIG on {0} needs driver {1} or newer; only {2} releases from {1} on qualify".format(gpu.label, minimum, view.driver),
                        "pin driver_version to {0} or newer to be sure".format(minimum),
                        "mig",
                    )
                )
        return found
