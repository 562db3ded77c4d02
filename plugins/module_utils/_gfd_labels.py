# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""GPU Feature Discovery's labels for a node, from nvml_info's facts and the
device plugin's declared sharing and MIG strategy, and the NFD local feature
file that carries them.

Pure functions, Python 3.8 standard library only: the node_labels filter runs
them on the controller (node_labels_plan), and the node's refresh command
(gpufleet-node-labels, from the collection's node runtime) runs the same plan()
on the node, so the two write the same file for the same node and settings.
Each rule follows GFD's code; the rules and their sources are in
_knowledge/gfd_labels.py. Problems raise ValueError naming the input and the
fix.
"""

from __future__ import annotations

import datetime
import math
import re
import typing as t

# Relative: the same import works in the collection and in the node runtime's gpufleet_runtime package.
from ._knowledge import gfd_labels as _k

GPU = "nvidia.com/gpu"
MIG_STRATEGIES = ("none", "single", "mixed")
_DROP = re.compile(_k.SANITISE_DROP["value"])
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
# NFD's local source refuses larger files (MaxFeatureFileSize, source/local/local.go).
MAX_FILE_BYTES = 65536
# Where GFD reads the machine type (its --machine-type-file default) and each GPU's PCI class.
MACHINE_FILE = "/sys/class/dmi/id/product_name"
_MIB = 1024 * 1024
_GIB = 1024 * _MIB
_GI_PROFILES = {row["index"]: row for row in _k.MIG_GI_PROFILES}
_CI_SLICES = {row["index"]: row["slices"] for row in _k.MIG_CI_PROFILES}
_PCI_MODES = {row["class"]: row["mode"] for row in _k.PCI_CLASS_MODES}
# nvmlDeviceGetAttributes field -> GFD's label suffix (nvml-mig-device.go GetAttributes).
_MIG_ATTRIBUTES = (
    ("memory_size_mb", "memory"),
    ("multiprocessor_count", "multiprocessors"),
    ("gpu_instance_slice_count", "slices.gi"),
    ("compute_instance_slice_count", "slices.ci"),
    ("shared_copy_engine_count", "engines.copy"),
    ("shared_decoder_count", "engines.decoder"),
    ("shared_encoder_count", "engines.encoder"),
    ("shared_jpeg_count", "engines.jpeg"),
    ("shared_ofa_count", "engines.ofa"),
)


def sanitise(text: str) -> str:
    """GFD's sanitise(): drop characters outside [A-Za-z0-9-_. ], join the words with '-'."""
    return "-".join(_DROP.sub("", text).split())


def arch_family(major: int, minor: int) -> str:
    for row in _k.ARCH_FAMILIES:
        if row["major"] == major:
            return row["then"] if "from_minor" in row and minor >= row["from_minor"] else row["family"]
    return next(row["family"] for row in _k.ARCH_FAMILIES if row["major"] is None)


def mig_memory_gb(total_bytes: int, mig_mib: int) -> int:
    """go-nvlib's getMigMemorySizeGB: the MIG device's share of the GPU, rounded up to eighths, times whole GiB."""
    fraction = math.ceil(float(mig_mib) * _MIB / float(total_bytes) * 8) / 8.0
    total_gb = (total_bytes + _GIB - 1) // _GIB
    # Go's math.Round rounds halves away from zero; Python's round() to even.
    return int(math.floor(fraction * total_gb + 0.5))


# --- the declaration ---------------------------------------------------------------------------------------------
class _Sharing:
    """The device plugin's sharing config as GFD reads it (api/config/v1: sharing.go, replicas.go)."""

    def __init__(self, settings: t.Mapping[str, t.Any]) -> None:
        self.time_slicing = _resources(settings.get("time_slicing") or [], "node_labels_time_slicing")
        mps = settings.get("mps")
        self.mps = None if mps is None else _resources(mps, "node_labels_mps")
        # GFD drops every `rename`, then gives all the default one when renameByDefault is true.
        self.renamed = bool(settings.get("rename_by_default"))

    def strategy(self) -> str:
        if self.mps is not None and any(r["replicas"] > 1 for r in self.mps):
            return "mps"
        if any(r["replicas"] > 1 for r in self.time_slicing):
            return "time-slicing"
        return "none"

    def entry(self, resource: str) -> t.Mapping[str, t.Any] | None:
        # ReplicatedResources(): MPS's list when MPS is declared at all, else time-slicing's.
        for entry in self.mps if self.mps is not None else self.time_slicing:
            if entry["name"] == resource:
                return entry
        return None


def _resources(entries: t.Any, variable: str) -> list[dict[str, t.Any]]:
    if not isinstance(entries, list):
        raise ValueError("{0} must be a list of {{name: nvidia.com/gpu, replicas: N}}, got {1!r}".format(variable, entries))
    found = []
    for index, entry in enumerate(entries):
        replicas = entry.get("replicas") if isinstance(entry, t.Mapping) else None
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1 or not isinstance(entry.get("name"), str):
            raise ValueError("{0}[{1}] must have a resource name and replicas >= 1, got {2!r}".format(variable, index, entry))
        found.append({"name": entry["name"], "replicas": replicas})
    return found


class _Resource:
    """resourceLabeler: one resource's labels; sharing None = labelled without sharing (MIG-enabled full GPUs)."""

    def __init__(self, name: str, sharing: _Sharing | None) -> None:
        self.name = name
        self.sharing = sharing

    def key(self, suffix: str) -> str:
        return "{0}.{1}".format(self.name, suffix)

    def replicas(self) -> int:
        if self.sharing is None:
            return 0
        entry = self.sharing.entry(self.name)
        return entry["replicas"] if entry else 1

    def product(self, *parts: str) -> str:
        words = [sanitise(part) for part in parts if part]
        entry = self.sharing.entry(self.name) if self.sharing else None
        if entry and entry["replicas"] > 1 and not self.sharing.renamed:  # type: ignore[union-attr]
            words.append("SHARED")
        return "-".join(words)

    def base(self, count: int, *parts: str) -> dict[str, str]:
        replicas = self.replicas()
        strategy = self.sharing.strategy() if self.sharing is not None and replicas > 1 else "none"
        return {
            self.key("product"): self.product(*parts),
            self.key("count"): str(count),
            self.key("replicas"): str(replicas),
            self.key("sharing-strategy"): strategy,
        }


# --- the facts ---------------------------------------------------------------------------------------------------
def _gpus(nvml: t.Mapping[str, t.Any]) -> list[t.Mapping[str, t.Any]]:
    if not isinstance(nvml, t.Mapping) or nvml.get("status") != "ok":
        raise ValueError(
            "node_labels: NVML is not usable on this node (nvml.status={0!r}); GFD labels nothing then: install "
            "or load the driver first (the driver layer), or turn node_labels_enabled off for this host".format(
                nvml.get("status") if isinstance(nvml, t.Mapping) else nvml
            )
        )
    gpus = nvml.get("gpus") or []
    lost = [gpu["index"] for gpu in gpus if gpu.get("lost")]
    if lost:
        raise ValueError("node_labels: GPU(s) {0} fell off the bus; GFD would fail on them: recover the GPUs (reset or reboot) first".format(lost))
    return gpus


def _mig_on(gpu: t.Mapping[str, t.Any]) -> bool:
    return bool((gpu.get("mig") or {}).get("enabled"))


def _mig_devices(gpu: t.Mapping[str, t.Any]) -> list[dict[str, t.Any]]:
    """The GPU's MIG devices, each with GFD's profile name and attributes."""
    mig = gpu.get("mig") or {}
    instances = {gi["id"]: gi for gi in mig.get("gpu_instances") or []}
    found = []
    for device in mig.get("devices") or []:
        where = "GPU {0} MIG device {1}/{2}".format(gpu["index"], device.get("gpu_instance_id"), device.get("compute_instance_id"))
        gi = instances.get(device.get("gpu_instance_id"))
        ci = next((c for c in (gi or {}).get("compute_instances") or [] if c["id"] == device.get("compute_instance_id")), None)
        attributes = device.get("attributes")
        if gi is None or ci is None or not attributes or gi.get("profile_index") is None or ci.get("profile_index") is None:
            raise ValueError(
                "node_labels: {0}: NVML did not report its instance profiles and attributes (needs nvml_info from "
                "this collection's version, and a driver with nvmlDeviceGetAttributes)".format(where)
            )
        found.append({"profile": _profile_name(gpu, gi, ci, attributes, where), "attributes": attributes})
    return found


def _profile_name(gpu: t.Mapping[str, t.Any], gi: t.Mapping, ci: t.Mapping, attributes: t.Mapping, where: str) -> str:
    """go-nvlib's MigProfileInfo.String(), with '+' turned into '.' as GFD's GetName does."""
    gi_profile = _GI_PROFILES.get(gi["profile_index"])
    ci_slices = _CI_SLICES.get(ci["profile_index"])
    if gi_profile is None or ci_slices is None:
        raise ValueError(
            "node_labels: {0}: GPU-instance profile index {1} / compute-instance profile index {2} is not one GFD "
            "(go-nvlib) can name, so GFD fails on this node too; use another MIG layout".format(where, gi["profile_index"], ci["profile_index"])
        )
    total = gpu.get("memory_total_bytes") or (gpu.get("memory_total_mib") or 0) * _MIB
    gb = mig_memory_gb(total, attributes["memory_size_mb"])
    suffix = ""
    if gi_profile["attributes"]:
        suffix = "+" + ",".join(gi_profile["attributes"])
    if gi_profile["negative"]:
        suffix = "-" + ",".join(gi_profile["negative"])
    g = gi_profile["slices"]
    name = "{0}g.{1}gb{2}".format(g, gb, suffix) if ci_slices == g else "{0}c.{1}g.{2}gb{3}".format(ci_slices, g, gb, suffix)
    return name.replace("+", ".")


# --- the labels --------------------------------------------------------------------------------------------------
def _full_gpu_labels(gpu: t.Mapping[str, t.Any], count: int, sharing: _Sharing | None) -> dict[str, str]:
    """NewGPUResourceLabeler for one GPU name."""
    resource = _Resource(GPU, sharing)
    labels = resource.base(count, gpu["name"])
    if gpu.get("memory_total_mib"):
        labels[resource.key("memory")] = str(gpu["memory_total_mib"])
    major, minor = (int(part) for part in (gpu.get("compute_capability") or "0.0").split("."))
    if major != 0:
        labels[resource.key("family")] = arch_family(major, minor)
        labels[resource.key("compute.major")] = str(major)
        labels[resource.key("compute.minor")] = str(minor)
    return labels


def _gpu_labels(gpus: list[t.Mapping[str, t.Any]], sharing: _Sharing) -> dict[str, str]:
    """newGPULabelers: per GPU name, MIG-enabled GPUs first (without sharing), then the others over them.

    GFD walks Go maps here, so with several GPU names on one node which name's labels win is random; the role
    takes them in NVML index order, so the last GPU's name wins, and says nothing more than GFD does.
    """
    counts: dict[str, int] = {}
    for gpu in gpus:
        counts[gpu["name"]] = counts.get(gpu["name"], 0) + 1
    labels: dict[str, str] = {}
    for mig_on, labeller_sharing in ((True, None), (False, sharing)):
        seen: dict[str, t.Mapping[str, t.Any]] = {}
        for gpu in gpus:
            if _mig_on(gpu) == mig_on:
                seen[gpu["name"]] = gpu  # the last device of a name stands for it, as in GFD's map
        for name, gpu in seen.items():
            labels.update(_full_gpu_labels(gpu, counts[name], labeller_sharing))
    return labels


def _mig_resource_labels(resource: _Resource, parent: str, profile: str, count: int, attributes: t.Mapping) -> dict[str, str]:
    """NewMIGResourceLabeler."""
    labels = resource.base(count, parent, "MIG", profile)
    for field, suffix in _MIG_ATTRIBUTES:
        labels[resource.key(suffix)] = str(attributes[field])
    return labels


def _mig_resources(gpus: list[t.Mapping[str, t.Any]]) -> dict[str, dict[str, t.Any]]:
    """Every MIG device of the node by profile: the first device's parent and attributes, and the count."""
    resources: dict[str, dict[str, t.Any]] = {}
    for gpu in gpus:
        if not _mig_on(gpu):
            continue
        for device in _mig_devices(gpu):
            entry = resources.setdefault(device["profile"], {"parent": gpu["name"], "attributes": device["attributes"], "count": 0})
            entry["count"] += 1
    return resources


def _single_labels(gpus: list[t.Mapping[str, t.Any]], sharing: _Sharing) -> dict[str, str]:
    """newMigStrategySingleLabeler: the MIG devices as nvidia.com/gpu, or -MIG-INVALID."""
    mig_gpus = [gpu for gpu in gpus if _mig_on(gpu)]
    if not mig_gpus:
        return {}
    valid = all((gpu.get("mig") or {}).get("devices") for gpu in mig_gpus) and len(mig_gpus) == len(gpus)
    resources = _mig_resources(gpus) if valid else {}
    if not valid or len(resources) != 1:
        invalid = _Resource(GPU, None)
        return {
            invalid.key("product"): invalid.product(mig_gpus[0]["name"], "MIG", "INVALID"),
            invalid.key("count"): "0",
            invalid.key("replicas"): "0",
            invalid.key("sharing-strategy"): "",
            invalid.key("memory"): "0",
        }
    profile, entry = next(iter(resources.items()))
    return _mig_resource_labels(_Resource(GPU, sharing), entry["parent"], profile, entry["count"], entry["attributes"])


def _mixed_labels(gpus: list[t.Mapping[str, t.Any]], sharing: _Sharing) -> dict[str, str]:
    labels: dict[str, str] = {}
    for profile, entry in sorted(_mig_resources(gpus).items()):
        resource = _Resource("nvidia.com/mig-" + profile, sharing)
        labels.update(_mig_resource_labels(resource, entry["parent"], profile, entry["count"], entry["attributes"]))
    return labels


def _version_labels(nvml: t.Mapping[str, t.Any]) -> dict[str, str]:
    """newVersionLabeler, the deprecated names included (GFD still writes them)."""
    driver = nvml.get("driver_version") or ""
    parts = driver.split(".")
    if not 2 <= len(parts) <= 3:
        raise ValueError('node_labels: the driver version {0!r} does not match "X.Y[.Z]"; GFD fails on it too'.format(driver))
    major, minor = parts[0], parts[1]
    revision = parts[2] if len(parts) == 3 else ""
    cuda = str(nvml.get("cuda_driver_version") or "")
    if not re.fullmatch(r"^\d+\.\d+$", cuda):
        raise ValueError("node_labels: NVML reported no CUDA driver version (cuda_driver_version={0!r})".format(cuda))
    cuda_major, cuda_minor = cuda.split(".")
    return {
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": revision,
        "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": revision,
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.runtime-version.major": cuda_major,
        "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.runtime-version.full": "{0}.{1}".format(int(cuda_major), int(cuda_minor)),
    }


def _mode(gpus: list[t.Mapping[str, t.Any]], pci_classes: t.Mapping[str, t.Any]) -> str:
    """newGPUModeLabeler: one PCI class for every GPU, named; anything unreadable or mixed is 'unknown'."""
    classes = set()
    for gpu in gpus:
        raw = pci_classes.get((gpu.get("pci") or {}).get("bus_id"))
        if not isinstance(raw, str) or not re.fullmatch(r"^0x[0-9a-fA-F]+$", raw.strip()):
            return "unknown"
        classes.add(int(raw.strip(), 16))
    return _PCI_MODES.get(classes.pop(), "unknown") if len(classes) == 1 else "unknown"


_PCI_STATUS, _STATUS_CAPABILITIES, _CAPABILITY_LIST = 0x06, 0x10, 0x34
_VGPU_RECORDS_START, _HOST_FIELD = 5, 10
_VGPU = _k.VGPU_SIGNATURE["value"]


def _vendor_capability(config: bytes, address: str) -> bytes | None:
    """The first vendor-specific capability in the function's capability list, as GFD finds it (pciutil.go)."""
    if len(config) < 256:
        raise ValueError("only {0} bytes of {1}'s PCI config could be read (GFD needs 256: it runs privileged)".format(len(config), address))
    if not config[_PCI_STATUS] & _STATUS_CAPABILITIES:
        return None
    visited = set()
    position = config[_CAPABILITY_LIST]
    while position and position not in visited:
        capability_id, following, length = config[position], config[(position + 1) & 0xFF], config[(position + 2) & 0xFF]
        if capability_id == 0xFF:
            return None
        if capability_id == _VGPU["capability_id"]:
            return config[position : position + length]
        visited.add(position)
        position = following
    return None


def _host_driver(capability: bytes, address: str) -> tuple[str, str]:
    """(version, branch) from a vGPU capability's host-driver record (vgpu.go GetInfo)."""
    position = _VGPU_RECORDS_START
    while position < len(capability) and capability[position] != 0:
        if position + 1 >= len(capability) or capability[position + 1] == 0:
            break
        position += capability[position + 1]
    end = position + 2 + 2 * _HOST_FIELD
    if position >= len(capability) or capability[position] != 0 or end > len(capability):
        raise ValueError("the vGPU capability of PCI device {0} has no host driver record (GFD fails on it too)".format(address))
    field = capability[position + 2 : end]
    return field[:_HOST_FIELD].strip(b"\0").decode("ascii", "replace"), field[_HOST_FIELD:].strip(b"\0").decode("ascii", "replace")


def vgpu_labels(nvidia_pci: t.Mapping[str, t.Any] | None) -> dict[str, str]:
    """GFD's vGPU labeller: vgpu.present (and the host driver of a vGPU guest) from _pci.read_nvidia_functions.

    Nothing when the read failed or is missing: GFD logs the error and gives no vGPU label.
    """
    if not nvidia_pci or nvidia_pci.get("error"):
        return {}
    signature = _VGPU["signature"].encode("ascii")
    offset = _VGPU["offset"]
    result = {}
    present = False
    for device in nvidia_pci.get("devices") or []:
        try:
            capability = _vendor_capability(bytes.fromhex(device["config"]), device["address"])
        except ValueError:
            return {}
        if capability is None or capability[offset : offset + len(signature)] != signature:
            continue
        present = True
        version, branch = _host_driver(capability, device["address"])
        result["nvidia.com/vgpu.host-driver-version"] = version
        result["nvidia.com/vgpu.host-driver-branch"] = branch
    result["nvidia.com/vgpu.present"] = "true" if present else "false"
    return result


def vgpu_guest(nvidia_pci: t.Mapping[str, t.Any] | None) -> bool | None:
    """Whether the node is a vGPU guest by GFD's rule (an NVIDIA function with the vGPU capability); None when
    the PCI read is missing or failed (then nothing is known)."""
    labels = vgpu_labels(nvidia_pci)
    return labels["nvidia.com/vgpu.present"] == "true" if labels else None


_NO_CLUSTER = "00000000-0000-0000-0000-000000000000"


def clique_labels(gpus: list[t.Mapping[str, t.Any]]) -> dict[str, str]:
    """GFD's IMEX labeller: nvidia.com/gpu.clique = <cluster UUID>.<clique id> of the fabric-attached GPUs.

    A GPU is attached when its fabric probe completed with success and a cluster UUID (go-nvlib's
    IsFabricAttached); GPUs that disagree on either id give no label, as in GFD. nvml_info's health
    read carries the fabric facts (a read without health has none: no label).
    """
    clusters, cliques = set(), set()
    for gpu in gpus:
        fabric = (gpu.get("health") or {}).get("fabric") or {}
        if fabric.get("state") != "completed" or fabric.get("status") != "NVML_SUCCESS":
            continue
        if fabric.get("cluster_uuid") in (None, "", _NO_CLUSTER):
            continue
        clusters.add(str(fabric["cluster_uuid"]))
        cliques.add(str(fabric.get("clique_id")))
    if len(clusters) != 1 or len(cliques) != 1:
        return {}
    return {"nvidia.com/gpu.clique": "{0}.{1}".format(clusters.pop(), cliques.pop())}


def labels(nvml: t.Mapping[str, t.Any], settings: t.Mapping[str, t.Any], reads: t.Mapping[str, t.Any]) -> dict[str, str]:
    """GFD's label set for the node (NewDeviceLabeler's labellers, merged in GFD's order)."""
    strategy = settings.get("mig_strategy", "none")
    if strategy not in MIG_STRATEGIES:
        raise ValueError("node_labels_mig_strategy must be one of {0}, got {1!r}".format(", ".join(MIG_STRATEGIES), strategy))
    sharing = _Sharing(settings)
    gpus = _gpus(nvml)
    vgpu = vgpu_labels(reads.get("nvidia_pci"))
    if not gpus:
        return vgpu  # GFD's empty device labeller, merged with the vGPU labeller all the same
    machine = reads.get("machine")
    result = {"nvidia.com/gpu.machine": sanitise(machine.strip()) if isinstance(machine, str) else "unknown"}
    result.update(_version_labels(nvml))
    result["nvidia.com/mig.capable"] = "true" if any((gpu.get("mig") or {}).get("capable") for gpu in gpus) else "false"
    if sharing.strategy() == "mps" and any(_mig_on(gpu) for gpu in gpus):
        raise ValueError("node_labels: MPS sharing is not supported with MIG on (GFD fails); drop node_labels_mps or turn MIG off")
    result["nvidia.com/mps.capable"] = "true" if sharing.strategy() == "mps" else "false"
    result.update(_gpu_labels(gpus, sharing))
    if strategy != "none":
        result["nvidia.com/mig.strategy"] = strategy
        result.update(_single_labels(gpus, sharing) if strategy == "single" else _mixed_labels(gpus, sharing))
    result["nvidia.com/gpu.mode"] = _mode(gpus, reads.get("pci_classes") or {})
    result.update(clique_labels(gpus))
    result.update(vgpu)
    return dict(sorted(result.items()))


def check_expiry(expiry: t.Any) -> str:
    """'' (no expiry) or an RFC 3339 time NFD's time.Parse(time.RFC3339, ...) accepts."""
    if expiry in (None, ""):
        return ""
    text = str(expiry)
    if not _RFC3339.fullmatch(text):
        raise ValueError("node_labels_expiry_time must be an RFC 3339 time such as 2027-01-31T00:00:00Z, or '' for none; got {0!r}".format(text))
    try:
        datetime.datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise ValueError("node_labels_expiry_time {0!r} is not a real date and time".format(text)) from None
    return text


def feature_file(node_labels: t.Mapping[str, str], expiry: str, header: str) -> str:
    """The NFD local feature file: the header, the expiry directive first (it covers the lines after it), the labels."""
    lines = ["# " + line if line else "#" for line in header.splitlines()]
    if expiry:
        lines.append("# +expiry-time=" + expiry)
    lines.extend("{0}={1}".format(key, value) for key, value in sorted(node_labels.items()))
    return "\n".join(lines) + "\n"


def summary(node_labels: t.Mapping[str, str], mig_strategy: str) -> dict[str, t.Any]:
    """The key values the fleet report shows per node."""
    return {
        "product": node_labels.get(GPU + ".product"),
        "memory_mib": int(node_labels[GPU + ".memory"]) if node_labels.get(GPU + ".memory") else None,
        "count": int(node_labels[GPU + ".count"]) if node_labels.get(GPU + ".count") else 0,
        "mig_strategy": mig_strategy,
        "mig_resources": sorted(
            key[len("nvidia.com/") : -len(".count")] for key in node_labels if key.startswith("nvidia.com/mig-") and key.endswith(".count")
        ),
    }


def pci_class_path(bus_id: str) -> str:
    """NVML's 00000000:07:00.0 is sysfs' 0000:07:00.0: go-nvlib keeps its last 12 characters, lower case."""
    return "/sys/bus/pci/devices/{0}/class".format(bus_id[-12:].lower())


def check_path(path: t.Any) -> str:
    """The feature file's path: absolute, and a name NFD reads (it skips names that start with a dot)."""
    directory, name = str(path).rsplit("/", 1) if "/" in str(path) else ("", str(path))
    if not directory.startswith("/"):
        raise ValueError("node_labels_dir must be an absolute path, got {0!r}".format(directory))
    if not name or name.startswith(".") or name in ("..",):
        raise ValueError(
            "node_labels_file {0!r} would never be read: NFD skips names that start with a dot; use a plain name such as gpufleet-gpu".format(name)
        )
    return str(path)


def plan(request: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The labels, the feature file's content and the fleet report's summary; ValueError names what is wrong.

    `request`: nvml (nvml_info's facts), settings (mig_strategy, time_slicing, mps, rename_by_default), reads
    (machine: the text of MACHINE_FILE or None, pci_classes: {bus_id: the text of pci_class_path(bus_id) or None}),
    expiry_time ('' or RFC 3339), header (the file's comment) and optionally path (checked).
    """
    if request.get("path") is not None:
        check_path(request["path"])
    settings = request.get("settings") or {}
    expiry = check_expiry(request.get("expiry_time"))
    node_labels = labels(request.get("nvml") or {}, settings, request.get("reads") or {})
    content = feature_file(node_labels, expiry, str(request.get("header") or ""))
    size = len(content.encode("utf-8"))
    if size > MAX_FILE_BYTES:
        raise ValueError("the feature file would be {0} bytes; NFD reads at most {1}: shorten node_labels_header".format(size, MAX_FILE_BYTES))
    return {"labels": node_labels, "content": content, "summary": summary(node_labels, settings.get("mig_strategy", "none"))}
