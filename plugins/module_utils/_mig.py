# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""MIG partitions: mig-parted v1 configs, GPU layouts, and the plan between them.

Four steps, each usable alone:

1. ``parse_config`` checks a mig-parted ``version: v1`` config (the format of
   nvidia-mig-parted and the GPU Operator's ConfigMaps) and rejects what
   mig-parted rejects, naming the field.
2. ``NvmlReader`` reads each GPU through NVML: MIG mode, the GPU-instance
   profiles and placements the GPU really offers, its GPU and compute
   instances and the processes holding it.
3. ``plan_gpu`` turns a GPU's state and the config entry that selects it into
   the smallest change: which GPU instances to keep, destroy and create (with
   placement), or why the layout cannot fit.
4. ``MigApplier`` carries a plan out through NVML, keeping a journal, so a
   failure reports exactly what was done and what was not; a second run plans
   from what is there and converges.

``MigController`` ties them together for the ``mig_config`` module and the
``gpufleet-mig`` boot command. Standard library only (target Python 3.8+);
the imports are relative so the same files also work as a plain package on a
node (the boot command has no Ansible).
"""

from __future__ import annotations

import difflib
import itertools
import json
import os
import re
import subprocess
import typing as t
from collections import Counter
from dataclasses import dataclass, field

from ._mig_profiles import known_model
from ._nvml import (
    NVML_ERROR_IN_USE,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_RESET_REQUIRED,
    NVML_SUCCESS,
    Device,
    GpuInstance,
    GpuInstanceProfile,
    NvmlError,
    NvmlSession,
    Placement,
)

CONFIG_VERSION = "v1"
_TOP_KEYS = ("version", "mig-configs")
_ENTRY_KEYS = ("devices", "device-filter", "mig-enabled", "mig-devices")
_MIB = 1024 * 1024
_GIB = 1024 * _MIB

# `[<c>c.]<g>g.<n>gb[+attr|-attr...]`: a MIG device as mig-parted names it.
# `<c>c.` asks for a compute instance of c slices inside a g-slice GPU
# instance; without it the compute instance spans the whole GPU instance.
_PROFILE_RE = re.compile(r"^(?:(?P<c>[1-9][0-9]*)c\.)?(?P<gi>(?P<g>[1-9][0-9]*)g\.[0-9]+gb(?:[+-][a-z][a-z0-9.]*)*)$")


class MigConfigError(ValueError):
    """The config (or the label asked for) is invalid; the message names the field."""


class MigPlanError(Exception):
    """A GPU cannot take the layout asked for; the message says exactly why.

    `gpu` and `reason` (the message without the GPU) let a node's problems be
    grouped: eight GPUs refusing a layout for the same reason read as one line.
    """

    def __init__(self, message: str, gpu: GpuState | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.gpu = gpu
        self.reason = reason


def _gpu_error(gpu: GpuState, reason: str) -> MigPlanError:
    return MigPlanError("{0}: {1}".format(gpu.label, reason), gpu, reason)


# --------------------------------------------------------------------------
# 1. the mig-parted v1 config
# --------------------------------------------------------------------------
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
        if not isinstance(name, str) or not _PROFILE_RE.match(name):
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


# --------------------------------------------------------------------------
# 2. what a GPU offers and has
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Profile:
    """A GPU-instance profile as the GPU offers it."""

    id: int  # the profile id NVML's placement/create calls take (19 = 1g on 8-slice GPUs)
    name: str  # as NVML names it, e.g. 1g.5gb
    slices: int  # compute slices: the N of Ng
    instances: int  # at most this many on one GPU
    placements: tuple[tuple[int, int], ...]  # (start, size) in memory slices, sorted by start
    aliases: tuple[str, ...] = ()  # other names configs use for it (mig-parted derives names from memory)

    @property
    def size(self) -> int:
        return self.placements[0][1] if self.placements else 0

    def known_as(self, name: str) -> bool:
        return name == self.name or name in self.aliases

    def starts_text(self) -> str:
        starts = [start for start, _size in self.placements]
        if len(starts) > 2 and starts == list(range(starts[0], starts[-1] + 1)):
            text = "{0}-{1}".format(starts[0], starts[-1])
        else:
            text = ",".join(str(s) for s in starts)
        return "{{{0}}}:{1}".format(text, self.size)


@dataclass(frozen=True)
class ComputeInstanceState:
    id: int
    slices: int
    start: int


@dataclass(frozen=True)
class GpuInstanceState:
    id: int
    profile_id: int
    start: int
    size: int
    compute_instances: tuple[ComputeInstanceState, ...] = ()

    @property
    def compute(self) -> tuple[int, ...]:
        """Slice counts of the compute instances, largest first."""
        return tuple(sorted((ci.slices for ci in self.compute_instances), reverse=True))


@dataclass(frozen=True)
class ClientProcess:
    pid: int
    name: str
    used_memory_mib: int | None
    gpu_instance_id: int | None
    compute_instance_id: int | None

    def __str__(self) -> str:
        where = ""
        if self.gpu_instance_id is not None:
            where = ", GPU instance {0}".format(self.gpu_instance_id)
            if self.compute_instance_id is not None:
                where += " / compute instance {0}".format(self.compute_instance_id)
        memory = "" if self.used_memory_mib is None else ", {0} MiB".format(self.used_memory_mib)
        return "pid {0} ({1}{2}{3})".format(self.pid, self.name, where, memory)


@dataclass(frozen=True)
class GpuState:
    index: int
    uuid: str
    name: str
    pci_device_id: int
    pci_subsystem_id: int
    mig_capable: bool
    mig_enabled: bool = False
    mig_pending: bool = False  # the mode after the next reset/reboot
    profiles: tuple[Profile, ...] = ()
    profiles_from: str = "none"  # nvml | catalogue | none
    gpu_instances: tuple[GpuInstanceState, ...] = ()
    processes: tuple[ClientProcess, ...] = ()

    @property
    def label(self) -> str:
        return "GPU {0} ({1})".format(self.index, self.name)

    @property
    def compute_slices(self) -> int:
        return max((p.slices for p in self.profiles), default=0)

    @property
    def memory_slices(self) -> int:
        return max((s + z for p in self.profiles for s, z in p.placements), default=0)

    def profile_by_id(self, profile_id: int) -> Profile | None:
        return next((p for p in self.profiles if p.id == profile_id), None)

    def profile_named(self, name: str) -> Profile | None:
        return next((p for p in self.profiles if p.known_as(name)), None)

    def profile_name(self, profile_id: int) -> str:
        profile = self.profile_by_id(profile_id)
        return profile.name if profile else "profile {0}".format(profile_id)


def migparted_name(slices: int, profile_memory_mib: int, gpu_memory_bytes: int, suffix: str = "") -> str:
    """The name nvidia-mig-parted gives a profile: memory rounded up to eighths of the GPU.

    mig-parted (pkg/types/mig_profile.go) derives "<g>g.<n>gb" from memory
    instead of using the driver's name, so configs written for it can say
    7g.80gb where nvidia-smi shows 7g.79gb; accepting both keeps such configs
    working unchanged.
    """
    if gpu_memory_bytes <= 0:
        return ""
    fraction = -(-profile_memory_mib * _MIB * 8 // gpu_memory_bytes) / 8  # ceil to eighths
    total_gb = -(-gpu_memory_bytes // _GIB)
    return "{0}g.{1}gb{2}".format(slices, int(fraction * total_gb + 0.5), suffix)


# --------------------------------------------------------------------------
# 3. the target of a GPU and the plan to get there
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class InstanceSpec:
    """One GPU instance to have: its profile and its compute instances (slice counts)."""

    profile: Profile
    compute: tuple[int, ...]  # largest first; (profile.slices,) = one full compute instance

    def device_names(self) -> list[str]:
        return [device_name(self.profile, c) for c in self.compute]


def device_name(profile: Profile, compute_slices: int) -> str:
    """A MIG device the way mig-parted and nvidia-smi name it: 3g.20gb, or 1c.3g.20gb."""
    return profile.name if compute_slices == profile.slices else "{0}c.{1}".format(compute_slices, profile.name)


@dataclass(frozen=True)
class GpuTarget:
    """What one config entry asks of one GPU."""

    entry: ConfigEntry
    instances: tuple[InstanceSpec, ...] = ()
    # MIG is off and the GPU's profiles are unknown until it is on: the
    # instances are planned after enabling (MigApplier does).
    deferred: bool = False

    @property
    def mig_enabled(self) -> bool:
        return self.entry.mig_enabled

    @property
    def selected_by(self) -> str:
        return self.entry.where


def _split_profile(name: str) -> tuple[int | None, str]:
    match = _PROFILE_RE.match(name)
    if not match:  # parse_config already refused it; kept for direct callers
        raise MigPlanError("{0!r} is not a MIG profile name".format(name))
    return (int(match.group("c")) if match.group("c") else None), match.group("gi")


def resolve_target(gpu: GpuState, entry: ConfigEntry) -> GpuTarget:
    """The GPU instances `entry` asks of `gpu`, against the profiles the GPU offers.

    MIG devices with partial compute instances are packed like mig-parted
    does: the same GPU-instance profile keeps taking compute instances until
    they no longer fit, then a new GPU instance starts.
    """
    if not entry.mig_enabled:
        return GpuTarget(entry)
    if not gpu.mig_capable:
        raise _gpu_error(
            gpu, "{0} selects it with mig-enabled: true, but it does not support MIG; narrow the entry with 'devices' or 'device-filter'".format(entry.where)
        )
    if gpu.profiles_from == "none":
        return GpuTarget(entry, deferred=True)
    devices = []  # (profile, compute slices)
    for name, count in entry.mig_devices:
        compute, gi_name = _split_profile(name)
        profile = gpu.profile_named(gi_name)
        if profile is None:
            raise _gpu_error(
                gpu, "{0} asks for {1}, which this GPU does not offer; it offers {2}".format(entry.where, name, ", ".join(p.name for p in gpu.profiles))
            )
        if compute is not None and compute > profile.slices:
            raise _gpu_error(
                gpu,
                "{0} asks for {1}: a {2}-slice compute instance does not fit in a {3} GPU instance ({4} compute slices)".format(
                    entry.where, name, compute, profile.name, profile.slices
                ),
            )
        devices.extend([(profile, compute or profile.slices)] * count)
    devices.sort(key=lambda d: (-d[0].slices, -d[0].size, d[0].id, -d[1]))
    instances: list[InstanceSpec] = []
    for profile, compute in devices:
        last = instances[-1] if instances else None
        if last and last.profile == profile and sum(last.compute) + compute <= profile.slices:
            instances[-1] = InstanceSpec(profile, last.compute + (compute,))
        else:
            instances.append(InstanceSpec(profile, (compute,)))
    return GpuTarget(entry, tuple(instances))


@dataclass(frozen=True)
class CreateInstance:
    spec: InstanceSpec
    start: int

    def describe(self) -> str:
        return "create {0} at memory slice {1}{2}".format(self.spec.profile.name, self.start, _compute_note(self.spec.profile, self.spec.compute))


@dataclass(frozen=True)
class DestroyInstance:
    instance: GpuInstanceState
    profile_name: str

    def describe(self) -> str:
        return "destroy GPU instance {0} ({1} at memory slice {2})".format(self.instance.id, self.profile_name, self.instance.start)


@dataclass(frozen=True)
class RecomputeInstance:
    """Keep a GPU instance, replace its compute instances."""

    instance: GpuInstanceState
    spec: InstanceSpec

    def describe(self) -> str:
        return "replace the compute instances of GPU instance {0} ({1} at memory slice {2}){3}".format(
            self.instance.id,
            self.spec.profile.name,
            self.instance.start,
            _compute_note(self.spec.profile, self.spec.compute) or " with one full compute instance",
        )


def _compute_note(profile: Profile, compute: tuple[int, ...]) -> str:
    if compute == (profile.slices,):
        return ""
    return " with compute instances " + " + ".join(device_name(profile, c) for c in compute)


def _mode_step(enabled: bool) -> str:
    return "{0} MIG mode".format("enable" if enabled else "disable")


@dataclass
class GpuPlan:
    gpu: GpuState
    target: GpuTarget | None = None  # None: the label does not select this GPU
    set_mode: bool | None = None  # MIG mode to request, None to leave it
    destroy: list[DestroyInstance] = field(default_factory=list)
    recompute: list[RecomputeInstance] = field(default_factory=list)
    create: list[CreateInstance] = field(default_factory=list)
    skipped: str | None = None  # why a selected GPU is left alone

    @property
    def changed(self) -> bool:
        """Whether this run changes the GPU. Instances of a GPU waiting for its reset are made only after it."""
        if self.set_mode is not None or self.destroy:
            return True
        return bool(self.recompute or self.create) and not self.awaiting_reset

    @property
    def awaiting_reset(self) -> bool:
        """The wanted MIG mode is already requested; only a GPU reset (or reboot) is missing."""
        return self.target is not None and self.gpu.mig_capable and self.set_mode is None and self.gpu.mig_pending != self.gpu.mig_enabled

    @property
    def managed(self) -> bool:
        return self.target is not None and self.gpu.mig_capable and self.skipped is None

    def steps(self, reset_step: str | None = None) -> list[str]:
        """Every NVML change this plan makes, in the order the applier makes them.

        A GPU waiting for its reset gets its instances only after it: with
        `reset_step` (the run resets it) that step comes first, without it they
        are not made in this run and not listed.
        """
        out = [d.describe() for d in self.destroy]
        if self.set_mode is not None:
            out.append(_mode_step(self.set_mode))
        if self.awaiting_reset:
            if reset_step is None:
                return out
            out.append(reset_step)
        out += [r.describe() for r in self.recompute]
        out += [c.describe() for c in self.create]
        if self.target is not None and self.target.deferred:
            out.append("plan the GPU instances from the profiles NVML reports once MIG is on")
        return out

    def mig_after(self) -> tuple[bool, bool]:
        """(current, pending) MIG mode once the plan is done, assuming the switch needs no reset."""
        if self.set_mode is None:
            return self.gpu.mig_enabled, self.gpu.mig_pending
        return self.set_mode, self.set_mode

    def layout_after(self) -> list[tuple[int, str, tuple[int, ...]]]:
        """(start, profile name, compute) of every GPU instance once the plan is done."""
        gone = {d.instance.id for d in self.destroy}
        recomputed = {r.instance.id: r.spec.compute for r in self.recompute}
        after = [(gi.start, self.gpu.profile_name(gi.profile_id), recomputed.get(gi.id, gi.compute)) for gi in self.gpu.gpu_instances if gi.id not in gone]
        after += [(c.start, c.spec.profile.name, c.spec.compute) for c in self.create]
        return sorted(after)


def _capacity_problems(gpu: GpuState, wanted: t.Sequence[InstanceSpec]) -> list[str]:
    """What rules a layout out before any placement is tried."""
    by_profile = Counter(spec.profile for spec in wanted)
    ordered = sorted(by_profile.items(), key=lambda pc: (-pc[0].slices, -pc[0].size, pc[0].id))
    problems = []
    for profile, count in ordered:
        if count > profile.instances:
            problems.append("{0} x {1} asked for, but at most {2} fit on this GPU".format(count, profile.name, profile.instances))
        if not profile.placements:
            problems.append("{0} has no possible placement on this GPU".format(profile.name))
    breakdown = " + ".join("{0} x {1}".format(c, p.name) for p, c in ordered)
    compute = sum(spec.profile.slices for spec in wanted)
    if compute > gpu.compute_slices:
        problems.append("{0} need {1} compute slices, the GPU has {2}".format(breakdown, compute, gpu.compute_slices))
    memory = sum(spec.profile.size for spec in wanted)
    if memory > gpu.memory_slices:
        problems.append("{0} need {1} memory slices, the GPU has {2}".format(breakdown, memory, gpu.memory_slices))
    return problems


def _overlaps(spans: t.Iterable[tuple[int, int]], start: int, size: int) -> bool:
    return any(start < s + z and s < start + size for s, z in spans)


def _free_starts(profile: Profile, used: t.Sequence[tuple[int, int]]) -> list[int]:
    """Starts of the profile's placements still free, highest first."""
    return [s for s, z in sorted(profile.placements, reverse=True) if not _overlaps(used, s, z)]


def _combinations(profile: Profile, used: t.Sequence[tuple[int, int]], count: int) -> t.Iterator[tuple[int, ...]]:
    """Sets of `count` mutually free starts for `profile`, highest starts first."""
    for starts in itertools.combinations(_free_starts(profile, used), count):
        spans: list[tuple[int, int]] = []
        for start in starts:
            if _overlaps(spans, start, profile.size):
                break
            spans.append((start, profile.size))
        else:
            yield starts


Layout = t.List[t.Tuple[Profile, t.Tuple[int, ...]]]


class _LayoutSearch:
    """Fit GPU instances into non-overlapping placements, keeping what exists.

    Instances of one profile are interchangeable, so the search picks a
    *combination* of placements per profile: largest profiles first, highest
    start first -- where NVML's own automatic placement would put them. Of all
    layouts that fit, it keeps the first that retains the most existing GPU
    instances that processes are using (so running work is not disturbed when
    the layout allows it), then the most existing instances, then the most
    with the right compute instances: the smallest change. Deterministic: the
    same input always gives the same layout.
    """

    def __init__(self, gpu: GpuState, wanted: t.Sequence[InstanceSpec]) -> None:
        groups: dict[Profile, list[InstanceSpec]] = {}
        for spec in wanted:
            groups.setdefault(spec.profile, []).append(spec)
        self.groups = sorted(groups.items(), key=lambda g: (-g[0].size, -g[0].slices, g[0].id))
        self.existing = {(gi.profile_id, gi.start): gi for gi in gpu.gpu_instances}
        self.busy = {p.gpu_instance_id for p in gpu.processes if p.gpu_instance_id is not None}
        self.best: Layout | None = None
        self.best_score = (-1, -1, -1)
        self.ceiling = self._ceiling(gpu)

    def _ceiling(self, gpu: GpuState) -> tuple[int, int, int]:
        """A score no layout can beat; reaching it ends the search early."""
        busy = kept = exact = 0
        for profile, specs in self.groups:
            existing = [gi for gi in gpu.gpu_instances if gi.profile_id == profile.id]
            wanted = Counter(spec.compute for spec in specs)
            have = Counter(gi.compute for gi in existing)
            have_busy = Counter(gi.compute for gi in existing if gi.id in self.busy)
            kept += min(len(existing), len(specs))
            exact += sum(min(have[c], n) for c, n in wanted.items())
            busy += sum(min(have_busy[c], n) for c, n in wanted.items())
        return busy, kept, exact

    def kept(self, profile: Profile, starts: t.Sequence[int]) -> list[GpuInstanceState]:
        return [self.existing[(profile.id, s)] for s in starts if (profile.id, s) in self.existing]

    def _score(self, layout: Layout) -> tuple[int, int, int]:
        busy = kept = exact = 0
        for profile, starts in layout:
            remaining = [spec.compute for spec in dict(self.groups)[profile]]
            # Busy instances take a matching compute layout first.
            here = sorted(self.kept(profile, starts), key=lambda gi: gi.id not in self.busy)
            kept += len(here)
            for gi in here:
                if gi.compute in remaining:
                    remaining.remove(gi.compute)
                    exact += 1
                    busy += gi.id in self.busy
        return busy, kept, exact

    def run(self) -> Layout | None:
        self._walk(0, [], [])
        return self.best

    def _walk(self, depth: int, layout: Layout, used: list[tuple[int, int]]) -> bool:
        """Depth-first over the profile groups; True once no better layout can exist."""
        if depth == len(self.groups):
            score = self._score(layout)
            if score > self.best_score:
                self.best, self.best_score = list(layout), score
            return self.best_score >= self.ceiling
        profile, specs = self.groups[depth]
        for starts in _combinations(profile, used, len(specs)):
            spans = used + [(s, profile.size) for s in starts]
            if self._walk(depth + 1, layout + [(profile, starts)], spans):
                return True
        return False

    def most_that_fit(self) -> list[tuple[Profile, int]]:
        """The largest subset of the wanted instances that fits at once (for explanations)."""
        best: list[tuple[Profile, int]] = []

        def walk(depth: int, placed: list[tuple[Profile, int]], used: list[tuple[int, int]]) -> None:
            nonlocal best
            if len(placed) + sum(len(specs) for _p, specs in self.groups[depth:]) <= len(best):
                return
            if depth == len(self.groups):
                best = list(placed)
                return
            profile, specs = self.groups[depth]
            for count in range(len(specs), -1, -1):
                for starts in _combinations(profile, used, count):
                    walk(depth + 1, placed + [(profile, s) for s in starts], used + [(s, profile.size) for s in starts])

        walk(0, [], [])
        return best


def _no_fit_message(wanted: t.Sequence[InstanceSpec], search: _LayoutSearch) -> str:
    fitted = search.most_that_fit()
    left = Counter(spec.profile for spec in wanted) - Counter(p for p, _s in fitted)
    together = ", ".join("{0} at {1}".format(p.name, s) for p, s in sorted(fitted, key=lambda ps: (ps[1], ps[0].id)))
    missing = ", ".join("{0} x {1} (placements {2})".format(c, p.name, p.starts_text()) for p, c in sorted(left.items(), key=lambda pc: pc[0].id))
    return "the instances cannot be placed without overlapping: at most {0} of {1} fit together ({2}), leaving no free placement for {3}".format(
        len(fitted), len(wanted), together or "none", missing
    )


def plan_gpu(gpu: GpuState, target: GpuTarget | None) -> GpuPlan:
    """The smallest change that gives `gpu` the `target` layout. Raises MigPlanError."""
    plan = GpuPlan(gpu, target)
    if target is None:
        return plan
    if not gpu.mig_capable:
        if target.mig_enabled:
            plan.skipped = "does not support MIG; left alone (the entry selects all devices)"
        return plan
    if not target.mig_enabled:
        if gpu.mig_enabled:
            plan.destroy = [DestroyInstance(gi, gpu.profile_name(gi.profile_id)) for gi in gpu.gpu_instances]
        if gpu.mig_pending:
            plan.set_mode = False
        return plan

    if not gpu.mig_pending:
        # Off, or on with a disable pending: ask for MIG on (which also
        # cancels a pending disable without a reset).
        plan.set_mode = True
    wanted = list(target.instances)
    problems = _capacity_problems(gpu, wanted)
    if problems:
        raise _gpu_error(gpu, "{0} does not fit: {1}".format(target.selected_by, "; ".join(problems)))
    search = _LayoutSearch(gpu, wanted)
    layout = search.run()
    if layout is None:
        raise _gpu_error(gpu, "{0} does not fit: {1}".format(target.selected_by, _no_fit_message(wanted, search)))
    keep: set[int] = set()
    for profile, starts in layout:
        remaining = [spec.compute for spec in dict(search.groups)[profile]]
        here = [search.existing.get((profile.id, s)) for s in starts]
        # Instances that already carry a wanted compute layout take it first,
        # busy ones before idle ones (as the search scored them).
        for gi in sorted((gi for gi in here if gi is not None), key=lambda gi: gi.id not in search.busy):
            if gi.compute in remaining:
                remaining.remove(gi.compute)
                keep.add(gi.id)
        for start, gi in zip(starts, here):
            if gi is not None and gi.id in keep:
                continue
            spec = InstanceSpec(profile, remaining.pop(0))
            if gi is None:
                plan.create.append(CreateInstance(spec, start))
            else:
                keep.add(gi.id)
                plan.recompute.append(RecomputeInstance(gi, spec))
    plan.destroy = [DestroyInstance(gi, gpu.profile_name(gi.profile_id)) for gi in gpu.gpu_instances if gi.id not in keep]
    plan.create.sort(key=lambda c: (-c.spec.profile.size, -c.spec.profile.slices, -c.start))
    return plan


# --------------------------------------------------------------------------
# descriptions: what people read in task output, diffs and assertions
# --------------------------------------------------------------------------
def _device_counts(items: t.Iterable[tuple[int, int, str]]) -> str:
    """'2 x 3g.20gb, 1 x 1g.5gb' from (GI slices, CI slices, device name) items, largest first."""
    counts = Counter(items)
    return ", ".join("{0} x {1}".format(counts[key], key[2]) for key in sorted(counts, key=lambda k: (-k[0], -k[1], k[2])))


def describe_gpu(gpu: GpuState) -> str:
    """What a GPU has now, e.g. 'MIG enabled: 1 x 3g.20gb, 2 x 1g.5gb'."""
    if not gpu.mig_capable:
        return "MIG not supported"
    state = "MIG {0}".format("enabled" if gpu.mig_enabled else "disabled")
    if gpu.mig_pending != gpu.mig_enabled:
        state += " ({0} pending until a GPU reset or reboot)".format("enable" if gpu.mig_pending else "disable")
    if not gpu.mig_enabled:
        return state
    items = []
    for gi in gpu.gpu_instances:
        profile = gpu.profile_by_id(gi.profile_id)
        name = gpu.profile_name(gi.profile_id)
        slices = profile.slices if profile else 0
        if not gi.compute_instances:
            items.append((slices, 0, "{0} without compute instance".format(name)))
        for c in gi.compute:
            items.append((slices, c, device_name(profile, c) if profile else name))
    return "{0}: {1}".format(state, _device_counts(items)) if items else state + ", no GPU instances"


def describe_target(target: GpuTarget) -> str:
    """What an entry asks for, in the words describe_gpu uses."""
    if not target.mig_enabled:
        return "MIG disabled"
    if target.deferred:
        asked = ", ".join("{0} x {1}".format(c, n) for n, c in target.entry.mig_devices)
        return "MIG enabled" + (": " + asked if asked else ", no GPU instances")
    items = [(spec.profile.slices, c, device_name(spec.profile, c)) for spec in target.instances for c in spec.compute]
    return "MIG enabled: {0}".format(_device_counts(items)) if items else "MIG enabled, no GPU instances"


def layout_lines(gpu: GpuState, mig: tuple[bool, bool], layout: t.Sequence[tuple[int, str, tuple[int, ...]]]) -> list[str]:
    """A GPU's layout as diff lines, one GPU instance per line."""
    head = "GPU {0} {1} ({2}): ".format(gpu.index, gpu.name, gpu.uuid)
    if not gpu.mig_capable:
        return [head + "MIG not supported"]
    current, pending = mig
    head += "MIG {0}".format("enabled" if current else "disabled")
    if pending != current:
        head += ", {0} pending".format("enable" if pending else "disable")
    lines = [head]
    for start, name, compute in layout:
        profile = gpu.profile_named(name)
        devices = [device_name(profile, c) for c in compute] if profile else ["{0}c".format(c) for c in compute]
        note = "" if devices == [name] else "  compute instances: " + (" + ".join(devices) or "none")
        lines.append("  memory slice {0}: {1}{2}".format(start, name, note))
    return lines


def gpu_layout(gpu: GpuState) -> list[tuple[int, str, tuple[int, ...]]]:
    return sorted((gi.start, gpu.profile_name(gi.profile_id), gi.compute) for gi in gpu.gpu_instances)


# --------------------------------------------------------------------------
# reading GPUs through NVML
# --------------------------------------------------------------------------
# GPU-instance profile index -> the attribute suffix of its name, for drivers
# whose v1 profile info carries no name.
_INDEX_SUFFIX = {7: "+me", 8: "+me", 10: "+gfx", 11: "+gfx", 12: "+gfx", 13: "-me", 14: "-me", 15: "+me.all", 16: "+me.all", 17: "+gfx"}


def _process_name(pid: int, proc_root: str) -> str:
    try:
        with open(os.path.join(proc_root, str(pid), "comm"), encoding="utf-8") as handle:
            return handle.read().strip() or "unknown"
    except OSError:
        return "not visible here"


class NvmlReader:
    """Reads GpuState through NVML; every MIG call goes through the _nvml binding."""

    def __init__(self, session: NvmlSession, proc_root: str = "/proc") -> None:
        self.s = session
        self.proc_root = proc_root

    def device(self, index: int) -> Device:
        return self.s.device_by_index(index)

    def gpus(self) -> list[GpuState]:
        return [self.gpu(index) for index in range(self.s.device_count())]

    def gpu(self, index: int) -> GpuState:
        s = self.s
        dev = s.device_by_index(index)
        pci = s.device_pci_info(dev)
        base: dict[str, t.Any] = dict(
            index=index,
            uuid=s.device_uuid(dev),
            name=s.device_name(dev),
            pci_device_id=pci.pci_device_id,
            pci_subsystem_id=pci.pci_subsystem_id,
            processes=self._processes(dev),
        )
        try:
            mode = s.device_mig_mode(dev)
        except NvmlError as err:
            if err.code != NVML_ERROR_NOT_SUPPORTED:
                raise
            return GpuState(mig_capable=False, **base)
        # NVML's own answer first, with MIG off too: driver 580 on an H100
        # described every profile and placement with MIG disabled
        # (tests/device/h100-reading-2026-11-23.json), and it knows GPUs the
        # built-in table does not. Drivers that answer NOT_SUPPORTED with MIG
        # off (every profile) leave the table as the fallback.
        infos = s.gpu_instance_profiles(dev)
        if not mode.current and not infos:
            profiles = self._catalogue_profiles(dev, pci.pci_device_id)
            return GpuState(
                mig_capable=True, mig_enabled=False, mig_pending=mode.pending, profiles=profiles, profiles_from="catalogue" if profiles else "none", **base
            )
        total = s.device_memory(dev).total
        profiles = tuple(self._profile(info, s.gpu_instance_possible_placements(dev, info.id), total) for info in infos)
        return GpuState(
            mig_capable=True,
            mig_enabled=bool(mode.current),
            mig_pending=mode.pending,
            profiles=profiles,
            profiles_from="nvml",
            gpu_instances=self._gpu_instances(dev, infos) if mode.current else (),
            **base,
        )

    @staticmethod
    def _profile(info: GpuInstanceProfile, placements: list[Placement], total_memory: int) -> Profile:
        name = info.name or ""
        if name.startswith("MIG "):
            name = name[4:]
        suffix = name[name.index("gb") + 2 :] if "gb" in name else _INDEX_SUFFIX.get(info.index, "")
        derived = migparted_name(info.slice_count, info.memory_size_mb, total_memory, suffix)
        return Profile(
            id=info.id,
            name=name or derived,
            slices=info.slice_count,
            instances=info.instance_count,
            placements=tuple(sorted((p.start, p.size) for p in placements)),
            aliases=(derived,) if name and derived and derived != name else (),
        )

    def _catalogue_profiles(self, dev: Device, device_id: int) -> tuple[Profile, ...]:
        model = known_model(device_id)
        if model is None:
            return ()
        profiles = []
        for (profile_id, slices, instances, size, starts), names in zip(model.geometry, model.names):
            # Placements are a hardware fact NVML reports with MIG off too;
            # the catalogue's own are the fallback where it does not.
            try:
                placements = tuple(sorted((p.start, p.size) for p in self.s.gpu_instance_possible_placements(dev, profile_id)))
            except NvmlError as err:
                if err.code != NVML_ERROR_NOT_SUPPORTED:
                    raise
                placements = tuple((s, size) for s in starts)
            name, *aliases = names.split("|")
            profiles.append(Profile(profile_id, name, slices, instances, placements, tuple(aliases)))
        return tuple(profiles)

    def _gpu_instances(self, dev: Device, infos: t.Sequence[GpuInstanceProfile]) -> tuple[GpuInstanceState, ...]:
        s = self.s
        found = []
        for info in infos:
            for handle in s.gpu_instances(dev, info):
                gi = s.gpu_instance_info(handle)
                found.append(GpuInstanceState(gi.id, gi.profile_id, gi.placement.start, gi.placement.size, self._compute_instances(handle)))
        return tuple(sorted(found, key=lambda gi: gi.id))

    def _compute_instances(self, handle: GpuInstance) -> tuple[ComputeInstanceState, ...]:
        s = self.s
        found = []
        for profile in s.compute_instance_profiles(handle):
            for ci in s.compute_instances(handle, profile):
                info = s.compute_instance_info(ci)
                found.append(ComputeInstanceState(info.id, profile.slice_count, info.placement.start))
        return tuple(sorted(found, key=lambda ci: ci.id))

    def _processes(self, dev: Device) -> tuple[ClientProcess, ...]:
        try:
            processes = self.s.device_compute_processes(dev)
        except NvmlError as err:
            if err.code != NVML_ERROR_NOT_SUPPORTED:
                raise
            return ()
        return tuple(
            ClientProcess(
                pid=p.pid,
                name=_process_name(p.pid, self.proc_root),
                used_memory_mib=None if p.used_memory is None else p.used_memory // _MIB,
                gpu_instance_id=p.gpu_instance_id,
                compute_instance_id=p.compute_instance_id,
            )
            for p in sorted(processes, key=lambda p: p.pid)
        )


def blocking_clients(plan: GpuPlan) -> list[ClientProcess]:
    """Processes that keep `plan` from being carried out (NVML would answer IN_USE)."""
    if plan.set_mode is not None:
        return list(plan.gpu.processes)
    touched = {d.instance.id for d in plan.destroy} | {r.instance.id for r in plan.recompute}
    return [p for p in plan.gpu.processes if p.gpu_instance_id in touched]


# --------------------------------------------------------------------------
# 4. carrying a plan out
# --------------------------------------------------------------------------
class MigApplyError(Exception):
    """A change failed part-way; `done` and `not_done` say exactly how far it got.

    `converges` is False when running again cannot help (the layout does not
    fit the profiles the driver reports once MIG is on): the config is wrong.
    """

    def __init__(self, message: str, done: list[str], not_done: list[str], converges: bool = True) -> None:
        super().__init__(message)
        self.done = done
        self.not_done = not_done
        self.converges = converges


class MigApplier:
    """Carries GpuPlans out through NVML, journalling every change it makes."""

    def __init__(self, session: NvmlSession, reader: NvmlReader) -> None:
        self.s = session
        self.reader = reader
        self.done: list[str] = []
        self.reset_gpus: list[int] = []
        self.plans: list[GpuPlan] = []  # as carried out (re-planned where MIG just came on)
        self._gpu_done: list[str] = []
        self._replan_failed = False

    def apply(self, plans: t.Sequence[GpuPlan]) -> None:
        for position, plan in enumerate(plans):
            self._gpu_done = []
            try:
                self.plans.append(self._gpu(plan))
            except (NvmlError, MigPlanError) as err:
                current = self._current
                not_done = ["GPU {0}: {1}".format(current.gpu.index, step) for step in current.steps() if step not in self._gpu_done]
                not_done += ["GPU {0}: {1}".format(p.gpu.index, step) for p in plans[position + 1 :] for step in p.steps()]
                raise MigApplyError(
                    "GPU {0}: {1} failed: {2}".format(plan.gpu.index, self._step, err), list(self.done), not_done, converges=not self._replan_failed
                ) from None

    def _run(self, gpu: GpuState, step: str, action: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
        self._step = step
        result = action(*args)
        self.done.append("GPU {0}: {1}".format(gpu.index, step))
        self._gpu_done.append(step)
        return result

    def _gpu(self, plan: GpuPlan) -> GpuPlan:
        self._current = plan
        self._step = "reading its MIG state"
        if not plan.changed:
            if plan.awaiting_reset:
                self.reset_gpus.append(plan.gpu.index)
            return plan
        gpu = plan.gpu
        dev = self.reader.device(gpu.index)
        for destroy in plan.destroy:
            self._run(gpu, destroy.describe(), self._destroy, dev, destroy.instance)
        if plan.set_mode is not None:
            status = self._run(gpu, _mode_step(plan.set_mode), self.s.set_mig_mode, dev, plan.set_mode)
            if status == NVML_ERROR_IN_USE:
                raise MigPlanError(
                    "NVML could not switch MIG mode because the GPU is in use; stop its clients (DCGM, nvsm, kubelet pods, CUDA jobs) and run again"
                )
            if status == NVML_ERROR_RESET_REQUIRED:
                # The new mode waits for a GPU reset or reboot; instances can
                # only be made once it is active.
                self.reset_gpus.append(gpu.index)
                return plan
            if status != NVML_SUCCESS:
                raise NvmlError(status, "nvmlDeviceSetMigMode (activation status)", self.s.error_string(status))
            if plan.set_mode and gpu.profiles_from != "nvml":
                plan = self._replan(plan)
        elif plan.awaiting_reset:
            self.reset_gpus.append(gpu.index)
            return plan
        for recompute in plan.recompute:
            self._run(gpu, recompute.describe(), self._recompute, dev, recompute)
        for create in plan.create:
            self._run(gpu, create.describe(), self._create, dev, create)
        return plan

    def _destroy(self, dev: Device, instance: GpuInstanceState) -> None:
        handle = self.s.gpu_instance_by_id(dev, instance.id)
        for ci in instance.compute_instances:
            self.s.destroy_compute_instance(self.s.compute_instance_by_id(handle, ci.id))
        self.s.destroy_gpu_instance(handle)

    def _recompute(self, dev: Device, recompute: RecomputeInstance) -> None:
        handle = self.s.gpu_instance_by_id(dev, recompute.instance.id)
        for ci in recompute.instance.compute_instances:
            self.s.destroy_compute_instance(self.s.compute_instance_by_id(handle, ci.id))
        self._compute(handle, recompute.spec)

    def _create(self, dev: Device, create: CreateInstance) -> None:
        profile = create.spec.profile
        handle = self.s.create_gpu_instance(dev, profile.id, Placement(create.start, profile.size))
        self._compute(handle, create.spec)

    def _compute(self, handle: GpuInstance, spec: InstanceSpec) -> None:
        if spec.compute == (spec.profile.slices,):
            self.s.create_compute_instance(handle)  # the full-size default, as `nvidia-smi mig -cgi .. -C` makes
            return
        offered = {p.slice_count: p for p in self.s.compute_instance_profiles(handle)}
        for slices in spec.compute:
            if slices not in offered:
                raise MigPlanError(
                    "{0} offers no {1}-slice compute instance (only {2})".format(
                        spec.profile.name, slices, ", ".join("{0}c".format(s) for s in sorted(offered))
                    )
                )
            self.s.create_compute_instance(handle, offered[slices].id)

    def _replan(self, plan: GpuPlan) -> GpuPlan:
        """MIG just came on: plan again from the profiles NVML now reports."""
        step = "plan the GPU instances from the profiles NVML reports now that MIG is on"
        self._step = step
        gpu = self.reader.gpu(plan.gpu.index)
        try:
            if plan.target is None:
                raise MigPlanError("{0}: no target to plan".format(gpu.label))
            fresh = plan_gpu(gpu, resolve_target(gpu, plan.target.entry))
        except MigPlanError as err:
            # Put the GPU back as it was found: MIG on without instances runs
            # no CUDA work at all.
            self._run(gpu, "disable MIG mode again", self.s.set_mig_mode, self.reader.device(gpu.index), False)
            self._step = step
            self._replan_failed = True
            raise MigPlanError("{0} (MIG mode was switched back off)".format(err)) from None
        self._current = fresh
        self._gpu_done = []
        return fresh


# --------------------------------------------------------------------------
# the whole node
# --------------------------------------------------------------------------
@dataclass
class NodePlan:
    label: str
    plans: list[GpuPlan]
    missing: list[str] = field(default_factory=list)  # entries naming GPUs the node lacks

    @property
    def changed(self) -> bool:
        return any(p.changed for p in self.plans)

    def changes(self, resetting: bool) -> bool:
        """Whether applying changes anything: with resetting, a GPU only waiting for its reset gets it."""
        return self.changed or (resetting and bool(self.reset_gpus))

    @property
    def reset_gpus(self) -> list[int]:
        return [p.gpu.index for p in self.plans if p.awaiting_reset]

    def differences(self, missing: bool = True) -> list[str]:
        """Why the label is not applied: one line per GPU that differs, and per GPU the config names but lacks.

        An assert counts a named GPU that is not there (it may have fallen
        off the bus); the check after an apply does not, since apply skips
        those GPUs as mig-parted does and warns instead.
        """
        return [
            "GPU {0}: expected {1}, found {2}".format(p.gpu.index, describe_target(p.target), describe_gpu(p.gpu))
            for p in self.plans
            if p.target is not None and p.managed and (p.changed or p.awaiting_reset)
        ] + (self.missing if missing else [])

    def mode_differences(self) -> list[str]:
        """Like differences, for the MIG mode alone (mig-parted's `assert --mode-only`): current and pending."""
        out = []
        for plan in self.plans:
            if plan.target is None or not plan.managed:
                continue
            wanted = plan.target.mig_enabled
            if (plan.gpu.mig_enabled, plan.gpu.mig_pending) != (wanted, wanted):
                out.append("GPU {0}: expected MIG {1}, found {2}".format(plan.gpu.index, "enabled" if wanted else "disabled", describe_gpu(plan.gpu)))
        return out + self.missing

    def clients_in_the_way(self, resetting: bool = False) -> list[str]:
        """One line per GPU whose planned change (or, with resetting, its reset) attached processes would block."""
        out = []
        for plan in self.plans:
            if resetting and plan.awaiting_reset:
                # A reset fails on a GPU that processes hold; finding that
                # out mid-way would leave the GPUs reset before it half-done.
                blocking = list(plan.gpu.processes)
            elif plan.changed:
                blocking = blocking_clients(plan)
            else:
                continue
            if blocking:
                out.append("{0} ({1}): {2}".format(plan.gpu.label, plan.gpu.uuid, ", ".join(str(p) for p in blocking)))
        return out


class MigController:
    """Plans, applies or asserts one label of a config on this node."""

    def __init__(self, entries: t.Sequence[ConfigEntry], label: str, session: NvmlSession, proc_root: str = "/proc") -> None:
        self.entries = list(entries)
        self.label = label
        self.session = session
        self.reader = NvmlReader(session, proc_root)

    def plan(self) -> NodePlan:
        plans, errors = [], []
        gpus = self.reader.gpus()
        for gpu in gpus:
            try:
                plans.append(plan_gpu(gpu, self._target(gpu)))
            except MigPlanError as err:
                errors.append(err)
        problems = group_gpu_problems(errors) + self._entries_reaching_no_mig(plans)
        if problems:
            raise MigPlanError("; ".join(problems))
        return NodePlan(self.label, plans, self._missing_devices(len(gpus)))

    def _missing_devices(self, count: int) -> list[str]:
        """Entries naming GPU indices this node lacks: mig-parted skips them silently, a lost GPU looks the same."""
        out = []
        for entry in self.entries:
            absent = [i for i in entry.devices or () if i >= count]
            if absent:
                out.append(
                    "{0} selects GPU {1}, which this node does not have (it has {2})".format(
                        entry.where, index_ranges(absent), "no GPU" if not count else "GPU " + index_ranges(range(count))
                    )
                )
        return out

    def _target(self, gpu: GpuState) -> GpuTarget | None:
        chosen = [e for e in self.entries if e.selects(gpu.index, gpu.pci_device_id, gpu.pci_subsystem_id)]
        if not chosen:
            return None
        if len({(e.mig_enabled, e.mig_devices) for e in chosen}) > 1:
            raise _gpu_error(
                gpu,
                "selected by {0}, which ask for different layouts; make their devices or device-filter disjoint".format(" and ".join(e.where for e in chosen)),
            )
        entry = chosen[0]
        if not gpu.mig_capable and entry.devices is None:
            # mig-parted leaves GPUs without MIG alone when an entry selects
            # all devices, so a config written for a whole node also works on
            # a node that mixes A100s and T4s.
            return GpuTarget(entry)
        return resolve_target(gpu, entry)

    def _entries_reaching_no_mig(self, plans: t.Sequence[GpuPlan]) -> list[str]:
        """An entry asking for MIG that reaches no MIG-capable GPU is a mistake, not a no-op."""
        problems = []
        for entry in self.entries:
            selected = [p.gpu for p in plans if p.target is not None and p.target.entry is entry]
            if entry.mig_enabled and selected and not any(g.mig_capable for g in selected):
                names = " / ".join(sorted({g.name for g in selected}))
                problems.append("{0} asks for MIG on GPU {1}, but {2} has no MIG support".format(entry.where, ", ".join(str(g.index) for g in selected), names))
        return problems

    def apply(self, node: NodePlan) -> MigApplier:
        applier = MigApplier(self.session, self.reader)
        applier.apply(node.plans)
        return applier

    def read_back(self, indices: t.Iterable[int]) -> dict[int, GpuState]:
        return {index: self.reader.gpu(index) for index in indices}


# --------------------------------------------------------------------------
# a whole run: plan, refuse, apply, reset every waiting GPU at once, finish
# --------------------------------------------------------------------------
# Resets the given GPUs in one call; returns (all reset, what the tool said).
ResetGpus = t.Callable[[t.Sequence[int]], t.Tuple[bool, str]]


class MigClientsError(Exception):
    """Processes hold GPUs that the run must change or reset; nothing was touched."""

    def __init__(self, clients: list[str], before_reset: bool = False) -> None:
        super().__init__(
            (
                "a GPU client attached after the MIG mode change was requested, so no GPU was reset and the new mode stays pending: "
                if before_reset
                else "GPU clients are still attached, so nothing was changed: "
            )
            + "; ".join(clients)
        )
        self.clients = clients
        self.before_reset = before_reset


@dataclass
class RunResult:
    """What one run did, for the module and the boot command alike."""

    found: NodePlan  # the node as first read, and the plan made from it
    done: list[str] = field(default_factory=list)
    plans: list[GpuPlan] = field(default_factory=list)  # as carried out, in GPU order
    reset: list[int] = field(default_factory=list)  # GPUs a reset was asked for
    reset_output: str = ""
    waiting: list[int] = field(default_factory=list)  # GPUs still waiting for a reset or reboot at the end
    states: dict[int, GpuState] = field(default_factory=dict)  # read back at the end, per changed GPU


class MigResetError(Exception):
    """The GPU reset failed; the GPUs that did reset were finished, the others are as they were."""

    def __init__(self, message: str, result: RunResult) -> None:
        super().__init__(message)
        self.result = result


# --------------------------------------------------------------------------
# user hooks, in mig-parted's hooks file format
# --------------------------------------------------------------------------
# mig-parted's hook points (NVIDIA/mig-parted@2f087e947abe:cmd/nvidia-mig-parted/
# apply/apply.go, ApplyMigConfigWithHooks): apply-start first; pre-apply-mode
# when a MIG mode changes; pre-apply-config when instances change; apply-exit
# last, whatever happened. Hooks files written for it work unchanged.
HOOK_NAMES = ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")
_HOOK_KEYS = ("command", "args", "envs", "workdir")


class MigHookError(Exception):
    """A user hook failed; the message names it, its exit status and its output."""


@dataclass(frozen=True)
class Hook:
    where: str
    command: str
    args: tuple[str, ...] = ()
    envs: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None


def parse_hooks(data: t.Any) -> dict[str, tuple[Hook, ...]]:
    """Check a mig-parted hooks file (version: v1, hooks: {name: [{command, args, envs, workdir}]})."""
    if not data:
        return {}
    if not isinstance(data, dict):
        raise MigConfigError("hooks: expected a mapping with 'version: v1' and 'hooks', got {0}".format(_type_name(data)))
    _unknown_keys(data, ("version", "hooks"), "hooks", "top-level key")
    if data.get("version") != CONFIG_VERSION:
        raise MigConfigError("hooks.version: expected 'v1' (mig-parted's hooks format), got {0!r}".format(data.get("version")))
    named = data.get("hooks") or {}
    if not isinstance(named, dict):
        raise MigConfigError("hooks.hooks: expected a mapping of hook name to a list of commands")
    _unknown_keys(named, HOOK_NAMES, "hooks.hooks", "hook")
    parsed = {}
    for name, items in named.items():
        if not isinstance(items, list):
            raise MigConfigError("hooks.hooks.{0}: expected a list of commands, got {1}".format(name, _type_name(items)))
        hooks = []
        for n, item in enumerate(items):
            where = "hooks.hooks.{0}[{1}]".format(name, n)
            if not isinstance(item, dict):
                raise MigConfigError("{0}: expected a mapping with command (and args, envs, workdir)".format(where))
            _unknown_keys(item, _HOOK_KEYS, where, "key")
            command, args, envs = item.get("command"), item.get("args") or [], item.get("envs") or {}
            if not isinstance(command, str) or not command:
                raise MigConfigError("{0}.command: expected the program to run, e.g. /bin/sh".format(where))
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise MigConfigError("{0}.args: expected a list of strings".format(where))
            if not isinstance(envs, dict) or not all(isinstance(v, str) for v in envs.values()):
                raise MigConfigError("{0}.envs: expected a mapping of name to string value".format(where))
            workdir = item.get("workdir") or None
            if workdir is not None and not isinstance(workdir, str):
                raise MigConfigError("{0}.workdir: expected a directory path".format(where))
            hooks.append(Hook(where, command, tuple(args), tuple(sorted(envs.items())), workdir))
        parsed[name] = tuple(hooks)
    return parsed


class HookRunner:
    """Runs the hooks of one point in order; the first that fails stops the run.

    Each hook gets this process's environment, the hook's `envs`, and the
    MIG_PARTED_* variables mig-parted gives its hooks (config file, selected
    config, hooks file, skip reset, mode only), so its scripts read the same.
    """

    def __init__(self, hooks: dict[str, tuple[Hook, ...]], env: dict[str, str]) -> None:
        self.hooks = hooks
        self.env = env
        self.ran: list[str] = []

    def run(self, name: str) -> None:
        for hook in self.hooks.get(name, ()):
            env = dict(os.environ)
            env.update(hook.envs)
            env.update(self.env)
            try:
                done = subprocess.run(
                    [hook.command] + list(hook.args), cwd=hook.workdir, env=env, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
                )
            except OSError as exc:
                raise MigHookError("{0} ({1}) could not run: {2}".format(hook.where, hook.command, exc.strerror))
            self.ran.append(hook.where)
            if done.returncode != 0:
                raise MigHookError(
                    "{0} ({1}) failed with exit {2}: {3}".format(hook.where, hook.command, done.returncode, " ".join(done.stdout.split()) or "no output")
                )


def hook_env(config_file: str, label: str, hooks_file: str, reset: bool) -> dict[str, str]:
    """The variables mig-parted's apply gives its hooks (its flags' EnvVars), with our values."""
    return {
        "MIG_PARTED_CONFIG_FILE": config_file,
        "MIG_PARTED_SELECTED_CONFIG": label,
        "MIG_PARTED_HOOKS_FILE": hooks_file,
        "MIG_PARTED_SKIP_RESET": "false" if reset else "true",
        "MIG_PARTED_MODE_CHANGE_ONLY": "false",
    }


class MigRun:
    """One label on the node, carried out so that no GPU is left half-done.

    mig-parted's order: check everything first, then change. Every GPU the run
    will change *or reset* must be free of processes before the first NVML
    change; the mode changes are made; every GPU whose new mode waits for a
    reset is reset in one call; then the layout is finished on every GPU that
    did reset. A reset that fails part-way (a process that started after the
    check) still gets the GPUs that reset finished, and leaves the others in
    their old mode with the new one pending -- never MIG on without a layout.

    NVML is closed around the reset: the reset tool must see a GPU that no
    NVML client of ours holds, and the driver state is re-read after it.
    """

    def __init__(self, entries: t.Sequence[ConfigEntry], label: str, open_session: t.Callable[[], NvmlSession], proc_root: str = "/proc") -> None:
        self.entries = list(entries)
        self.label = label
        self.open_session = open_session
        self.proc_root = proc_root

    def _with_controller(self, work: t.Callable[[MigController], t.Any]) -> t.Any:
        session = self.open_session()
        try:
            return work(MigController(self.entries, self.label, session, self.proc_root))
        finally:
            session.shutdown()

    def plan(self) -> NodePlan:
        return self._with_controller(lambda c: c.plan())

    def apply(self, reset: ResetGpus | None = None, hooks: HookRunner | None = None) -> RunResult:
        """Raises MigPlanError, MigClientsError (nothing touched), MigApplyError, MigResetError, MigHookError or
        NvmlError. apply-exit runs whatever happened; its failure counts only when nothing else failed."""
        if hooks is None:
            return self._apply(reset)
        try:
            hooks.run("apply-start")
            # The hooks before a change see what will change, and may stop
            # the GPU's clients: the run reads the GPUs again after them.
            node = self.plan()
            if any(p.set_mode is not None for p in node.plans) or (reset is not None and node.reset_gpus):
                hooks.run("pre-apply-mode")
            if any(p.destroy or p.recompute or p.create for p in node.plans):
                hooks.run("pre-apply-config")
            result = self._apply(reset)
        except BaseException:
            try:
                hooks.run("apply-exit")
            except MigHookError:
                pass  # the first failure is the one to report
            raise
        hooks.run("apply-exit")
        return result

    def _apply(self, reset: ResetGpus | None) -> RunResult:
        result: RunResult = self._with_controller(lambda c: self._first_pass(c, reset is not None))
        if not result.waiting or reset is None:
            return result
        result.reset = list(result.waiting)
        all_reset, result.reset_output = reset(result.reset)
        self._with_controller(lambda c: self._finish(c, result))
        if not all_reset or result.waiting:
            finished = [i for i in result.reset if i not in result.waiting]
            raise MigResetError(
                "the GPU reset failed{0}: {1}. {2}GPU {3} {4} as {5} before the reset, with the new MIG mode pending until a reset or reboot".format(
                    " for GPU " + index_ranges(result.waiting) if result.waiting else "",
                    " ".join(result.reset_output.split()) or "no output",
                    "The layout was finished on GPU {0}, which did reset. ".format(index_ranges(finished)) if finished else "",
                    index_ranges(result.waiting),
                    "stay" if len(result.waiting) > 1 else "stays",
                    "they were" if len(result.waiting) > 1 else "it was",
                ),
                result,
            )
        return result

    def _first_pass(self, controller: MigController, resetting: bool) -> RunResult:
        node = controller.plan()
        result = RunResult(node)
        clients = node.clients_in_the_way(resetting)
        if clients:
            raise MigClientsError(clients)
        if not node.changed:
            result.plans = list(node.plans)
            result.waiting = node.reset_gpus
            return result
        applier = controller.apply(node)
        result.done, result.plans = list(applier.done), list(applier.plans)
        result.waiting = sorted(set(node.reset_gpus) | set(applier.reset_gpus))
        result.states = controller.read_back(p.gpu.index for p in node.plans if p.changed)
        if resetting and result.waiting:
            # A process that attached while the modes were changed would make
            # the reset fail part-way; look once more before resetting.
            late = [(gpu, gpu.processes) for gpu in (controller.reader.gpu(i) for i in result.waiting) if gpu.processes]
            if late:
                raise MigClientsError(
                    ["{0} ({1}): {2}".format(gpu.label, gpu.uuid, ", ".join(str(p) for p in found)) for gpu, found in late], before_reset=True
                )
        return result

    def _finish(self, controller: MigController, result: RunResult) -> None:
        node = controller.plan()
        try:
            applier = controller.apply(node)
        except MigApplyError as err:
            err.done[:0] = result.done
            raise
        result.done += applier.done
        by_index = {p.gpu.index: p for p in applier.plans}
        result.plans = [by_index.get(p.gpu.index, p) if p.gpu.index in result.reset else p for p in result.plans]
        result.waiting = sorted(set(node.reset_gpus) | set(applier.reset_gpus))
        result.states.update(controller.read_back(result.reset))


# --------------------------------------------------------------------------
# export: the node's layout as a mig-parted config
# --------------------------------------------------------------------------
def _exported_devices(gpu: GpuState) -> dict[str, int] | None:
    """The mig-devices that describe `gpu` now; None when MIG is off.

    A mode change waiting for its reset is exported as the mode the GPU is
    headed for: applying the export then requests nothing new.
    """
    if not gpu.mig_pending:
        return None
    if not gpu.mig_enabled:
        return {}  # MIG comes on at the reset; no instance can exist before
    counts: Counter = Counter()
    for gi in gpu.gpu_instances:
        profile = gpu.profile_by_id(gi.profile_id)
        if profile is None or not gi.compute_instances:
            raise _gpu_error(
                gpu, "GPU instance {0} ({1}) has no compute instance, which a mig-parted config cannot describe".format(gi.id, gpu.profile_name(gi.profile_id))
            )
        counts.update(device_name(profile, c) for c in gi.compute)
    return dict(sorted(counts.items()))


def export_layout(gpus: t.Sequence[GpuState], label: str) -> tuple[dict[str, t.Any], list[str]]:
    """The GPUs' current layout as a mig-parted v1 config, and the GPUs it had to leave out (and why).

    Every GPU's entry is checked by planning it against the GPU itself: only
    what re-applies without a change is exported. A layout the format cannot
    say (two 3g instances with one 1c each read back as one 3g with 2 x 1c; a
    GPU instance without a compute instance) is left out with the reason, so
    applying the export never changes a GPU.
    """
    groups: dict[tuple[bool, tuple[tuple[str, int], ...]], list[int]] = {}
    problems: list[str] = []
    capable = [g for g in gpus if g.mig_capable]
    for gpu in capable:
        try:
            devices = _exported_devices(gpu)
            item: dict[str, t.Any] = {"devices": [gpu.index], "mig-enabled": devices is not None}
            if devices is not None:
                item["mig-devices"] = devices
            (entry,) = parse_config({"version": CONFIG_VERSION, "mig-configs": {label: [item]}})[label]
            plan = plan_gpu(gpu, resolve_target(gpu, entry))
            if plan.changed:
                raise _gpu_error(
                    gpu,
                    "re-applying mig-devices {0} would change it ({1}); a mig-parted config cannot describe this state".format(
                        "{" + ", ".join("{0}: {1}".format(*i) for i in (devices or {}).items()) + "}", "; ".join(plan.steps())
                    ),
                )
        except (MigPlanError, MigConfigError) as err:
            problems.append("{0}; left out of the export".format(err))
            continue
        groups.setdefault((devices is not None, tuple((devices or {}).items())), []).append(gpu.index)
    entries = []
    whole = len(groups) == 1 and not problems
    for (enabled, devices_items), indices in groups.items():
        item = {"devices": "all" if whole else indices, "mig-enabled": enabled}
        if enabled:
            item["mig-devices"] = dict(devices_items)
        entries.append(item)
    if not entries:
        # mig-parted needs at least one entry per label; this one selects no GPU.
        entries.append({"devices": [], "mig-enabled": False})
    return {"version": CONFIG_VERSION, "mig-configs": {label: entries}}, problems


def export_config(open_session: t.Callable[[], NvmlSession], label: str, proc_root: str = "/proc") -> tuple[dict[str, t.Any], list[str]]:
    """Read the node through NVML and export it (see export_layout)."""
    session = open_session()
    try:
        gpus = NvmlReader(session, proc_root).gpus()
    finally:
        session.shutdown()
    return export_layout(gpus, label)


def index_ranges(indices: t.Iterable[int]) -> str:
    """'0-3, 5' from [0, 1, 2, 3, 5]."""
    out: list[list[int]] = []
    for index in sorted(set(indices)):
        if out and index == out[-1][1] + 1:
            out[-1][1] = index
        else:
            out.append([index, index])
    return ", ".join(str(a) if a == b else "{0}-{1}".format(a, b) for a, b in out)


def group_gpu_problems(errors: t.Sequence[MigPlanError]) -> list[str]:
    """One line per distinct reason: 'GPUs 0-7 (NVIDIA A100-SXM4-40GB): ...' instead of eight identical lines."""
    groups: dict[tuple[str, str], list[int]] = {}
    lines: list[str] = []
    for err in errors:
        if err.gpu is None or err.reason is None:
            lines.append(str(err))
        else:
            groups.setdefault((err.gpu.name, err.reason), []).append(err.gpu.index)
    for (name, reason), indices in groups.items():
        lines.append("{0} {1} ({2}): {3}".format("GPU" if len(indices) == 1 else "GPUs", index_ranges(indices), name, reason))
    return lines


def plan_to_dict(plan: GpuPlan) -> dict[str, t.Any]:
    """One GPU's plan as the module returns it."""
    gpu = plan.gpu
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "selected_by": plan.target.selected_by if plan.target else None,
        "skipped": plan.skipped,
        "mig_capable": gpu.mig_capable,
        "mig_enabled": {"current": gpu.mig_enabled, "pending": gpu.mig_pending, "wanted": plan.target.mig_enabled if plan.managed and plan.target else None},
        "mode_change": None if plan.set_mode is None else ("enable" if plan.set_mode else "disable"),
        "profiles_from": gpu.profiles_from,
        "destroy": [
            {
                "gpu_instance_id": d.instance.id,
                "profile": d.profile_name,
                "start": d.instance.start,
                "size": d.instance.size,
                "compute_instances": [ci.id for ci in d.instance.compute_instances],
            }
            for d in plan.destroy
        ],
        "recompute": [
            {
                "gpu_instance_id": r.instance.id,
                "profile": r.spec.profile.name,
                "start": r.instance.start,
                "destroy_compute_instances": [ci.id for ci in r.instance.compute_instances],
                "compute": r.spec.device_names(),
            }
            for r in plan.recompute
        ],
        "create": [
            {
                "profile": c.spec.profile.name,
                "profile_id": c.spec.profile.id,
                "start": c.start,
                "size": c.spec.profile.size,
                "compute": c.spec.device_names(),
            }
            for c in plan.create
        ],
        "steps": plan.steps(),
        "reset_required": plan.awaiting_reset,
        "changed": plan.changed,
        "before": describe_gpu(gpu),
        "after": describe_target(plan.target) if plan.target is not None and plan.managed else describe_gpu(gpu),
        "clients": [str(p) for p in gpu.processes],
    }
