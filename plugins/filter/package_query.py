# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""package_query, package_versions: read the output of the knowledge base's package query formats."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge.packages import dpkg_query_rows, rpm_query_rows
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable

_PARSERS = {"dpkg": dpkg_query_rows, "rpm": rpm_query_rows}


def package_query(text: t.Any, manager: str) -> list[dict[str, t.Any]]:
    """The packages in the output of dpkg-query or rpm run with packages.DPKG_QUERY_FORMAT / RPM_QUERY_FORMAT."""
    if manager not in _PARSERS:
        raise AnsibleFilterError("package_query: manager must be one of {0}, not {1!r}".format(", ".join(sorted(_PARSERS)), manager))
    if not isinstance(text, str):
        raise AnsibleFilterError("package_query: expects the query's stdout (a string), not {0}".format(type(text).__name__))
    return _PARSERS[manager](text)


def package_versions(rows: t.Any) -> dict[str, list[dict[str, str]]]:
    """package_facts' shape, {name: [{version}]}, of package_query rows; a later row of a name wins."""
    if not isinstance(rows, list) or not all(isinstance(row, dict) and "name" in row and "version" in row for row in rows):
        raise AnsibleFilterError("package_versions: expects package_query's rows (a list of mappings with name and version)")
    return {row["name"]: [{"version": row["version"]}] for row in rows}


class FilterModule(FilterTable):
    """Filters over package queries."""

    FILTERS = (package_query, package_versions)
