# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""How containerd reads its config files, and the drop-in that adds our runtimes.

Pure functions over parsed TOML, shared by the containerd_drop_in module and
its unit tests. Which behaviour a containerd version has (config version 2 or
3, whole-table or deep merging of imported files) is decided by the caller
from the container_runtime role's version facts; nothing here parses version
strings.
"""

from __future__ import annotations

import copy
import os
import re
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._toml import TomlError, loads, top_level_keys

CRI_V2 = "io.containerd.grpc.v1.cri"  # config version 2: one CRI plugin table
CRI_RUNTIME_V3 = "io.containerd.cri.v1.runtime"  # config version 3: the CRI runtime half
CRI_IMAGES_V3 = "io.containerd.cri.v1.images"  # config version 3: the CRI image half (sandbox image)
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


# How containerd finds the files it loads. The code is the same in every version we support;
# read in containerd 1.7.29 services/server/config/config.go (LoadConfig, resolveImports),
# 2.0.0 and 2.4.2 cmd/containerd/server/config/config.go (LoadConfig[WithPlugins], resolveImports),
# and cmd/containerd/command/main.go of both lines for the main file:
#
# 1. Order: a queue, breadth-first. The main file first; after a file is merged, its own
#    imports are appended to the end of the queue, so files merge in the order they leave it.
# 2. Relative entries: each entry is filepath.Clean'ed; one that is not absolute is joined to
#    filepath.Dir of the file that imports it (not the main file's directory, not the cwd).
# 3. Globs: only an entry containing '*' (after rule 2) is expanded, with Go's filepath.Glob;
#    an entry without '*' is taken literally even if it has '?' or '['. Glob (Go's
#    path/filepath/match.go, ported below) matches dot-files (there is no hidden-file rule);
#    '*' and '?' never match '/'; classes are [a-z] / [^a-z] ('!' is no negation); '\' escapes;
#    each directory's matches come sorted by their bytes, and wildcards in directory parts
#    expand directory by directory. A glob matching nothing adds nothing; a malformed
#    pattern (ErrBadPattern) is an error. Whatever matches is loaded, a directory too, and
#    reading a directory as TOML fails.
# 4. Duplicates: a path already loaded is skipped when it leaves the queue again, which ends
#    import cycles. The check compares path strings (the main path as given, imports as
#    rules 2-3 make them), so one file reached under two spellings (a symlink) loads twice.
# 5. Missing files: an imported file that does not exist is an error (the daemon does not
#    start; 2.x's `config dump` alone ignores it and prints what was merged up to it). A
#    missing main file is the built-in defaults when it is the default path and --config
#    was not given.
# 6. Config version plays no part in finding files: 1.7 follows imports of version-1 files
#    too, and 2.x migrates each older file before merging it (see `merge`), not before
#    resolving its imports. `imports` is a []string in both (Config.Imports).


def load_chain(main_path: str, skip: str) -> list[LoadedFile]:
    """The files containerd loads from `main_path`, in its order, without `skip` (see the rules above)."""
    chain: list[LoadedFile] = []
    pending = [main_path]
    seen: set[str] = set()
    skip = _go_clean(skip) if skip else skip
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
        except IsADirectoryError:
            what = (
                "is a directory, not a config file"
                if path == main_path
                else ("is a directory that an 'imports' entry matches; containerd would read it as TOML and not start. Narrow the pattern (e.g. '*.toml')")
            )
            raise ContainerdConfigError("{0} {1}".format(path, what)) from None
        except OSError as err:
            raise ContainerdConfigError("{0} cannot be read: {1}".format(path, err)) from None
        try:
            data = loads(text)
        except TomlError as err:
            raise ContainerdConfigError("{0} is not valid TOML: {1}".format(path, err)) from None
        chain.append(LoadedFile(path, data))
        pending.extend(resolve_imports(path, _imports_of(path, data)))
    return chain


def _imports_of(path: str, data: t.Mapping[str, t.Any]) -> list[str]:
    imports = data.get("imports")
    if imports is None:
        return []
    if not isinstance(imports, list) or not all(isinstance(entry, str) for entry in imports):
        raise ContainerdConfigError("{0}: 'imports' must be an array of file paths (strings), got {1!r}; containerd would not start".format(path, imports))
    return imports


def _resolve(parent: str, entry: str) -> str:
    """Rule 2: Clean, then relative to the importing file's directory."""
    path = _go_clean(entry)
    if not path.startswith("/"):
        path = _go_clean(_go_dir(parent) + "/" + path)
    return path


