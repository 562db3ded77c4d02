"""Build, inspect and edit nvml-sim state files.

The simulated libnvidia-ml.so.1 keeps a whole node in one text file (see
FORMAT.md next to this script).  This tool renders node fixtures into such
files and edits them the way the library does: atomically (write
``<path>.tmp``, fsync, rename) under an exclusive ``flock`` on
``<path>.lock``.

Only ``render`` needs PyYAML; every other subcommand uses the standard library
alone, so the tool also works inside bare containers.  Python 3.8+.

Examples::

    simctl.py render nodes/dgx-a100-8x40gb.yml -o /var/lib/nvml-sim/state --booted
    simctl.py show
    simctl.py fault add nvmlDeviceGetHandleByIndex_v2 GPU_IS_LOST --gpu 3 --once
    simctl.py set driver_loaded=0
    simctl.py set mig_pending=1 --gpu 0
    simctl.py process add --gpu 0 --pid 4242 --used-memory 1GiB --name python3
    simctl.py reboot
    simctl.py health --gpu 0 temp=85 clock_event_reasons=0x40
    simctl.py inject remap-pending --gpu 2
    simctl.py inject xid --gpu 3 --xid 79
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import sys
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

HEADER = "nvml-sim 1"
DEFAULT_STATE = "/var/lib/nvml-sim/state"
DEFAULT_RUNDIR = "/run/nvml-sim"
RECORD_ORDER = ("system", "gpu", "giprofile", "placement", "gi", "ci", "process", "fault")

# nvmlReturn_t values (nvml.h)
NVML_ERRORS: Dict[str, int] = {
    "SUCCESS": 0,
    "UNINITIALIZED": 1,
    "INVALID_ARGUMENT": 2,
    "NOT_SUPPORTED": 3,
    "NO_PERMISSION": 4,
    "ALREADY_INITIALIZED": 5,
    "NOT_FOUND": 6,
    "INSUFFICIENT_SIZE": 7,
    "INSUFFICIENT_POWER": 8,
    "DRIVER_NOT_LOADED": 9,
    "TIMEOUT": 10,
    "IRQ_ISSUE": 11,
    "LIBRARY_NOT_FOUND": 12,
    "FUNCTION_NOT_FOUND": 13,
    "CORRUPTED_INFOROM": 14,
    "GPU_IS_LOST": 15,
    "RESET_REQUIRED": 16,
    "OPERATING_SYSTEM": 17,
    "LIB_RM_VERSION_MISMATCH": 18,
    "IN_USE": 19,
    "MEMORY": 20,
    "NO_DATA": 21,
    "VGPU_ECC_NOT_SUPPORTED": 22,
    "INSUFFICIENT_RESOURCES": 23,
    "FREQ_NOT_SUPPORTED": 24,
    "ARGUMENT_VERSION_MISMATCH": 25,
    "DEPRECATED": 26,
    "NOT_READY": 27,
    "GPU_NOT_FOUND": 28,
    "INVALID_STATE": 29,
    "RESET_TYPE_NOT_SUPPORTED": 30,
    "UNKNOWN": 999,
}

# NVML_COMPUTE_INSTANCE_PROFILE_* index -> compute slices (0: not derived)
CI_PROFILE_SLICES = (1, 2, 3, 4, 7, 8, 6, 0, 0)

# The key tables below keep several keys a line (ruff format would give each its own line).
# keys whose values stay strings in `show`; everything else is an integer
# fmt: off
STRING_KEYS = frozenset(
    ("name", "uuid", "serial", "board_part_number", "bus_id", "driver_version", "nvml_version",
     "mig_toggle", "call", "mode", "ci_slices", "fabric_state", "fabric_status", "cluster_uuid", "nvlink_down"))

SYSTEM_KEYS = ("driver_version", "cuda_driver_version", "nvml_version", "driver_loaded", "libcuda")
GPU_KEYS = (
    "name", "uuid", "serial", "board_part_number", "bus_id", "pci_domain", "pci_bus", "pci_device",
    "pci_device_id", "pci_subsystem_id", "minor", "memory_total", "memory_reserved", "arch", "cc_major",
    "cc_minor", "sm_count", "persistence", "mig_capable", "mig_current", "mig_pending", "mig_toggle",
    "mig_profiles_off")
# gpu-record health keys (FORMAT.md "Health"); absent keys read as a healthy GPU
HEALTH_KEYS = (
    "lost", "ecc_supported", "ecc_mode", "ecc_pending", "ecc_vol_corr", "ecc_vol_uncorr", "ecc_agg_corr",
    "ecc_agg_uncorr", "retired_pages_supported", "retired_sbe", "retired_dbe", "retired_pending",
    "remapped_rows_supported", "remap_corr", "remap_uncorr", "remap_pending", "remap_failure", "recovery_action",
    "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max", "pcie_replay", "nvlinks", "nvlink_down",
    "fabric_state", "fabric_status", "clique_id", "cluster_uuid", "temp", "temp_slowdown", "temp_shutdown",
    "clock_event_reasons", "power_mw", "power_limit_mw")
# fmt: on
# system-record keys beyond the library's: read by the driver facade only
SYSTEM_EXTRA_KEYS = ("nvswitches",)
DEFAULT_KMSG = "/run/nvml-sim/kmsg"
FABRIC_STATES = ("not_supported", "not_started", "in_progress", "completed")

MIB = 1 << 20


class SimError(Exception):
    """A user-facing error: bad arguments, a malformed file or fixture."""


# --------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------


def pct_decode(text: str) -> str:
    """Undo the percent-encoding of a state-file value."""
    out = bytearray()
    raw = text.encode("utf-8")
    i = 0
    hexdigits = b"0123456789abcdefABCDEF"
    while i < len(raw):
        if raw[i : i + 1] == b"%" and len(raw) >= i + 3 and raw[i + 1] in hexdigits and raw[i + 2] in hexdigits:
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", errors="replace")


def pct_encode(text: str) -> str:
    """Percent-encode '%', '=', blanks and control characters."""
    return "".join(f"%{ord(ch):02X}" if ch in "%=" or ord(ch) <= 0x20 or ord(ch) == 0x7F else ch for ch in text)


def parse_int(text: str) -> int:
    """Parse an integer the way FORMAT.md says: decimal unless it starts with 0x."""
    value = text.strip()
    sign = -1 if value.startswith("-") else 1
    body = value.lstrip("+-")
    try:
        if body[:2].lower() == "0x":
            return sign * int(body[2:], 16)
        return sign * int(body, 10)
    except ValueError:
        raise SimError(f"not an integer: {text!r}") from None


def parse_size(text: str) -> int:
    """Parse a byte count: a plain integer or one with a KiB/MiB/GiB suffix."""
    value = text.strip()
    for suffix, factor in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)):
        if value.endswith(suffix):
            return parse_int(value[: -len(suffix)]) * factor
    return parse_int(value)


def error_code(text: str) -> int:
    """NVML error given as a number, NVML_ERROR_NAME or NAME (any case)."""
    name = text.strip().upper()
    if name.startswith("NVML_ERROR_"):
        name = name[len("NVML_ERROR_") :]
    elif name.startswith("NVML_"):
        name = name[len("NVML_") :]
    if name in NVML_ERRORS:
        return NVML_ERRORS[name]
    try:
        return parse_int(text)
    except SimError:
        raise SimError(f"unknown NVML error {text!r} (try `simctl.py errors`)") from None


def error_name(code: int) -> str:
    """NVML_ERROR_* name of a code, or the number as text."""
    for name, value in NVML_ERRORS.items():
        if value == code:
            return "NVML_SUCCESS" if name == "SUCCESS" else "NVML_ERROR_" + name
    return str(code)


def fnv1a64(data: bytes, seed: int) -> int:
    """64-bit FNV-1a, as used by the library for MIG UUIDs."""
    value = seed
    for byte in data:
        value ^= byte
        value = (value * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def mig_uuid(gpu_uuid: str, gi: int, ci: int) -> str:
    """The MIG device UUID the library derives for (GPU UUID, GI id, CI id)."""
    key = f"{gpu_uuid}/{gi}/{ci}".encode()
    h1 = fnv1a64(key, 0xCBF29CE484222325)
    h2 = fnv1a64(key, h1 ^ 0x9E3779B97F4A7C15)
    return f"MIG-{h1 >> 32:08x}-{(h1 >> 16) & 0xFFFF:04x}-{h1 & 0xFFFF:04x}-{h2 >> 48:04x}-{h2 & 0xFFFFFFFFFFFF:012x}"


# --------------------------------------------------------------------------
# state file model
# --------------------------------------------------------------------------


class Record:
    """One line of a state file: a type and ordered key=value fields."""

    __slots__ = ("fields", "rtype")

    def __init__(self, rtype: str, fields: Optional[Dict[str, str]] = None) -> None:
        self.rtype = rtype
        self.fields: Dict[str, str] = dict(fields or {})

    def get(self, key: str, default: str = "") -> str:
        """Field value as a string."""
        return self.fields.get(key, default)

    def num(self, key: str, default: int = 0) -> int:
        """Field value as an integer."""
        return parse_int(self.fields[key]) if key in self.fields else default

    def line(self) -> str:
        """The record as one state-file line."""
        parts = [self.rtype]
        parts.extend(f"{key}={pct_encode(str(val))}" for key, val in self.fields.items())
        return " ".join(parts)


class State:
    """A parsed state file."""

    def __init__(self, records: Optional[List[Record]] = None) -> None:
        self.records: List[Record] = list(records or [])

    @classmethod
    def parse(cls, text: str, origin: str = "<state>") -> "State":
        """Parse state-file text; raise SimError on syntax errors."""
        lines = text.splitlines()
        if not lines or lines[0].rstrip("\r") != HEADER:
            raise SimError(f"{origin}: first line must be {HEADER!r}")
        records = []
        for number, raw in enumerate(lines[1:], start=2):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            tokens = line.split()
            if tokens[0] not in RECORD_ORDER:
                raise SimError(f"{origin}:{number}: unknown record type {tokens[0]!r}")
            fields = {}
            for token in tokens[1:]:
                key, sep, value = token.partition("=")
                if not sep or not key:
                    raise SimError(f"{origin}:{number}: expected key=value, got {token!r}")
                fields[key] = pct_decode(value)
            records.append(Record(tokens[0], fields))
        return cls(records)

    def dump(self) -> str:
        """Serialise in the library's canonical order (GPU records grouped)."""
        out = [HEADER, "# written by simctl.py; see tests/nvml-sim/FORMAT.md"]
        out.extend(r.line() for r in self.of_type("system"))
        for gpu in sorted(self.of_type("gpu"), key=lambda r: r.num("index")):
            index = gpu.num("index")
            out.append(gpu.line())
            for prof in self.for_gpu("giprofile", index):
                out.append(prof.line())
                out.extend(p.line() for p in self.for_gpu("placement", index) if p.num("profile") == prof.num("id"))
            for gi in sorted(self.for_gpu("gi", index), key=lambda r: r.num("id")):
                out.append(gi.line())
                out.extend(c.line() for c in sorted(self.for_gpu("ci", index), key=lambda r: r.num("id")) if c.num("gi") == gi.num("id"))
        out.extend(r.line() for r in self.of_type("process"))
        out.extend(r.line() for r in self.of_type("fault"))
        return "\n".join(out) + "\n"

    def of_type(self, rtype: str) -> List[Record]:
        """All records of one type, in file order."""
        return [r for r in self.records if r.rtype == rtype]

    def for_gpu(self, rtype: str, index: int) -> List[Record]:
        """Records of one type that belong to GPU `index`."""
        return [r for r in self.of_type(rtype) if r.num("gpu", -1) == index]

    def system(self) -> Record:
        """The system record (created if missing)."""
        found = self.of_type("system")
        if found:
            return found[0]
        rec = Record("system")
        self.records.insert(0, rec)
        return rec

    def gpu(self, index: int) -> Record:
        """The gpu record with this index."""
        for rec in self.of_type("gpu"):
            if rec.num("index") == index:
                return rec
        raise SimError(f"no GPU with index {index}")

    def remove(self, predicate: Any) -> int:
        """Drop the records for which predicate(record) is true; return how many."""
        before = len(self.records)
        self.records = [r for r in self.records if not predicate(r)]
        return before - len(self.records)

    def apply_boot(self) -> None:
        """What a reboot does: pending MIG modes apply, instances and processes go."""
        for gpu in self.of_type("gpu"):
            gpu.fields["mig_current"] = gpu.get("mig_pending", "0")
        self.remove(lambda r: r.rtype in ("gi", "ci", "process"))


