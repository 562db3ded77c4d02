# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Host-managed handover filters: the GPU Operator's (and the DRA driver's)
Helm values that fit what a node has. The logic is in
plugins/plugin_utils/_handover.py."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _handover
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def operator_values(layers: t.Any, settings: t.Any) -> dict[str, t.Any]:
    """One node's Helm values, by chart."""
    if not isinstance(layers, t.Mapping) or not isinstance(settings, t.Mapping):
        raise AnsibleFilterError("operator_values: expected the declared_layers lookup's answer and the settings as mappings")
    try:
        return _handover.operator_values(layers, settings)
    except _handover.HandoverError as exc:
        raise AnsibleFilterError("operator_values: {0}".format(exc)) from None


def operator_fleet_values(per_host: t.Any) -> dict[str, t.Any]:
    """One set of values for the hosts of one Helm release, which must agree."""
    if not isinstance(per_host, t.Mapping):
        raise AnsibleFilterError("operator_fleet_values: expected host name -> operator_values")
    try:
        return _handover.fleet_values(per_host)
    except _handover.HandoverError as exc:
        raise AnsibleFilterError("operator_fleet_values: {0}".format(exc)) from None


class FilterModule(FilterTable):
    """Handover filters."""

    FILTERS = (operator_values, operator_fleet_values)
