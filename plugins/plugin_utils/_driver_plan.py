# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The driver role's plan: pure functions of the declaration, the OS data and
what driver_info / nvml_info / package_versions_info read. Controller side.

The role applies the plan in four steps, because the node is asked twice in
between and the OS data (vars/<OS>.yml) names packages after the branch and
the flavour decided first:

1. decide()     declaration + node -> branch, module build, flavour, or the
                first error (naming the variable and the fix);
2. plan()       + the OS data      -> packages, repository, kernels, what is
                installed, whether the repository must be asked, removal;
3. select()     + the repository's offer -> exact versions, what to install,
                release and hold, the rollback set;
4. holds() / rollback() / rescue_holds() / dnf_locks() / stale_files() / reboot_reason(): the small
   decisions the tasks take after the node changed.

Every function returns plain data; errors are returned as {"error": "..."}
so that the role fails in one assert, with the message, before the node is
touched.
"""

from __future__ import annotations

import json
import re
import typing as t
from urllib.parse import urlsplit

from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.evaluate import Matrix
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.versions import (
    KERNEL_MODULE_REQUESTS,
    flavours_for,
    gpu_kind,
    kernel_module_flavour,
    open_modules_first_branch,
)

# "3:580.95.05-1.el9" / "535.216.03-2~bpo12+1" / "535.183.01-0ubuntu0.22.04.1" -> the NVIDIA version.
_UPSTREAM = re.compile(r"^(?:\d+:)?(?P<upstream>[0-9][0-9.]*[0-9])")

# `apt-cache policy` output: a package with a candidate version.
APT_POLICY = re.compile(r"(?m)^(\S+):\n +Installed: .*\n +Candidate: (\S+)")

SUPPORTED = "the role installs the driver on Debian 12/13, Ubuntu 22.04/24.04 and RHEL, Rocky, AlmaLinux 8/9/10."


def upstream_version(version: t.Any) -> str | None:
    """NVIDIA's version inside a package version; None for anything else."""
    if version is None:
        return None
    match = _UPSTREAM.match(str(version))
    return match.group("upstream") if match else None


