# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The Slurm GRES layer's plan: gres.conf, the node's Gres= value and the
cgroup.conf check, from NVML facts and the declared MIG layout.

Pure functions, on the controller. GRES types are named as Slurm's gpu/nvml
plugin names them (module_utils._knowledge.slurm), so an explicit gres.conf
and AutoDetect=nvml give the same Gres= line.
"""

from __future__ import annotations

import re
import typing as t
from collections import Counter

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import slurm as _slurm
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.config import MigConfigError, parse_config, select_label

AUTODETECT_CHOICES = ("off", "nvml")
_MINORS_LINE = re.compile(r"^gpu(?P<gpu>\d+)/gi(?P<gi>\d+)(?:/ci(?P<ci>\d+))?/access\s+(?P<minor>\d+)$")
_CONSTRAIN_LINE = re.compile(r"^\s*constraindevices\s*=", re.IGNORECASE)


def _underscorify_tolower(name: str) -> str:
    """gpu_common_underscorify_tolower: lower case, spaces to underscores."""
    rule = _slurm.GPU_TYPE_NAME["value"]
    return name.lower().replace(" ", rule["space"])


def gpu_type(gpu_name: str) -> str:
    """A whole GPU's GRES type, as AutoDetect=nvml names it."""
    return _underscorify_tolower(gpu_name)


def mig_type(gpu_name: str, mig_device_name: str) -> str | None:
    """A MIG device's GRES type, as AutoDetect=nvml names it; None when its name has no "mig_"."""
    rule = _slurm.MIG_TYPE_NAME["value"]
    base = gpu_type(gpu_name).split(rule["gpu_type_cut_at"], 1)[0]
    name = _underscorify_tolower(mig_device_name)
    at = name.find(rule["mig_name_from"])
    if at < 0:
        return None
    return base + name[at + len(rule["drop"]) :]


def parse_mig_minors(text: str) -> dict[tuple[int, int, int | None], int]:
    """/proc/driver/nvidia-caps/mig-minors: {(gpu minor, gi, ci or None): capability minor}."""
    minors = {}
    for line in (text or "").splitlines():
        match = _MINORS_LINE.fullmatch(line.strip())
        if match:
            ci = match.group("ci")
            minors[(int(match.group("gpu")), int(match.group("gi")), None if ci is None else int(ci))] = int(match.group("minor"))
    return minors


def _profile_of(mig_device_name: str) -> str:
    """The mig-parted profile in a MIG device's NVML name ("... MIG 1c.3g.20gb" -> "1c.3g.20gb")."""
    return mig_device_name.rsplit(" MIG ", 1)[-1]


def _pci_int(value: t.Any) -> int:
    try:
        return int(str(value), 16)
    except ValueError:
        return -1


def _declared_entries(mig_label: str, mig_config: t.Any) -> tuple[t.Any, ...]:
    """The entries of mig_label, or () without a label. Raises MigConfigError."""
    if not mig_label:
        return ()
    return select_label(parse_config(mig_config), mig_label)


def _layout_mismatch(gpu: t.Mapping[str, t.Any], entries: t.Sequence[t.Any], label: str) -> str | None:
    """Why the GPU's MIG state, as NVML shows it now, is not what mig_label declares for it."""
    pci = gpu.get("pci") or {}
    chosen = [e for e in entries if e.selects(gpu["index"], _pci_int(pci.get("device_id")), _pci_int(pci.get("subsystem_id")))]
    if not chosen:
        return None
    entry = chosen[0]
    mig = gpu.get("mig") or {}
    where = "GPU {0} ({1})".format(gpu["index"], gpu.get("name"))
    if entry.mig_enabled != bool(mig.get("enabled")):
        return "{0}: mig_label {1!r} ({2}) declares MIG {3}, but NVML shows it {4}".format(
            where, label, entry.where, "on" if entry.mig_enabled else "off", "on" if mig.get("enabled") else "off"
        )
    if not entry.mig_enabled:
        return None
    declared = Counter(dict(entry.mig_devices))
    found = Counter(_profile_of(d.get("name") or "") for d in mig.get("devices") or [])
    if declared != found:
        return "{0}: mig_label {1!r} ({2}) declares MIG devices {3}, but NVML shows {4}".format(
            where, label, entry.where, _counts(declared), _counts(found) or "none"
        )
    return None


