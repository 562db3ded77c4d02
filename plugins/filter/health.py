# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GPU health filters: the judgement of plugins/module_utils/_verify/health.py
(shared with gpufleet-verify-boot on the node) for the roles."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import health as _health
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def health_policy_errors(policy: t.Any, prefix: str = _health.PREFIX) -> list[str]:
    """Every problem of the health variables (named with prefix) and its fix; [] when they are good."""
    return _health.policy_errors(policy, prefix)


def health_metrics(nvml: t.Any, findings: t.Any, kernel_log: t.Any = None) -> str:
    """The node's health as a Prometheus node-exporter textfile."""
    if not isinstance(findings, list):
        raise AnsibleFilterError("health_metrics: expected the list of health findings, got {0}".format(type(findings).__name__))
    try:
        return _health.metrics_text(nvml, findings, _health.kernel_events(kernel_log))
    except ValueError as exc:
        raise AnsibleFilterError("health_metrics: {0}".format(exc)) from None


class FilterModule(FilterTable):
    """GPU health filters."""

    FILTERS = (health_metrics, health_policy_errors)
