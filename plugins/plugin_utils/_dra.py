# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""verify's `dra` check: is the node ready for NVIDIA's DRA driver for GPUs
with a host-installed driver (the DRA driver's nvidiaDriverRoot: /)?

What the DRA driver needs from the node, each from its own source (the
knowledge base's _knowledge/kubernetes.py DRA_* rows):
- CDI on in the container engine, which reads /var/run/cdi, where the DRA
  driver's kubelet plugins write their CDI specs;
- nvidia-cdi-hook on the host: the CDI specs name it by its host path and the
  engine runs it on the host;
- the driver under the root `/`: libnvidia-ml.so.1 and nvidia-smi where the
  kubelet plugins look for them;
- nvidia-imex.service masked (the DRA driver runs its own IMEX daemons for
  ComputeDomains), or, when the site runs IMEX on the host, enabled with a
  nodes file.

Pure functions over what the verify role reads in one node_reads_info call;
controller side only (Python >= 3.11: tomllib reads containerd's TOML).
"""

from __future__ import annotations

import json
import tomllib
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import kubernetes as _kubernetes
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.node import finding
from ansible_collections.gpufleet.nvidia.plugins.module_utils._read_probes import DRA_PATHS_SCRIPT, HOOK_ON_PATH
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _verify

LAYER = "dra"
IMEX_MODES = ("masked", "host")
ROOT = _kubernetes.DRA_DRIVER_ROOT["value"]
CDI_ROOT = _kubernetes.DRA_CDI_ROOT["value"]
CDI_HOOK_PATHS = tuple(_kubernetes.DRA_CDI_HOOK_PATHS["value"])
IMEX = _kubernetes.DRA_IMEX_UNIT["value"]
# /var/run is a link to /run on every systemd distribution: an engine that
# reads /run/cdi reads the directory the DRA driver writes.
CDI_ROOT_SPELLINGS = (CDI_ROOT, "/run/cdi")


def candidate_paths() -> list[str]:
    """Every path the check resolves on the node: the driver root's library and binary candidates (the DRA
    driver's own search order: the root itself, then its directories) and nvidia-cdi-hook's homes."""
    root = ROOT["root"].rstrip("/")
    libraries = [root + "/" + ROOT["library"]] + ["{0}{1}/{2}".format(root, d, ROOT["library"]) for d in ROOT["libraries"]]
    binaries = [root + "/" + ROOT["binary"]] + ["{0}{1}/{2}".format(root, d, ROOT["binary"]) for d in ROOT["binaries"]]
    return libraries + binaries + list(CDI_HOOK_PATHS)


def paths_command() -> list[str]:
    """The path read: node_reads_info's "DRA driver paths" probe over every candidate."""
    return ["sh", "-c", DRA_PATHS_SCRIPT, "sh"] + candidate_paths()


IMEX_COMMAND = ["systemctl", "show", "--property=LoadState,ActiveState,UnitFileState", IMEX["unit"]]


def _error(subject: str, message: str, fix: str, severity: str = "error") -> dict[str, str]:
    return finding("verify_dra", severity, subject, message, fix, LAYER, "gpufleet verify")


def parse_paths(text: str | None) -> dict[str, str]:
    """{candidate: resolved target} from the paths command's output."""
    found: dict[str, str] = {}
    for line in (text or "").splitlines():
        candidate, space, target = line.strip().partition(" ")
        if candidate and space and target:
            found.setdefault(candidate, target)
    return found


def parse_systemctl_show(text: str | None) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            props[key] = value
    return props


def engine_cdi(engine: str, text: str) -> tuple[bool | None, list[str] | None, str | None]:
    """(CDI on, CDI spec dirs, error) from the engine's own view of its effective configuration."""
    if engine == "containerd":
        try:
            config = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            return None, None, "`containerd config dump` is not TOML: {0}".format(exc)
        section = _verify._containerd_cri(config)[0]
        return section.get("enable_cdi") is True, list(section.get("cdi_spec_dirs") or []), None
    if engine == "docker":
        try:
            info = json.loads(text)
        except ValueError as exc:
            return None, None, "`docker info` is not JSON: {0}".format(exc)
        dirs = list(info.get("CDISpecDirs") or [])
        # Docker lists CDI spec directories only while CDI is on (features.cdi, Docker 25+).
        return bool(dirs), dirs, None
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return None, None, "`crio status config` is not TOML: {0}".format(exc)
    runtime = (config.get("crio") or {}).get("runtime") or {}
    # CRI-O has CDI on by default from 1.27 (the DRA driver's prerequisites); its config then lists the dirs.
    dirs = runtime.get("cdi_spec_dirs")
    return dirs is not None, list(dirs or []), None


def _engine_findings(engine: str, observed: dict[str, t.Any], seen: dict[str, t.Any]) -> list[dict[str, str]]:
    text = observed.get("engine")
    if not text:
        why = observed.get("engine_error") or "{0} is not installed or not running".format(engine)
        return [
            _error(
                "cdi", "DRA needs CDI in the container engine, and {0} gave nothing to judge: {1}".format(engine, why), "install and start {0}".format(engine)
            )
        ]
    enabled, dirs, error = engine_cdi(engine, text)
    if error:
        return [_error("cdi", error, "check {0}'s configuration".format(engine))]
    seen["cdi"] = enabled
    seen["cdi_spec_dirs"] = dirs
    if not enabled:
        return [
            _error(
                "cdi",
                "CDI is off in {0}: the DRA driver hands GPUs to containers only through CDI".format(engine),
                "set container_runtime_cdi: true and run the container_runtime layer (--tags container_runtime)",
            )
        ]
    if not any(spelling in (dirs or []) for spelling in CDI_ROOT_SPELLINGS):
        return [
            _error(
                "cdi_spec_dirs",
                "{0}'s CDI spec directories ({1}) do not include {2}, where the DRA driver writes its CDI specs".format(
                    engine, ", ".join(dirs or []) or "none", CDI_ROOT
                ),
                "add {0} to {1}'s CDI spec directories (cdi_spec_dirs), or drop the override so that the default (/etc/cdi, /var/run/cdi) applies".format(
                    CDI_ROOT, engine
                ),
            )
        ]
    return []


def _hook_findings(paths: dict[str, str], seen: dict[str, t.Any]) -> list[dict[str, str]]:
    found = [paths[p] for p in (HOOK_ON_PATH,) + CDI_HOOK_PATHS if p in paths]
    seen["nvidia_cdi_hook"] = found[0] if found else None
    if found:
        return []
    return [
        _error(
            "nvidia-cdi-hook",
            "nvidia-cdi-hook is not on the host (not in PATH, nor {0}): the CDI specs' hooks cannot run".format(", ".join(CDI_HOOK_PATHS)),
            "install the NVIDIA Container Toolkit (the container_toolkit layer; nvidia-container-toolkit-base ships "
            "/usr/bin/nvidia-cdi-hook), and give the DRA driver nvidiaCDIHookPath: /usr/bin/nvidia-cdi-hook",
        )
    ]


def _first(paths: dict[str, str], name: str, directories: t.Sequence[str]) -> str | None:
    root = ROOT["root"].rstrip("/")
    for candidate in [root + "/" + name] + ["{0}{1}/{2}".format(root, d, name) for d in directories]:
        if candidate in paths:
            return paths[candidate]
    return None


def _root_findings(paths: dict[str, str], seen: dict[str, t.Any]) -> list[dict[str, str]]:
    library = _first(paths, ROOT["library"], ROOT["libraries"])
    binary = _first(paths, ROOT["binary"], ROOT["binaries"])
    seen["driver_root"] = {"root": ROOT["root"], "library": library, "nvidia_smi": binary}
    found = []
    for name, where, directories in ((ROOT["library"], library, ROOT["libraries"]), (ROOT["binary"], binary, ROOT["binaries"])):
        if where is None:
            found.append(
                _error(
                    "driver_root",
                    "the driver root {0} has no {1} (looked in {2}): the DRA driver (nvidiaDriverRoot: {0}) cannot find the host's driver".format(
                        ROOT["root"], name, ", ".join([ROOT["root"]] + list(directories))
                    ),
                    "install the driver on the host (the driver layer, --tags driver); a driver container's root (/run/nvidia/driver) is not host-managed",
                )
            )
    return found


def _imex_findings(mode: str, show: dict[str, str], nodes_file: str | None, seen: dict[str, t.Any]) -> list[dict[str, str]]:
    unit = IMEX["unit"]
    load = show.get("LoadState") or "unknown"
    seen["imex"] = {"mode": mode, "load": load, "active": show.get("ActiveState"), "enabled": show.get("UnitFileState")}
    if mode == "masked":
        if load in ("masked", "not-found"):
            return []
        return [
            _error(
                "imex",
                "{0} is {1} and {2} ({3}), not masked: it clashes with the IMEX daemons the DRA driver runs for ComputeDomains".format(
                    unit, show.get("UnitFileState") or "?", show.get("ActiveState") or "?", load
                ),
                "systemctl disable --now {0} && systemctl mask {0}; or set verify_dra_imex: host where the site runs IMEX on the host instead".format(unit),
            )
        ]
    found = []
    if load != "loaded" or show.get("UnitFileState") != "enabled":
        found.append(
            _error(
                "imex",
                "verify_dra_imex is host, but {0} is {1} ({2})".format(unit, show.get("UnitFileState") or load, load),
                "install the nvidia-imex package of the driver's branch and systemctl enable --now {0}; or set "
                "verify_dra_imex: masked where the DRA driver runs IMEX".format(unit),
            )
        )
    nodes = [line for line in (nodes_file or "").splitlines() if line.strip() and not line.lstrip().startswith("#")]
    seen["imex"]["nodes"] = len(nodes)
    if not nodes:
        found.append(
            _error(
                "imex_nodes",
                "verify_dra_imex is host, but {0} {1}".format(IMEX["config"], "is missing" if nodes_file is None else "lists no node"),
                "write the IMEX domain's node addresses into {0}, one per line".format(IMEX["config"]),
            )
        )
    return found


def check_dra(settings: dict[str, t.Any], observed: dict[str, t.Any]) -> dict[str, t.Any]:
    """settings: {enabled, engine, imex (masked | host)}; observed: {engine, engine_error, paths, imex, imex_nodes}
    (the engine's config view, the paths command's output, `systemctl show nvidia-imex.service`, the IMEX nodes
    file or None)."""
    if not settings.get("enabled"):
        return _verify.check(LAYER, "not_managed", "not managed: verify_dra is false")
    mode = settings.get("imex") or "masked"
    if mode not in IMEX_MODES:
        raise _verify.VerifyError("verify_dra_imex must be one of {0}, got {1!r}".format(", ".join(IMEX_MODES), mode))
    engine = settings.get("engine") or "containerd"
    seen: dict[str, t.Any] = {"engine": engine}
    paths = parse_paths(observed.get("paths"))
    found = _engine_findings(engine, observed, seen)
    found += _hook_findings(paths, seen)
    found += _root_findings(paths, seen)
    found += _imex_findings(mode, parse_systemctl_show(observed.get("imex")), observed.get("imex_nodes"), seen)
    expected = {"cdi": True, "cdi_spec_dir": CDI_ROOT, "nvidia_cdi_hook": True, "driver_root": ROOT["root"], "imex": mode}
    summary = "ready for the DRA driver: CDI on with {0}, nvidia-cdi-hook, driver root {1}, nvidia-imex {2}".format(
        CDI_ROOT, ROOT["root"], "masked" if mode == "masked" else "host-managed"
    )
    return _verify.judged(LAYER, summary, expected, seen, found)