def resolve_imports(parent: str, imports: t.Sequence[str]) -> list[str]:
    """The paths one file's `imports` stand for, in containerd's order (rules 2 and 3)."""
    out: list[str] = []
    for entry in imports:
        path = _resolve(parent, entry)
        if "*" in path:
            try:
                out.extend(_go_glob(path))
            except _BadPattern:
                raise ContainerdConfigError(
                    "{0}: imports entry '{1}' is not a valid pattern (syntax error in pattern); containerd would not start".format(parent, entry)
                ) from None
        else:
            out.append(path)
    return out


def import_covers(parent: str, imports: t.Sequence[str], target: str) -> bool:
    """Whether one of `imports` (as containerd resolves them) names `target`, existing or not."""
    target = _go_clean(target)
    for entry in imports:
        path = _resolve(parent, entry)
        if path == target:
            return True
        if "*" in path:
            # Glob expands directory by directory, so a match is a match of every path element.
            parts, names = path.split("/"), target.split("/")
            try:
                if len(parts) == len(names) and all(_go_match(p, n) for p, n in zip(parts, names)):
                    return True
            except _BadPattern:
                raise ContainerdConfigError(
                    "{0}: imports entry '{1}' is not a valid pattern (syntax error in pattern); containerd would not start".format(parent, entry)
                ) from None
    return False


# --- Go's path handling, for the rules above ----------------------------------------------------
# Ported from Go's path/filepath (match.go: Match, Glob; path.go: Clean, Dir) for '/' systems.


class _BadPattern(Exception):
    """Go's filepath.ErrBadPattern."""


def _go_clean(path: str) -> str:
    """filepath.Clean; unlike os.path.normpath it also turns a leading '//' into '/'."""
    cleaned = os.path.normpath(path) if path else "."
    return "/" + cleaned.lstrip("/") if cleaned.startswith("/") else cleaned


def _go_dir(path: str) -> str:
    return _go_clean(os.path.dirname(path) or ".")


def _has_meta(path: str) -> bool:
    return any(ch in path for ch in "*?[\\")


def _go_glob(pattern: str) -> list[str]:
    _go_match(pattern, "")  # Glob first checks the pattern (as far as Match("") looks)
    if not _has_meta(pattern):
        return [pattern] if os.path.lexists(pattern) else []
    cut = pattern.rfind("/") + 1
    directory, name = pattern[:cut], pattern[cut:]
    directory = "." if directory == "" else directory if directory == "/" else directory[:-1]
    if not _has_meta(directory):
        return _glob_in(directory, name, [])
    if directory == pattern:
        raise _BadPattern()
    matches: list[str] = []
    for found in _go_glob(directory):
        matches = _glob_in(found, name, matches)
    return matches


def _glob_in(directory: str, pattern: str, matches: list[str]) -> list[str]:
    if not os.path.isdir(directory):
        return matches  # Glob ignores I/O errors
    try:
        names = os.listdir(directory)
    except OSError:
        return matches
    for name in sorted(names, key=os.fsencode):  # Go sorts the names as bytes
        if _go_match(pattern, name):
            matches.append(_go_clean(directory + "/" + name))
    return matches