def truthy(value: t.Any) -> bool:
    """Ansible's `bool` filter: yes/on/1/true (any case) and True are true."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, str):
        value = value.lower()
    return value in ("yes", "on", "1", "true", 1)


def _unique(items: t.Iterable[str]) -> list[str]:
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


# ---------------------------------------------------------------------------
# The kernel-module flavour


def _gpu_labels(gpus: list[dict]) -> str:
    """'8 x Tesla V100-SXM2-16GB (volta), B200 (blackwell)': each model once, with its count."""
    counts: dict[str, int] = {}
    for gpu in gpus:
        label = "{0} ({1})".format(gpu["name"], gpu["architecture"])
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(label if n == 1 else "{0} x {1}".format(n, label) for label, n in counts.items())


def _gpu(matrix: Matrix, gpu: t.Any, vgpu_guest: bool) -> dict[str, t.Any]:
    """One GPU as the flavour rules see it: the knowledge base's model table, else NVML's architecture."""
    if isinstance(gpu, dict):
        found = matrix.gpus_from_nvml({"gpus": [gpu]})[0]
    else:
        found = matrix.gpu_from_name(str(gpu), str(gpu))
    kind = gpu_kind(found.architecture, found.grace)
    return {"name": found.name, "architecture": kind, "flavours": list(flavours_for(found.architecture, found.grace, vgpu_guest))}


def kernel_module(gpus: list, requested: str, branch: t.Any, source: str, vgpu_guest: t.Any = False) -> dict[str, t.Any]:
    """Decide (auto) or check the kernel-module flavour for a node's GPUs.

    gpus: NVML GPUs (dicts with name and architecture) or declared model names;
    source: where they came from ("nvml" or "driver_gpu_models"), for messages;
    vgpu_guest: the node is a vGPU guest (driver_info's read of its PCI functions).
    The decision is the knowledge base's one rule (matrix.versions.kernel_module_flavour,
    which preflight and verify ask too); this only words its answer for the role.
    """
    if requested not in KERNEL_MODULE_REQUESTS:
        raise ValueError("unknown flavour {0!r}".format(requested))
    try:
        branch_number = int(str(branch))
    except ValueError:
        raise ValueError("branch {0!r} is not a number".format(branch)) from None

    matrix = Matrix()
    vgpu_guest = bool(vgpu_guest)
    seen = [_gpu(matrix, gpu, vgpu_guest) for gpu in gpus or []]
    result: dict[str, t.Any] = {"flavour": None, "gpus": seen, "error": None}

    unknown = [g for g in seen if not g["flavours"]]
    if unknown and source == "driver_gpu_models":
        result["error"] = (
            "driver_gpu_models: {0} is not a GPU model the role knows; give product names as nvidia-smi "
            "prints them (for example A100, H100, L40S, T4, V100, B200, GH200)".format(", ".join(repr(g["name"]) for g in unknown))
        )
        return result

    choice = kernel_module_flavour([g["flavours"] for g in seen], requested, branch_number, vgpu_guest)
    first_open = open_modules_first_branch(vgpu_guest)
    in_guest = " in a vGPU guest" if vgpu_guest else ""
    concerned = [seen[i] for i in choice.concerned]
    if choice.flavour is not None:
        result["flavour"] = choice.flavour
    elif choice.problem == "open_too_old" and requested == "open":
        result["error"] = (
            "driver_kernel_module: open needs driver branch {0} or later{2}, but the branch is {1}; "
            "set driver_kernel_module: proprietary or choose a newer driver_branch".format(first_open, branch_number, in_guest)
        )
    elif choice.problem == "open_too_old":
        result["error"] = (
            "driver_branch: {0} run only the open kernel modules, which {3} from driver branch {1} on, "
            "but the branch is {2}; choose driver_branch {1} or newer".format(
                _gpu_labels(concerned), first_open, branch_number, "drive vGPUs" if vgpu_guest else "ship"
            )
        )
    elif choice.problem == "refused":
        other = "open" if requested == "proprietary" else "proprietary"
        result["error"] = (
            "driver_kernel_module: {0} cannot drive {1}, which run only the {2} kernel modules{3}; set driver_kernel_module: {2} (or auto)".format(
                requested, _gpu_labels(concerned), other, " as vGPUs (a vGPU guest)" if vgpu_guest else ""
            )
        )
    elif choice.problem == "no_gpus":
        result["error"] = (
            "driver_kernel_module: auto needs to know the GPUs, but no driver is loaded to read them "
            "through NVML and driver_gpu_models is empty; declare driver_gpu_models (for example "
            "['H100']) or set driver_kernel_module to open or proprietary"
        )
    elif choice.problem == "unknown":
        result["error"] = (
            "driver_kernel_module: auto cannot tell which kernel modules {0} need (unknown "
            "architecture); set driver_kernel_module to open or proprietary".format(", ".join(repr(g["name"]) for g in concerned))
        )
    else:
        by_flavour: dict[str, list[dict[str, t.Any]]] = {}
        for gpu in concerned:
            by_flavour.setdefault(" or ".join(gpu["flavours"]), []).append(gpu)
        result["error"] = (
            "driver_kernel_module: the GPUs of this node need different kernel modules ({0}); "
            "one driver cannot serve them all: split them into separate host groups".format(
                "; ".join("{0}: {1}".format(k, _gpu_labels(v)) for k, v in sorted(by_flavour.items()))
            )
        )
    return result


# ---------------------------------------------------------------------------
# 1. decide


def decide(declaration: dict, os_data: dict, info: dict, nvml: dict) -> dict[str, t.Any]:
    """Validate the declaration and settle the branch, the module build and the flavour.

    declaration: the role's driver_* variables without the prefix (state, branch, version, kernel_module,
    gpu_models, source, module_build, secure_boot_enroll, secure_boot_enroll_password).
    os_data: backend (None when the OS has no data), sources (the keys of __driver_packages, None likewise),
    distribution_repo (whether the OS has a distribution repository), cuda_repo_key (None when unknown),
    distribution, distribution_version, branch_pattern, version_pattern, nvml_gpus_known.
    The flavour is kernel_module()'s (the knowledge base's flavour rules), told whether the node is a vGPU guest
    (driver_info's vgpu_guest).
    """
    result: dict[str, t.Any] = {"error": None, "branch": None, "branch_tag": None, "build": None, "flavour": None, "gpus": []}
    if os_data.get("backend") is None or os_data.get("sources") is None:
        result["error"] = "driver: {0} {1} is not supported; {2}".format(os_data.get("distribution"), os_data.get("distribution_version"), SUPPORTED)
        return result

    branch_given = str(declaration["branch"])
    version = str(declaration["version"])
    # fullmatch: `$` alone lets a trailing newline through, and the version reaches commands and file names.
    if not re.fullmatch(os_data["branch_pattern"], branch_given):
        result["error"] = 'driver_branch {0} is not a driver branch: give its three digits as a string, for example "580"'.format(json.dumps(branch_given))
        return result
    if version and not re.fullmatch(os_data["version_pattern"], version):
        result["error"] = (
            "driver_version {0} is not an NVIDIA driver version: give it as nvidia-smi prints it, "
            'for example "580.95.05", or "" for the newest of driver_branch'.format(json.dumps(version))
        )
        return result

    # driver_version, when set, decides the branch.
    branch = version.split(".", maxsplit=1)[0] if version else branch_given
    # NVIDIA's Ubuntu packages carry the branch in their names up to 580, none from 590 on.
    result["branch"] = branch
    result["branch_tag"] = "" if int(branch) >= 590 else "-" + branch

    source = declaration["source"]
    sources = list(os_data["sources"])
    build = declaration["module_build"]
    if build == "auto":
        build = "precompiled" if source == "distribution" and "precompiled" in sources else "dkms"
    result["build"] = build
    source_ok = (
        source in sources
        and (build == "dkms" or (source == "distribution" and "precompiled" in sources))
        and (source == "cuda" or os_data.get("distribution_repo"))
        and (source != "cuda" or os_data.get("cuda_repo_key") is not None)
    )
    if not source_ok:
        if build == "precompiled":
            result["error"] = (
                "driver_module_build: precompiled modules are Canonical's signed linux-modules-nvidia "
                "packages and exist only on Ubuntu with driver_source: distribution; use "
                "driver_module_build: dkms (or auto)"
            )
        else:
            result["error"] = ("driver_source: {0} has no NVIDIA driver for {1} {2}; use driver_source: cuda (NVIDIA's repository)").format(
                source, os_data.get("distribution"), os_data.get("distribution_version")
            )
        return result

    enroll = truthy(declaration.get("secure_boot_enroll"))
    if enroll and not declaration.get("secure_boot_enroll_password"):
        result["error"] = (
            "driver_secure_boot_enroll: true queues the signing certificate for enrolment at the "
            "next boot, which asks for a one-time password at the console: set "
            "driver_secure_boot_enroll_password (from a vault)."
        )
        return result

    # NVML lists the GPUs only while a driver whose library matches its module is loaded.
    nvml_gpus = nvml.get("gpus") or [] if nvml.get("status") in os_data["nvml_gpus_known"] else []
    vgpu_guest = bool(info.get("vgpu_guest"))
    if nvml_gpus:
        flavour = kernel_module(nvml_gpus, declaration["kernel_module"], branch, "nvml", vgpu_guest)
    else:
        flavour = kernel_module(declaration.get("gpu_models") or [], declaration["kernel_module"], branch, "driver_gpu_models", vgpu_guest)
    result["gpus"] = flavour["gpus"]
    present = declaration["state"] == "present"
    if not present:
        # Removal needs no decision: both flavours' packages go.
        result["flavour"] = "open"
        return result
    if flavour["error"] is not None:
        result["error"] = flavour["error"]
        return result
    result["flavour"] = flavour["flavour"]

    secure_boot = info["secure_boot"]
    if secure_boot["enabled"] and build != "precompiled" and not secure_boot["mok_certificate_enrolled"] and not enroll:
        result["error"] = (
            "Secure Boot is enabled and DKMS would sign the nvidia modules with {0}, which is not enrolled as a "
            "Machine Owner Key, so the kernel would refuse them. Enrol it (driver_secure_boot_enroll: true with "
            "driver_secure_boot_enroll_password; confirm at the console on the next boot), point "
            "driver_secure_boot_mok_key/driver_secure_boot_mok_cert at an enrolled key pair, or use modules signed "
            "by your distribution (Ubuntu: driver_source: distribution, driver_module_build: precompiled).".format(
                secure_boot.get("mok_certificate") or "a key"
            )
        )
    return result


# ---------------------------------------------------------------------------
# 2. plan


def repository(declaration: dict, os_data: dict, facts: dict) -> dict[str, t.Any]:
    """The repository the driver comes from, as the probe, the sources file and the key task need it.

    declaration: source, cuda_repo_url, cuda_repo_key_url, cuda_repo_key_fingerprint, distribution_mirror_url,
    distribution_key_url. os_data: keyring_dir, cuda_repo_arch, cuda_repo_name, cuda_repo_key,
    cuda_repo_fingerprint, distribution_repo. facts: architecture, distribution."""
    keyring_dir = os_data.get("keyring_dir") or ""
    if declaration["source"] == "cuda":
        arch = os_data["cuda_repo_arch"].get(facts["architecture"], facts["architecture"])
        path = "{0}/{1}".format(os_data["cuda_repo_name"], arch)
        base = re.sub("/+$", "", declaration["cuda_repo_url"]) + "/" + path
        return {
            "name": "NVIDIA CUDA repository " + path,
            "base": base,
            "apt_lines": ["deb {0}/ /".format(base)],
            "key": declaration["cuda_repo_key_url"] or base + "/" + os_data["cuda_repo_key"],
            "fingerprint": declaration["cuda_repo_key_fingerprint"] or os_data["cuda_repo_fingerprint"],
            "keyring": keyring_dir + "/gpufleet-nvidia-cuda.asc",
        }
    repo = os_data["distribution_repo"]
    url = declaration["distribution_mirror_url"] or repo["url"]
    components = list(repo["components"])
    return {
        "name": "{0} {1}".format(facts["distribution"], "/".join(components)),
        "base": url,
        "apt_lines": ["deb {0} {1} {2}".format(url, suite, " ".join(components)) for suite in repo["suites"]],
        "key": declaration["distribution_key_url"] or repo["keyring"],
        # The archive keyring on the node is the node's own trust; a downloaded key is pinned like the CUDA one.
        "fingerprint": declaration.get("distribution_key_fingerprint", "") if declaration["distribution_key_url"] else "",
        "keyring": (keyring_dir + "/gpufleet-nvidia-distribution.asc") if declaration["distribution_key_url"] else repo["keyring"],
    }


def _owned_files(os_data: dict) -> list[str]:
    """Every file the role may have written, as node_files removes them in one call."""
    keyring_dir = os_data.get("keyring_dir")
    candidates = [
        os_data.get("sources_file"),
        os_data.get("pin_file"),
        os_data.get("unattended_upgrades_file"),
        keyring_dir + "/gpufleet-nvidia-cuda.asc" if keyring_dir else None,
        keyring_dir + "/gpufleet-nvidia-distribution.asc" if keyring_dir else None,
        os_data.get("repo_file"),
        os_data.get("module_stream_file"),
        os_data["nouveau_file"],
        os_data["dkms_signing_file"],
        os_data.get("nvlsm_modules_file"),
    ]
    return [{"path": path, "state": "absent"} for path in candidates if path]


def plan(decision: dict, declaration: dict, os_data: dict, facts: dict, info: dict) -> dict[str, t.Any]:
    """What to install and from where, and how far the node is from it.

    decision: decide()'s result (its error is passed through: nothing is planned then).
    declaration: the driver_* variables without the prefix (source, package_set, version, fabricmanager,
    cuda_repo_url, cuda_repo_key_url, cuda_repo_key_fingerprint, distribution_mirror_url, distribution_key_url,
    secure_boot_mok_key, secure_boot_mok_cert, secure_boot_enroll, bake, state).
    os_data: the role's vars (without the __driver_ prefix), templated with the decided branch and flavour.
    facts: distribution, architecture. info: driver_info's `driver`.
    """
    if decision.get("error") is not None:
        return {"error": decision["error"]}
    source = declaration["source"]
    build = decision["build"]
    flavour = decision["flavour"]
    branch = decision["branch"]
    backend = os_data["backend"]
    present = declaration["state"] == "present"
    key = "precompiled" if build == "precompiled" else source
    other_flavour = "proprietary" if flavour == "open" else "open"

    packages = info["packages"]
    installed = {p["name"]: p["version"] for p in packages}
    unconfigured = [p["name"] for p in packages if not p["configured"]]
    held = [p["name"] for p in packages if p["held"]]
    kernels = info["kernels"]["installed"]
    in_container = info.get("container") is not None
    bake = truthy(declaration.get("bake"))

    top = list(os_data["packages"][key][declaration["package_set"]][flavour])
    version_package = os_data["module_package"][key][flavour]
    other_flavour_package = os_data["module_package"][key][other_flavour]
    independent = list((os_data.get("independent_packages") or {}).get(source) or [])
    version = str(declaration["version"])
    # NVIDIA's apt repositories publish pinning packages from about R580 on.
    pinning = ["nvidia-driver-pinning-" + (version or branch)] if source == "cuda" and backend == "apt" else []
    fabricmanager_setting = str(declaration["fabricmanager"]).lower()
    fabricmanager = fabricmanager_setting == "true" or (fabricmanager_setting == "auto" and len(info.get("nvswitches") or []) > 0)
    nvlsm = any(gpu["architecture"] in os_data["nvlsm_architectures"] for gpu in decision.get("gpus") or [])
    repo = repository(declaration, os_data, facts)

    result: dict[str, t.Any] = {"error": None}
    # The URLs go into results, logs and the world-readable sources file: a password in one is refused unrepeated.
    for variable in ("cuda_repo_url", "cuda_repo_key_url", "distribution_mirror_url", "distribution_key_url"):
        if "@" in urlsplit(str(declaration.get(variable) or "")).netloc:
            result["error"] = (
                "driver_{0} carries credentials (user:password@), which results, logs and the apt sources file would "
                "show; remove them from the URL (the driver role has no repository login: serve the repository to the "
                "nodes without one, for example through a proxy or a mirror on their network).".format(variable)
            )
            return result
    key_downloaded = bool(re.match(r"(https?|ftp|file)://", repo["key"]))
    if key_downloaded and not repo["fingerprint"] and not truthy(declaration.get("allow_unpinned_key")) and present:
        variable = "driver_cuda_repo_key_fingerprint" if source == "cuda" else "driver_distribution_key_fingerprint"
        result["error"] = (
            "{0}: empty, and the role knows no fingerprint for the key of {1} ({2}), so nothing would check it before "
            "apt or dnf trusts it. Set {0} to the repository's signing key (or driver_allow_unpinned_key: true to trust "
            "whatever is served).".format(variable, repo["name"], repo["key"])
        )
        return result
    fabricmanager_packages = list((os_data.get("fabricmanager_packages") or {}).get(source) or [])
    nvlsm_packages = list((os_data.get("nvlsm_packages") or {}).get(source) or [])
    if fabricmanager and not fabricmanager_packages:
        result["error"] = (
            "{0}Fabric Manager is needed, but {1} does not package it; use driver_source: cuda (NVIDIA's repository "
            "has Fabric Manager at every driver version){2}.".format(
                "NVSwitches were found, so " if fabricmanager_setting == "auto" else "",
                repo["name"],
                "" if fabricmanager_setting == "true" else ", or set driver_fabricmanager: false if these GPUs do not use the NVSwitches",
            )
        )
        return result
    # Fabric Manager is versioned with the driver (pinned and held with it); NVLSM has its own versions.
    if fabricmanager:
        top += fabricmanager_packages + (nvlsm_packages if nvlsm else [])
    independent += nvlsm_packages
    # NVLSM reaches the NVSwitches through InfiniBand management datagrams: its kernel modules must be in every
    # kernel the node can boot (Ubuntu ships them in linux-modules-extra), and loaded at every boot.
    nvlsm_modules = list(os_data.get("nvlsm_kernel_modules") or []) if fabricmanager and nvlsm else []
    nvlsm_modules_package = os_data.get("nvlsm_modules_package") or ""
    lacking = [k for k in info["kernels"]["installed"] if nvlsm_modules and k.get("modules_absent")]
    if lacking and not nvlsm_modules_package and present:
        result["error"] = (
            "Fabric Manager on {0} GPUs needs NVLSM, and NVLSM needs the {1} kernel modules, which kernel(s) {2} do "
            "not have (not in their modules.dep); the role knows no package that adds them on {3}. Install a kernel "
            "built with them (CONFIG_INFINIBAND_USER_MAD, CONFIG_MLX5_INFINIBAND) or the package that carries them, "
            "or set driver_fabricmanager: false if these GPUs do not use the NVSwitches.".format(
                "/".join(os_data["nvlsm_architectures"]),
                " and ".join(nvlsm_modules),
                ", ".join("{0} ({1})".format(k["release"], " ".join(k["modules_absent"])) for k in lacking),
                facts.get("distribution", "this OS"),
            )
        )
        return result

    installed_version = upstream_version(installed.get(version_package))
    installed_any = next((upstream_version(installed[name]) for name in (version_package, other_flavour_package) if name in installed), None)
    # Installed as declared: the installed versions are the plan, nothing to look up.
    satisfied = (
        installed_version is not None
        and version_package not in unconfigured
        and (installed_version == version if version else installed_version.split(".", maxsplit=1)[0] == branch)
        and all(name in installed for name in top)
    )
    # Everything of the installed driver: its version's packages and the named ones.
    named = set(top + pinning + [version_package, other_flavour_package])
    driver_packages = [p["name"] for p in packages if (installed_any is not None and upstream_version(p["version"]) == installed_any) or p["name"] in named]

    # DKMS builds from headers; precompiled modules come one package per kernel.
    if build == "dkms":
        kernel_packages = [os_data["headers_prefix"] + k["release"] for k in kernels if not k["headers"]]
    else:
        kernel_packages = [os_data["precompiled_module_package"] + k["release"] for k in kernels]
    kernel_packages += [nvlsm_modules_package + k["release"] for k in lacking]
    if not kernel_packages:
        kernel_query: list[str] = []
    elif backend == "apt":
        kernel_query = ["apt-cache", "policy"] + kernel_packages
    else:
        kernel_query = ["dnf", "-q", "repoquery", "--qf", "%{name}-%{version}-%{release}.%{arch}"] + kernel_packages
    # A container runs its host's kernel and a bake runs the builder's: neither is a kernel of the node.
    running_foreign = not info["kernels"]["running_installed"] and (in_container or bake)
    if present and not info["kernels"]["running_installed"] and not running_foreign:
        result["error"] = (
            "the running kernel {0} is not installed any more (no /boot/vmlinuz-{0}), so no module can be built for "
            "it; reboot into an installed kernel ({1}) first.".format(info["kernels"]["running"], ", ".join(k["release"] for k in kernels) or "none")
        )
        return result

    secure_boot = info["secure_boot"]
    mok_key = declaration.get("secure_boot_mok_key") or os_data.get("dkms_mok_key")
    mok_cert = declaration.get("secure_boot_mok_cert") or os_data.get("dkms_mok_cert")
    enroll = truthy(declaration.get("secure_boot_enroll"))

    # The role's own files, written whole, by the step that needs them: the repository and its locks before
    # the packages, the nouveau blacklist with the configuration.
    files = []
    if backend == "apt":
        files = [
            {"path": os_data["sources_file"], "template": "apt-sources.list.j2", "step": "repository"},
            {"path": os_data["pin_file"], "template": "apt-preferences.j2", "step": "repository"},
            {"path": os_data["unattended_upgrades_file"], "template": "apt-unattended-upgrades.j2", "step": "repository"},
        ]
    elif truthy(os_data.get("module_streams")):
        files = [{"path": os_data["module_stream_file"], "template": "dnf-module-stream.j2", "step": "repository"}]
    files.append({"path": os_data["nouveau_file"], "template": "blacklist-nouveau.conf.j2", "step": "configure"})
    # Written where NVLSM runs, removed where it no longer does (another driver_fabricmanager, other GPUs).
    files_absent = []
    if nvlsm_modules:
        files.append({"path": os_data["nvlsm_modules_file"], "template": "modules-load-nvlsm.conf.j2", "step": "fabric"})
    elif os_data.get("nvlsm_modules_file"):
        files_absent.append({"path": os_data["nvlsm_modules_file"], "step": "fabric"})
    # Loaded now too, where modules can be loaded: not in a container, nor in an image being built. driver_info
    # names those of them it found loaded as they were asked for (the role asks for NVLSM's).
    loaded = info.get("other_modules_loaded") or []
    nvlsm_modules_to_load = [name for name in nvlsm_modules if name not in loaded] if present and not in_container and not bake else []

    result.update(
        {
            "branch": branch,
            "build": build,
            "flavour": flavour,
            "backend": backend,
            "installed": installed,
            "unconfigured": unconfigured,
            "held": held,
            "kernels": kernels,
            "in_container": in_container,
            "top_packages": top,
            "version_package": version_package,
            "other_flavour_package": other_flavour_package,
            "independent": independent,
            "pinning_packages": pinning,
            "probe_packages": _unique(top + [version_package] + pinning),
            # EL 8/9: NVIDIA's streams are <branch>-open and <branch>-dkms (proprietary).
            "module_stream": "{0}-{1}".format(branch, "open" if flavour == "open" else "dkms"),
            "fabricmanager": fabricmanager,
            "services": ["nvidia-persistenced"] + (["nvidia-fabricmanager"] if fabricmanager else []),
            "repo": repo,
            "mok_key": mok_key,
            "mok_cert": mok_cert,
            "mok_enrolment_needed": bool(secure_boot["enabled"] and build == "dkms" and not secure_boot["mok_certificate_enrolled"] and enroll),
            "secure_boot": bool(secure_boot["enabled"] or enroll),
            "installed_version": installed_version,
            "installed_any": installed_any,
            "satisfied": satisfied,
            # The repository is asked when the node is not as declared, and when the key the role writes is
            # missing: the probe checks the key, and its export is what is written, never a second download.
            "probe": not satisfied or (key_downloaded and not ((info.get("files") or {}).get(repo["keyring"]) or {}).get("exists", False)),
            "key_downloaded": key_downloaded,
            "driver_packages": driver_packages,
            "release_for_removal": [name for name in held if name in driver_packages],
            "owned_files": _owned_files(os_data),
            "kernel_packages": kernel_packages,
            "kernel_query": kernel_query,
            "running_kernel_foreign": running_foreign,
            "files": files,
            "files_absent": files_absent,
            "nvlsm_kernel_modules": nvlsm_modules,
            "nvlsm_modules_to_load": nvlsm_modules_to_load,
        }
    )
    return result


def kernels_missing(planned: dict, query_output: str) -> list[str]:
    """The kernel packages the node's repositories cannot install, from the output of the plan's kernel_query
    (apt-cache policy: a package with a candidate; dnf repoquery: one offered package a line)."""
    if planned["backend"] == "apt":
        offered = [name for name, candidate in APT_POLICY.findall(query_output) if candidate != "(none)"]
    else:
        offered = query_output.splitlines()
    return [name for name in planned["kernel_packages"] if name not in offered]


# ---------------------------------------------------------------------------
# 3. select


def select_versions(
    offered: dict[str, list[str]],
    packages: list[str],
    version_package: str,
    branch: t.Any,
    version: str,
    independent: list[str] | None = None,
    installed: dict[str, str] | None = None,
    where: str = "the repository",
) -> dict[str, t.Any]:
    """Pick the driver version and the exact version of every package to install.

    offered: versions per package, newest first (package_versions_info).
    version_package: the package whose version is the driver's (its module package).
    version: an exact NVIDIA version, or "" for the newest of `branch`.
    independent: packages versioned apart from the driver (Debian's nvidia-persistenced);
    they keep their installed version when it is offered, else take the newest.
    """
    independent = independent or []
    installed = installed or {}
    branch = str(branch)
    result: dict[str, t.Any] = {"version": None, "packages": {}, "error": None}
    offered_main = offered.get(version_package) or []
    upstreams = []
    for full in offered_main:
        upstream = upstream_version(full)
        if upstream and upstream not in upstreams:
            upstreams.append(upstream)
    if version:
        chosen = version if version in upstreams else None
        if not chosen:
            result["error"] = (
                "driver_version {0} is not offered by {1}: {2} has {3}; set driver_version to one of them, or to '' for the newest of driver_branch".format(
                    version, where, version_package, ", ".join(upstreams) or "no versions at all"
                )
            )
            return result
    else:
        in_branch = [u for u in upstreams if u.split(".")[0] == branch]
        if not in_branch:
            branches = sorted({u.split(".")[0] for u in upstreams})
            result["error"] = "driver_branch {0} is not offered by {1}: {2} is available in branch(es) {3}; set driver_branch to one of them{4}".format(
                branch, where, version_package, ", ".join(branches) or "none", ", or use another driver_source" if branches else ""
            )
            return result
        chosen = in_branch[0]
    result["version"] = chosen

    for package in packages:
        versions = offered.get(package) or []
        if package in independent:
            if not versions:
                result["error"] = "{0} is not offered by {1}".format(package, where)
                return result
            keep = installed.get(package)
            result["packages"][package] = keep if keep in versions else versions[0]
            continue
        matching = [v for v in versions if upstream_version(v) == chosen]
        if not matching:
            result["error"] = "{0} {1} is not offered by {2} ({0} has {3}); the repository is incomplete for this driver version".format(
                package, chosen, where, ", ".join(versions) or "no versions"
            )
            return result
        result["packages"][package] = matching[0]
    return result


def select(planned: dict, offered: dict | None, version: str, nvml: dict, bake: t.Any) -> dict[str, t.Any]:
    """The exact versions to install, and what changes on the node for them.

    offered: package_versions_info's `versions` (newest first), or None when the node is already as declared.
    """
    installed = planned["installed"]
    top = planned["top_packages"]
    if planned["satisfied"]:
        chosen = {"version": planned["installed_version"], "packages": {name: installed[name] for name in top}, "error": None}
        pinning = [name for name in planned["pinning_packages"] if name in installed]
    else:
        offered = offered or {}
        chosen = select_versions(
            offered, top, planned["version_package"], planned["branch"], str(version), planned["independent"], installed, planned["repo"]["name"]
        )
        # NVIDIA's pinning package, when the repository has it.
        pinning = [name for name in planned["pinning_packages"] if offered.get(name)]
    if chosen["error"] is not None:
        return {"error": chosen["error"]}
    target = chosen["version"]
    packages = chosen["packages"]
    new_pinning = [name for name in pinning if name not in installed]

    if planned["backend"] == "apt":
        install = ["{0}={1}".format(name, v) for name, v in packages.items()] + new_pinning
        # Packages missing, at another version, or left half-configured by an earlier failure.
        changing = [name for name, v in packages.items() if installed.get(name) != v or name in planned["unconfigured"]] + new_pinning
    else:
        install = ["{0}-{1}".format(name, v) for name, v in packages.items()]
        changing = [name for name, v in packages.items() if installed.get(name) != v]
    # The old driver's held packages (all versioned alike) must be released for apt to replace them.
    old_held = [name for name in planned["held"] if upstream_version(installed[name]) == planned["installed_any"]]
    release = _unique(old_held + [name for name in changing if name in planned["held"]]) if changing else []
    other = planned["other_flavour_package"]
    remove_other_flavour = other in installed and other != planned["version_package"]
    return {
        "error": None,
        "version": target,
        "packages": packages,
        "pinning": pinning,
        "install": install,
        "changing": changing,
        "release": release,
        "remove_other_flavour": remove_other_flavour,
        # Left unconfigured by a failed switch to it (a rescue that could not roll back keeps it): apt would try to
        # configure it again in the install and fail the same way, so it goes first.
        "remove_other_flavour_first": remove_other_flavour and other in planned["unconfigured"] and bool(changing),
        # The new module is running already: services can be started now, no reboot.
        "module_current": bool(nvml.get("status") == "ok" and nvml.get("driver_version") == target and not truthy(bake)),
        # dnf's rollback: the old versions of the packages the plan installs.
        "rollback_packages": {name: v for name, v in installed.items() if name in packages},
        "rollback_install": ["{0}-{1}".format(name, v) for name, v in installed.items() if name in packages],
    }


def files_to_write(planned: dict, rendered: list[str], found: dict) -> dict[str, t.Any]:
    """The role's own files as rendered (`rendered` in the order of the plan's files), those that differ on the
    node (content or mode, as driver_info read them), and node_files' entries for them by step."""
    desired = {entry["path"]: content for entry, content in zip(planned["files"], rendered)}
    stale = [path for path, content in desired.items() if (found.get(path) or {}).get("content") != content or (found.get(path) or {}).get("mode") != "0644"]
    write: dict[str, list[dict]] = {"repository": [], "configure": [], "fabric": []}
    for entry in planned["files"]:
        if entry["path"] in stale:
            write[entry["step"]].append({"path": entry["path"], "content": desired[entry["path"]], "mode": "0644"})
    for entry in planned.get("files_absent") or []:
        if (found.get(entry["path"]) or {}).get("exists"):
            stale.append(entry["path"])
            write[entry["step"]].append({"path": entry["path"], "state": "absent"})
    return {"desired": desired, "stale": stale, "write": write}


# ---------------------------------------------------------------------------
# 4. after the node changed


def holds(selection: dict, packages_now: list[dict]) -> list[str]:
    """The driver's packages to hold: the planned ones and every installed one of the driver's version,
    of those installed now (check mode has not installed the new ones) and not held yet."""
    wanted = list(selection["packages"]) + list(selection["pinning"])
    wanted += [p["name"] for p in packages_now if upstream_version(p["version"]) == selection["version"]]
    installed_now = [p["name"] for p in packages_now]
    held_now = [p["name"] for p in packages_now if p["held"]]
    return [name for name in _unique(wanted) if name in installed_now and name not in held_now]


def rollback(planned: dict, packages_after: list[dict]) -> dict[str, list[str]]:
    """apt's rollback after a failed installation: what it added goes, what it changed or removed comes back."""
    installed = planned["installed"]
    after = {p["name"] for p in packages_after}
    return {
        "remove": [p["name"] for p in packages_after if p["name"] not in installed],
        "restore": [
            "{0}={1}".format(p["name"], installed[p["name"]])
            for p in packages_after
            if p["name"] in installed and (p["version"] != installed[p["name"]] or not p["configured"])
        ]
        # apt removes what conflicts with, or depends on an old version of, what it installs: that comes back too,
        # unless it was left unconfigured before (it would fail again).
        + ["{0}={1}".format(name, version) for name, version in installed.items() if name not in after and name not in planned["unconfigured"]],
    }


def rescue_holds(planned: dict, selection: dict, packages_now: list[dict]) -> dict[str, list[str]]:
    """The holds a failed installation's rescue sets, of the packages installed now and not held.

    hold_back: after a rollback: what was held before the installation (the installation released those holds,
    apt dropped them on what it changed). hold_kept: when the rollback could not start (the old packages could not
    be fetched, so nothing was removed): those, and the new driver's packages as holds() names them, so that
    nothing of the driver the node keeps is left for unattended-upgrades to move.
    """
    installed_now = {p["name"] for p in packages_now}
    held_now = {p["name"] for p in packages_now if p["held"]}
    back = [name for name in planned["held"] if name in installed_now and name not in held_now]
    return {"hold_back": back, "hold_kept": _unique(back + holds(selection, packages_now))}


def dnf_locks(selection: dict, packages_now: list[dict]) -> dict[str, str]:
    """The versionlock entries for the driver's packages as rpm lists them now: the old versions after a rollback,
    the new ones when the rollback could not fetch the old ones (dnf downloads a transaction whole before it
    changes anything, so the node then still has the new driver)."""
    names = set(selection["packages"]) | set(selection.get("rollback_packages") or {})
    return {p["name"]: p["version"] for p in packages_now if p["name"] in names}


def reboot_reason(nvml: dict, target_version: str, mok_import_changed: bool, reboot: str, changing: list) -> str:
    """Why the node must reboot into the installed driver; '' when it needn't."""
    status = nvml.get("status")
    if status in ("driver_not_loaded", "library_not_found"):
        return "the nvidia module is not loaded ({0})".format(status)
    if status == "version_mismatch":
        return "the loaded nvidia module does not match the installed libraries (version mismatch)"
    if nvml.get("driver_version") != target_version:
        return "the loaded nvidia module is {0}, the installed driver is {1}".format(nvml.get("driver_version"), target_version)
    if mok_import_changed:
        return "a Machine Owner Key enrolment is queued (confirm it at the console)"
    if reboot == "always" and changing:
        return "driver_reboot: always and this run changed the driver"
    return ""


def reboot_forbidden(bake: t.Any, container: str | None, reboot: str) -> str:
    """Whose reboot it would not be: the image builder's or the container host's; '' when it is ours."""
    if truthy(bake):
        return "an image bake (driver_bake)"
    if container is not None:
        return "a container ({0})".format(container)
    if reboot == "never":
        return "driver_reboot: never"
    return ""


def reboot_marks(found: dict, required_file: str, packages_file: str) -> list[dict]:
    """node_files' entries that tell Debian's tools a reboot is needed: /run/reboot-required as they write it,
    and the driver named in /run/reboot-required.pkgs (appended, as lineinfile would); none already there."""
    marks = []
    if not (found.get(required_file) or {}).get("exists"):
        marks.append({"path": required_file, "content": "*** System restart required ***\n", "mode": "0644"})
    listed = (found.get(packages_file) or {}).get("content") or ""
    if "nvidia-driver" not in listed.splitlines():
        separator = "\n" if listed and not listed.endswith("\n") else ""
        marks.append({"path": packages_file, "content": listed + separator + "nvidia-driver\n", "mode": "0644"})
    return marks
