# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""A finding, the one shape that the version matrix's rules and the verify checks report in:

    {rule, severity, layer, subject, message, fix, source}

with the severities' order and the two questions every reader asks of a list of them: the worst, and
those at or above a threshold. Standard library only: the node runtime carries it (the boot check).
"""

from __future__ import annotations

import typing as t

# Lowest first.
SEVERITIES = ("info", "warning", "error")


def finding(rule: str, severity: str, layer: str, subject: str, message: str, fix: str, source: str) -> dict[str, str]:
    return {"rule": rule, "severity": severity, "layer": layer, "subject": subject, "message": message, "fix": fix, "source": source}


def worst(findings: t.Iterable[t.Mapping[str, t.Any]]) -> str | None:
    """The highest severity among findings, or None when there are none."""
    levels = [SEVERITIES.index(f["severity"]) for f in findings]
    return SEVERITIES[max(levels)] if levels else None


def fails(findings: t.Iterable[t.Mapping[str, t.Any]], fail_on: str) -> list[t.Any]:
    """The findings at or above `fail_on` (error | warning | never)."""
    if fail_on == "never":
        return []
    threshold = SEVERITIES.index(fail_on)
    return [f for f in findings if SEVERITIES.index(f["severity"]) >= threshold]
