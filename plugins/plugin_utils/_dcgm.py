# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The dcgm layer's plan, and readers of dcgmi's output; pure functions.

plan(): which DCGM 4 packages at which version (the CUDA flavour from the
driver), the repository path, the dcgm-exporter artifact and command line,
the health and diag command lines, or the first problem with its fix.
health_watches(): the systems `dcgmi health --fetch` reports watched.
diag_failures(): the failing tests of `dcgmi diag --json`.
"""

from __future__ import annotations

import json
import os
import re
import typing as t
from collections.abc import Mapping
from urllib.parse import urlsplit

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import dcgm as knowledge
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.evaluate import Matrix

_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_PINNED = re.compile(r"^([0-9]+:)?[0-9]+\.[0-9]+\.[0-9]+-[0-9A-Za-z.~+]+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_EXPORTER_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+\.[0-9]+\.[0-9]+$")
_ATTRIBUTIONS = ("none", "kubernetes", "hpc")
_ARCH_GO = {"x86_64": "amd64", "aarch64": "arm64"}

SETTINGS = (
    "version",
    "cuda_major",
    "driver_version",
    "nvml",
    "os_family",
    "distribution",
    "distribution_major_version",
    "architecture",
    "proprietary",
    "repo_url",
    "gpg_key_url",
    "repo_distro",
    "exporter",
    "exporter_version",
    "exporter_download_url",
    "exporter_sha256",
    "exporter_allow_insecure_transport",
    "exporter_install_dir",
    "exporter_address",
    "exporter_counters_file",
    "exporter_attribution",
    "exporter_pod_resources_socket",
    "exporter_hpc_job_mapping_dir",
    "exporter_hostengine",
    "exporter_extra_args",
    "health_watches",
    "diag_level",
)


def url_problem(url: str, variable: str) -> str | None:
    """A URL with credentials in it (user:password@), named by its variable: results, logs and the 0644 apt
    sources file would show them. The login's variables share the URL variable's role prefix (dcgm_, imex_)."""
    if "@" in urlsplit(url).netloc:
        prefix = variable.split("_", maxsplit=1)[0]
        return (
            "{0} carries credentials (user:password@), which results, logs and apt's sources file would show; "
            "remove them from the URL (apt reads a login from {1}_apt_auth_login and {1}_apt_auth_password)".format(variable, prefix)
        )
    return None


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"[0-9]+", text)[:3])


def _cuda_major(settings: Mapping) -> tuple[int | None, str, str | None]:
    """(major, where it came from, problem). Declared, else NVML's CUDA version, else the declared driver's."""
    declared = str(settings["cuda_major"] or "").strip()
    nvml = settings["nvml"] or {}
    reported = str(nvml.get("cuda_driver_version") or "").strip()
    if declared:
        if not declared.isdigit():
            return None, "", "dcgm_cuda_major must be a CUDA major such as 12, got '{0}'".format(declared)
        major = int(declared)
        # The same-major rule: the flavour must be the one the running driver reports.
        if reported and int(reported.split(".", maxsplit=1)[0]) != major:
            return (
                None,
                "",
                "dcgm_cuda_major={0}, but the running driver {1} reports CUDA {2}: DCGM's CUDA flavour must be the "
                "driver's CUDA major; set dcgm_cuda_major={3} or leave it empty to follow the driver".format(
                    major, nvml.get("driver_version") or "", reported, reported.split(".", maxsplit=1)[0]
                ),
            )
        return major, "dcgm_cuda_major", None
    if reported:
        return int(reported.split(".", maxsplit=1)[0]), "CUDA {0} of the running driver {1} (NVML)".format(reported, nvml.get("driver_version") or "?"), None
    driver = str(settings["driver_version"] or "").strip()
    if driver:
        cuda = Matrix().max_cuda(driver)
        if cuda is None:
            return None, "", "the driver {0} is older than every CUDA release the matrix knows; set dcgm_cuda_major".format(driver)
        return int(cuda.split(".", maxsplit=1)[0]), "CUDA {0}, the newest the declared driver {1} supports (version matrix)".format(cuda, driver), None
    return (
        None,
        "",
        "no NVIDIA driver is running and none is declared, so the DCGM CUDA flavour is unknown; set dcgm_driver_version "
        "(the driver the node will run) or dcgm_cuda_major",
    )


def cuda_repository(settings: Mapping, prefix: str, no_distro: str, no_arch: str) -> tuple[dict[str, str], str | None]:
    """The directory of NVIDIA's CUDA repository (DCGM's and IMEX's packages come from it) for the node, from
    <prefix>_repo_url and <prefix>_repo_distro, or the problem: `no_distro` ({0} distribution, {1} major, {2} the
    known ones) and `no_arch` ({0} architecture) say it in the calling role's words."""
    for variable in ("repo_url", "gpg_key_url"):
        problem = url_problem(str(settings[variable] or ""), prefix + "_" + variable)
        if problem:
            return {}, problem
    # <prefix>_repo_distro: a mirror's own directory for a distribution NVIDIA's table does not list.
    distro = str(settings["repo_distro"] or "") or next(
        (
            row["repo"]
            for row in knowledge.DCGM_REPO_DISTROS
            if row["distribution"] == settings["distribution"] and row["major"] == str(settings["distribution_major_version"])
        ),
        None,
    )
    arch = knowledge.DCGM_REPO_ARCHES["value"].get(settings["architecture"])
    if distro is None:
        supported = sorted({"{0} {1}".format(row["distribution"], row["major"]) for row in knowledge.DCGM_REPO_DISTROS})
        return {}, no_distro.format(settings["distribution"], settings["distribution_major_version"], ", ".join(supported))
    if arch is None:
        return {}, no_arch.format(settings["architecture"])
    url = str(settings["repo_url"]).rstrip("/")
    return {"distro": distro, "arch": arch, "url": "{0}/{1}/{2}".format(url, distro, arch)}, None


