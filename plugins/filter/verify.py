# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters of the verify role: judge one layer, assemble a host's report,
summarise it. The checks live in plugins/plugin_utils/_verify.py, and those
gpufleet-verify-boot shares with the role in plugins/module_utils/_verify/
(the health layer's whole check is there)."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import health as gpu_health
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import imex as imex_check
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify.remedies import RUN
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _dra, _verify
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def _declaration(declaration: t.Any) -> dict[str, t.Any]:
    if not isinstance(declaration, dict) or "managed" not in declaration:
        raise AnsibleFilterError("verify_check: the declaration must be one layer of lookup('gpufleet.nvidia.declared_layers')")
    return declaration


def verify_check(observed: t.Any, layer: str, declaration: t.Any = None) -> dict[str, t.Any]:
    """Judge one layer from what the role observed on the node."""
    if not isinstance(observed, dict):
        raise AnsibleFilterError("verify_check: expected the observations as a mapping, got {0}".format(type(observed).__name__))
    if layer not in ("matrix", "workload", "health", "dra"):
        declaration = _declaration(declaration)
        if declaration.get("managed") and observed.get("deferred"):
            return _verify.deferred(layer, str(observed["deferred"]))
    try:
        if layer == "driver":
            return _verify.check_driver(
                declaration, observed.get("nvml") or {}, observed.get("proc_version"), observed.get("nvidia_pci"), observed.get("kernel_modules")
            )
        if layer == "container_toolkit":
            return _verify.check_container_toolkit(declaration, observed.get("packages") or {}, observed.get("dev_char"))
        if layer == "container_runtime":
            return _verify.check_container_runtime(declaration, observed)
        if layer == "cdi":
            return _verify.check_cdi(declaration, observed.get("nvml") or {}, observed.get("spec"), str(observed.get("path") or ""))
        if layer == "crictl":
            return _verify.check_crictl(declaration, observed.get("version"), observed.get("info_error"))
        if layer == "mig":
            return _verify.check_mig(
                declaration, bool(observed.get("available")), observed.get("result"), configured=observed.get("configured", True) is not False
            )
        if layer == "imex":
            declared_nodes = observed.get("declared_nodes")
            if declaration.get("managed") and not isinstance(declared_nodes, list):
                raise _verify.VerifyError("the observations lack declared_nodes, the addresses imex_domain_nodes gives")
            return imex_check.check_layer(declaration, declared_nodes or [], observed)
        if layer == "matrix":
            return _verify.check_matrix(observed)
        if layer == "health":
            settings = declaration if isinstance(declaration, dict) else {}
            if settings.get("enabled") and observed.get("deferred"):
                return _verify.deferred(layer, str(observed["deferred"]))
            return gpu_health.check_layer(settings, observed, RUN)
        if layer == "dra":
            return _dra.check_dra(declaration if isinstance(declaration, dict) else {}, observed)
        if layer == "workload":
            plan = _declaration(declaration)
            if plan.get("managed") and observed.get("deferred"):
                return _verify.deferred(layer, str(observed["deferred"]))
            return _verify.check_workload(plan, observed.get("result"))
    except ValueError as exc:  # _verify.VerifyError, or the health layer's bad policy or read
        raise AnsibleFilterError("verify_check: {0}: {1}".format(layer, exc)) from None
    raise AnsibleFilterError("verify_check: unknown layer '{0}'".format(layer))


def workload_plan(nvml: t.Any, layers: t.Any, settings: t.Any, cuda_images: t.Any = None) -> dict[str, t.Any]:
    """The workload check's containers for one host."""
    if not isinstance(layers, dict) or not isinstance(settings, dict):
        raise AnsibleFilterError("workload_plan: expected the declared layers and the verify_workload settings as mappings")
    try:
        return _verify.workload_plan(nvml if isinstance(nvml, dict) else {}, layers, settings, cuda_images if isinstance(cuda_images, list) else None)
    except _verify.VerifyError as exc:
        raise AnsibleFilterError(str(exc)) from None


def verify_dev_char_missing(listing: t.Any) -> list[dict[str, str]]:
    """The /dev/char links missing for the NVIDIA device nodes, from the roles' find listing.

    The container_toolkit role creates links when this is not empty; verify
    judges the same listing, so the two never disagree."""
    if not isinstance(listing, str):
        raise AnsibleFilterError("verify_dev_char_missing: expected the find listing as text, got {0}".format(type(listing).__name__))
    return _verify.dev_char_missing(listing)


def verify_dra_reads(settings: t.Any) -> dict[str, t.Any]:
    """What the dra check reads on the node (node_reads_info's files and commands), for its settings
    ({enabled, engine, imex}); nothing when it is off."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError("verify_dra_reads: expected the dra check's settings as a mapping")
    if not settings.get("enabled"):
        return {"files": {}, "commands": {}}
    files = {"dra_imex_nodes": _dra.IMEX["config"]} if settings.get("imex") == "host" else {}
    return {"files": files, "commands": {"dra_paths": _dra.paths_command(), "dra_imex": list(_dra.IMEX_COMMAND)}}


def verify_imex_reads(socket: t.Any) -> dict[str, t.Any]:
    """What the imex check reads on the node (node_reads_info's files and commands), for the declared
    imex_cmd_socket ("" : the command service through config.cfg)."""
    if not isinstance(socket, str):
        raise AnsibleFilterError("verify_imex_reads: expected imex_cmd_socket as a string, got {0}".format(type(socket).__name__))
    return imex_check.reads(socket)


def verify_report(
    checks: t.Any,
    host: str,
    nvml: t.Any = None,
    versions: t.Any = None,
    not_checked: t.Any = None,
    boot_id: t.Any = None,
    time: t.Any = None,
    previous: t.Any = None,
    extra: t.Any = None,
) -> dict[str, t.Any]:
    """One host's report from its checks, NVML facts and versions; `not_checked` says why a version was not read;
    `boot_id` and `time` say when the node was read, `previous` (the report text the node holds) keeps the time
    of an unchanged report; `extra` adds keys to the report (before that comparison)."""
    if not isinstance(checks, list) or not all(isinstance(c, dict) and "layer" in c for c in checks):
        raise AnsibleFilterError("verify_report: expected a list of verify_check results")
    if not_checked is not None and not isinstance(not_checked, dict):
        raise AnsibleFilterError("verify_report: not_checked must map a version's key to why it was not read, got {0}".format(type(not_checked).__name__))
    if extra is not None and not isinstance(extra, dict):
        raise AnsibleFilterError("verify_report: extra must be a mapping of keys to add, got {0}".format(type(extra).__name__))
    for name, value in (("boot_id", boot_id), ("time", time), ("previous", previous)):
        if value is not None and not isinstance(value, str):
            raise AnsibleFilterError("verify_report: {0} must be a string, got {1}".format(name, type(value).__name__))
    previous_report = _verify.previous_report(previous)
    return _verify.build_report(host, checks, nvml or {}, versions or {}, not_checked, boot_id=boot_id, time=time, previous=previous_report, extra=extra)


def verify_engine_version(reads: t.Any, engine: str, packages: t.Any = None) -> dict[str, t.Any]:
    """The container engine's version: from the package that owns it, else from the engine itself
    (`docker info`, or `containerd --version` / `crio --version` for one installed from a release tarball);
    with `not_checked` saying why when neither answered."""
    if not isinstance(reads, dict):
        raise AnsibleFilterError("verify_engine_version: expected the engine's reads as a mapping, got {0}".format(type(reads).__name__))
    if not isinstance(engine, str) or not engine:
        raise AnsibleFilterError("verify_engine_version: engine must name the container engine (containerd, docker or crio)")
    if packages is not None and not isinstance(packages, dict):
        raise AnsibleFilterError("verify_engine_version: packages must be the package_versions mapping, got {0}".format(type(packages).__name__))
    return _verify.engine_version(engine, packages or {}, reads)


def verify_stats(report: t.Any) -> dict[str, t.Any]:
    """A host's report as set_stats returns it to AWX."""
    if not isinstance(report, dict) or not all(key in report for key in ("status", "summary", "versions", "checks")):
        raise AnsibleFilterError("verify_stats: expected a verify_report result")
    return _verify.stats(report)


class FilterModule(FilterTable):
    """Verify filters."""

    FILTERS = (
        verify_check,
        verify_dev_char_missing,
        verify_dra_reads,
        verify_engine_version,
        verify_imex_reads,
        verify_report,
        verify_stats,
        workload_plan,
    )
