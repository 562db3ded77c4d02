# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How containerd reads its config files, and the drop-in that adds our runtimes.

Pure functions over parsed TOML, shared by the containerd_drop_in module and
its unit tests. Which behaviour a containerd version has (config version 2 or
3, whole-table or deep merging of imported files) is decided by the caller
from the container_runtime role's version facts; nothing here parses version
strings.
"""

from __future__ import annotations

import copy
import glob
import os
import re
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._toml import TomlError, loads, top_level_keys

CRI_V2 = "io.containerd.grpc.v1.cri"  # config version 2: one CRI plugin table
CRI_RUNTIME_V3 = "io.containerd.cri.v1.runtime"  # config version 3: the CRI runtime half
RUNC_V2 = "io.containerd.runc.v2"

# containerd < 2.0 replaces a plugin's whole table with an imported file's
# table; 2.0 and later merge them key by key (see the role's vars/main.yml).
MERGE_REPLACE = "replace"
MERGE_DEEP = "deep"


class ContainerdConfigError(Exception):
    """A config file that containerd itself would refuse, or that we must not edit."""


class LoadedFile(t.NamedTuple):
    path: str
    data: dict[str, t.Any]


def load_chain(main_path: str, skip: str) -> list[LoadedFile]:
    """The files containerd loads from `main_path`, in its order, without `skip`.

    containerd reads the main file, then each `imports` entry breadth-first
    (relative paths are relative to the importing file, `*` globs expand in
    name order) and loads every path once. A missing main file means built-in
    defaults; a missing import is an error in containerd, and here too.
    """
    chain: list[LoadedFile] = []
    pending = [main_path]
    seen: set[str] = set()
    while pending:
        path = pending.pop(0)
        if path in seen:
            continue
        seen.add(path)
        if path == skip:
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            if path == main_path:
                return []
            raise ContainerdConfigError("{0} is imported but does not exist; containerd would not start".format(path))
        try:
            data = loads(text)
        except TomlError as err:
            raise ContainerdConfigError("{0} is not valid TOML: {1}".format(path, err)) from None
        chain.append(LoadedFile(path, data))
        pending.extend(resolve_imports(path, data.get("imports") or []))
    return chain


def resolve_imports(parent: str, imports: t.Sequence[str]) -> list[str]:
    out = []
    for entry in imports:
        path = os.path.normpath(entry)
        if not os.path.isabs(path):
            path = os.path.join(os.path.dirname(parent), path)
        if "*" in path:
            out.extend(sorted(glob.glob(path)))
        else:
            out.append(path)
    return out


def import_covers(parent: str, imports: t.Sequence[str], target: str) -> bool:
    """Whether one of `imports` (as containerd resolves them) names `target`, existing or not."""
    for entry in imports:
        path = os.path.normpath(entry)
        if not os.path.isabs(path):
            path = os.path.join(os.path.dirname(parent), path)
        if path == target or ("*" in path and _glob_regex(path).fullmatch(target)):
            return True
    return False


def _glob_regex(pattern: str) -> t.Pattern[str]:
    """Go's filepath.Match syntax: `*` and `?` never match a `/`."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1:end]
                out.append("[" + ("^" + body[1:] if body.startswith("^") else body) + "]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out))


# --- merging, as containerd does it -----------------------------------------------------------

def _is_empty(value: t.Any) -> bool:
    """mergo's notion of a zero value: it never overrides with one."""
    return value is None or value is False or value == 0 or value == "" or value == [] or value == {}


def _deep_merge(dst: dict[str, t.Any], src: t.Mapping[str, t.Any]) -> None:
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _deep_merge(dst[key], value)
        elif isinstance(value, list) and isinstance(dst.get(key), list):
            dst[key] = dst[key] + [v for v in value if v not in dst[key]]
        elif key not in dst or not _is_empty(value):
            dst[key] = copy.deepcopy(value)


def _as_v3(data: dict[str, t.Any]) -> dict[str, t.Any]:
    """Move a version-2 file's CRI runtime settings to where version 3 keeps them.

    containerd 2.x migrates each older file before merging it; only the parts
    we read (runtimes, default runtime, CDI) are moved here.
    """
    if int(data.get("version") or 1) >= 3:
        return data
    data = copy.deepcopy(data)
    plugins = data.get("plugins") or {}
    old = plugins.pop(CRI_V2, None)
    if isinstance(old, dict):
        runtime: dict[str, t.Any] = {}
        for key in ("containerd", "enable_cdi", "cdi_spec_dirs"):
            if key in old:
                runtime[key] = old[key]
        merged = plugins.setdefault(CRI_RUNTIME_V3, {})
        _deep_merge(merged, runtime)
    return data


def merge(chain: t.Sequence[LoadedFile], plugin_merge: str) -> dict[str, t.Any]:
    """The configuration containerd ends up with from `chain` (before its defaults)."""
    result: dict[str, t.Any] = {}
    for loaded in chain:
        data = loaded.data if plugin_merge == MERGE_REPLACE else _as_v3(loaded.data)
        for key, value in data.items():
            if key == "plugins" and plugin_merge == MERGE_REPLACE:
                result.setdefault("plugins", {}).update(copy.deepcopy(value))
            elif isinstance(value, dict) and isinstance(result.get(key), dict):
                _deep_merge(result[key], value)
            elif isinstance(value, list) and isinstance(result.get(key), list):
                result[key] = result[key] + [v for v in value if v not in result[key]]
            elif key not in result or not _is_empty(value):
                result[key] = copy.deepcopy(value)
    return result


# --- our drop-in -------------------------------------------------------------------------------

class DropInSpec(t.NamedTuple):
    config_version: int  # 2, 3 or 4
    plugin_merge: str  # MERGE_REPLACE or MERGE_DEEP
    runtimes: list[tuple[str, str]]  # (name, binary path)
    default_runtime: str | None
    enable_cdi: bool | None  # None: leave containerd's own default
    cdi_spec_dirs: list[str]
    plugin_settings: dict[str, t.Any]


def cri_plugin_id(config_version: int) -> str:
    """Version 2 has one CRI table; versions 3 and 4 keep runtimes in the runtime plugin."""
    return CRI_V2 if config_version < 3 else CRI_RUNTIME_V3


def base_runtime(cri: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The runc runtime our runtimes copy (cgroup driver and other runc options).

    The default runtime if it is a runc one, else `runc`; without either, none.
    """
    section = cri.get("containerd") or {}
    runtimes = section.get("runtimes") or {}
    default = section.get("default_runtime_name") or "runc"
    for name in (default, "runc"):
        candidate = runtimes.get(name)
        if isinstance(candidate, dict) and candidate.get("runtime_type", RUNC_V2) == RUNC_V2:
            return copy.deepcopy(candidate)
    return {}


def drop_in_data(merged: t.Mapping[str, t.Any], spec: DropInSpec,
                 defaults: t.Mapping[str, t.Any] | None = None) -> dict[str, t.Any]:
    """The content of our drop-in, given what the other files configure.

    `defaults` is `containerd config default` as data: with whole-table
    replacement, a `runtimes` table in the drop-in also replaces containerd's
    built-in runtimes map, so the built-in runtimes (runc) are written out too,
    or the CRI plugin would lose its default runtime and fail to load.
    """
    plugin_id = cri_plugin_id(spec.config_version)
    current = (merged.get("plugins") or {}).get(plugin_id) or {}
    builtin = ((defaults or {}).get("plugins") or {}).get(plugin_id) or {}
    # containerd < 2.0 would let this file's CRI table replace the whole CRI
    # table of the main config (registry, CNI, sandbox image...): repeat it.
    cri = copy.deepcopy(current) if spec.plugin_merge == MERGE_REPLACE else {}
    base = base_runtime(current) or _minimal_runtime(base_runtime(builtin))
    runtimes = cri.setdefault("containerd", {}).setdefault("runtimes", {})
    if spec.plugin_merge == MERGE_REPLACE:
        for name, entry in ((builtin.get("containerd") or {}).get("runtimes") or {}).items():
            if name not in runtimes and isinstance(entry, dict):
                runtimes[name] = _minimal_runtime(entry)
    for name, binary in spec.runtimes:
        entry = copy.deepcopy(base)
        entry["runtime_type"] = RUNC_V2
        options = entry.get("options") if isinstance(entry.get("options"), dict) else {}
        options["BinaryName"] = binary
        entry["options"] = options
        runtimes[name] = entry
    if spec.default_runtime:
        cri["containerd"]["default_runtime_name"] = spec.default_runtime
    if spec.enable_cdi is not None:
        cri["enable_cdi"] = spec.enable_cdi
        if spec.enable_cdi and spec.cdi_spec_dirs:
            cri["cdi_spec_dirs"] = list(spec.cdi_spec_dirs)
    _override(cri, spec.plugin_settings)
    return {"version": spec.config_version, "plugins": {plugin_id: cri}}


def _minimal_runtime(entry: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """A built-in runtime entry without its zero values (what a person would write)."""
    out = {k: copy.deepcopy(v) for k, v in entry.items() if not _is_empty(v) and k != "options"}
    options = {k: copy.deepcopy(v) for k, v in (entry.get("options") or {}).items() if not _is_empty(v)}
    if options:
        out["options"] = options
    return out


def _override(dst: dict[str, t.Any], src: t.Mapping[str, t.Any]) -> None:
    """User settings win, including false and empty values (unlike containerd's merge)."""
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _override(dst[key], value)
        else:
            dst[key] = copy.deepcopy(value)


def effective_view(dump: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """Runtimes and CDI from `containerd config dump` output (either config version)."""
    plugins = dump.get("plugins") or {}
    cri = plugins.get(CRI_RUNTIME_V3) or plugins.get(CRI_V2) or {}
    section = cri.get("containerd") or {}
    runtimes = section.get("runtimes") or {}
    # The gRPC socket: top-level [grpc] up to config version 3, a server
    # plugin from version 4 on.
    grpc = dump.get("grpc") or plugins.get("io.containerd.server.v1.grpc") or {}
    return {
        "config_version": int(dump.get("version") or 1),
        "address": grpc.get("address") or "/run/containerd/containerd.sock",
        "default_runtime": section.get("default_runtime_name"),
        "runtimes": {
            name: {
                "runtime_type": entry.get("runtime_type"),
                "binary": (entry.get("options") or {}).get("BinaryName"),
            }
            for name, entry in sorted(runtimes.items())
            if isinstance(entry, dict)
        },
        "enable_cdi": cri.get("enable_cdi"),
        "cdi_spec_dirs": cri.get("cdi_spec_dirs"),
    }


_SECRET_KEY = re.compile(r"^(\s*(?:auth|password|identitytoken|identity_token|token|secret)\s*=\s*).*$",
                         re.IGNORECASE | re.MULTILINE)


def redact(text: str) -> str:
    """Hide registry credentials in text shown in diffs and logs."""
    return _SECRET_KEY.sub(r'\1"<redacted>"', text)


def preamble(text: str) -> str:
    """The top-level statements before the first table: where `version` and `imports` live."""
    statements = top_level_keys(text)
    return text[:statements[-1].line_end] if statements else ""