def _repo(settings: Mapping) -> tuple[dict[str, str], str | None]:
    return cuda_repository(settings, "dcgm", "DCGM 4 has no repository for {0} {1} (supported: {2})", "DCGM 4 has no packages for the architecture {0}")


def _manager(settings: Mapping) -> str:
    """The node's package manager, which spells the packages' versions and the install's name=version."""
    return "dnf" if settings["os_family"] == "RedHat" else "apt"


def _packages(settings: Mapping, major: int) -> tuple[list[str], str, str | None]:
    version = str(settings["version"])
    manager = _manager(settings)
    if _VERSION.fullmatch(version):
        pinned = knowledge.DCGM_PACKAGE_VERSION["value"][manager].format(version=version)
        upstream = version
    elif _PINNED.fullmatch(version):
        pinned = version
        upstream = version.rsplit(":", maxsplit=1)[-1].split("-", maxsplit=1)[0]
    else:
        return [], "", "dcgm_version must look like 4.5.3 (or a full package version such as 1:4.5.3-1), got '{0}'".format(version)
    if _version_tuple(upstream)[0] != 4:
        return [], "", "dcgm_version {0} is not DCGM 4; this role installs the datacenter-gpu-manager-4-* packages".format(version)
    flavours = {row["major"]: row["since"] for row in knowledge.DCGM_CUDA_FLAVOURS}
    if major not in flavours:
        return (
            [],
            "",
            "DCGM 4 has no CUDA {0} flavour (known: {1}); use a driver of a supported CUDA major".format(
                major, ", ".join("cuda{0}".format(m) for m in sorted(flavours))
            ),
        )
    if _version_tuple(upstream) < _version_tuple(flavours[major]):
        return [], "", "DCGM {0} has no cuda{1} packages (first in {2}); set dcgm_version to {2} or later".format(upstream, major, flavours[major])
    names = [row["package"].format(major=major) for row in knowledge.DCGM_PACKAGES if settings["proprietary"] or not row["proprietary"]]
    return names, pinned, None


