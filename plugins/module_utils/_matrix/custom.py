# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Declarative rules users add without editing the collection (``custom_rules``
of the version_matrix module): conditions over the NodeView's fields and the
finding they raise.
"""

from __future__ import annotations

import re
import typing as t

from .node import NodeView, finding
from .tables import SEVERITIES, MatrixError
from .versions import _OPERATORS, Driver, parse_version

_CONDITION = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\S.*)$")

# Fields a custom rule can test; "per_item" fields hold several values (one
# per GPU, per CUDA version): `when` matches if any value matches, `require`
# needs every value to match.
CUSTOM_FIELDS: dict[str, str] = {
    "driver_version": "version",
    "driver_branch": "version",
    "kernel_module": "text",
    "gpu_model": "per_item",
    "gpu_architecture": "per_item",
    "cuda_version": "per_item_version",
    "container_toolkit_version": "version",
    "engine": "text",
    "engine_version": "version",
    "crictl_version": "version",
    "kubernetes_version": "version",
}


class CustomRule:
    """A user rule: `when` all conditions hold, every `require` must hold.

    ``{id, severity, message, fix, when: {field: cond}, require: {field: cond}}``
    where a condition is a value ("hopper"), a list of values (any of them) or,
    for versions, an operator and a version (">= 550.90.07"). A bare driver
    branch that cannot be decided against a release is reported, as a warning
    at most, rather than guessed.
    """

    def __init__(self, spec: t.Any) -> None:
        if not isinstance(spec, dict):
            raise MatrixError("custom rule {0!r}: expected a mapping".format(spec))
        self.id = str(spec.get("id") or "")
        if not re.fullmatch(r"^[A-Za-z0-9_.-]+$", self.id):
            raise MatrixError("custom rule {0!r}: `id` must be a word (letters, digits, _ . -)".format(spec))
        unknown = sorted(set(spec) - {"id", "severity", "message", "fix", "when", "require", "layer"})
        if unknown:
            raise MatrixError("custom rule {0}: unknown key(s) {1}".format(self.id, ", ".join(unknown)))
        self.severity = spec.get("severity", "error")
        if self.severity not in SEVERITIES:
            raise MatrixError("custom rule {0}: severity must be one of {1}".format(self.id, ", ".join(SEVERITIES)))
        self.message = str(spec.get("message") or "custom rule {0} is not met".format(self.id))
        self.fix = str(spec.get("fix") or "")
        self.layer = str(spec.get("layer") or "fleet")
        self.when = self._conditions(spec.get("when") or {}, "when")
        self.require = self._conditions(spec.get("require") or {}, "require")
        if not self.require:
            raise MatrixError("custom rule {0}: `require` needs at least one condition".format(self.id))

    def _conditions(self, conditions: t.Any, key: str) -> list[tuple[str, list[tuple[str, t.Any]]]]:
        if not isinstance(conditions, dict):
            raise MatrixError("custom rule {0}: `{1}` must be a mapping of field: condition".format(self.id, key))
        parsed = []
        for field, raw in conditions.items():
            if field not in CUSTOM_FIELDS:
                raise MatrixError("custom rule {0}: unknown field `{1}` in `{2}` (known: {3})".format(self.id, field, key, ", ".join(sorted(CUSTOM_FIELDS))))
            values = raw if isinstance(raw, list) else [raw]
            alternatives = []
            for value in values:
                match = _CONDITION.fullmatch(str(value))
                operator, operand = (match.group(1), match.group(2).strip()) if match else ("==", str(value).strip())
                if "version" in CUSTOM_FIELDS[field]:
                    try:
                        parse_version(operand)
                    except MatrixError:
                        raise MatrixError("custom rule {0}: `{1}: {2}` is not a version condition".format(self.id, field, value)) from None
                elif operator not in ("==", "!="):
                    raise MatrixError("custom rule {0}: `{1}` compares text; use a value or a list".format(self.id, field))
                alternatives.append((operator, operand))
            parsed.append((field, alternatives))
        return parsed

    @staticmethod
    def _values(view: NodeView, field: str) -> list[t.Any] | None:
        """The view's values for a field (None: not known)."""
        if field == "driver_version":
            return [view.driver] if view.driver else None
        if field == "driver_branch":
            return [str(view.driver.branch)] if view.driver else None
        if field == "kernel_module":
            return [view.kernel_module] if view.kernel_module else None
        if field == "gpu_model":
            return [gpu.model_key or gpu.name for gpu in view.gpus] or None
        if field == "gpu_architecture":
            return [gpu.architecture for gpu in view.gpus] or None
        if field == "cuda_version":
            return list(view.cuda_versions) or None
        if field == "engine":
            return [view.engine] if view.engine else None
        versions = {
            "container_toolkit_version": view.toolkit,
            "engine_version": view.engine_version,
            "crictl_version": view.crictl,
            "kubernetes_version": view.kubernetes,
        }
        return [versions[field]] if versions.get(field) else None

    @staticmethod
    def _holds(field: str, value: t.Any, operator: str, operand: str) -> bool | None:
        if isinstance(value, Driver):
            return value.compare(operator, operand)
        if "version" in CUSTOM_FIELDS[field]:
            left = value if isinstance(value, tuple) else parse_version(value)
            right = parse_version(operand)
            # "1.33" means the whole minor: compare on the operand's precision.
            return _OPERATORS[operator](left[: len(right)], right)
        same = str(value).lower() == operand.lower()
        return same if operator == "==" else not same

    def _field_holds(self, view: NodeView, field: str, alternatives: list[tuple[str, t.Any]], every: bool) -> bool | None:
        values = self._values(view, field)
        if values is None:
            return None
        results = []
        for value in values:
            outcomes = [self._holds(field, value, op, operand) for op, operand in alternatives]
            if True in outcomes:
                results.append(True)
            elif None in outcomes:
                results.append(None)
            else:
                results.append(False)
        if every:
            if False in results:
                return False
            return None if None in results else True
        if True in results:
            return True
        return None if None in results else False

    def evaluate(self, view: NodeView) -> list[dict[str, str]]:
        for field, alternatives in self.when:
            if self._field_holds(view, field, alternatives, every=False) is not True:
                return []
        found = []
        for field, alternatives in self.require:
            holds = self._field_holds(view, field, alternatives, every=True)
            wanted = " or ".join("{0} {1}".format(op, operand) for op, operand in alternatives)
            if holds is False:
                found.append(
                    finding(
                        "custom:" + self.id,
                        self.severity,
                        field,
                        "{0} ({1} must be {2})".format(self.message, field, wanted),
                        self.fix,
                        self.layer,
                        "custom rule",
                    )
                )
            elif holds is None:
                found.append(
                    finding(
                        "custom:" + self.id,
                        "warning" if self.severity == "error" else self.severity,
                        field,
                        "{0}: cannot tell whether {1} is {2} from what is declared".format(self.message, field, wanted),
                        self.fix or "declare {0} precisely (e.g. pin driver_version)".format(field),
                        self.layer,
                        "custom rule",
                    )
                )
        return found
