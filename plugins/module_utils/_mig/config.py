# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The mig-parted v1 config: parsing and checking it, and choosing a label.

``parse_config`` checks a mig-parted ``version: v1`` config (the format of
nvidia-mig-parted and the GPU Operator's ConfigMaps) and rejects what
mig-parted rejects, naming the field; ``select_label`` picks the entries of
one label. Runs on the controller (filters, plugin_utils) and on the node.
"""

from __future__ import annotations

import difflib
import json
import re
import typing as t
from dataclasses import dataclass

CONFIG_VERSION = "v1"
_TOP_KEYS = ("version", "mig-configs")
_ENTRY_KEYS = ("devices", "device-filter", "mig-enabled", "mig-devices")


# `[<c>c.]<g>g.<n>gb[+attr|-attr...]`: a MIG device as mig-parted names it.
# `<c>c.` asks for a compute instance of c slices inside a g-slice GPU
# instance; without it the compute instance spans the whole GPU instance.
_PROFILE_RE = re.compile(r"^(?:(?P<c>[1-9][0-9]*)c\.)?(?P<gi>(?P<g>[1-9][0-9]*)g\.[0-9]+gb(?:[+-][a-z][a-z0-9.]*)*)$")


class MigConfigError(ValueError):
    """The config (or the label asked for) is invalid; the message names the field."""


@dataclass(frozen=True)
class DeviceFilter:
    """One `device-filter` value: 0xDDDDVVVV, optionally :0xSSSSVVVV (subsystem)."""

    device_id: int
    subsystem_id: int | None = None

    @classmethod
    def parse(cls, text: str, where: str) -> DeviceFilter:
        parts = text.split(":")
        try:
            if len(parts) > 2:
                raise ValueError
            values = [int(part, 0) for part in parts]
        except ValueError:
            raise MigConfigError(
                "{0}: {1!r} is not a PCI id; write the combined device and vendor id as NVML and nvidia-smi show it, "
                "e.g. 0x20B010DE, optionally with the subsystem id: 0x20B010DE:0x134F10DE".format(where, text)
            ) from None
        if any(not 0 <= value <= 0xFFFFFFFF for value in values):
            raise MigConfigError("{0}: {1!r} does not fit in 32 bits".format(where, text))
        return cls(values[0], values[1] if len(values) == 2 else None)

    def matches(self, device_id: int, subsystem_id: int) -> bool:
        return self.device_id == device_id and self.subsystem_id in (None, subsystem_id)

    def __str__(self) -> str:
        text = "0x{0:08X}".format(self.device_id)
        return text if self.subsystem_id is None else text + ":0x{0:08X}".format(self.subsystem_id)


@dataclass(frozen=True)
class ConfigEntry:
    """One item of a label's list: which GPUs, and what they should look like."""

    where: str  # "mig-configs.<label>[<n>]", for messages
    devices: tuple[int, ...] | None  # None = all; () = none (mig-parted accepts `devices: []`)
    device_filter: tuple[DeviceFilter, ...]
    mig_enabled: bool
    mig_devices: tuple[tuple[str, int], ...]  # (profile, count), count > 0, sorted by name

    def selects(self, index: int, device_id: int, subsystem_id: int) -> bool:
        if self.devices is not None and index not in self.devices:
            return False
        return not self.device_filter or any(f.matches(device_id, subsystem_id) for f in self.device_filter)


def _type_name(value: t.Any) -> str:
    return "null" if value is None else type(value).__name__


def _unknown_keys(found: t.Iterable[str], allowed: t.Sequence[str], where: str, what: str) -> None:
    unknown = sorted(str(k) for k in found if k not in allowed)
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, allowed, n=1)
        hints.append("{0!r}{1}".format(key, " (did you mean {0!r}?)".format(close[0]) if close else ""))
    raise MigConfigError("{0}: unknown {1} {2}; allowed: {3}".format(where, what, ", ".join(hints), ", ".join(allowed)))


def _parse_devices(value: t.Any, where: str) -> tuple[int, ...] | None:
    if value == "all":
        return None
    # An empty list selects no GPU: mig-parted reads it as an []int and
    # accepts it (NVIDIA/mig-parted@28f9599079a9:api/spec/v1/spec.go,
    # MigConfigSpec.UnmarshalJSON), so fleet configs use it to park an entry.
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        return tuple(sorted(set(value)))
    raise MigConfigError("{0}.devices: expected 'all' or a list of GPU indices such as [0, 1], got {1!r}".format(where, value))