def _exporter(settings: Mapping, counters_file: str) -> tuple[dict[str, t.Any], str | None]:
    flags = knowledge.DCGM_EXPORTER_FLAGS["value"]
    if not settings["exporter"]:
        return {"enabled": False}, None
    if not str(settings["exporter_download_url"] or ""):
        return {}, (
            "dcgm_exporter_download_url is empty: NVIDIA publishes dcgm-exporter as an image and source only; build the "
            "binary from its tag, publish <url>/<version>/dcgm-exporter-<version>-linux-<arch>.tar.gz on your mirror, "
            "set dcgm_exporter_download_url=<url> and dcgm_exporter_sha256 to the tarball's sha256, or set dcgm_exporter=false"
        )
    version = str(settings["exporter_version"])
    if not _EXPORTER_VERSION.fullmatch(version):
        return {}, "dcgm_exporter_version must look like 4.5.3-4.8.2 (<DCGM version>-<exporter version>, as its tags), got '{0}'".format(version)
    arch = _ARCH_GO.get(settings["architecture"])
    if arch is None:
        return {}, "no dcgm-exporter build for the architecture {0}".format(settings["architecture"])
    digest = str(settings["exporter_sha256"] or "").strip().lower()
    if not _SHA256.fullmatch(digest):
        # NVIDIA publishes no binary, so there is no upstream table: the site that builds the tarball pins it.
        # A .sha256 beside the tarball would vouch for whatever the mirror serves.
        return {}, (
            "dcgm_exporter_sha256 must be the sha256 of the site's dcgm-exporter tarball (64 hexadecimal digits), got "
            "'{0}'; pin the digest of the tarball you built and published, or set dcgm_exporter=false".format(settings["exporter_sha256"] or "")
        )
    problem = url_problem(str(settings["exporter_download_url"]), "dcgm_exporter_download_url")
    if problem:
        return {}, problem
    scheme = urlsplit(str(settings["exporter_download_url"])).scheme.lower()
    if scheme != "https" and not settings["exporter_allow_insecure_transport"]:
        return {}, (
            "dcgm_exporter_download_url {0} is fetched over {1}, which does not authenticate the server; use an "
            "https:// mirror, or set dcgm_exporter_allow_insecure_transport: true (the pinned dcgm_exporter_sha256 "
            "still checks the tarball)".format(settings["exporter_download_url"], scheme or "no scheme")
        )
    attribution = settings["exporter_attribution"]
    if attribution not in _ATTRIBUTIONS:
        return {}, "dcgm_exporter_attribution must be one of {0}, got '{1}'".format(", ".join(_ATTRIBUTIONS), attribution)
    for name in ("exporter_install_dir",):
        if not os.path.isabs(str(settings[name])):
            return {}, "dcgm_{0} must be an absolute path".format(name)
    address = str(settings["exporter_address"])
    if not re.fullmatch(r"^[^:\s]*:[0-9]{1,5}$", address) or not 0 < int(address.rsplit(":", 1)[1]) < 65536:
        return {}, "dcgm_exporter_address must be [host]:port such as :9400, got '{0}'".format(address)
    argv = [
        "{0}/dcgm-exporter".format(str(settings["exporter_install_dir"]).rstrip("/")),
        flags["collectors"],
        counters_file,
        flags["address"],
        address,
        flags["remote_hostengine"],
        str(settings["exporter_hostengine"]),
    ]
    if attribution == "kubernetes":
        socket = str(settings["exporter_pod_resources_socket"])
        if not os.path.isabs(socket):
            return {}, "dcgm_exporter_pod_resources_socket must be an absolute path (the kubelet's is {0})".format(flags["pod_resources_socket_default"])
        argv += [flags["kubernetes"], flags["pod_resources_socket"], socket]
    elif attribution == "hpc":
        mapping = str(settings["exporter_hpc_job_mapping_dir"] or "")
        if not os.path.isabs(mapping):
            return {}, (
                "dcgm_exporter_attribution=hpc needs dcgm_exporter_hpc_job_mapping_dir, the absolute directory where the "
                "scheduler's prolog writes one file per GPU index with the job IDs on it, got '{0}'".format(mapping)
            )
        argv += [flags["hpc_job_mapping_dir"], mapping]
    extra = settings["exporter_extra_args"] or []
    if isinstance(extra, (str, bytes)) or not all(isinstance(arg, str) for arg in extra):
        return {}, "dcgm_exporter_extra_args must be a list of strings, one argument each"
    argv += list(extra)
    tarball = "{0}/{1}/dcgm-exporter-{1}-linux-{2}.tar.gz".format(str(settings["exporter_download_url"]).rstrip("/"), version, arch)
    return {
        "enabled": True,
        "version": version,
        "tarball_url": tarball,
        "sha256": digest,
        "allow_insecure_transport": bool(settings["exporter_allow_insecure_transport"]),
        "binary": argv[0],
        "argv": argv,
        "hpc_job_mapping_dir": settings["exporter_hpc_job_mapping_dir"] if attribution == "hpc" else None,
    }, None


