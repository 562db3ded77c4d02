# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters over the version matrix (plugins/module_utils/_matrix/).

Each filter is documented by the YAML sidecar of the same name next to this
file. They answer single questions in templates and `when:` conditions; the
version_matrix module runs the whole rule set.
"""

from __future__ import annotations

import datetime
import functools
import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.evaluate import Matrix
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.node import Gpu
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.tables import ARCHITECTURE_NAMES, MatrixError
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.versions import Driver
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.versions import driver_branch as _driver_branch
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def _errors_named(name: str) -> t.Callable[[t.Callable[..., t.Any]], t.Callable[..., t.Any]]:
    """Turn MatrixError (bad input) into AnsibleFilterError("<name>: ...")."""

    def wrap(func: t.Callable[..., t.Any]) -> t.Callable[..., t.Any]:
        @functools.wraps(func)
        def run(*args: t.Any, **kwargs: t.Any) -> t.Any:
            try:
                return func(*args, **kwargs)
            except (MatrixError, TypeError, ValueError) as exc:
                raise AnsibleFilterError("{0}: {1}".format(name, exc)) from None

        return run

    return wrap


def _matrix(tables: dict[str, t.Any] | None = None, today: str | None = None, eol_warning_days: int = 180) -> Matrix:
    day = datetime.datetime.strptime(today, "%Y-%m-%d").date() if today else None
    return Matrix(tables=tables, today=day, eol_warning_days=eol_warning_days)


def _driver(value: t.Any) -> Driver:
    text = str(value).strip()
    return Driver(branch=text) if text.isdigit() else Driver(version=text)


@_errors_named("cuda_min_driver")
def cuda_min_driver(cuda: t.Any, compat: str = "full", tables: dict[str, t.Any] | None = None) -> str:
    """Minimum driver for a CUDA version (full support, or the minor-version-compatibility floor)."""
    minimum = _matrix(tables).min_driver(str(cuda), compat)
    if minimum is None:
        raise MatrixError("CUDA {0} is not in the matrix; add it with tables.cuda_drivers".format(cuda))
    return minimum


@_errors_named("driver_branch")
def driver_branch(version: t.Any) -> str:
    """The branch of a driver version: 550.127.05 -> 550."""
    return _driver_branch(version)


@_errors_named("driver_max_cuda")
def driver_max_cuda(driver: t.Any, tables: dict[str, t.Any] | None = None) -> str | None:
    """The newest CUDA major.minor a driver fully supports (None when older than every known release)."""
    return _matrix(tables).max_cuda(str(driver))


@_errors_named("gpu_architecture")
def gpu_architecture(name: t.Any, tables: dict[str, t.Any] | None = None) -> str:
    """Architecture of a GPU product name (or an architecture name); 'unknown' when not in the matrix."""
    return _matrix(tables).gpu_from_name(str(name), str(name)).architecture


@_errors_named("driver_supports_arch")
def driver_supports_arch(driver: t.Any, gpu: t.Any, tables: dict[str, t.Any] | None = None) -> bool:
    """Whether a driver (release or bare branch) supports an architecture or GPU model."""
    matrix = _matrix(tables)
    architecture = matrix.gpu_from_name(str(gpu), str(gpu)).architecture
    if architecture not in ARCHITECTURE_NAMES:
        raise MatrixError("'{0}' is neither an architecture ({1}) nor a GPU model in the matrix".format(gpu, ", ".join(ARCHITECTURE_NAMES)))
    # A bare branch supports an architecture if its later releases do.
    return matrix.supports_architecture(_driver(driver), architecture) is not False


@_errors_named("driver_branch_info")
def driver_branch_info(driver: t.Any, today: str | None = None, eol_warning_days: int = 180, tables: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
    """Type and lifecycle status of a driver's branch."""
    return _matrix(tables, today, eol_warning_days).branch_status(str(driver))


def _gpus(matrix: Matrix, value: t.Any) -> list[Gpu]:
    """GPUs from the nvml_info result, its `gpus` list, or a list of model/architecture names."""
    if isinstance(value, dict):
        return matrix.gpus_from_nvml(value)
    if isinstance(value, str):
        value = [value]
    gpus = []
    for item in value or []:
        if isinstance(item, dict):
            gpus.extend(matrix.gpus_from_nvml({"gpus": [item]}))
        else:
            gpus.append(matrix.gpu_from_name(str(item), str(item)))
    return gpus


@_errors_named("kernel_module_flavour")
def kernel_module_flavour(gpus: t.Any, requested: str = "auto", tables: dict[str, t.Any] | None = None, branch: t.Any = None, vgpu_guest: t.Any = False) -> str:
    """The kernel module flavour for a set of GPUs (on a vGPU guest or not): what `auto` means, or a check of `requested`."""
    if requested not in ("auto", "open", "proprietary"):
        raise MatrixError("requested must be auto, open or proprietary, got '{0}'".format(requested))
    matrix = _matrix(tables)
    branch_number = None if branch in (None, "") else int(_driver_branch(branch))
    choice, reasons = matrix.kernel_module_for(_gpus(matrix, gpus), requested, branch_number, bool(vgpu_guest))
    if choice.flavour is None:
        raise MatrixError("no {0} kernel module flavour suits these GPUs: {1}".format("single" if requested == "auto" else requested, "; ".join(reasons)))
    return choice.flavour


@_errors_named("cuda_image_judgement")
def cuda_image_judgement(
    images: t.Any, driver_version: t.Any, gpus: t.Any, packages: t.Any = None, tables: dict[str, t.Any] | None = None, variable: str = "verify_cuda_images"
) -> list[dict[str, t.Any]]:
    """Judge CUDA images ({name, cuda, run?}) against a node's loaded driver and GPUs.

    Each comes back with verdict native | compat | unsupported | unknown,
    min_driver, compat_package, compat_installed, reason and run.
    """
    matrix = _matrix(tables)
    text = str(driver_version or "").strip()
    driver = _driver(text) if text else None
    if packages is not None and not isinstance(packages, dict):
        raise MatrixError("packages must be the node's installed packages (package name -> versions), got {0}".format(type(packages).__name__))
    return matrix.judge_cuda_images(images, driver, _gpus(matrix, gpus), packages, variable)


@_errors_named("ctk_features")
def ctk_features(version: t.Any) -> dict[str, bool]:
    """Which NVIDIA Container Toolkit features a version has."""
    return Matrix.ctk_features(str(version))


class FilterModule(FilterTable):
    """Version matrix filters."""

    FILTERS = (
        cuda_min_driver,
        driver_branch,
        driver_max_cuda,
        gpu_architecture,
        driver_supports_arch,
        driver_branch_info,
        kernel_module_flavour,
        ctk_features,
        cuda_image_judgement,
    )
