# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The imex role's filters: its plan, the config.cfg merge and the domain's nodes (plugins/plugin_utils/_imex.py)."""

from __future__ import annotations

import typing as t
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _imex
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable, plan_of_mapping


def imex_plan(settings: object) -> dict[str, t.Any]:
    """Package, repository, nodes, config.cfg keys and TLS files for one host, or the first problem with its fix."""
    return plan_of_mapping("imex_plan", _imex.plan, settings, "give the role's settings as a mapping, not {0}")


def imex_config_merge(text: object, settings: object) -> dict[str, t.Any]:
    """config.cfg's text with the keys of `settings` set in place, comments kept: {content, changed}."""
    if not isinstance(text, str):
        raise AnsibleFilterError("imex_config_merge: expected config.cfg's text, got {0}".format(type(text).__name__))
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError("imex_config_merge: expected the keys to set as a mapping, got {0}".format(type(settings).__name__))
    try:
        return _imex.merge_config(text, settings)
    except _imex.ConfigError as exc:
        raise AnsibleFilterError("imex_config_merge: {0}".format(exc)) from None


def imex_domain_nodes(settings: object) -> dict[str, t.Any]:
    """The domain's node addresses from imex_nodes or imex_nodes_group: {nodes, problem}."""
    if not isinstance(settings, Mapping) or not {"nodes", "nodes_group", "nodes_address_var", "group_addresses"} <= set(settings):
        raise AnsibleFilterError("imex_domain_nodes: give {nodes, nodes_group, nodes_address_var, group_addresses}")
    found, problem = _imex.nodes(settings)
    return {"nodes": found, "problem": problem or ""}


class FilterModule(FilterTable):
    """The imex role's plan, config merge and domain nodes."""

    FILTERS = (imex_plan, imex_config_merge, imex_domain_nodes)
