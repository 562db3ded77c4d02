# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Data access: the matrix's tables (built in, plus rows users add through
``Matrix(tables=...)``: CUDA releases, driver branches, GPU models) and the
lookups the rules and filters make in them.
"""

from __future__ import annotations

import datetime
import re
import typing as t

from .custom import CustomRule
from .node import Gpu, _normalise_name
from .tables import (
    ARCHITECTURE_NAMES,
    ARCHITECTURES,
    BRANCH_TYPES,
    CTK_FEATURES,
    CUDA_BUILD_NUMBERED_FROM,
    CUDA_MVC_FIRST_MINOR,
    CUDA_MVC_FLOORS,
    CUDA_TOOLKIT_DRIVERS,
    DRIVER_BRANCHES,
    ENGINE_CDI,
    ENGINES,
    GPU_MODELS,
    MatrixError,
)
from .versions import (
    Driver,
    FlavourChoice,
    _month_end,
    cuda_label,
    driver_branch,
    flavours_for,
    gpu_kind,
    kernel_module_flavour,
    open_modules_first_branch,
    parse_version,
    version_text,
)

_BUILTIN: dict[str, t.Any] = {}


def _builtin_cuda_rows() -> dict[tuple[int, ...], tuple[str, tuple[int, ...] | None]]:
    """The knowledge base's CUDA rows, parsed once per process: every host's Matrix starts from them, and the
    controller parses them before it forks its workers (the action plugin builds a Matrix at import)."""
    if "cuda" not in _BUILTIN:
        _BUILTIN["cuda"] = {parse_version(cuda): (label, parse_version(driver) if driver else None) for cuda, label, driver in CUDA_TOOLKIT_DRIVERS}
    return _BUILTIN["cuda"]


class MatrixData:
    """The tables (built in, plus user rows) and the lookups in them; the base of the view and the rules."""

    def __init__(
        self,
        tables: dict[str, t.Any] | None = None,
        custom_rules: t.Iterable[t.Any] = (),
        today: datetime.date | None = None,
        eol_warning_days: int = 180,
        ignore_rules: t.Iterable[str] = (),
    ) -> None:
        tables = tables or {}
        unknown = sorted(set(tables) - {"cuda_drivers", "branches", "gpu_models"})
        if unknown:
            raise MatrixError("tables: unknown table(s) {0} (known: branches, cuda_drivers, gpu_models)".format(", ".join(unknown)))
        self.cuda_drivers = self._cuda_rows(tables.get("cuda_drivers") or [])
        self.branches = self._branch_rows(tables.get("branches") or [])
        self.gpu_models = self._gpu_rows(tables.get("gpu_models") or [])
        self.custom_rules = [CustomRule(spec) for spec in custom_rules or []]
        self.today = today or datetime.date.today()
        self.eol_warning_days = int(eol_warning_days)
        self.ignore_rules = set(ignore_rules or [])

    # -- tables -------------------------------------------------------------------
    @staticmethod
    def _cuda_rows(extra: list[t.Any]) -> dict[tuple[int, ...], tuple[str, tuple[int, ...] | None]]:
        rows = dict(_builtin_cuda_rows())
        for row in extra:
            if not isinstance(row, dict) or not row.get("cuda") or not row.get("driver"):
                raise MatrixError("tables.cuda_drivers: each row needs `cuda` and `driver`, got {0!r}".format(row))
            cuda = parse_version(row["cuda"])
            if len(cuda) < 2:
                raise MatrixError("tables.cuda_drivers: `cuda` must be major.minor[.patch], got {0!r}".format(row["cuda"]))
            if len(cuda) == 2:
                # "13.4" names the GA release: 13.4.1 from the build-numbered releases on.
                cuda = cuda + ((1,) if cuda >= CUDA_BUILD_NUMBERED_FROM else (0,))
            cuda = cuda[:3]
            rows[cuda] = (str(row.get("label") or cuda_label(cuda)), parse_version(row["driver"]))
        return rows

    @staticmethod
    def _branch_rows(extra: list[t.Any]) -> dict[str, dict[str, t.Any]]:
        rows = {branch: dict(info) for branch, info in DRIVER_BRANCHES.items()}
        for row in extra:
            if not isinstance(row, dict) or not row.get("branch"):
                raise MatrixError("tables.branches: each row needs `branch`, got {0!r}".format(row))
            eol = row.get("eol")
            if eol not in (None, "ended") and not re.fullmatch(r"^\d{4}-\d{2}$", str(eol)):
                raise MatrixError("tables.branches: `eol` of R{0} must be YYYY-MM, 'ended' or null".format(row["branch"]))
            if row.get("type", "PB") not in BRANCH_TYPES:
                raise MatrixError("tables.branches: `type` of R{0} must be one of {1}".format(row["branch"], ", ".join(BRANCH_TYPES)))
            rows[driver_branch(row["branch"])] = {
                "type": row.get("type", "PB"),
                "eol": eol,
                "note": row.get("note"),
                "status": "V",
                "source": "tables.branches",
            }
        return rows

    @staticmethod
    def _gpu_rows(extra: list[t.Any]) -> tuple[dict[str, t.Any], ...]:
        rows = []
        for row in extra:
            if not isinstance(row, dict) or not row.get("model") or not row.get("architecture"):
                raise MatrixError("tables.gpu_models: each row needs `model` and `architecture`, got {0!r}".format(row))
            if row["architecture"] not in ARCHITECTURE_NAMES:
                raise MatrixError("tables.gpu_models: architecture of {0} must be one of {1}".format(row["model"], ", ".join(ARCHITECTURE_NAMES)))
            pattern = row.get("match") or r"\b{0}\b".format(re.escape(_normalise_name(str(row["model"]))))
            try:
                re.compile(pattern)
            except re.error as exc:
                raise MatrixError("tables.gpu_models: `match` of {0} is not a regular expression: {1}".format(row["model"], exc)) from None
            merged = {"grace": False, "data_center": None, "mig": None, "mig_min_driver": None, "mig_units": None, "source": "tables.gpu_models"}
            merged.update(row)
            merged["match"] = pattern
            rows.append(merged)
        # User rows first: they refine or replace built-in ones.
        return tuple(rows) + GPU_MODELS

    def model_for(self, name: str) -> dict[str, t.Any] | None:
        normalised = _normalise_name(name)
        for row in self.gpu_models:
            if re.search(row["match"], normalised):
                return row
        return None

    # -- lookups used by rules and filters --------------------------------------
    def cuda_release(self, cuda: str) -> tuple[tuple[int, ...], tuple[int, ...] | None, str]:
        """(requested release, its minimum driver or None, note) for a CUDA version.

        "12.4" is the GA release, "12.4.1" Update 1. A release newer than the
        newest known one of its minor gets the newest known floor and a note
        (the real minimum may be higher); an unknown minor gets None.
        """
        parts = parse_version(cuda)
        if len(parts) < 2:
            raise MatrixError("CUDA version '{0}' needs major.minor (e.g. 12.4)".format(cuda))
        same_minor = sorted(release for release in self.cuda_drivers if release[:2] == parts[:2])
        if not same_minor:
            return parts, None, "CUDA {0} is not in the matrix".format(version_text(parts[:2]))
        if len(parts) == 2:
            ga = [r for r in same_minor if self.cuda_drivers[r][0] == "GA"] or same_minor
            return ga[0], self.cuda_drivers[ga[0]][1], self._unread(ga[0])
        release = (parts + (0,))[:3]
        if release in self.cuda_drivers:
            return release, self.cuda_drivers[release][1], self._unread(release)
        older = [r for r in same_minor if r < release and self.cuda_drivers[r][1] is not None] or [r for r in same_minor if r < release]
        if not older:
            return release, self.cuda_drivers[same_minor[0]][1], ""
        note = ""
        if release[:2] >= CUDA_BUILD_NUMBERED_FROM:
            # A build of a known release, not an update: the floor of the
            # newest known release at or below it holds.
            note = "CUDA {0} is not in the matrix: from CUDA {1} the third number is a build number, not an update; the floor of CUDA {2} ({3}) is used".format(
                version_text(release), version_text(CUDA_BUILD_NUMBERED_FROM), version_text(older[-1]), self.cuda_drivers[older[-1]][0]
            )
        elif release > same_minor[-1]:
            note = "CUDA {0} is newer than the newest {1} release in the matrix ({2}); its driver floor may be higher".format(
                version_text(release), version_text(parts[:2]), version_text(same_minor[-1])
            )
        return release, self.cuda_drivers[older[-1]][1], note

    def _unread(self, release: tuple[int, ...]) -> str:
        """The note for a known release whose minimum driver was not read ("" otherwise)."""
        if self.cuda_drivers[release][1] is not None:
            return ""
        return "the minimum driver of CUDA {0} ({1}) is not verified yet".format(version_text(release), self.cuda_drivers[release][0])

    def min_driver(self, cuda: str, compat: str = "full") -> str | None:
        """Minimum driver for a CUDA version: full support, or `minor` (MVC floor)."""
        if compat == "minor":
            parts = parse_version(cuda)
            if len(parts) < 2:
                raise MatrixError("CUDA version '{0}' needs major.minor (e.g. 12.4)".format(cuda))
            floor = CUDA_MVC_FLOORS.get(parts[0])
            if floor and parts[1] >= CUDA_MVC_FIRST_MINOR.get(parts[0], 0):
                return floor
            return self.min_driver(cuda, "full")
        if compat != "full":
            raise MatrixError("compat must be 'full' or 'minor', got '{0}'".format(compat))
        driver = self.cuda_release(cuda)[1]
        return version_text(driver) if driver else None

    def max_cuda(self, driver: str) -> str | None:
        """The newest CUDA major.minor whose release driver the given driver satisfies."""
        version = parse_version(driver)
        satisfied = [release for release, (_label, minimum) in self.cuda_drivers.items() if minimum is not None and version >= minimum]
        return version_text(max(satisfied)[:2]) if satisfied else None

    def branch_status(self, branch: str) -> dict[str, t.Any]:
        """Type and lifecycle of a branch as of `today`."""
        key = driver_branch(branch)
        info = self.branches.get(key)
        result: dict[str, t.Any] = {"branch": key, "type": None, "eol": None, "status": "unknown", "days_left": None, "note": None}
        if info is None:
            return result
        result.update(type=info["type"], eol=info["eol"], note=info.get("note"))
        eol = info["eol"]
        if eol == "ended":
            result["status"] = "eol"
        elif eol:
            end = _month_end(eol)
            days_left = (end - self.today).days
            result["days_left"] = days_left
            if days_left < 0:
                result["status"] = "eol"
            elif days_left <= self.eol_warning_days:
                result["status"] = "near_eol"
            else:
                result["status"] = "supported"
        return result

    @staticmethod
    def architecture_index(architecture: str) -> int:
        return ARCHITECTURE_NAMES.index(architecture)

    def architecture_support(self, architecture: str) -> tuple[str | None, str | None]:
        """(first driver, last branch) for an architecture; None where not bounded."""
        for name, first_cuda, last_branch in ARCHITECTURES:
            if name == architecture:
                first = None
                if first_cuda and parse_version(first_cuda) >= (11, 0):
                    first = self.min_driver(first_cuda)
                return first, last_branch
        raise MatrixError("unknown architecture '{0}' (known: {1})".format(architecture, ", ".join(ARCHITECTURE_NAMES)))

    def supports_architecture(self, driver: Driver, architecture: str) -> bool | None:
        first, last = self.architecture_support(architecture)
        if last is not None and driver.branch > int(last):
            return False
        if first is not None:
            return driver.at_least(first)
        return True

    @staticmethod
    def ctk_features(version: str) -> dict[str, bool]:
        current = parse_version(version)
        return {name: current >= parse_version(first) for name, first, _what in CTK_FEATURES}

    @staticmethod
    def engine_cdi(engine: str, version: tuple[int, ...]) -> str:
        if engine not in ENGINE_CDI:
            raise MatrixError("unknown container engine '{0}' (known: {1})".format(engine, ", ".join(ENGINES)))
        support = "none"
        for first, level in ENGINE_CDI[engine]:
            if version >= parse_version(first):
                support = level
        return support

    @staticmethod
    def kernel_module_for(
        gpus: t.Iterable[Gpu], requested: str = "auto", branch: int | None = None, vgpu_guest: bool = False
    ) -> tuple[FlavourChoice, list[str]]:
        """(choice, reasons): what `requested` comes to for these GPUs and branch (on a vGPU guest or not), by
        versions.kernel_module_flavour (the one rule), and why nothing serves them when choice.flavour is None.
        """
        gpus = list(gpus)

        def offered(gpu: Gpu) -> tuple[str, ...]:
            return flavours_for(gpu.architecture, gpu.grace, vgpu_guest)

        choice = kernel_module_flavour([offered(gpu) for gpu in gpus], requested, branch, vgpu_guest)
        if choice.flavour is not None:
            return choice, []
        concerned = [gpus[i] for i in choice.concerned]
        if choice.problem == "open_too_old":
            shipped = ("in a vGPU guest the open kernel modules drive vGPUs from R{0} on" if vgpu_guest else "open kernel modules ship from R{0} on").format(
                open_modules_first_branch(vgpu_guest)
            )
            return choice, [shipped] + [
                "{0} ({1}) runs only the open modules".format(gpu.label, gpu_kind(gpu.architecture, gpu.grace, "text")) for gpu in concerned
            ]
        if choice.problem == "unknown":
            return choice, ["{0} ({1}): unknown architecture, the flavour it needs is not known".format(gpu.label, gpu.architecture) for gpu in concerned]
        if choice.problem == "no_gpus":
            return choice, ["no GPU is known"]
        need_open = [gpu for gpu in concerned if "proprietary" not in offered(gpu)]
        need_proprietary = [gpu for gpu in concerned if "open" not in offered(gpu)]

        def proprietary_why(gpu: Gpu) -> str:
            # A GPU that runs the open modules on bare metal needs the proprietary ones only as a vGPU.
            return " as a vGPU" if "open" in flavours_for(gpu.architecture, gpu.grace) else ""

        return choice, ["{0} ({1}) needs the open modules".format(gpu.label, gpu_kind(gpu.architecture, gpu.grace, "text")) for gpu in need_open] + [
            "{0} ({1}) needs the proprietary modules{2}".format(gpu.label, gpu.architecture, proprietary_why(gpu)) for gpu in need_proprietary
        ]
