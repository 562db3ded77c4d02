# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""A verify check and its findings, as the report (verify's and gpufleet-verify-boot's) holds them:

    {layer, status, summary, expected, observed, findings}

status: pass | warn | fail (from the worst finding), or not_managed |
not_available | deferred, which are never passes. A finding has the shape of
the version matrix's findings (rule, severity, layer, subject, message, fix,
source), so one report reader takes both.
"""

from __future__ import annotations

import typing as t

from .. import _findings

SOURCE = "gpufleet verify"


def finding(layer: str, subject: str, message: str, fix: str, severity: str = "error") -> dict[str, str]:
    """A verify finding of `layer`; its rule is verify_<layer>."""
    return _findings.finding("verify_" + layer, severity, layer, subject, message, fix, SOURCE)


def check(
    layer: str,
    status: str,
    summary: str,
    expected: dict[str, t.Any] | None = None,
    observed: dict[str, t.Any] | None = None,
    findings: list[dict[str, str]] | None = None,
) -> dict[str, t.Any]:
    return {
        "layer": layer,
        "status": status,
        "summary": summary,
        "expected": expected or {},
        "observed": observed or {},
        "findings": findings or [],
    }


def judged(layer: str, summary: str, expected: dict[str, t.Any], observed: dict[str, t.Any], findings: list[dict[str, str]]) -> dict[str, t.Any]:
    """A check whose status follows from its worst finding; a failing or warning check is summed up by that finding."""
    level = _findings.worst(findings)
    status = {"error": "fail", "warning": "warn"}.get(level or "", "pass")
    if status != "pass":
        summary = next(f["message"] for f in findings if f["severity"] == level)
    return check(layer, status, summary, expected, observed, findings)