def _go_match(pattern: str, name: str) -> bool:
    """filepath.Match: '*' and '?' stop at '/', [...] classes with '^', '\\' escapes; raises _BadPattern."""
    while pattern:
        star, chunk, pattern = _scan_chunk(pattern)
        if star and chunk == "":
            return "/" not in name  # a trailing * matches the rest unless it has a /
        rest, ok = _match_chunk(chunk, name)
        if ok and (rest == "" or pattern):
            name = rest
            continue
        if star:
            matched = False
            i = 0
            while i < len(name) and name[i] != "/":
                rest, ok = _match_chunk(chunk, name[i + 1 :])
                if ok and not (pattern == "" and rest):
                    name, matched = rest, True
                    break
                i += 1
            if matched:
                continue
        return False
    return name == ""


def _scan_chunk(pattern: str) -> tuple[bool, str, str]:
    star = False
    while pattern.startswith("*"):
        pattern, star = pattern[1:], True
    in_range, i = False, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 < len(pattern):
                i += 1
        elif ch == "[":
            in_range = True
        elif ch == "]":
            in_range = False
        elif ch == "*" and not in_range:
            return star, pattern[:i], pattern[i:]
        i += 1
    return star, pattern, ""


def _match_chunk(chunk: str, s: str) -> tuple[str, bool]:
    failed = False
    while chunk:
        failed = failed or s == ""
        ch = chunk[0]
        if ch == "[":
            r = ""
            if not failed:
                r, s = s[0], s[1:]
            chunk = chunk[1:]
            negated = chunk.startswith("^")
            if negated:
                chunk = chunk[1:]
            match, nrange = False, 0
            while True:
                if chunk.startswith("]") and nrange > 0:
                    chunk = chunk[1:]
                    break
                lo, chunk = _get_esc(chunk)
                hi = lo
                if chunk[0] == "-":
                    hi, chunk = _get_esc(chunk[1:])
                match = match or (not failed and lo <= r <= hi)
                nrange += 1
            failed = failed or match == negated
        elif ch == "?":
            if not failed:
                failed = s[0] == "/"
                s = s[1:]
            chunk = chunk[1:]
        else:
            if ch == "\\":
                chunk = chunk[1:]
                if not chunk:
                    raise _BadPattern()
            if not failed:
                failed = chunk[0] != s[0]
                s = s[1:]
            chunk = chunk[1:]
    return ("", False) if failed else (s, True)


def _get_esc(chunk: str) -> tuple[str, str]:
    if not chunk or chunk[0] in "-]":
        raise _BadPattern()
    if chunk[0] == "\\":
        chunk = chunk[1:]
        if not chunk:
            raise _BadPattern()
    r, chunk = chunk[0], chunk[1:]
    if not chunk:
        raise _BadPattern()
    return r, chunk


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
    sandbox_image: str | None = None  # None: leave the other files' (or containerd's default) pause image


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


def drop_in_data(merged: t.Mapping[str, t.Any], spec: DropInSpec, defaults: t.Mapping[str, t.Any] | None = None) -> dict[str, t.Any]:
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
    plugins = {plugin_id: cri}
    if spec.sandbox_image:
        # Version 2 keeps it in the one CRI table; versions 3 and 4 pin it in
        # the image half (containerd 2.x: pinned_images.sandbox).
        if spec.config_version < 3:
            cri["sandbox_image"] = spec.sandbox_image
        else:
            plugins[CRI_IMAGES_V3] = {"pinned_images": {"sandbox": spec.sandbox_image}}
    return {"version": spec.config_version, "plugins": plugins}


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


_SECRET_KEY = re.compile(r"^(\s*(?:auth|password|identitytoken|identity_token|token|secret)\s*=\s*).*$", re.IGNORECASE | re.MULTILINE)


def redact(text: str) -> str:
    """Hide registry credentials in text shown in diffs and logs."""
    return _SECRET_KEY.sub(r'\1"<redacted>"', text)


def preamble(text: str) -> str:
    """The top-level statements before the first table: where `version` and `imports` live."""
    statements = top_level_keys(text)
    return text[: statements[-1].line_end] if statements else ""
