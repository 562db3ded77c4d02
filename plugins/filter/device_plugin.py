# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""device_plugin_problems: every problem of a device plugin declaration, each with its fix, on the controller."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable

# A MIG resource is advertised by its own name only under the mixed strategy.
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-")
_DIGITS = re.compile(r"[0-9]+")


def _json(value: object) -> str:
    """A value as the messages quote it (as Ansible's to_json writes it)."""
    return json.dumps(value)


def _mig_on(layout: Sequence) -> list[Mapping]:
    """The entries of a mig-parted label that turn MIG on."""
    return [entry for entry in layout if isinstance(entry, Mapping) and entry.get("mig-enabled")]


def _strategy_problem(strategy: str, label: object, layout: Sequence) -> str | None:
    """A MIG strategy that contradicts the node's MIG layout: why, and what to set instead."""
    mig_on = _mig_on(layout)
    quoted = "mig_label " + _json(label)
    if strategy == "none" and mig_on:
        return (
            "device_plugin_mig_strategy is none, but {0} turns MIG on: the plugin would offer those GPUs whole "
            "and cannot hand them out; set mixed (or single when every GPU has MIG on with the same devices), "
            "or leave it unset to follow the layout".format(quoted)
        )
    # single advertises every MIG device as nvidia.com/gpu: only sound when all GPUs are cut the same way.
    device_sets: list[object] = []
    for entry in mig_on:
        devices = entry.get("mig-devices", {})
        if devices not in device_sets:
            device_sets.append(devices)
    if strategy == "single" and layout and (len(mig_on) < len(layout) or len(device_sets) > 1):
        return (
            "device_plugin_mig_strategy is single, which needs MIG on every GPU with the same MIG devices, but "
            "{0} does not declare that; set mixed, or declare a uniform layout".format(quoted)
        )
    return None


def _devices_are_valid(devices: object) -> bool:
    """The plugin's `devices`: "all", a count >= 1, or a non-empty list of GPU indexes or UUIDs."""
    if isinstance(devices, bool):
        return False
    if isinstance(devices, str):
        return devices == "all"
    if isinstance(devices, int):
        return devices >= 1
    return isinstance(devices, Sequence) and len(devices) > 0


def _entry_problems(index: int, entry: Mapping, names: list, strategy: str, name_pattern: str, name_max: int) -> list[str]:
    """The problems of one time-slicing entry, in the order a reader fixes them."""
    problems = []
    name = entry.get("name")
    where = "device_plugin_time_slicing[{0}] ({1})".format(index, name)
    if not isinstance(name, str) or not re.match(name_pattern, name) or len(name) > name_max:
        problems.append(
            "{0}: the name is not a resource of the device plugin; use nvidia.com/gpu, or nvidia.com/mig-<profile> "
            "(e.g. nvidia.com/mig-1g.10gb) with device_plugin_mig_strategy: mixed (lower case, at most {1} "
            "characters)".format(where, name_max)
        )
    elif _MIG_RESOURCE.match(name) and strategy != "mixed":
        problems.append(
            "{0}: MIG resources are advertised by name only with device_plugin_mig_strategy: mixed (it is {1}); with single they are nvidia.com/gpu".format(
                where, strategy
            )
        )
    # Said once, at the first of the entries that share the name.
    if names.count(name) > 1 and name not in names[:index]:
        problems.append("{0}: the resource is named more than once; give it one entry".format(where))
    replicas = entry.get("replicas")
    if not _DIGITS.fullmatch(str(replicas)) or int(str(replicas)) < 2:
        problems.append(
            "{0}: replicas is {1}; time-slicing needs replicas >= 2 (one replica is the whole GPU: remove the entry instead)".format(where, _json(replicas))
        )
    # The plugin (0.15 to 0.19, DisableResourceNamingInConfig) rewrites both at
    # start-up with only a warning in its log: a custom rename is dropped (or
    # becomes <name>.shared under renameByDefault), and devices become all.
    rename = entry.get("rename")
    if rename not in (None, ""):
        problems.append(
            "{0}: rename {1} would be ignored: the device plugin drops a custom rename (it logs 'Setting the rename "
            "field ... is not yet supported'); remove it, and set device_plugin_rename_by_default: true to advertise "
            "{2}.shared".format(where, _json(rename), name if isinstance(name, str) else "<name>")
        )
    devices = entry.get("devices", "all")
    if not _devices_are_valid(devices):
        problems.append('{0}: devices must be "all", a count >= 1 or a list of GPU indexes or UUIDs, got {1}'.format(where, _json(devices)))
    elif devices != "all":
        problems.append(
            "{0}: devices {1} would be ignored: the device plugin shares every GPU of the resource (it replaces "
            "devices with all and logs 'Customizing the devices field ... is not yet supported'); remove devices, "
            "and give GPUs that must not be shared a host group of their own".format(where, _json(devices))
        )
    return problems


def device_plugin_problems(
    time_slicing: object, config_path: object, mig_strategy: object, name_pattern: str, name_max: int, mig_label: object = "", mig_layout: object = None
) -> list[str]:
    """Every problem of the declaration, each naming the variable, the entry and the fix; [] when it is sound.

    All at once, so one run shows all there is to fix. `mig_layout` is the
    entries of `mig_label` in the mig role's config ([] without a label).
    """
    if not isinstance(time_slicing, Sequence) or isinstance(time_slicing, str) or not all(isinstance(entry, Mapping) for entry in time_slicing):
        raise AnsibleFilterError(
            "device_plugin_problems: device_plugin_time_slicing must be a list of entries (name, replicas, ...), got {0}".format(_json(time_slicing))
        )
    layout = mig_layout if isinstance(mig_layout, Sequence) and not isinstance(mig_layout, str) else []
    strategy = str(mig_strategy)
    problems = []
    if not isinstance(config_path, str) or not os.path.isabs(config_path):
        problems.append("device_plugin_config_path must be an absolute path, got {0}".format(_json(config_path)))
    strategy_problem = _strategy_problem(strategy, mig_label, layout)
    if strategy_problem:
        problems.append(strategy_problem)
    names = [entry.get("name") for entry in time_slicing]
    for index, entry in enumerate(time_slicing):
        problems.extend(_entry_problems(index, entry, names, strategy, name_pattern, int(name_max)))
    return problems


class FilterModule(FilterTable):
    """The device_plugin role's plan: its declaration checked on the controller."""

    FILTERS = (device_plugin_problems,)