def _counts(counter: Counter) -> str:
    return ", ".join("{0} x{1}".format(name, count) for name, count in sorted(counter.items()))


def _gpu_devices(gpu: t.Mapping[str, t.Any], minors: dict, problems: list[str], warnings: list[str], autodetect: str) -> list[dict[str, t.Any]]:
    """The GRES devices one GPU gives Slurm: itself, or its MIG devices."""
    name = gpu.get("name") or ""
    minor = gpu.get("minor_number")
    where = "GPU {0} ({1})".format(gpu.get("index"), name)
    gpu_file = "/dev/nvidia{0}".format(minor)
    mig = gpu.get("mig") or {}
    if mig.get("pending_change"):
        warnings.append(
            "{0}: its MIG mode changes to {1} at the next GPU reset or reboot; gres.conf follows the mode it has now".format(
                where, "on" if mig.get("pending_enabled") else "off"
            )
        )
    if not mig.get("enabled"):
        return [{"index": gpu["index"], "type": gpu_type(name), "keyword": "File", "files": [gpu_file], "uuid": gpu.get("uuid")}]
    if not mig.get("devices"):
        # AutoDetect=nvml offers such a GPU whole (and logs an error), though
        # no CUDA job can use a GPU in MIG mode without MIG devices; with the
        # count in slurm.conf it then drops a good GPU instead (seen with
        # Debian's slurmd 24.11 in the slurm_gres scenario). Explicit lines
        # leave it out.
        if autodetect == "nvml":
            problems.append(
                "{0}: MIG is on but the GPU has no MIG devices; AutoDetect=nvml would offer it whole, a GPU no job can "
                "use, and leave a good one out. Declare MIG devices for it, turn MIG off, or set "
                'slurm_gres_autodetect: "off" (explicit lines leave it out)'.format(where)
            )
            return []
        warnings.append("{0}: MIG is on but the GPU has no MIG devices, so it gives Slurm no GRES; declare MIG devices for it or turn MIG off".format(where))
        return []
    devices = []
    files_rule = _slurm.MIG_GRES_FILES["value"]
    for device in mig["devices"]:
        type_name = mig_type(name, device.get("name") or "")
        gi, ci = device.get("gpu_instance_id"), device.get("compute_instance_id")
        gi_minor, ci_minor = minors.get((minor, gi, None)), minors.get((minor, gi, ci))
        if type_name is None:
            problems.append(
                "{0}: MIG device {1} is named {2!r}, without the MIG profile Slurm types it by".format(where, device.get("uuid"), device.get("name"))
            )
            continue
        if gi_minor is None or ci_minor is None:
            problems.append(
                "{0}: {1} lists no capability minor for GPU instance {2} / compute instance {3}; the MIG device's "
                "files cannot be named (is the driver loaded, and the layout applied?)".format(where, files_rule["minors_file"], gi, ci)
            )
            continue
        files = [pattern.format(gpu_minor=minor, gi_minor=gi_minor, ci_minor=ci_minor) for pattern in files_rule["files"]]
        devices.append({"index": gpu["index"], "type": type_name, "keyword": files_rule["keyword"], "files": files, "uuid": device.get("uuid")})
    return devices


def _gres_value(devices: t.Sequence[t.Mapping[str, t.Any]]) -> str:
    """slurm.conf's Gres= value: gpu:<type>:<count> per type, in the order the types first appear."""
    counts = Counter(d["type"] for d in devices)
    order = list(dict.fromkeys(d["type"] for d in devices))
    return ",".join("gpu:{0}:{1}".format(type_name, counts[type_name]) for type_name in order)


