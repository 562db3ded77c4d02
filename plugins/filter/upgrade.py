# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters of the rolling upgrade (playbooks/upgrade.yml, the upgrade role):
check the roll's batch settings, and decide from verify's own judgement of a
layer whether a node needs upgrading at all."""

from __future__ import annotations

import re
import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable

UPGRADE_LAYERS = ("driver", "container_toolkit")
_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")
_NUMBER = re.compile(r"^\s*(\d+)\s*$")
SERIAL_FIX = 'give a number of nodes per batch (1), a percentage of the play\'s nodes ("25%"), or a list of them for growing batches ([1, "10%", "50%"])'


def _batch_error(value: t.Any) -> str | None:
    """Why one batch size is not one, or None."""
    if isinstance(value, bool):
        return "{0!r} is a boolean".format(value)
    if isinstance(value, int):
        return None if value >= 1 else "{0} is not a positive number of nodes".format(value)
    if isinstance(value, str):
        number = _NUMBER.match(value)
        if number:
            return None if int(number.group(1)) >= 1 else "'{0}' is not a positive number of nodes".format(value)
        percent = _PERCENT.match(value)
        if percent:
            return None if 1 <= int(percent.group(1)) <= 100 else "'{0}' is not between 1% and 100%".format(value)
        return "'{0}' is neither a number of nodes nor a percentage".format(value)
    return "{0!r} is a {1}".format(value, type(value).__name__)


def upgrade_roll_errors(settings: t.Any) -> list[str]:
    """Every problem with the roll's batch settings, each naming the variable and the fix."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError("upgrade_roll_errors: expected a mapping of the roll's settings, got {0}".format(type(settings).__name__))
    errors = []
    serial = settings.get("upgrade_serial")
    batches = serial if isinstance(serial, list) else [serial]
    problems = [_batch_error(batch) for batch in batches] if batches else ["the list is empty"]
    problems = [problem for problem in problems if problem]
    if problems:
        errors.append("upgrade_serial: {0}; {1}".format("; ".join(problems), SERIAL_FIX))
    failing = settings.get("upgrade_max_fail_percentage")
    number = None
    if isinstance(failing, int) and not isinstance(failing, bool):
        number = failing
    elif isinstance(failing, str) and _NUMBER.match(failing):
        number = int(failing)
    if number is None or not 0 <= number <= 100:
        errors.append(
            "upgrade_max_fail_percentage: {0!r} is not a whole percentage from 0 to 100; give 0 to stop "
            "the roll at the first failed node, or the share of a batch that may fail (25)".format(failing)
        )
    layers = settings.get("upgrade_layers")
    if not isinstance(layers, list) or not layers or any(layer not in UPGRADE_LAYERS for layer in layers):
        errors.append("upgrade_layers: {0!r} must be a non-empty list of {1}".format(layers, ", ".join(UPGRADE_LAYERS)))
    return errors


def upgrade_plan(checks: t.Any, layers: t.Any) -> dict[str, t.Any]:
    """What a node lacks of its declaration, from verify_check results.

    A layer the roll upgrades is pending when verify would fail it now (an
    error finding): the same judgement that gates the node afterwards, so a
    node the gate would pass is never drained. Warnings do not drain a node.
    """
    if not isinstance(checks, list) or not all(isinstance(c, dict) and "layer" in c for c in checks):
        raise AnsibleFilterError("upgrade_plan: expected a list of verify_check results")
    if not isinstance(layers, list) or any(layer not in UPGRADE_LAYERS for layer in layers):
        raise AnsibleFilterError("upgrade_plan: layers must be a list of {0}, got {1!r}".format(", ".join(UPGRADE_LAYERS), layers))
    pending, reasons = [], []
    for check in checks:
        if check["layer"] not in layers:
            continue
        errors = [f for f in check.get("findings") or [] if f.get("severity") == "error"]
        if errors:
            pending.append(check["layer"])
            reasons.extend("{0}: {1}".format(check["layer"], f.get("message", "")) for f in errors)
    return {
        "layers": list(layers),
        "pending": bool(pending),
        "pending_layers": pending,
        "reasons": reasons,
        "summary": "; ".join(reasons) if reasons else "{0} as declared".format(" and ".join(layers)),
    }


class FilterModule(FilterTable):
    """Rolling upgrade filters."""

    FILTERS = (upgrade_plan, upgrade_roll_errors)
