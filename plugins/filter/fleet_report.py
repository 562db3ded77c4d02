# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""fleet_report: the verify role's per-host reports as one HTML page or Markdown."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _report


def fleet_report(reports: t.Any, format: str = "html", title: str = "gpufleet fleet report", hosts: t.Any = None) -> t.Any:
    """Render the fleet report from a list of per-host verify reports.

    `hosts`: every host of the run; those without a report are shown as such.
    """
    if isinstance(reports, dict):
        reports = list(reports.values())
    if not isinstance(reports, list) or not all(isinstance(r, dict) and "host" in r for r in reports):
        raise AnsibleFilterError("fleet_report: expected a list of verify reports (each with a `host`)")
    reported = {str(r["host"]) for r in reports}
    reports = list(reports) + [
        {"host": str(host), "status": "missing", "reason": "no verify report: the host failed or was unreachable before verify ran"}
        for host in hosts or []
        if str(host) not in reported
    ]
    if format == "html":
        return _report.render_html(reports, title)
    if format == "markdown":
        return _report.render_markdown(reports, title)
    if format == "text":
        return _report.render_text(reports)
    raise AnsibleFilterError("fleet_report: format must be html, markdown or text, got '{0}'".format(format))


class FilterModule:
    """Fleet report filter."""

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {"fleet_report": fleet_report}