def state_path(explicit: Optional[str]) -> str:
    """--state, else $NVML_SIM_STATE, else the library default."""
    return explicit or os.environ.get("NVML_SIM_STATE") or DEFAULT_STATE


def run_dir(explicit: Optional[str]) -> str:
    """--rundir, else $NVML_SIM_RUNDIR, else /run/nvml-sim."""
    return explicit or os.environ.get("NVML_SIM_RUNDIR") or DEFAULT_RUNDIR


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """Hold the exclusive flock on <path>.lock shared with the library."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_state(path: str) -> State:
    """Parse the file at path (no locking)."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return State.parse(handle.read(), path)
    except FileNotFoundError:
        raise SimError(f"state file {path} does not exist (render one first)") from None


def write_state(path: str, state: State) -> None:
    """Atomically replace the file at path; the caller holds the lock."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(state.dump())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def editing(path: str) -> Iterator[State]:
    """Read-modify-write the state under the lock."""
    with locked(path):
        state = read_state(path)
        yield state
        write_state(path, state)


# --------------------------------------------------------------------------
# MIG geometry (mirrors the library, used when rendering fixtures)
# --------------------------------------------------------------------------

Span = Tuple[int, int]


def spans_overlap(a: Span, b: Span) -> bool:
    """Do [start, start+size) ranges a and b intersect?"""
    return a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


class GpuGeometry:
    """The MIG rules of one GPU: profiles, placements, GI ids, capacity."""

    def __init__(self, profiles: Sequence[Dict[str, Any]]) -> None:
        self.profiles = list(profiles)
        self.units = max((s + z for p in self.profiles for s, z in p["placements"]), default=0)
        self.compute = max((p["slices"] for p in self.profiles), default=0)

    def profile(self, key: Any) -> Dict[str, Any]:
        """Look a profile up by name or unique id."""
        for prof in self.profiles:
            if prof["name"] == key or (isinstance(key, int) and prof["id"] == key):
                return prof
        raise SimError(f"no GPU-instance profile {key!r} on this model")

    def gi_id(self, span: Span) -> int:
        """GI id of a placement: sizes descending, ceil(U/size) ids each, by start."""
        sizes = sorted({z for p in self.profiles for _start, z in p["placements"]}, reverse=True)
        base = sum(-(-self.units // z) for z in sizes if z > span[1])
        return base + span[0] // span[1]

    def check(self, gis: Sequence[Tuple[Dict[str, Any], Span]], prof: Dict[str, Any], span: Span) -> str:
        """'' when prof fits at span next to gis, else the reason it does not."""
        if span not in prof["placements"]:
            return f"placement {span!r} is not one of {prof['name']}'s placements"
        if sum(1 for p, _span in gis if p is prof) >= prof["instances"]:
            return f"no more than {prof['instances']} instance(s) of {prof['name']}"
        if any(spans_overlap(s, span) for _prof, s in gis):
            return f"placement {span!r} overlaps an existing GPU instance"
        if sum(p["slices"] for p, _span in gis) + prof["slices"] > self.compute:
            return f"not enough compute slices left for {prof['name']}"
        return ""

    def pick(self, gis: Sequence[Tuple[Dict[str, Any], Span]], prof: Dict[str, Any]) -> Span:
        """Automatic placement, like the library: the free one with the highest start."""
        for span in sorted(prof["placements"], key=lambda s: -s[0]):
            if not self.check(gis, prof, span):
                return span
        raise SimError(f"no free placement left for {prof['name']}")


def ci_profiles(gi_prof: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Compute-instance profiles derived from a GI profile (see FORMAT.md)."""
    out = []
    allowed = gi_prof.get("ci_slices")
    for index, slices in enumerate(CI_PROFILE_SLICES):
        if not slices or slices > gi_prof["slices"] or (allowed and slices not in allowed):
            continue
        name = gi_prof["name"] if slices == gi_prof["slices"] else f"{slices}c.{gi_prof['name']}"
        out.append({"index": index, "slices": slices, "instances": gi_prof["slices"] // slices, "name": name})
    return out


# --------------------------------------------------------------------------
# render: node fixture -> state
# --------------------------------------------------------------------------

NODE_KEYS = frozenset(("name", "description", "system", "gpus", "overrides", "bus_ids", "fabric"))
GPU_FIXTURE_KEYS = frozenset(
    (
        "model",
        "count",
        "name",
        "persistence",
        "mig",
        "mig_current",
        "mig_pending",
        "mig_toggle",
        "uuid",
        "serial",
        "bus_id",
        "minor",
        "memory_reserved_mib",
        "board_part_number",
        "gis",
        "processes",
        "health",
        "mig_profiles_off",
    )
)
# a model's `health:` block -> gpu-record keys (the model's healthy idle values)
MODEL_HEALTH_KEYS = {
    "ecc_supported": "ecc_supported",
    "retired_pages_supported": "retired_pages_supported",
    "remapped_rows_supported": "remapped_rows_supported",
    "pcie_gen_max": "pcie_gen_max",
    "pcie_width_max": "pcie_width_max",
    "nvlinks": "nvlinks",
    "temp_c": "temp",
    "temp_slowdown_c": "temp_slowdown",
    "temp_shutdown_c": "temp_shutdown",
    "clock_event_reasons": "clock_event_reasons",
    "power_w": "power_mw",
    "power_limit_w": "power_limit_mw",
}
FABRIC_FIXTURE_KEYS = {"state": "fabric_state", "status": "fabric_status", "clique_id": "clique_id", "cluster_uuid": "cluster_uuid"}
UNIQUE_KEYS = ("uuid", "serial", "bus_id", "minor")
DEFAULT_BUS = (0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD)


def load_yaml(path: str) -> Any:
    """Load a YAML file (PyYAML is needed for `render` only)."""
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise SimError("`render` needs PyYAML (python3-yaml)") from None
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except OSError as exc:
        raise SimError(f"cannot read {path}: {exc}") from None


def load_model(models_dir: str, key: str) -> Dict[str, Any]:
    """Load and normalise ../models/<key>.yml."""
    path = os.path.join(models_dir, key + ".yml")
    if not os.path.exists(path):
        raise SimError(f"unknown GPU model {key!r} (no {path})")
    model = load_yaml(path)
    profiles = []
    for prof in model.get("profiles") or []:
        place = prof["placements"]
        entry = dict(prof)
        entry["placements"] = [(int(start), int(place["size"])) for start in place["starts"]]
        profiles.append(entry)
    model["profiles"] = profiles
    return model


def as_flag(value: Any) -> str:
    """YAML booleans/integers -> "0"/"1"."""
    return "1" if value in (True, 1, "1", "true", "yes", "on") else "0"


def expand_gpus(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Turn the `gpus` list (with counts) and `overrides` into one dict per GPU."""
    gpus: List[Dict[str, Any]] = []
    for entry in node.get("gpus") or []:
        unknown = set(entry) - GPU_FIXTURE_KEYS
        if unknown:
            raise SimError(f"unknown GPU keys: {', '.join(sorted(unknown))}")
        count = int(entry.get("count", 1))
        if count > 1 and any(k in entry for k in UNIQUE_KEYS):
            raise SimError(f"{'/'.join(UNIQUE_KEYS)} cannot be shared by {count} GPUs")
        for _copy in range(count):
            gpu = {k: v for k, v in entry.items() if k != "count"}
            gpus.append(gpu)
    for index, override in (node.get("overrides") or {}).items():
        index = int(index)
        if index >= len(gpus):
            raise SimError(f"override for GPU {index}, but the node has {len(gpus)} GPUs")
        unknown = set(override) - GPU_FIXTURE_KEYS
        if unknown:
            raise SimError(f"unknown keys in override {index}: {', '.join(sorted(unknown))}")
        gpus[index] = dict(gpus[index], **override)
    if not gpus:
        raise SimError("the node lists no GPUs")
    return gpus


def identity(node_name: str, index: int, model_key: str) -> Dict[str, str]:
    """Deterministic UUID and serial for GPU `index` of a node."""
    digest = hashlib.sha256(f"{node_name}/{index}/{model_key}".encode()).hexdigest()
    uuid = f"GPU-{digest[0:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    serial = "1" + str(int(digest[32:48], 16))[-12:].rjust(12, "0")
    return {"uuid": uuid, "serial": serial}


def bus_id_for(node: Dict[str, Any], index: int) -> str:
    """Bus id from the node's bus_ids list, else a DGX-like default layout."""
    listed = node.get("bus_ids") or []
    if index < len(listed):
        return str(listed[index])
    bus = DEFAULT_BUS[index] if index < len(DEFAULT_BUS) else 0x10 + index
    return f"00000000:{bus:02X}:00.0"


def parse_bus_id(text: str) -> Tuple[int, int, int]:
    """'00000000:07:00.0' (or a 4-digit domain) -> (domain, bus, device)."""
    try:
        domain, bus, rest = text.split(":")
        device, function = rest.split(".")
        values = (int(domain, 16), int(bus, 16), int(device, 16), int(function, 16))
    except ValueError:
        raise SimError(f"bad PCI bus id {text!r} (want DDDDDDDD:BB:DD.F)") from None
    if values[1] > 0xFF or values[2] > 0x1F or values[3] != 0:
        raise SimError(f"bad PCI bus id {text!r}")
    return values[0], values[1], values[2]


def render_instances(state: State, index: int, gpu: Dict[str, Any], geo: GpuGeometry, uuid: str) -> Dict[int, int]:
    """Validate and emit the gi/ci records of one GPU; return {GI id: CI count}."""
    placed: List[Tuple[Dict[str, Any], Span]] = []
    made: Dict[int, int] = {}
    for spec in gpu.get("gis") or []:
        prof = geo.profile(spec["profile"])
        if "start" in spec:
            span = (int(spec["start"]), prof["placements"][0][1])
            reason = geo.check(placed, prof, span)
            if reason:
                raise SimError(f"GPU {index}: cannot create {prof['name']}: {reason}")
        else:
            span = geo.pick(placed, prof)
        placed.append((prof, span))
        gid = geo.gi_id(span)
        state.records.append(Record("gi", {"gpu": str(index), "id": str(gid), "profile": str(prof["id"]), "start": str(span[0]), "size": str(span[1])}))
        render_cis(state, (index, gid), prof, spec.get("cis") or [], uuid)
        made[gid] = len(spec.get("cis") or [])
    return made


def ci_span(cip: Dict[str, Any], spec: Dict[str, Any], used: Sequence[Tuple[int, Span]]) -> Span:
    """Placement of one compute instance: the given start or the lowest free one."""
    starts = [k * cip["slices"] for k in range(cip["instances"])]
    if "start" in spec:
        start = int(spec["start"])
    else:
        start = next((s for s in starts if not any(spans_overlap(u, (s, cip["slices"])) for _index, u in used)), -1)
    span = (start, cip["slices"])
    same = sum(1 for p, _span in used if p == cip["index"])
    if start not in starts or same >= cip["instances"] or any(spans_overlap(u, span) for _index, u in used):
        raise SimError(f"cannot place {cip['name']} at {start}")
    return span


def render_cis(state: State, where: Tuple[int, int], prof: Dict[str, Any], specs: Sequence[Dict[str, Any]], uuid: str) -> None:
    """Validate and emit the ci records of GPU instance where=(GPU index, GI id)."""
    index, gid = where
    available = ci_profiles(prof)
    used: List[Tuple[int, Span]] = []
    for cid, spec in enumerate(specs):
        match = [c for c in available if spec["profile"] in (c["name"], c["index"])]
        if not match:
            raise SimError(f"GPU {index} GI {gid}: no compute-instance profile {spec['profile']!r} in {prof['name']}")
        try:
            span = ci_span(match[0], spec, used)
        except SimError as exc:
            raise SimError(f"GPU {index} GI {gid}: {exc}") from None
        used.append((match[0]["index"], span))
        state.records.append(
            Record(
                "ci",
                {
                    "gpu": str(index),
                    "gi": str(gid),
                    "id": str(cid),
                    "profile": str(match[0]["index"]),
                    "start": str(span[0]),
                    "size": str(span[1]),
                    "uuid": mig_uuid(uuid, gid, cid),
                },
            )
        )


def gpu_record(node: Dict[str, Any], index: int, gpu: Dict[str, Any], model: Dict[str, Any]) -> Record:
    """The gpu record of one fixture GPU (identity generated unless given)."""
    ident = identity(str(node.get("name", "node")), index, model["key"])
    mig_capable = bool(model.get("mig_capable"))
    current = as_flag(gpu.get("mig_current", gpu.get("mig", 0)))
    pending = as_flag(gpu.get("mig_pending", gpu.get("mig", current)))
    if not mig_capable and (current == "1" or pending == "1" or gpu.get("gis")):
        raise SimError(f"GPU {index}: {model['name']} does not support MIG")
    if gpu.get("gis") and current != "1":
        raise SimError(f"GPU {index}: GPU instances need mig_current=1")
    bus_id = str(gpu.get("bus_id", bus_id_for(node, index)))
    domain, bus, device = parse_bus_id(bus_id)
    reserved = int(gpu.get("memory_reserved_mib", model.get("memory_reserved_mib", 0)))
    return Record(
        "gpu",
        {
            "index": str(index),
            "name": str(gpu.get("name", model["name"])),
            "uuid": str(gpu.get("uuid", ident["uuid"])),
            "serial": str(gpu.get("serial", ident["serial"])),
            "board_part_number": str(gpu.get("board_part_number", model.get("board_part_number", ""))),
            "bus_id": bus_id,
            "pci_domain": str(domain),
            "pci_bus": str(bus),
            "pci_device": str(device),
            "pci_device_id": f"0x{parse_int(str(model['pci_device_id'])):08X}",
            "pci_subsystem_id": f"0x{parse_int(str(model.get('pci_subsystem_id', '0'))):08X}",
            "minor": str(gpu.get("minor", index)),
            "memory_total": str(int(model["memory_total_mib"]) * MIB),
            "memory_reserved": str(reserved * MIB),
            "arch": str(model["arch"]),
            "cc_major": str(model["cuda_compute_capability"][0]),
            "cc_minor": str(model["cuda_compute_capability"][1]),
            "sm_count": str(model["sm_count"]),
            "persistence": as_flag(gpu.get("persistence", 0)),
            "mig_capable": "1" if mig_capable else "0",
            "mig_current": current,
            "mig_pending": pending,
            "mig_toggle": str(gpu.get("mig_toggle", model.get("mig_toggle", "immediate"))),
            # Only models whose source says so: the record stays as before for the others.
            **({"mig_profiles_off": "1"} if gpu.get("mig_profiles_off", model.get("mig_profiles_off")) else {}),
        },
    )


def profile_records(index: int, model: Dict[str, Any]) -> List[Record]:
    """giprofile and placement records of one GPU."""
    out = []
    for prof in model["profiles"]:
        fields = {
            "gpu": str(index),
            "index": str(prof["index"]),
            "id": str(prof["id"]),
            "name": prof["name"],
            "slices": str(prof["slices"]),
            "instances": str(prof["instances"]),
            "sm": str(prof["sm"]),
            "memory_mb": str(prof["memory_mib"]),
        }
        for key in ("ce", "dec", "enc", "jpeg", "ofa", "p2p"):
            fields[key] = str(prof.get(key, 0))
        if prof.get("ci_slices"):
            fields["ci_slices"] = ",".join(str(s) for s in prof["ci_slices"])
        out.append(Record("giprofile", fields))
        out.extend(
            Record("placement", {"gpu": str(index), "profile": str(prof["id"]), "start": str(start), "size": str(size)}) for start, size in prof["placements"]
        )
    return out


def process_records(index: int, gpu: Dict[str, Any], made: Dict[int, int]) -> List[Record]:
    """process records of one GPU; GI/CI references must exist in the fixture."""
    out = []
    for proc in gpu.get("processes") or []:
        gi, ci = int(proc.get("gi", -1)), int(proc.get("ci", -1))
        if gi >= 0 and (gi not in made or not 0 <= ci < made[gi]):
            raise SimError(f"GPU {index}: process {proc.get('pid')} runs in GI {gi} / CI {ci}, which the fixture does not create")
        used = int(proc.get("used_memory", int(proc.get("used_memory_mib", 0)) * MIB))
        out.append(
            Record(
                "process",
                {"gpu": str(index), "pid": str(proc["pid"]), "used_memory": str(used), "gi": str(gi), "ci": str(ci), "name": str(proc.get("name", ""))},
            )
        )
    return out


def health_fields(node: Dict[str, Any], gpu: Dict[str, Any], model: Dict[str, Any]) -> Dict[str, str]:
    """Health keys of one GPU: the model's healthy values, the node's fabric, the GPU's own `health`."""
    out: Dict[str, str] = {}
    for key, value in (model.get("health") or {}).items():
        if key == "sources":
            continue
        if key not in MODEL_HEALTH_KEYS:
            raise SimError(f"model {model['key']}: unknown health key {key!r} (known: {', '.join(sorted(MODEL_HEALTH_KEYS))})")
        target = MODEL_HEALTH_KEYS[key]
        if isinstance(value, bool):
            value = int(value)
        if key.endswith("_w"):  # watts in the model, milliwatts in NVML
            value = int(round(float(value) * 1000))
        out[target] = str(value)
    for key, value in (node.get("fabric") or {}).items():
        if key not in FABRIC_FIXTURE_KEYS:
            raise SimError(f"unknown fabric key {key!r} (known: {', '.join(FABRIC_FIXTURE_KEYS)})")
        out[FABRIC_FIXTURE_KEYS[key]] = str(value)
    own = gpu.get("health") or {}
    unknown = set(own) - set(HEALTH_KEYS)
    if unknown:
        raise SimError(f"unknown GPU health keys: {', '.join(sorted(unknown))} (known: {', '.join(HEALTH_KEYS)})")
    out.update({k: str(int(v) if isinstance(v, bool) else v) for k, v in own.items()})
    return out


def render_gpu(state: State, node: Dict[str, Any], index: int, gpu: Dict[str, Any], models_dir: str) -> None:
    """Emit the gpu, giprofile, placement, gi, ci and process records of one GPU."""
    model = load_model(models_dir, str(gpu["model"]))
    record = gpu_record(node, index, gpu, model)
    record.fields.update(health_fields(node, gpu, model))
    state.records.append(record)
    state.records.extend(profile_records(index, model))
    made = render_instances(state, index, gpu, GpuGeometry(model["profiles"]), record.get("uuid"))
    state.records.extend(process_records(index, gpu, made))


def render_node(path: str) -> State:
    """Expand a node fixture (and the models it names) into a state."""
    node = load_yaml(path)
    if not isinstance(node, dict):
        raise SimError(f"{path}: not a node fixture")
    unknown = set(node) - NODE_KEYS
    if unknown:
        raise SimError(f"{path}: unknown keys {', '.join(sorted(unknown))}")
    models_dir = os.path.join(os.path.dirname(os.path.abspath(path)), os.pardir, "models")
    system = node.get("system") or {}
    state = State(
        [
            Record(
                "system",
                {
                    "driver_version": str(system.get("driver_version", "")),
                    "cuda_driver_version": str(system.get("cuda_driver_version", 0)),
                    "nvml_version": str(system.get("nvml_version", "")),
                    "driver_loaded": as_flag(system.get("driver_loaded", True)),
                    "libcuda": as_flag(system.get("libcuda", True)),
                },
            )
        ]
    )
    if system.get("nvswitches"):
        state.system().fields["nvswitches"] = str(int(system["nvswitches"]))
    for index, gpu in enumerate(expand_gpus(node)):
        render_gpu(state, node, index, gpu, models_dir)
    return state


# --------------------------------------------------------------------------
# show
# --------------------------------------------------------------------------


def typed(rec: Record, drop: Sequence[str] = ()) -> Dict[str, Any]:
    """Record fields with integers converted, minus `drop`."""
    out: Dict[str, Any] = {}
    for key, value in rec.fields.items():
        if key in drop:
            continue
        if key == "ci_slices":
            out[key] = [parse_int(v) for v in value.split(",") if v]
        elif key in STRING_KEYS:
            out[key] = value
        else:
            try:
                out[key] = parse_int(value)
            except SimError:
                out[key] = value
    return out


def show_gpu(state: State, gpu: Record) -> Dict[str, Any]:
    """JSON view of one GPU with its profiles, instances and processes."""
    index = gpu.num("index")
    out = typed(gpu)
    profiles = []
    names = {}
    for prof in state.for_gpu("giprofile", index):
        entry = typed(prof, ("gpu",))
        entry["placements"] = [
            {"start": p.num("start"), "size": p.num("size")} for p in state.for_gpu("placement", index) if p.num("profile") == prof.num("id")
        ]
        names[prof.num("id")] = prof.get("name")
        profiles.append(entry)
    out["profiles"] = profiles
    gis = []
    for gi in sorted(state.for_gpu("gi", index), key=lambda r: r.num("id")):
        entry = typed(gi, ("gpu",))
        entry["profile_name"] = names.get(gi.num("profile"), "")
        entry["cis"] = [typed(c, ("gpu", "gi")) for c in sorted(state.for_gpu("ci", index), key=lambda r: r.num("id")) if c.num("gi") == gi.num("id")]
        gis.append(entry)
    out["gis"] = gis
    out["processes"] = [typed(p, ("gpu",)) for p in state.for_gpu("process", index)]
    return out


def show_state(state: State, path: str, rundir: str) -> Dict[str, Any]:
    """The whole state as a JSON-friendly dict."""
    faults = []
    for fault in state.of_type("fault"):
        entry = typed(fault)
        entry.setdefault("mode", "always")
        entry.setdefault("skip", 0)
        entry.setdefault("gpu", -1)
        entry["error_name"] = error_name(entry["error"]) if isinstance(entry.get("error"), int) else ""
        faults.append(entry)
    return {
        "state": path,
        "booted": os.path.exists(os.path.join(rundir, "booted")),
        "system": typed(state.system()),
        "gpus": [show_gpu(state, g) for g in sorted(state.of_type("gpu"), key=lambda r: r.num("index"))],
        "faults": faults,
    }


# --------------------------------------------------------------------------
# subcommands
# --------------------------------------------------------------------------


def mark_booted(rundir: str) -> None:
    """Create the boot marker: the state file describes the current boot."""
    os.makedirs(rundir, exist_ok=True)
    with open(os.path.join(rundir, "booted"), "a", encoding="utf-8"):
        pass


def cmd_render(args: argparse.Namespace) -> int:
    """render NODE [-o STATE] [--booted]"""
    state = render_node(args.node)
    if not args.output:
        sys.stdout.write(state.dump())
    else:
        with locked(args.output):
            write_state(args.output, state)
    if args.booted:
        mark_booted(run_dir(args.rundir))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """show: the state as JSON."""
    path = state_path(args.state)
    with locked(path):
        state = read_state(path)
    json.dump(show_state(state, path, run_dir(args.rundir)), sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
    return 0


def cmd_fault(args: argparse.Namespace) -> int:
    """fault add|list|clear"""
    path = state_path(args.state)
    if args.action == "list":
        with locked(path):
            state = read_state(path)
        for fault in state.of_type("fault"):
            print(fault.line())
        return 0
    if args.action == "clear":
        with editing(path) as state:
            removed = state.remove(
                lambda r: r.rtype == "fault" and (args.call is None or r.get("call") == args.call) and (args.gpu is None or r.num("gpu", -1) == args.gpu)
            )
        print(f"removed {removed} fault(s)")
        return 0
    if not args.call or args.error is None:
        raise SimError("fault add needs CALL and ERROR")
    if not args.call.startswith("nvml"):
        raise SimError("CALL must be an NVML entry point name such as nvmlDeviceGetHandleByIndex_v2")
    if args.skip < 0:
        raise SimError("--skip must not be negative")
    code = error_code(args.error)
    with editing(path) as state:
        state.records.append(
            Record(
                "fault",
                {
                    "call": args.call,
                    "error": str(code),
                    "mode": "once" if args.once else "always",
                    "skip": str(args.skip),
                    "gpu": str(-1 if args.gpu is None else args.gpu),
                },
            )
        )
    return 0


def cmd_set(args: argparse.Namespace) -> int:
    """set KEY=VALUE... [--gpu N]"""
    allowed = GPU_KEYS + HEALTH_KEYS if args.gpu is not None else SYSTEM_KEYS + SYSTEM_EXTRA_KEYS
    pairs = []
    for item in args.assignments:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SimError(f"expected KEY=VALUE, got {item!r}")
        if key not in allowed and not args.force:
            kind = "gpu" if args.gpu is not None else "system"
            raise SimError(f"unknown {kind} key {key!r} (known: {', '.join(allowed)}; --force to set anyway)")
        pairs.append((key, value))
    with editing(state_path(args.state)) as state:
        record = state.gpu(args.gpu) if args.gpu is not None else state.system()
        for key, value in pairs:
            record.fields[key] = value
    return 0


def cmd_process(args: argparse.Namespace) -> int:
    """process add|clear|list"""
    path = state_path(args.state)
    if args.action == "list":
        with locked(path):
            state = read_state(path)
        for proc in state.of_type("process"):
            print(proc.line())
        return 0
    if args.action == "clear":
        with editing(path) as state:
            removed = state.remove(
                lambda r: r.rtype == "process" and (args.gpu is None or r.num("gpu", -1) == args.gpu) and (args.pid is None or r.num("pid", -1) == args.pid)
            )
        print(f"removed {removed} process(es)")
        return 0
    if args.gpu is None or args.pid is None:
        raise SimError("process add needs --gpu and --pid")
    with editing(path) as state:
        state.gpu(args.gpu)  # must exist
        state.records.append(
            Record(
                "process",
                {
                    "gpu": str(args.gpu),
                    "pid": str(args.pid),
                    "used_memory": str(parse_size(args.used_memory)),
                    "gi": str(args.gi),
                    "ci": str(args.ci),
                    "name": args.name,
                },
            )
        )
    return 0


def cmd_reboot(args: argparse.Namespace) -> int:
    """reboot [--apply]: forget the current boot."""
    rundir = run_dir(args.rundir)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(rundir, "booted"))
    if args.apply:
        with editing(state_path(args.state)) as state:
            state.apply_boot()
        mark_booted(rundir)
    return 0


def cmd_mark_booted(args: argparse.Namespace) -> int:
    """mark-booted: declare the state file to be the current boot."""
    mark_booted(run_dir(args.rundir))
    return 0


def cmd_errors(_args: argparse.Namespace) -> int:
    """errors: list NVML error names and codes."""
    for name, code in NVML_ERRORS.items():
        print(f"{code:4}  {error_name(code) if name != 'SUCCESS' else 'NVML_SUCCESS'}")
    return 0


# --------------------------------------------------------------------------
# health and fault injection
# --------------------------------------------------------------------------

# health keys a fault sets and `inject clear` removes (the model's own values,
# such as thresholds and maximum link widths, stay)
# fmt: off
FAULT_KEYS = (
    "lost", "ecc_vol_corr", "ecc_vol_uncorr", "ecc_agg_corr", "ecc_agg_uncorr", "retired_sbe", "retired_dbe",
    "retired_pending", "remap_corr", "remap_uncorr", "remap_pending", "remap_failure", "recovery_action",
    "pcie_gen", "pcie_width", "pcie_replay", "nvlink_down")
# fmt: on

# Text the driver logs with an Xid when the caller gives none: Xid 79 is
# raised by osHandleGpuLost with this message
# (NVIDIA/open-gpu-kernel-modules@448d5cc65624:src/nvidia/arch/nvalloc/unix/src/osinit.c).
XID_DEFAULT_TEXT = {79: "GPU has fallen off the bus."}


def check_health_value(key: str, value: str) -> None:
    """Reject values the library would refuse to load (it fails nvmlInit on them)."""
    if key == "fabric_state":
        if value not in FABRIC_STATES and value not in ("0", "1", "2", "3"):
            raise SimError(f"fabric_state must be one of {', '.join(FABRIC_STATES)}")
    elif key == "fabric_status":
        if not value.lstrip("-").isdigit() and value not in ("SUCCESS", "NVML_SUCCESS"):
            error_code(value)  # raises on a name nvml.h does not have
    elif key == "cluster_uuid":
        digits = value.replace("-", "")
        if len(digits) != 32 or any(ch not in "0123456789abcdefABCDEF" for ch in digits):
            raise SimError("cluster_uuid must be 32 hex digits (8-4-4-4-12 with dashes allowed)")
    elif key == "nvlink_down":
        for item in filter(None, value.split(",")):
            if not item.isdigit() or int(item) >= 36:
                raise SimError(f"nvlink_down: {item!r} is not a link number 0..35")
    else:
        number = parse_int(value)
        if number < 0 and key != "recovery_action":
            raise SimError(f"{key} must not be negative")


def gpu_arch_supports(gpu: Record, key: str) -> bool:
    """Whether the library answers remapped rows / retired pages for this GPU (FORMAT.md)."""
    ecc = gpu.num("ecc_supported", 1) == 1
    arch = gpu.num("arch", 0)
    explicit = gpu.get(key)
    if explicit != "":
        return parse_int(explicit) == 1
    if key == "remapped_rows_supported":
        return ecc and arch >= 7
    return ecc and 0 < arch < 7


def cmd_health(args: argparse.Namespace) -> int:
    """health --gpu N [KEY=VALUE ...]: set (KEY= removes) health keys; without pairs print them."""
    pairs = []
    for item in args.assignments:
        key, sep, value = item.partition("=")
        if not sep or key not in HEALTH_KEYS:
            raise SimError(f"expected KEY=VALUE with KEY one of {', '.join(HEALTH_KEYS)}; got {item!r}")
        if value != "":
            check_health_value(key, value)
        pairs.append((key, value))
    path = state_path(args.state)
    if not pairs:
        with locked(path):
            gpu = read_state(path).gpu(args.gpu)
        json.dump({k: v for k, v in typed(gpu).items() if k in HEALTH_KEYS}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    with editing(path) as state:
        record = state.gpu(args.gpu)
        for key, value in pairs:
            if value == "":
                record.fields.pop(key, None)
            else:
                record.fields[key] = value
    return 0


def kmsg_path(explicit: Optional[str]) -> str:
    """--kmsg, else $NVML_SIM_KMSG, else /run/nvml-sim/kmsg."""
    return explicit or os.environ.get("NVML_SIM_KMSG") or DEFAULT_KMSG


def driver_pci(bus_id: str) -> Tuple[str, str]:
    """('0000:07:00', '0000:07:00.0'): how the driver prints a GPU's PCI address.

    Xid lines use "PCI:%04x:%02x:%02x" (kernel_rc.c), the per-device prefix
    NV_PCI_DEV_FMT "%04x:%02x:%02x.%x" (nv.h): lower-case hex, 4-digit domain.
    """
    domain, bus, device = parse_bus_id(bus_id)
    short = f"{domain:04x}:{bus:02x}:{device:02x}"
    return short, short + ".0"


def append_kmsg(path: str, messages: Sequence[str], level: int = 3) -> List[str]:
    """Append records in /dev/kmsg's format: "<prio>,<seq>,<usec>,<flags>;<message>".

    prio = facility (0, kernel) * 8 + level (3, KERN_ERR: the driver logs
    these at NV_DBG_ERRORS, which nv_printf maps to pr_err); seq continues
    from the file's last record; usec is CLOCK_MONOTONIC (time since boot),
    as the kernel stamps records.  Returns the lines written.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "r", encoding="utf-8", errors="replace") as handle:
            seq = -1
            for line in handle:
                head = line.split(";", 1)[0].split(",")
                if len(head) >= 3 and not line.startswith(" ") and head[1].isdigit():
                    seq = max(seq, int(head[1]))
        written = []
        for message in messages:
            seq += 1
            usec = int(time.monotonic() * 1_000_000)
            written.append(f"{level},{seq},{usec},-;{message}\n")
        os.write(fd, "".join(written).encode("utf-8"))
        return written
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def xid_line(bus_id: str, xid: int, text: str, pid: str, name: str) -> str:
    """The driver's legacy (non-MIG) Xid line (kernel_rc.c, krcReportXid)."""
    short, _full = driver_pci(bus_id)
    return f"NVRM: Xid (PCI:{short}): {xid}, pid={pid}, name={name}, {text}"


def fallen_off_bus_line(bus_id: str) -> str:
    """NV_DEV_PRINTF(NV_DBG_ERRORS, nv, "GPU has fallen off the bus.\\n") in osHandleGpuLost."""
    _short, full = driver_pci(bus_id)
    return f"NVRM: GPU {full}: GPU has fallen off the bus."


def add_count(record: Record, key: str, amount: int) -> None:
    record.fields[key] = str(record.num(key, 0) + amount)


def inject(state: State, args: argparse.Namespace) -> List[str]:
    """Apply one named fault to GPU args.gpu; return the kernel-log messages it logs."""
    gpu = state.gpu(args.gpu)
    fault = args.fault
    messages: List[str] = []
    if fault == "ecc-burst":
        if gpu.num("ecc_supported", 1) != 1 or gpu.num("ecc_mode", 1) != 1:
            raise SimError(f"GPU {args.gpu} has no ECC enabled: its counters read NOT_SUPPORTED")
        for kind in ("vol", "agg"):
            add_count(gpu, f"ecc_{kind}_corr", args.corrected)
            add_count(gpu, f"ecc_{kind}_uncorr", args.uncorrected)
    elif fault in ("remap-pending", "remap-failure"):
        if not gpu_arch_supports(gpu, "remapped_rows_supported"):
            raise SimError(f"GPU {args.gpu} ({gpu.get('name')}) does not remap rows (pre-Ampere: use `health --gpu N retired_pending=1`)")
        if fault == "remap-pending":
            # an uncorrectable error marked a row; the remap happens at the next GPU reset
            add_count(gpu, "remap_uncorr", 1)
            gpu.fields["remap_pending"] = "1"
        else:
            gpu.fields["remap_failure"] = "1"
    elif fault == "link-degrade":
        if gpu.get("pcie_gen_max") == "":
            raise SimError(f"GPU {args.gpu} has no PCIe link data (pcie_gen_max)")
        gpu.fields["pcie_gen"] = str(args.gen)
        gpu.fields["pcie_width"] = str(args.width)
    elif fault == "nvlink-down":
        links = gpu.num("nvlinks", 0)
        if not 0 <= args.link < links:
            raise SimError(f"GPU {args.gpu} has {links} NVLink links; --link {args.link} is not one of them")
        down = sorted({int(x) for x in gpu.get("nvlink_down").split(",") if x} | {args.link})
        gpu.fields["nvlink_down"] = ",".join(str(x) for x in down)
    elif fault == "gpu-lost":
        gpu.fields["lost"] = "1"
        if args.log:
            # what osHandleGpuLost logs: the Xid 79, then the per-device line
            messages += [xid_line(gpu.get("bus_id"), 79, XID_DEFAULT_TEXT[79], "'<unknown>'", "<unknown>"), fallen_off_bus_line(gpu.get("bus_id"))]
    elif fault == "xid":
        if args.fallen_off_bus:
            messages.append(fallen_off_bus_line(gpu.get("bus_id")))
        else:
            if args.xid is None:
                raise SimError("inject xid needs --xid N (or --fallen-off-bus)")
            text = args.text if args.text is not None else XID_DEFAULT_TEXT.get(args.xid, "")
            messages.append(xid_line(gpu.get("bus_id"), args.xid, text, args.pid, args.name))
    elif fault == "clear":
        for key in FAULT_KEYS:
            gpu.fields.pop(key, None)
    return messages


def cmd_inject(args: argparse.Namespace) -> int:
    """inject FAULT --gpu N [...]: a named fault on a running node."""
    if args.corrected < 0 or args.uncorrected < 0:
        raise SimError("--corrected/--uncorrected must not be negative")
    path = state_path(args.state)
    if args.fault == "xid":
        with locked(path):
            messages = inject(read_state(path), args)  # the state is only read
    else:
        with editing(path) as state:
            messages = inject(state, args)
    for line in append_kmsg(kmsg_path(args.kmsg), messages) if messages else []:
        sys.stdout.write(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state", help=f"state file (default: $NVML_SIM_STATE or {DEFAULT_STATE})")
    common.add_argument("--rundir", help=f"boot-marker directory (default: $NVML_SIM_RUNDIR or {DEFAULT_RUNDIR})")

    parser = argparse.ArgumentParser(prog="simctl.py", description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    render = sub.add_parser("render", parents=[common], help="expand a node fixture into a state file")
    render.add_argument("node", help="node fixture (nodes/*.yml)")
    render.add_argument("-o", "--output", help="state file to write (default: stdout)")
    render.add_argument("--booted", action="store_true", help="also create the boot marker, so the library keeps the fixture's instances")
    render.set_defaults(func=cmd_render)

    show = sub.add_parser("show", parents=[common], help="print the state as JSON")
    show.set_defaults(func=cmd_show)

    fault = sub.add_parser("fault", parents=[common], help="manage injected faults")
    fault.add_argument("action", choices=("add", "list", "clear"))
    fault.add_argument("call", nargs="?", help="NVML entry point, e.g. nvmlInit or nvmlDeviceGetName")
    fault.add_argument("error", nargs="?", help="NVML error: number, NVML_ERROR_NAME or NAME")
    mode = fault.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="fire once, then remove the record")
    mode.add_argument("--always", action="store_true", help="keep firing (default)")
    fault.add_argument("--skip", type=int, default=0, help="let the first N matching calls pass")
    fault.add_argument("--gpu", type=int, help="only calls on this GPU index (default: any)")
    fault.set_defaults(func=cmd_fault)

    setp = sub.add_parser("set", parents=[common], help="set system (or --gpu N) keys")
    setp.add_argument("assignments", nargs="+", metavar="KEY=VALUE")
    setp.add_argument("--gpu", type=int, help="edit this GPU's record instead of the system record")
    setp.add_argument("--force", action="store_true", help="allow keys this tool does not know")
    setp.set_defaults(func=cmd_set)

    proc = sub.add_parser("process", parents=[common], help="manage GPU client processes")
    proc.add_argument("action", choices=("add", "clear", "list"))
    proc.add_argument("--gpu", type=int)
    proc.add_argument("--pid", type=int)
    proc.add_argument("--used-memory", default="0", help="bytes, or with a KiB/MiB/GiB suffix")
    proc.add_argument("--gi", type=int, default=-1, help="GPU instance id (MIG)")
    proc.add_argument("--ci", type=int, default=-1, help="compute instance id (MIG)")
    proc.add_argument("--name", default="", help="process name")
    proc.set_defaults(func=cmd_process)

    reboot = sub.add_parser("reboot", parents=[common], help="remove the boot marker: the next nvmlInit applies a boot")
    reboot.add_argument("--apply", action="store_true", help="apply the boot to the state file now")
    reboot.set_defaults(func=cmd_reboot)

    marker = sub.add_parser("mark-booted", parents=[common], help="create the boot marker")
    marker.set_defaults(func=cmd_mark_booted)

    health = sub.add_parser("health", parents=[common], help="set (or print) a GPU's health keys")
    health.add_argument("assignments", nargs="*", metavar="KEY=VALUE", help="KEY= removes the key (default)")
    health.add_argument("--gpu", type=int, required=True)
    health.set_defaults(func=cmd_health)

    inj = sub.add_parser("inject", parents=[common], help="inject a named fault into a GPU")
    inj.add_argument("fault", choices=("ecc-burst", "remap-pending", "remap-failure", "link-degrade", "nvlink-down", "gpu-lost", "xid", "clear"))
    inj.add_argument("--gpu", type=int, required=True)
    inj.add_argument("--corrected", type=int, default=100, help="ecc-burst: corrected errors added (100)")
    inj.add_argument("--uncorrected", type=int, default=1, help="ecc-burst: uncorrected errors added (1)")
    inj.add_argument("--gen", type=int, default=3, help="link-degrade: trained PCIe generation (3)")
    inj.add_argument("--width", type=int, default=8, help="link-degrade: trained PCIe width (8)")
    inj.add_argument("--link", type=int, default=0, help="nvlink-down: link number (0)")
    inj.add_argument("--log", action="store_true", help="gpu-lost: also log the driver's Xid 79 and fallen-off-the-bus lines")
    inj.add_argument("--xid", type=int, help="xid: the Xid number")
    inj.add_argument("--text", help="xid: the message after the name (default: the driver's, if known)")
    inj.add_argument("--pid", default="'<unknown>'", help="xid: pid= field (the driver's default '<unknown>')")
    inj.add_argument("--name", default="<unknown>", help="xid: name= field (the driver's default <unknown>)")
    inj.add_argument("--fallen-off-bus", action="store_true", help="xid: log the bare 'NVRM: GPU <pci>: GPU has fallen off the bus.' line instead")
    inj.add_argument("--kmsg", help=f"kernel log file (default: $NVML_SIM_KMSG or {DEFAULT_KMSG})")
    inj.set_defaults(func=cmd_inject)

    errors = sub.add_parser("errors", help="list NVML error names and codes")
    errors.set_defaults(func=cmd_errors)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SimError as exc:
        sys.stderr.write(f"simctl.py: {exc}\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"simctl.py: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