def plan(settings: Mapping) -> dict[str, t.Any]:
    """The dcgm role's plan for one host; `problem` is "" or the first problem with its fix."""
    missing = sorted(set(SETTINGS) - set(settings))
    if missing:
        raise ValueError("settings lack {0}".format(", ".join(missing)))
    result: dict[str, t.Any] = {"problem": ""}
    counters_file = str(settings["exporter_counters_file"])
    watches = str(settings["health_watches"] or "")
    systems = knowledge.DCGM_HEALTH_SYSTEMS["value"]
    diag_level = settings["diag_level"]
    checks = (
        (not os.path.isabs(counters_file), "dcgm_exporter_counters_file must be an absolute path"),
        (
            any(letter not in systems for letter in watches) or len(set(watches)) != len(watches),
            "dcgm_health_watches takes the letters of dcgmi health --set, each once ({0}), got '{1}'".format(
                ", ".join("{0}={1}".format(k, v) for k, v in systems.items()), watches
            ),
        ),
        (str(diag_level) not in ("1", "2", "3", "4"), "dcgm_diag_level must be 1, 2, 3 or 4 (dcgmi diag -r), got '{0}'".format(diag_level)),
    )
    for bad, message in checks:
        if bad:
            result["problem"] = message
            return result
    repo, problem = _repo(settings)
    if problem:
        result["problem"] = problem
        return result
    major, cuda_source, problem = _cuda_major(settings)
    if problem or major is None:
        result["problem"] = problem or "the CUDA flavour is unknown"
        return result
    names, pinned, problem = _packages(settings, major)
    if problem:
        result["problem"] = problem
        return result
    exporter, problem = _exporter(settings, counters_file)
    if problem:
        result["problem"] = problem
        return result
    manager = _manager(settings)
    separator = "-" if manager == "dnf" else "="
    # "a" is every system; dcgmi reports the systems one by one.
    expanded = [letter for letter in systems if letter != "a"] if "a" in watches else list(watches)
    result.update(
        cuda_major=major,
        cuda_source=cuda_source,
        manager=manager,
        packages=names,
        package_version=pinned,
        install=["{0}{1}{2}".format(name, separator, pinned) for name in names],
        repo=repo,
        service=knowledge.DCGM_SERVICE["value"],
        exporter=exporter,
        health={"argv": ["dcgmi", "health", "--set", watches], "systems": [systems[letter] for letter in expanded]} if watches else None,
    )
    return result


# --- dcgmi's output -----------------------------------------------------------

_FETCH_ROW = re.compile(r"^\|\s*([A-Za-z][A-Za-z ]*?)\s*\|\s*(On|Off)\s*\|\s*$", re.IGNORECASE)
# dcgmi's table names for the systems of --set (thermal and power are two rows).
_FETCH_NAMES = {
    "pcie": "PCIe",
    "memory": "memory",
    "inforom": "infoROM",
    "thermal": "thermal and power",
    "power": "thermal and power",
    "nvlink": "NVLink",
}


def health_watches(text: str) -> list[str]:
    """The systems that `dcgmi health --fetch` lists as On, named as DCGM_HEALTH_SYSTEMS names them."""
    found: list[str] = []
    for line in str(text).splitlines():
        match = _FETCH_ROW.fullmatch(line.strip())
        if match and match.group(2).lower() == "on":
            name = _FETCH_NAMES.get(match.group(1).strip().lower().replace(" ", ""))
            if name and name not in found:
                found.append(name)
    return found


def diag_failures(text: str, rc: int = 0) -> list[str]:
    """The failing tests of `dcgmi diag --json`, each "<test>: <why>"; a failure the JSON does not explain is named by rc."""
    try:
        report = json.loads(text) if str(text).strip() else {}
    except ValueError:
        report = None
    failures: list[str] = []
    categories = []
    if isinstance(report, Mapping):
        body = report.get("DCGM Diagnostic", report)
        categories = body.get("test_categories", []) if isinstance(body, Mapping) else []
    for category in categories:
        for test in category.get("tests", []) if isinstance(category, Mapping) else []:
            if not isinstance(test, Mapping):
                continue
            reasons = []
            failed = False
            for entry in test.get("results", []):
                if not isinstance(entry, Mapping) or str(entry.get("status", "")).lower() != "fail":
                    continue
                failed = True
                gpu = entry.get("gpu_id", entry.get("entity_id"))
                for warning in entry.get("warnings", []) or []:
                    message = warning.get("warning") if isinstance(warning, Mapping) else warning
                    reasons.append("GPU {0}: {1}".format(gpu, message) if gpu is not None else str(message))
            if failed:
                failures.append("{0}: {1}".format(test.get("name", "?"), "; ".join(reasons) or "failed"))
    if not failures and (report is None or rc != 0):
        tail = " ".join(str(text).split())[-300:]
        failures.append("dcgmi diag exited {0} without a JSON report of a failing test: {1}".format(rc, tail or "(no output)"))
    return failures