def _gres_conf(header: str, autodetect: str, gpus: t.Sequence[t.Mapping[str, t.Any]], devices: t.Sequence[t.Mapping[str, t.Any]]) -> str:
    lines = [header.rstrip("\n")] if header else []
    if autodetect == "nvml":
        lines += ["# slurmd's gpu/nvml plugin finds the GPUs and MIG devices itself (with Cores and Links).", "AutoDetect=nvml"]
        return "\n".join(lines) + "\n"
    lines += [
        "# From NVML; types named as AutoDetect=nvml names them. Cores= is left out: the",
        "# NVML facts carry no CPU affinity, and a wrong Cores= binds jobs to the wrong socket.",
        "AutoDetect=off",
    ]
    by_index = {gpu.get("index"): gpu for gpu in gpus}
    for device in devices:
        gpu = by_index.get(device["index"], {})
        lines.append("# GPU {0} {1} {2} {3}".format(device["index"], gpu.get("name"), (gpu.get("pci") or {}).get("bus_id"), device["uuid"]))
        lines.append("Name=gpu Type={0} {1}={2}".format(device["type"], device["keyword"], ",".join(device["files"])))
    return "\n".join(lines) + "\n"


def gres_plan(
    nvml: t.Any,
    mig_label: str = "",
    mig_config: t.Any = None,
    mig_minors: str = "",
    autodetect: str = "off",
    header: str = "",
) -> dict[str, t.Any]:
    """The layer's plan. `problems` stop the role before the node is touched;
    `layout_mismatches` too, except in check mode (the MIG layer may not have
    run yet); `warnings` are shown."""
    problems: list[str] = []
    warnings: list[str] = []
    mismatches: list[str] = []
    if autodetect not in AUTODETECT_CHOICES:
        problems.append("slurm_gres_autodetect is {0!r}; use one of {1}".format(autodetect, ", ".join(AUTODETECT_CHOICES)))
    nvml = nvml if isinstance(nvml, t.Mapping) else {}
    if nvml.get("status") != "ok":
        problems.append(
            "NVML is not usable on the node ({0}: {1}); the GRES are read from the running driver, so run the layer once the driver is loaded".format(
                nvml.get("status"), nvml.get("reason")
            )
        )
        return {"problems": problems, "warnings": warnings, "layout_mismatches": mismatches, "devices": [], "node_gres": "", "gres_conf": ""}
    gpus = list(nvml.get("gpus") or [])
    try:
        entries = _declared_entries(mig_label, mig_config)
    except MigConfigError as exc:
        problems.append("the MIG declaration (mig_label {0!r} in mig_config): {1}".format(mig_label, exc))
        entries = ()
    minors = parse_mig_minors(mig_minors)
    devices = []
    for gpu in gpus:
        if gpu.get("lost"):
            problems.append(
                "GPU {0} ({1}) has fallen off the bus; Slurm would find one GPU fewer than configured and drain the node. Reset or replace it first".format(
                    gpu.get("index"), gpu.get("uuid")
                )
            )
            continue
        mismatch = _layout_mismatch(gpu, entries, mig_label)
        if mismatch:
            mismatches.append(mismatch + "; apply the layout first (the mig role runs before slurm_gres in site.yml)")
        devices.extend(_gpu_devices(gpu, minors, problems, warnings, autodetect))
    if not devices and not problems:
        problems.append("the node has no GPU or MIG device to offer Slurm; leave slurm_gres off for it")
    return {
        "problems": problems,
        "warnings": warnings,
        "layout_mismatches": mismatches,
        "devices": devices,
        "node_gres": _gres_value(devices),
        "gres_conf": _gres_conf(header, autodetect, gpus, devices),
    }


def cgroup_conf_problem(existing: str, block_begin: str, block_end: str) -> str | None:
    """A ConstrainDevices line of the site's own in cgroup.conf, outside our managed block: two values, one silently lost."""
    inside = False
    for number, line in enumerate((existing or "").splitlines(), 1):
        if line.strip() == block_begin:
            inside = True
        elif line.strip() == block_end:
            inside = False
        elif not inside and _CONSTRAIN_LINE.match(line):
            return (
                "cgroup.conf line {0} sets {1!r} outside the block slurm_gres manages; remove it (the role sets "
                "ConstrainDevices=yes) or set slurm_gres_cgroup_constrain_devices: false to leave cgroup.conf alone".format(number, line.strip())
            )
    return None
