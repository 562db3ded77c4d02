# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The judge: what gpufleet.nvidia.version_matrix does with its options, shared by the
module (plugins/modules/version_matrix.py, when it runs as a module) and the
action plugin of the same name (plugins/action/version_matrix.py, the default
path: on the controller, in the worker that runs the task, with no module
transfer). One argument spec and one Manager, so both paths take the same
options, reject the same input with the same messages and return the same
values.

Standard library only (the module path may run on a target, Python 3.8+).
"""

from __future__ import annotations

import copy
import datetime
import json
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._findings import fails, worst

from .evaluate import Matrix
from .tables import RULES, SEVERITIES, MatrixError

DESIRED_OPTIONS: dict[str, dict[str, t.Any]] = dict(
    driver_state=dict(type="str", choices=["present", "absent"]),
    driver_branch=dict(type="str"),
    driver_version=dict(type="str"),
    driver_kernel_module=dict(type="str", choices=["auto", "open", "proprietary"]),
    driver_gpu_models=dict(type="list", elements="str"),
    driver_fabricmanager=dict(type="raw"),
    container_toolkit_version=dict(type="str"),
    container_runtime_engine=dict(type="str", choices=["containerd", "docker", "crio"]),
    container_runtime_cdi=dict(type="bool"),
    cdi_spec_dir=dict(type="str"),
    cdi_device_name_strategy=dict(type="list", elements="str"),
    container_runtime_set_default=dict(type="bool"),
    device_plugin_device_list_strategy=dict(type="str"),
    crictl_version=dict(type="str"),
    crictl_kubernetes_version=dict(type="str"),
    dcgm_version=dict(type="str"),
    dcgm_exporter=dict(type="bool"),
    dcgm_exporter_version=dict(type="str"),
    device_plugin_version=dict(type="str"),
    gpufleet_dra=dict(type="str"),
    gpufleet_dra_compute_domains=dict(type="bool"),
    mig_label=dict(type="str"),
    mig_config=dict(type="dict"),
)

INSTALLED_OPTIONS: dict[str, dict[str, t.Any]] = dict(
    nvml=dict(type="dict"),
    packages=dict(type="dict"),
    versions=dict(type="dict"),
    nvidia_pci=dict(type="dict"),
)

ARGUMENT_SPEC: dict[str, dict[str, t.Any]] = dict(
    desired=dict(type="dict", default={}, options=DESIRED_OPTIONS),
    installed=dict(type="dict", default={}, options=INSTALLED_OPTIONS),
    cuda_versions=dict(type="list", elements="str", default=[]),
    cuda_compat=dict(type="bool", default=False),
    target=dict(type="str", choices=["desired", "installed"], default="desired"),
    fail_on=dict(type="str", choices=["error", "warning", "never"], default="error"),
    tables=dict(type="dict", default={}),
    custom_rules=dict(type="list", elements="dict", default=[]),
    ignore_rules=dict(type="list", elements="str", default=[]),
    eol_warning_days=dict(type="int", default=180),
    today=dict(type="str"),
)


def argument_spec() -> dict[str, dict[str, t.Any]]:
    """A fresh copy of ARGUMENT_SPEC: validation fills the defaults it hands out (desired, installed) in place, so
    each validation needs its own."""
    return copy.deepcopy(ARGUMENT_SPEC)


# Matrices by their inputs (tables, custom rules, date, warning window,
# ignored rules): a fleet shares one set of them, so a process that judges
# many hosts (the action plugin's tests, a strategy without forks, the
# controller's own process where it runs the action in-line) parses the
# user's tables and rules once. Bounded: a run has a handful of distinct ones.
_MATRICES: dict[str, Matrix] = {}
_MATRICES_KEPT = 16


def matrix_for(params: dict[str, t.Any], today: datetime.date) -> Matrix:
    """The Matrix for these options, built once per distinct set of them."""
    key = json.dumps(
        [params["tables"], params["custom_rules"], today.isoformat(), params["eol_warning_days"], sorted(params["ignore_rules"])], sort_keys=True, default=str
    )
    matrix = _MATRICES.get(key)
    if matrix is None:
        matrix = Matrix(
            tables=params["tables"],
            custom_rules=params["custom_rules"],
            today=today,
            eol_warning_days=params["eol_warning_days"],
            ignore_rules=params["ignore_rules"],
        )
        if len(_MATRICES) >= _MATRICES_KEPT:
            _MATRICES.pop(next(iter(_MATRICES)))
        _MATRICES[key] = matrix
    return matrix


def prime_builtin_matrix() -> Matrix:
    """The matrix of the options' defaults (the built-in tables, today): the action plugins build it when the
    controller loads them, before the strategy forks its workers, so that every worker inherits it parsed."""
    defaults = {name: ARGUMENT_SPEC[name]["default"] for name in ("tables", "custom_rules", "eol_warning_days", "ignore_rules")}
    return matrix_for(defaults, datetime.date.today())


class VersionMatrixManager:
    """Builds the matrix from the validated options and judges one node."""

    def __init__(self, params: dict[str, t.Any]) -> None:
        self.params = params

    def _today(self) -> datetime.date:
        text = self.params.get("today")
        if not text:
            return datetime.date.today()
        try:
            return datetime.datetime.strptime(text, "%Y-%m-%d").date()
        except ValueError:
            raise MatrixError("today '{0}' is not a date (YYYY-MM-DD)".format(text)) from None

    def run(self) -> dict[str, t.Any]:
        """The module's return values, plus `failing`: the findings at or above fail_on (popped by the caller)."""
        matrix = matrix_for(self.params, self._today())
        desired = {k: v for k, v in (self.params["desired"] or {}).items() if v is not None}
        installed = {k: v for k, v in (self.params["installed"] or {}).items() if v is not None}
        view, findings = matrix.evaluate(desired, installed, self.params["cuda_versions"], self.params["target"], self.params["cuda_compat"])
        failing = fails(findings, self.params["fail_on"])
        summary: dict[str, t.Any] = {level: sum(1 for f in findings if f["severity"] == level) for level in SEVERITIES}
        summary.update(worst=worst(findings), failed=bool(failing))
        return {
            "findings": findings,
            "summary": summary,
            "matrix": view.as_dict(),
            "rules": dict(RULES),
            "messages": [line(f) for f in findings],
            "failing": failing,
        }


def line(found: dict[str, t.Any]) -> str:
    return "[{0}] {1}: {2} -- fix: {3}".format(found["severity"], found["rule"], found["message"], found["fix"])


def failure_message(failing: list[dict[str, t.Any]]) -> str:
    counts = {level: sum(1 for f in failing if f["severity"] == level) for level in SEVERITIES}
    what = ", ".join("{0} {1}{2}".format(n, level, "s" if n != 1 else "") for level, n in sorted(counts.items(), key=lambda kv: -SEVERITIES.index(kv[0])) if n)
    lines = ["version matrix: {0}".format(what)]
    lines += [line(f) for f in failing]
    return "\n".join(lines)


def judge(params: dict[str, t.Any]) -> tuple[dict[str, t.Any], str | None]:
    """(the task's result without `failed`, the failure message or None): the whole task, for both paths."""
    try:
        result = VersionMatrixManager(params).run()
    except MatrixError as exc:
        return {"changed": False}, "version_matrix: {0}".format(exc)
    failing = result.pop("failing")
    result["changed"] = False
    return result, failure_message(failing) if failing else None
