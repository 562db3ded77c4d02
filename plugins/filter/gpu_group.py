# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_group: stop a playbook whose GPU group matches no host of the inventory."""

from __future__ import annotations

from collections.abc import Mapping

from ansible import context
from ansible.errors import AnsibleFilterError
from ansible.inventory.manager import InventoryManager, split_host_pattern
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.parsing.dataloader import DataLoader

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable

# Groups every inventory has: listing them tells the user nothing.
_IMPLICIT_GROUPS = ("all", "ungrouped")
# A term with one of these is a wildcard or a regex, not a name.
_PATTERN_CHARS = ("~", "*", "?", "[")
# ansible-playbook options under which no play runs: a check (ansible-lint's
# --syntax-check) or a listing, usually without the real inventory.
# --list-hosts is not one of them: which hosts match is its question.
_NOTHING_RUNS = ("syntax", "listtasks", "listtags")


def _matching_hosts(pattern: str, groups: Mapping) -> list[str]:
    """The hosts `hosts: <pattern>` would run on, ignoring --limit.

    Ansible's own pattern rules (`a:&b`, `!c`, wildcards, `~regex`) on the
    inventory `groups` describes, as the inventory_hostnames lookup does it:
    the group variable may hold a pattern, not only a group name. --limit is
    left out on purpose: a limit that excludes every host of a real group is
    the user's choice, a group that matches nothing is a mistake.
    """
    manager = InventoryManager(DataLoader(), parse=False)
    for group, hosts in groups.items():
        manager.add_group(group)
        for host in hosts:
            manager.add_host(host, group=group)
    return [host.name for host in manager.get_hosts(pattern=pattern)]


def gpu_group(pattern: object, groups: object, allow_empty: object = False) -> str:
    """`pattern` unchanged when it matches a host (or allow_empty); else AnsibleFilterError naming the fix.

    Used in a play's `hosts:`, which Ansible evaluates whatever --tags and
    --limit say: a mistyped group fails the run there instead of every play
    printing "skipping: no hosts matched" and the run exiting 0.
    """
    if not isinstance(pattern, str) or not pattern.strip():
        raise AnsibleFilterError(
            "gpu_group: gpufleet_gpu_group is {0!r}: give the inventory group (or host pattern) of the GPU nodes, "
            "for example -e gpufleet_gpu_group=gpu_nodes".format(pattern)
        )
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError("gpu_group: give the inventory's groups (the magic variable `groups`), not {0}".format(type(groups).__name__))
    try:
        empty_is_fine = boolean(allow_empty, strict=True)
    except TypeError:
        raise AnsibleFilterError("gpu_group: gpufleet_gpu_group_allow_empty is {0!r}: give true or false".format(allow_empty)) from None
    if empty_is_fine or any(context.CLIARGS.get(option) for option in _NOTHING_RUNS):
        return pattern
    # A name that is neither a group nor a host: said by name (the usual
    # typo), and before Ansible's matcher, which would warn about it first.
    hosts = set(groups.get("all", ()))
    unknown = [
        term.lstrip("&!")
        for term in split_host_pattern(pattern)
        if not any(char in term for char in _PATTERN_CHARS) and term.lstrip("&!") not in groups and term.lstrip("&!") not in hosts
    ]
    if not unknown and _matching_hosts(pattern, groups):
        return pattern
    named = sorted(name for name in groups if name not in _IMPLICIT_GROUPS)
    listing = ", ".join("{0} ({1} host{2})".format(name, len(groups[name]), "" if len(groups[name]) == 1 else "s") for name in named) or "none besides all"
    why = "{0} is no group or host of this inventory".format(", ".join(repr(name) for name in unknown)) if unknown else "it matches no host of this inventory"
    raise AnsibleFilterError(
        "gpu_group: gpufleet_gpu_group is {0!r} (default gpu_nodes): {1}, so every play would be skipped. "
        "The inventory's groups: {2}. Fix: -e gpufleet_gpu_group=<one of them>, or put the GPU nodes in group "
        "{0!r}; if the group is empty on purpose (nothing to do is success), add "
        "-e gpufleet_gpu_group_allow_empty=true".format(pattern, why, listing)
    )


class FilterModule(FilterTable):
    """The GPU group check of the collection's playbooks."""

    FILTERS = (gpu_group,)