def _parse_device_filter(value: t.Any, where: str) -> tuple[DeviceFilter, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise MigConfigError("{0}.device-filter: expected a PCI id string or a list of them, got {1}".format(where, _type_name(value)))
    return tuple(DeviceFilter.parse(v, where + ".device-filter") for v in items if v != "")


def _parse_mig_devices(value: t.Any, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict):
        raise MigConfigError("{0}.mig-devices: expected a mapping of MIG profile to count such as {{'1g.5gb': 7}}, got {1}".format(where, _type_name(value)))
    wanted = []
    for name, count in value.items():
        if not isinstance(name, str) or not _PROFILE_RE.fullmatch(name):
            raise MigConfigError("{0}.mig-devices: {1!r} is not a MIG profile name; expected e.g. 1g.5gb, 1g.5gb+me or 1c.3g.20gb".format(where, name))
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise MigConfigError("{0}.mig-devices.{1}: the count must be a whole number >= 0, got {2!r}".format(where, name, count))
        if count:
            wanted.append((name, count))
    # mig-parted refuses a non-empty mapping whose counts are all 0 ("all
    # counts for all MigProfiles are 0", NVIDIA/mig-parted@f5e1171a2fda:
    # pkg/types/mig_config.go, MigConfig.AssertValid): it would switch MIG on
    # with no instance, which is what {} says explicitly.
    if value and not wanted:
        raise MigConfigError(
            "{0}.mig-devices: every count is 0 ({1}); mig-parted rejects that. Write {{}} for MIG on "
            "without instances, mig-enabled: false for MIG off, or give a profile a count above 0".format(where, ", ".join("{0}: 0".format(n) for n in value))
        )
    return tuple(sorted(wanted))


def _parse_entry(entry: t.Any, where: str) -> ConfigEntry:
    if not isinstance(entry, dict):
        raise MigConfigError(
            "{0}: expected a mapping with devices, mig-enabled and (optionally) device-filter and mig-devices, got {1}".format(where, _type_name(entry))
        )
    _unknown_keys(entry, _ENTRY_KEYS, where, "key")
    for required in ("devices", "mig-enabled"):
        if required not in entry:
            raise MigConfigError("{0}: missing required key {1!r}".format(where, required))
    enabled = entry["mig-enabled"]
    if not isinstance(enabled, bool):
        raise MigConfigError("{0}.mig-enabled: expected true or false, got {1!r}".format(where, enabled))
    if enabled and "mig-devices" not in entry:
        raise MigConfigError("{0}: 'mig-devices' is required when 'mig-enabled' is true (use {{}} for MIG on without instances)".format(where))
    mig_devices = _parse_mig_devices(entry.get("mig-devices", {}), where)
    if not enabled and mig_devices:
        raise MigConfigError("{0}: 'mig-devices' lists MIG devices but 'mig-enabled' is false".format(where))
    return ConfigEntry(
        where=where,
        devices=_parse_devices(entry["devices"], where),
        device_filter=_parse_device_filter(entry.get("device-filter", []), where),
        mig_enabled=enabled,
        mig_devices=mig_devices,
    )


def parse_config(data: t.Any) -> dict[str, tuple[ConfigEntry, ...]]:
    """Check a mig-parted v1 config; return {label: entries}. Raises MigConfigError."""
    if not isinstance(data, dict):
        raise MigConfigError("the MIG config must be a mapping with 'version: v1' and 'mig-configs', got {0}".format(_type_name(data)))
    _unknown_keys(data, _TOP_KEYS, "config", "top-level key")
    if "version" not in data:
        raise MigConfigError("config: 'version' is missing; a mig-parted config starts with 'version: v1'")
    if data["version"] != CONFIG_VERSION:
        raise MigConfigError("config.version: {0!r} is not supported; mig-parted's format is 'v1'".format(data["version"]))
    configs = data.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise MigConfigError("config.mig-configs: expected a mapping of label to a list of entries, with at least one label")
    parsed = {}
    for label, entries in configs.items():
        where = "mig-configs.{0}".format(label)
        if not isinstance(label, str) or not label:
            raise MigConfigError("config.mig-configs: labels must be non-empty strings, got {0!r}".format(label))
        if not isinstance(entries, list) or not entries:
            raise MigConfigError("{0}: expected a non-empty list of entries".format(where))
        parsed[label] = tuple(_parse_entry(entry, "{0}[{1}]".format(where, n)) for n, entry in enumerate(entries))
    return parsed


def select_label(configs: dict[str, tuple[ConfigEntry, ...]], label: str) -> tuple[ConfigEntry, ...]:
    if label not in configs:
        close = difflib.get_close_matches(label, list(configs), n=1)
        raise MigConfigError(
            "label {0!r} is not in the config{1}; its labels are: {2}".format(
                label, " (did you mean {0!r}?)".format(close[0]) if close else "", ", ".join(sorted(configs))
            )
        )
    return configs[label]


def load_config_file(path: str) -> t.Any:
    """Read a mig-parted config from a file on this host: JSON, or YAML when PyYAML is there."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise MigConfigError("cannot read the MIG config {0}: {1}".format(path, exc.strerror)) from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise MigConfigError(
            "{0} is not JSON and PyYAML is not installed to read it as YAML; write it as JSON (which is valid YAML) or pass the config inline".format(path)
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MigConfigError("{0} is not valid YAML: {1}".format(path, exc)) from None
