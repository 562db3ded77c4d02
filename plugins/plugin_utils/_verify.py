# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The verify role's checks: what a node runs now against what it declares.

Pure functions over observations the role gathers (NVML facts, package
facts, `containerd config dump`, `crictl info`, `docker info`, the CDI spec,
`crictl --version`, the mig_config module's assert result). Each layer's
check is self-contained and returns

    {layer, status, summary, expected, observed, findings}

with status pass | warn | fail (from its worst finding), or not_managed |
not_available | deferred, which are never passes. Controller side only
(Python >= 3.11: tomllib reads containerd's TOML).
"""

from __future__ import annotations

import json
import re
import tomllib
import typing as t

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.nvidia.plugins.module_utils._findings import fails
from ansible_collections.gpufleet.nvidia.plugins.module_utils._gfd_labels import vgpu_guest
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge.packages import toolkit_packages
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.evaluate import Matrix
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.node import PACKAGE_NAMES
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.tables import SEVERITIES, MatrixError
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.versions import driver_branch, parse_version, version_text
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import cdi as cdi_spec
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import driver as driver_version
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import mig as mig_layout
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify.remedies import RUN
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify.result import check, judged
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify.result import finding as _error
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._layers import LAYERS

STATUSES = ("pass", "warn", "fail", "not_managed", "not_available", "deferred")
REPORT_SCHEMA = 1
RUNTIME_NAME = "nvidia"


class VerifyError(ValueError):
    """Observations that cannot be what the role gathers (a bug, not a finding)."""


def not_managed(layer: str, declaration: dict[str, t.Any]) -> dict[str, t.Any]:
    return check(layer, "not_managed", "not managed: {0}".format(declaration.get("reason", "")))


def deferred(layer: str, why: str) -> dict[str, t.Any]:
    return check(
        layer,
        "deferred",
        why,
        findings=[_error(layer, layer, "{0}: {1}".format(layer, why), "verify the node after its first boot", "info")],
    )


def _vars(declaration: dict[str, t.Any]) -> dict[str, t.Any]:
    return declaration.get("vars") or {}


def unpinned_key(layer: str, wanted: dict[str, t.Any], allow: str, fingerprint: str | None) -> list[dict[str, str]]:
    """A warning for a layer whose repository key is trusted without a fingerprint (`allow` set and, where the
    layer has one, the `fingerprint` variable empty): every report says so until the key is pinned."""
    if not boolean(wanted.get(allow), strict=False) or (fingerprint is not None and str(wanted.get(fingerprint) or "").strip()):
        return []
    return [
        _error(
            layer,
            "repository key",
            "{0} is set: a repository key without a fingerprint is trusted as it was served".format(allow),
            "pin the key: set {0} to the repository's signing key and {1} back to false".format(
                fingerprint or "the repository's key fingerprint variable", allow
            ),
            severity="warning",
        )
    ]


# =============================================================================
# driver
# =============================================================================

NVML_PROBLEMS = {
    "library_not_found": ("the NVIDIA user-space driver (libnvidia-ml.so.1) is not installed", "run the driver layer (--tags driver)"),
    "driver_not_loaded": ("the nvidia kernel module is not loaded", "reboot the node (driver_reboot) or load the module (modprobe nvidia); check dkms status"),
    "version_mismatch": ("the loaded kernel module and the installed user-space driver differ", "reboot the node so the installed driver's module loads"),
}


def module_flavour(proc_version: str | None) -> str | None:
    """open | proprietary from /proc/driver/nvidia/version, None when unknown."""
    if not proc_version:
        return None
    return "open" if "Open Kernel Module" in proc_version else "proprietary"


def check_driver(
    declaration: dict[str, t.Any],
    nvml: dict[str, t.Any],
    proc_version: str | None = None,
    nvidia_pci: dict[str, t.Any] | None = None,
    kernel_modules: str | None = None,
) -> dict[str, t.Any]:
    if not declaration.get("managed"):
        return not_managed("driver", declaration)
    wanted = _vars(declaration)
    state = wanted.get("driver_state") or "present"
    status = nvml.get("status")
    observed = {
        "nvml_status": status,
        "driver_version": nvml.get("driver_version"),
        "cuda_driver_version": nvml.get("cuda_driver_version"),
        "gpu_count": nvml.get("gpu_count"),
        "kernel_module": module_flavour(proc_version),
    }
    keys = ("driver_state", "driver_version", "driver_branch", "driver_kernel_module")
    expected = {key: wanted.get(key) for key in keys if wanted.get(key) not in (None, "")}
    if state == "absent":
        found = (
            []
            if not nvml.get("driver_loaded")
            else [
                _error(
                    "driver",
                    "driver_state",
                    "driver {0} is loaded, but driver_state is absent".format(nvml.get("driver_version") or "?"),
                    "re-run the driver layer; reboot to unload the module",
                )
            ]
        )
        return judged("driver", "no NVIDIA driver, as declared", expected, observed, found)
    if status != "ok":
        problem, fix = NVML_PROBLEMS.get(status, ("NVML is not usable ({0})".format(status), "check the driver"))
        return judged("driver", "", expected, observed, [_error("driver", "nvml", "{0}: {1}".format(problem, nvml.get("reason") or status), fix)])
    loaded = str(nvml.get("driver_version") or "")
    found = driver_version.version_findings(loaded, str(wanted.get("driver_version") or ""), str(wanted.get("driver_branch") or ""), RUN)
    flavour = observed["kernel_module"]
    declared_flavour = wanted.get("driver_kernel_module") or "auto"
    if flavour and declared_flavour == "auto":
        try:
            matrix = Matrix()
            guest = bool(vgpu_guest(nvidia_pci))
            declared_flavour = matrix.kernel_module_for(matrix.gpus_from_nvml(nvml), "auto", int(driver_branch(loaded)), guest)[0].flavour or "auto"
        except MatrixError:
            declared_flavour = "auto"
    if flavour and declared_flavour in ("open", "proprietary") and flavour != declared_flavour:
        found.append(
            _error(
                "driver",
                "driver_kernel_module",
                "the {0} kernel modules are loaded, but {1} are declared".format(flavour, declared_flavour),
                "run the driver layer to switch flavours, then reboot",
            )
        )
    # Every kernel the node can boot carries the module of the driver it should run: the pinned one, else the loaded one.
    found.extend(driver_version.kernels_without_module(kernel_modules, str(wanted.get("driver_version") or loaded)))
    # Which fingerprint the unpinned key lacked depends on the OS data: the setting itself is what is reported.
    found.extend(unpinned_key("driver", wanted, "driver_allow_unpinned_key", None))
    return judged("driver", driver_version.summary(loaded, nvml.get("gpu_count"), flavour), expected, observed, found)


# =============================================================================
# container toolkit
# =============================================================================


def _installed(packages: dict[str, t.Any], name: str) -> str | None:
    entries = packages.get(name) or []
    entry = entries[0] if isinstance(entries, list) and entries else None
    return str(entry.get("version")) if isinstance(entry, dict) and entry.get("version") else None


# /dev/char/<major>:<minor> links to the NVIDIA device nodes. runc resolves a
# device it re-applies (systemd daemon-reload) through /dev/char; without the
# link the container loses the GPU (NVIDIA/nvidia-container-toolkit#48). The
# nodes nvidia-ctk itself leaves out (cmd/nvidia-ctk/system/
# create-dev-char-symlinks/existing.go, nodeIsBlocked) are not judged.
DEV_CHAR_FIX = (
    "run `nvidia-ctk system create-dev-char-symlinks --create-all`, or the container_toolkit layer "
    "with container_toolkit_dev_char_links: true (its udev rule also creates them when the driver loads)"
)
DEV_CHAR_IGNORED = ("nvidia-fs", "nvidia-nvswitch", "nvidia-nvlink")


def dev_char_missing(listing: str) -> list[dict[str, str]]:
    """The device nodes whose /dev/char link is missing or points elsewhere.

    `listing` is what the roles' `find` prints (vars of the container_toolkit
    role, __container_toolkit_dev_char_find): `node <hex major>:<hex minor>
    <path>` per NVIDIA character device and `link <major>:<minor> <target>`
    per /dev/char link, after `major <number> <name>` per line of
    /proc/devices. Relative targets are relative to /dev/char. Only nodes of
    the majors the nvidia modules registered count: without the driver there
    are none (nvidia-ctk then refuses to create links).
    """
    nodes: dict[str, str] = {}
    links: dict[str, str] = {}
    majors = set()
    for line in listing.splitlines():
        kind, _sep, rest = line.partition(" ")
        number, _sep, path = rest.partition(" ")
        if kind == "major" and number.isdigit() and path.startswith("nvidia"):
            majors.add(int(number))
        elif kind == "node" and ":" in number and path:
            if path.rsplit("/", 1)[-1].startswith(DEV_CHAR_IGNORED):
                continue
            major, minor = (int(part, 16) for part in number.split(":"))
            nodes[path] = "{0}:{1}".format(major, minor)
        elif kind == "link" and path:
            links[number] = path if path.startswith("/") else "/dev/" + path[3:] if path.startswith("../") else "/dev/char/" + path
    return [
        {"link": "/dev/char/" + name, "target": path, "found": links.get(name) or ""}
        for path, name in sorted(nodes.items())
        if int(name.split(":")[0]) in majors and links.get(name) != path
    ]


def _dev_char_findings(observed: t.Any) -> list[dict[str, str]]:
    """{} or None: not judged; {deferred: why}: an info; {listing: text}: one error per missing link."""
    if not observed:
        return []
    if not isinstance(observed, dict) or not ("deferred" in observed or "listing" in observed):
        raise VerifyError("dev_char: expected {listing: <find output>} or {deferred: <why>}, got " + repr(observed))
    if observed.get("deferred"):
        return [_error("container_toolkit", "/dev/char", "/dev/char links: {0}".format(observed["deferred"]), "verify the node after its first boot", "info")]
    listing = observed["listing"]
    if not isinstance(listing, str):
        raise VerifyError("dev_char: expected the find listing as text, got {0}".format(type(listing).__name__))
    findings = []
    for item in dev_char_missing(listing):
        state = "points to " + item["found"] if item["found"] else "is missing"
        findings.append(
            _error(
                "container_toolkit",
                item["link"],
                "{0}, the link to {1}, {2}: containers lose this device on systemctl daemon-reload".format(item["link"], item["target"], state),
                DEV_CHAR_FIX,
            )
        )
    return findings


def check_container_toolkit(declaration: dict[str, t.Any], packages: dict[str, t.Any], dev_char: t.Any = None) -> dict[str, t.Any]:
    """The packages; with `dev_char` ({listing: <find output>}, see dev_char_missing) also the /dev/char links."""
    if not declaration.get("managed"):
        return not_managed("container_toolkit", declaration)
    wanted = _vars(declaration)
    package_set = wanted.get("container_toolkit_package_set") or "full"
    version = str(wanted.get("container_toolkit_version") or "")
    # The packages of the set (team interface: container_toolkit_package_set), in install order.
    names = toolkit_packages(package_set) or toolkit_packages("full")
    observed = {name: _installed(packages, name) for name in names}
    found = []
    for name, installed in observed.items():
        if installed is None:
            found.append(
                _error("container_toolkit", name, "package {0} is not installed".format(name), "run the container_toolkit layer (--tags container_toolkit)")
            )
        elif version and parse_version(installed) != parse_version(version):
            found.append(
                _error(
                    "container_toolkit",
                    name,
                    "package {0} is {1}, pinned {2}".format(name, installed, version),
                    "run the container_toolkit layer to install the pinned version",
                )
            )
    found.extend(_dev_char_findings(dev_char))
    found.extend(unpinned_key("container_toolkit", wanted, "container_toolkit_allow_unpinned_key", "container_toolkit_gpg_key_fingerprint"))
    # With the base package missing the summary is that finding's message.
    summary = "Container Toolkit {0} ({1} set)".format(observed.get("nvidia-container-toolkit-base") or "not installed", package_set)
    return judged("container_toolkit", summary, {"version": version or None, "package_set": package_set}, observed, found)


# =============================================================================
# container runtime
# =============================================================================


def _containerd_cri(config: dict[str, t.Any]) -> tuple[dict[str, t.Any], dict[str, t.Any], int]:
    """(runtime section, its `containerd` section, config version) of a containerd config."""
    plugins = config.get("plugins") or {}
    version = int(config.get("version") or 1)
    section = plugins.get("io.containerd.cri.v1.runtime") if version >= 3 else plugins.get("io.containerd.grpc.v1.cri")
    section = section or {}
    return section, section.get("containerd") or {}, version


def _containerd_dump(text: str, wanted: dict[str, t.Any], found: list[dict[str, str]]) -> dict[str, t.Any]:
    """Judge `containerd config dump`: the effective config on disk, imports merged."""
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found.append(
            _error("container_runtime", "containerd", "`containerd config dump` is not TOML: {0}".format(exc), "check containerd's configuration files")
        )
        return {}
    section, containerd, version = _containerd_cri(config)
    runtimes = containerd.get("runtimes") or {}
    nvidia = runtimes.get(RUNTIME_NAME)
    observed = {
        "config_version": version,
        # containerd prints its imports in no stable order; a report must not
        # change while the node does not.
        "imports": sorted(config.get("imports") or []),
        "runtimes": sorted(runtimes),
        "nvidia_binary": ((nvidia or {}).get("options") or {}).get("BinaryName"),
        "default_runtime": containerd.get("default_runtime_name"),
        "enable_cdi": section.get("enable_cdi"),
        "cdi_spec_dirs": section.get("cdi_spec_dirs"),
    }
    if nvidia is None:
        found.append(
            _error(
                "container_runtime",
                "runtime",
                "containerd's effective config (`containerd config dump`) has no `{0}` runtime; imports: {1}".format(
                    RUNTIME_NAME, ", ".join(observed["imports"]) or "none"
                ),
                "run the container_runtime layer; it restores the drop-in and its `imports` entry",
            )
        )
    elif observed["nvidia_binary"] and not str(observed["nvidia_binary"]).endswith("nvidia-container-runtime"):
        found.append(
            _error(
                "container_runtime",
                "runtime",
                "containerd's `{0}` runtime runs {1}, not nvidia-container-runtime".format(RUNTIME_NAME, observed["nvidia_binary"]),
                "run the container_runtime layer",
                "warning",
            )
        )
    if wanted.get("container_runtime_set_default") and observed["default_runtime"] != RUNTIME_NAME:
        found.append(
            _error(
                "container_runtime",
                "default_runtime",
                "containerd's default runtime is {0}, but container_runtime_set_default is true".format(observed["default_runtime"]),
                "run the container_runtime layer",
            )
        )
    if wanted.get("container_runtime_cdi"):
        if observed["enable_cdi"] is None:
            found.append(
                _error(
                    "container_runtime",
                    "cdi",
                    "this containerd has no CDI support (its effective config has no enable_cdi; containerd 1.6 drops it)",
                    "upgrade containerd to 1.7 or newer, or set container_runtime_cdi: false",
                    "warning",
                )
            )
        elif observed["enable_cdi"] is not True:
            found.append(_error("container_runtime", "cdi", "containerd's effective config has enable_cdi = false", "run the container_runtime layer"))
    return observed


def _crictl_info(text: str, dump: dict[str, t.Any], wanted: dict[str, t.Any], found: list[dict[str, str]]) -> dict[str, t.Any]:
    """Judge `crictl info`: the configuration the running daemon uses."""
    try:
        info = json.loads(text)
    except ValueError as exc:
        found.append(
            _error("container_runtime", "crictl info", "`crictl info` is not JSON: {0}".format(exc), "check /etc/crictl.yaml and the runtime endpoint")
        )
        return {}
    config = info.get("config") or {}
    runtimes = (config.get("containerd") or {}).get("runtimes") or {}
    running = {
        "runtimes": sorted(runtimes),
        "enable_cdi": config.get("enableCDI"),
        "default_runtime": (config.get("containerd") or {}).get("defaultRuntimeName"),
    }
    if RUNTIME_NAME not in runtimes and RUNTIME_NAME in (dump.get("runtimes") or []):
        found.append(
            _error(
                "container_runtime",
                "restart",
                "the running containerd has no `{0}` runtime although its config does: it was not restarted after the change".format(RUNTIME_NAME),
                "restart containerd",
            )
        )
    elif RUNTIME_NAME not in runtimes and dump:
        pass  # already reported from the config dump
    elif RUNTIME_NAME not in runtimes:
        found.append(
            _error(
                "container_runtime",
                "runtime",
                "the running runtime (`crictl info`) has no `{0}` runtime".format(RUNTIME_NAME),
                "run the container_runtime layer",
            )
        )
    if wanted.get("container_runtime_cdi") and dump.get("enable_cdi") is True and running["enable_cdi"] is False:
        found.append(
            _error("container_runtime", "restart", "the running containerd has CDI off although its config enables it: restart it", "restart containerd")
        )
    return running


def _docker_info(text: str, wanted: dict[str, t.Any], found: list[dict[str, str]]) -> dict[str, t.Any]:
    try:
        info = json.loads(text)
    except ValueError as exc:
        found.append(_error("container_runtime", "docker info", "`docker info` is not JSON: {0}".format(exc), "check that dockerd runs"))
        return {}
    runtimes = info.get("Runtimes") or {}
    observed = {
        "runtimes": sorted(runtimes),
        "default_runtime": info.get("DefaultRuntime"),
        "cdi_spec_dirs": info.get("CDISpecDirs") or [],
        "server_version": info.get("ServerVersion"),
    }
    if RUNTIME_NAME not in runtimes:
        found.append(
            _error(
                "container_runtime",
                "runtime",
                "`docker info` lists no `{0}` runtime (runtimes: {1})".format(RUNTIME_NAME, ", ".join(observed["runtimes"]) or "none"),
                "run the container_runtime layer; it merges the runtime into daemon.json",
            )
        )
    if wanted.get("container_runtime_set_default") and observed["default_runtime"] != RUNTIME_NAME:
        found.append(
            _error(
                "container_runtime",
                "default_runtime",
                "Docker's default runtime is {0}, but container_runtime_set_default is true".format(observed["default_runtime"]),
                "run the container_runtime layer",
            )
        )
    if wanted.get("container_runtime_cdi") and not observed["cdi_spec_dirs"]:
        found.append(
            _error(
                "container_runtime",
                "cdi",
                "`docker info` shows no CDI spec directories: CDI is off",
                "run the container_runtime layer (features.cdi in daemon.json; Docker 25 or newer)",
            )
        )
    return observed


def _crio_config(text: str, wanted: dict[str, t.Any], found: list[dict[str, str]]) -> dict[str, t.Any]:
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found.append(_error("container_runtime", "crio", "`crio status config` is not TOML: {0}".format(exc), "check that CRI-O runs"))
        return {}
    runtime = (config.get("crio") or {}).get("runtime") or {}
    runtimes = runtime.get("runtimes") or {}
    observed = {"runtimes": sorted(runtimes), "default_runtime": runtime.get("default_runtime"), "cdi_spec_dirs": runtime.get("cdi_spec_dirs")}
    if RUNTIME_NAME not in runtimes:
        found.append(
            _error(
                "container_runtime",
                "runtime",
                "CRI-O's effective config has no `{0}` runtime".format(RUNTIME_NAME),
                "run the container_runtime layer; it writes the crio.conf.d drop-in",
            )
        )
    if wanted.get("container_runtime_set_default") and observed["default_runtime"] != RUNTIME_NAME:
        found.append(
            _error(
                "container_runtime",
                "default_runtime",
                "CRI-O's default runtime is {0}, but container_runtime_set_default is true".format(observed["default_runtime"]),
                "run the container_runtime layer",
            )
        )
    return observed


# An engine's version in its own words: `containerd --version` ("containerd
# github.com/containerd/containerd/v2 v2.3.7 <revision>"), `crio --version`
# ("crio version 1.30.0" or "Version:  1.30.0"). The first dotted x.y.z wins:
# the module path's "/v2" has no dots.
_ENGINE_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+\.\d+(?:[-+~][\w.~+-]*)?)")


def _command_text(argv: t.Any) -> str:
    return " ".join(str(part) for part in argv) if isinstance(argv, (list, tuple)) else str(argv or "")


def engine_version(engine: str, packages: dict[str, t.Any], reads: dict[str, t.Any]) -> dict[str, t.Any]:
    """The running engine's version and where it was read, or why it was not.

    The package that owns the engine first (its version is what the matrix
    judges for packaged engines); else the engine itself: `docker info`'s
    ServerVersion, or the version command node_reads_info ran in the same
    call (reads: {command: argv, version: {rc, stdout, stderr}, info: {rc,
    stdout}}), which is how an engine installed from a release tarball is
    read. Returns {engine, version (x.y.z text or None), source, not_checked
    (why, or None)}.
    """
    out: dict[str, t.Any] = {"engine": engine, "version": None, "source": None, "not_checked": None}
    for name in PACKAGE_NAMES.get(engine, ()):
        installed = _installed(packages, name)
        if installed:
            try:
                out.update(version=version_text(parse_version(installed)), source="package {0} {1}".format(name, installed))
                return out
            except MatrixError:
                out["not_checked"] = "package {0}'s version {1} is not a version number".format(name, installed)
                return out
    asked: list[str] = []
    info = reads.get("info") if isinstance(reads.get("info"), dict) else {}
    if engine == "docker":
        asked.append("`docker info`")
        if info.get("rc") == 0:
            try:
                server = json.loads(info.get("stdout") or "").get("ServerVersion")
            except (ValueError, AttributeError):
                server = None
            if server:
                match = _ENGINE_VERSION.search(str(server))
                if match:
                    out.update(version=version_text(parse_version(match.group(1))), source="`docker info` ServerVersion {0}".format(server))
                    return out
    answer = reads.get("version") if isinstance(reads.get("version"), dict) else None
    command = _command_text(reads.get("command"))
    if answer is not None:
        text = "{0}".format(answer.get("stdout") or "").strip()
        if answer.get("rc") == 0:
            match = _ENGINE_VERSION.search(text)
            if match:
                try:
                    out.update(version=version_text(parse_version(match.group(1))), source="`{0}`: {1}".format(command, text.splitlines()[0][:120]))
                    return out
                except MatrixError:
                    pass
            asked.append("`{0}` gave no version ({1})".format(command, text[:120] or "no output"))
        elif answer.get("rc") == 127:
            asked.append("`{0}`: {1} is not on PATH".format(command, command.split(" ", 1)[0]))
        else:
            error = "{0}".format(answer.get("stderr") or answer.get("stdout") or "").strip()
            asked.append("`{0}` failed (rc {1}): {2}".format(command, answer.get("rc"), error[:200] or "no output"))
    elif command:
        asked.append("`{0}` was not run".format(command))
    packages_text = " or ".join(PACKAGE_NAMES.get(engine, ())) or "none known"
    out["not_checked"] = "no package owns {0} ({1}){2}".format(engine, packages_text, "; " + "; ".join(asked) if asked else "")
    return out


def check_container_runtime(declaration: dict[str, t.Any], observed: dict[str, t.Any]) -> dict[str, t.Any]:
    """observed: engine outputs by name (containerd_dump, crictl_info, docker_info, crio_config) and errors."""
    if not declaration.get("managed"):
        return not_managed("container_runtime", declaration)
    wanted = _vars(declaration)
    engine = wanted.get("container_runtime_engine") or "containerd"
    found: list[dict[str, str]] = []
    seen: dict[str, t.Any] = {"engine": engine}
    sources = {
        "containerd": ("containerd_dump", "containerd config dump"),
        "docker": ("docker_info", "docker info"),
        "crio": ("crio_config", "crio status config"),
    }
    key, command = sources.get(engine, ("", engine))
    text = observed.get(key)
    if not text:
        found.append(
            _error(
                "container_runtime",
                engine,
                "`{0}` gave nothing: {1}".format(command, observed.get(key + "_error") or "{0} is not installed".format(engine)),
                "run the container_runtime layer; check that {0} is installed".format(engine),
            )
        )
        return judged("container_runtime", "", {"engine": engine}, seen, found)
    if engine == "containerd":
        seen["config"] = _containerd_dump(text, wanted, found)
        if observed.get("crictl_info"):
            seen["running"] = _crictl_info(observed["crictl_info"], seen["config"], wanted, found)
    elif engine == "docker":
        seen["running"] = _docker_info(text, wanted, found)
    else:
        seen["config"] = _crio_config(text, wanted, found)
    expected = {
        "engine": engine,
        "runtime": RUNTIME_NAME,
        "cdi": bool(wanted.get("container_runtime_cdi")),
        "default": bool(wanted.get("container_runtime_set_default")),
    }
    summary = "{0}: `{1}` runtime present{2}".format(engine, RUNTIME_NAME, ", CDI on" if expected["cdi"] else "")
    return judged("container_runtime", summary, expected, seen, found)


# =============================================================================
# CDI
# =============================================================================


def check_cdi(declaration: dict[str, t.Any], nvml: dict[str, t.Any], spec_text: str | None, spec_path: str) -> dict[str, t.Any]:
    if not declaration.get("managed"):
        return not_managed("cdi", declaration)
    strategies = cdi_spec.strategies(_vars(declaration).get("cdi_device_name_strategy"))
    if nvml.get("status") != "ok":
        return check(
            "cdi",
            "not_available",
            "NVML is not usable ({0}): the spec cannot be compared with the GPUs".format(nvml.get("status")),
            {"path": spec_path, "kind": cdi_spec.KIND, "strategies": list(strategies)},
            findings=[
                _error("cdi", "nvml", "CDI spec not verified: NVML is not usable ({0})".format(nvml.get("status")), "fix the driver layer first", "warning")
            ],
        )
    return cdi_spec.check_spec(spec_text, nvml, strategies, spec_path, RUN)


# =============================================================================
# crictl
# =============================================================================


def check_crictl(declaration: dict[str, t.Any], version_output: str | None, info_error: str | None = None) -> dict[str, t.Any]:
    if not declaration.get("managed"):
        return not_managed("crictl", declaration)
    wanted = _vars(declaration)
    pinned = str(wanted.get("crictl_version") or "")
    kubernetes = str(wanted.get("crictl_kubernetes_version") or "")
    expected = {"version": pinned or None, "kubernetes": kubernetes or None}
    if not version_output:
        return judged("crictl", "", expected, {}, [_error("crictl", "crictl", "crictl is not installed", "run the crictl layer (--tags crictl)")])
    match = re.search(r"v?(\d+\.\d+\.\d+)", version_output)
    if not match:
        return judged(
            "crictl",
            "",
            expected,
            {"output": version_output},
            [_error("crictl", "crictl", "cannot read the crictl version from: {0}".format(version_output), "check /usr/local/bin/crictl")],
        )
    installed = parse_version(match.group(1))
    observed = {"version": "v" + version_text(installed), "runtime_reachable": info_error is None}
    found = []
    if pinned and installed != parse_version(pinned):
        found.append(_error("crictl", "crictl_version", "crictl {0} is installed, pinned {1}".format(observed["version"], pinned), "run the crictl layer"))
    elif kubernetes:
        try:
            minor = parse_version(kubernetes)[:2]
        except MatrixError:
            minor = None
        if minor and tuple(installed[:2]) != tuple(minor):
            found.append(
                _error(
                    "crictl",
                    "crictl_kubernetes_version",
                    "crictl {0} does not fit Kubernetes {1}: cri-tools follows Kubernetes minors".format(observed["version"], version_text(minor)),
                    'use crictl v{0}.x (crictl_version: "" derives it)'.format(version_text(minor)),
                    "error" if not pinned else "warning",
                )
            )
    if info_error is not None:
        found.append(
            _error(
                "crictl",
                "crictl info",
                "crictl cannot reach the container runtime: {0}".format(info_error),
                "check runtime-endpoint in /etc/crictl.yaml (run the crictl layer)",
            )
        )
    return judged("crictl", "crictl {0}".format(observed["version"]), expected, observed, found)


# =============================================================================
# workload
# =============================================================================

# Why a workload container failed, from the engine's own words, and what to
# do about it (first match wins).
# (pattern, cause, fix); the patterns match case-insensitively.
_WORKLOAD_CAUSES = (
    (
        r"unresolvable CDI devices|CDI device injection failed|could not select device driver \"cdi\"|failed to inject CDI",
        "the engine cannot resolve the CDI device",
        "regenerate the CDI spec (run the cdi layer) and enable CDI in the engine (container_runtime_cdi: true)",
    ),
    (
        r"no runtime for|unknown or invalid runtime name|runtime handler .* not (?:found|supported)",
        "the engine does not know the runtime handler",
        "run the container_runtime layer (it configures the handler)",
    ),
    (
        r"time limit|timed out|deadline",
        "the container did not finish in time",
        "find what hangs in the container (the check command, a hook), or raise verify_workload_timeout",
    ),
    (
        r"does not see",
        "the container does not see every device NVML reports",
        "regenerate the CDI spec (run the cdi layer); check the /dev/char links (nvidia-ctk system create-dev-char-symlinks --create-all)",
    ),
    (r"reports driver", "the container runs another driver's libraries than the host", "regenerate the CDI spec after the driver change (run the cdi layer)"),
)
WORKLOAD_CAUSES = tuple((re.compile(pattern, re.IGNORECASE), cause, fix) for pattern, cause, fix in _WORKLOAD_CAUSES)


def workload_plan(
    nvml: dict[str, t.Any], layers: dict[str, t.Any], settings: dict[str, t.Any], cuda_images: list[dict[str, t.Any]] | None = None
) -> dict[str, t.Any]:
    """The workload check's containers for one host: which engine and handler, and per container the CDI devices
    it asks for and the GPU and MIG UUIDs it must see. `managed` false (with `reason`) when the check does not run."""
    runtime = layers.get("container_runtime") or {}
    plan: dict[str, t.Any] = {"managed": False, "reason": "", "run": False, "devices": [], "archive": ""}
    if not settings.get("enabled"):
        plan["reason"] = "verify_workload is false"
        return plan
    if not runtime.get("managed"):
        plan["reason"] = "no engine is configured (the container_runtime layer is not managed)"
        return plan
    wanted = _vars(runtime)
    engine = str(wanted.get("container_runtime_engine") or "containerd")
    plan.update(
        managed=True,
        engine=engine,
        runtime_handler=str(wanted.get("container_runtime_nvidia_runtime_name") or RUNTIME_NAME),
        image=str(settings.get("image") or ""),
    )
    archive_url = str(settings.get("archive_url") or "")
    if archive_url and not str(settings.get("archive_checksum") or "").startswith("sha256:"):
        raise VerifyError(
            "verify_workload_image_archive_checksum: give the archive's sha256 as 'sha256:<hex>' (downloads are verified); got '{0}'".format(
                settings.get("archive_checksum") or ""
            )
        )
    # Where the archive is kept on the node ("" without one).
    plan["archive"] = str(settings.get("image_dir") or "").rstrip("/") + "/" + archive_url.rsplit("/", 1)[-1] if archive_url else ""
    if not plan["image"]:
        plan["reason"] = "verify_workload_image is not set"
        return plan
    if nvml.get("status") != "ok":
        plan["reason"] = "NVML is not usable ({0})".format(nvml.get("status"))
        return plan
    gpus = nvml.get("gpus") or []
    migs = [(gpu, device) for gpu in gpus for device in ((gpu.get("mig") or {}).get("devices") or [])]
    # `all` brings a GPU's device node with the GPU itself or with its MIG
    # devices: a GPU in MIG mode without any is not in the container.
    seen = [g for g in gpus if g.get("uuid") and (not (g.get("mig") or {}).get("enabled") or (g.get("mig") or {}).get("devices"))]
    plan["devices"].append({"cdi": [cdi_spec.KIND + "=all"], "gpus": [g["uuid"] for g in seen], "migs": [d["uuid"] for _g, d in migs if d.get("uuid")]})
    # Every MIG device NVML reports, whoever made it (the mig layer, or a MIG
    # manager of its own), asked for by its CDI name, as a pod asks for MIG
    # devices: those of one GPU in one container, which must see them and
    # that GPU, nothing else. One container per GPU rather than per device:
    # a container's start (its CDI hooks) is what the check costs, and an
    # unresolvable device is named by the engine either way.
    strategies = cdi_spec.strategies(_vars(layers.get("cdi") or {}).get("cdi_device_name_strategy"))
    if settings.get("mig_devices") and "uuid" in strategies:
        for gpu in gpus:
            devices = [d["uuid"] for g, d in migs if g is gpu and d.get("uuid")]
            if devices:
                plan["devices"].append({"cdi": [cdi_spec.KIND + "=" + uuid for uuid in devices], "gpus": [gpu["uuid"]], "migs": devices})
    for image in cuda_images or []:
        if image.get("run"):
            plan["devices"].append(
                {"cdi": [cdi_spec.KIND + "=all"], "gpus": plan["devices"][0]["gpus"], "migs": plan["devices"][0]["migs"], "image": image["name"]}
            )
    plan["run"] = True
    return plan


def _workload_cause(error: str) -> tuple[str, str]:
    for pattern, cause, fix in WORKLOAD_CAUSES:
        if pattern.search(error):
            return cause, fix
    return "the container could not run the check", "read the engine's log (journalctl -u <engine>)"


def check_workload(plan: dict[str, t.Any], result: dict[str, t.Any] | None) -> dict[str, t.Any]:
    """Judge the gpu_workload module's result against the plan."""
    if not plan.get("managed"):
        return not_managed("workload", plan)
    where = "{0} (runtime handler {1})".format(plan["engine"], plan["runtime_handler"] or "default")
    expected = {
        "engine": plan["engine"],
        "runtime_handler": plan["runtime_handler"],
        "image": plan.get("image"),
        "containers": [{"cdi": d["cdi"], "image": d.get("image", plan.get("image"))} for d in plan["devices"]],
    }
    if not plan.get("run"):
        fix = (
            "set verify_workload_image to an image pinned by digest (e.g. a CUDA base image from the site's "
            "registry or the offline bundle), or verify_workload: false"
            if plan["reason"] == "verify_workload_image is not set"
            else "fix the driver layer first"
        )
        return judged("workload", "", expected, {}, [_error("workload", where, "workload check not run: {0}".format(plan["reason"]), fix, "warning")])
    result = result or {}
    image = result.get("image") or {}
    runs = result.get("runs") or []
    observed = {
        "image": {key: image.get(key) for key in ("ref", "present", "error")},
        # No timings: the report is deterministic, so a re-run that
        # finds the node unchanged rewrites nothing.
        "runs": [{key: run.get(key) for key in ("cdi", "image", "status", "gpus", "migs", "driver_version", "missing", "unexpected", "error")} for run in runs],
    }
    # The CUDA images' outcomes, for the fleet report's image matrix.
    cuda_images = {d["image"] for d in plan["devices"] if d.get("image")}
    observed["images"] = {run["image"]: {"status": "pass" if run.get("status") == "pass" else "fail"} for run in runs if run.get("image") in cuda_images}
    found = []
    for run in runs:
        if run.get("status") == "pass":
            continue
        cdi = ", ".join(run.get("cdi") or [])
        error = str(run.get("error") or "no result")
        if run.get("status") == "skipped":
            return check("workload", "not_available", "workload check skipped: {0}".format(error), expected, observed)
        if error.startswith("image "):
            cause, fix = (
                "the image is missing",
                ("load it from the offline bundle (verify_workload_image_archive_url) or make the site's registry reachable (verify_workload_pull: true)"),
            )
        else:
            cause, fix = _workload_cause(error)
        found.append(
            _error(
                "workload",
                "{0} {1}".format(where, cdi),
                "{0}, CDI device {1}{2}: {3}: {4}".format(where, cdi, ", image " + run["image"] if run.get("image") else "", cause, error),
                fix,
            )
        )
    summary = "{0}: {1} container(s) saw the host's GPUs and driver".format(where, len(runs))
    return judged("workload", summary, expected, observed, found)


# =============================================================================
# MIG
# =============================================================================


def check_mig(
    declaration: dict[str, t.Any], available: bool, result: dict[str, t.Any] | None = None, module: str = "gpufleet.nvidia.mig_config", configured: bool = True
) -> dict[str, t.Any]:
    if not declaration.get("managed"):
        return not_managed("mig", declaration)
    label = _vars(declaration).get("mig_label")
    expected = {"label": label}
    if not configured:
        return judged(
            "mig",
            "",
            expected,
            {},
            [
                _error(
                    "mig",
                    "mig_config",
                    "mig_label '{0}' is declared, but neither mig_config nor mig_config_src".format(label),
                    "declare the mig-parted configuration (mig_config, or mig_config_src on the controller)",
                )
            ],
        )
    if not available:
        return check(
            "mig",
            "not_available",
            "MIG layout not asserted: {0} is not available".format(module),
            expected,
            findings=[
                _error(
                    "mig",
                    "mig_config",
                    "MIG layout '{0}' was not asserted: {1} is not part of this collection version".format(label, module),
                    "install a gpufleet.nvidia version with {0}; meanwhile check `nvidia-smi mig -lgi`".format(module),
                    "warning",
                )
            ],
        )
    result = result or {}
    differences = result.get("differences")
    observed = {
        "diff": result.get("diff"),
        "reboot_required": result.get("reboot_required"),
        "reset_required": result.get("reset_required"),
        "differences": differences,
    }
    if not isinstance(differences, list):
        # `differences` is what state=asserted compares; without it the module
        # stopped before comparing (bad config, NVML unusable). `failed` cannot
        # tell: the role registers the assert under `failed_when: false`, and
        # Ansible then records `failed: false` whatever the module said.
        return judged(
            "mig",
            "",
            expected,
            observed,
            [
                _error(
                    "mig",
                    label or "mig",
                    "MIG layout '{0}' was not asserted: {1}".format(label, result.get("msg") or "the mig_config result has no comparison (differences)"),
                    "fix what the message names, then run the mig layer (--tags mig)",
                )
            ],
        )
    found = mig_layout.findings(str(label), differences, result.get("plan") or [], RUN)
    if not found and (result.get("reboot_required") or result.get("reset_required")):
        found.append(
            _error(
                "mig",
                label or "mig",
                "MIG layout '{0}' waits for a GPU reset or reboot".format(label),
                "reboot the node (or reset the GPUs) to finish the MIG mode change",
                "warning",
            )
        )
    return judged("mig", "MIG layout '{0}' applied".format(label), expected, observed, found)


# =============================================================================
# matrix (versions re-checked as installed)
# =============================================================================


def check_matrix(result: dict[str, t.Any] | None) -> dict[str, t.Any]:
    if not result or "findings" not in result:
        return check(
            "matrix",
            "fail",
            "the version matrix did not run: {0}".format((result or {}).get("msg")),
            findings=[
                _error(
                    "matrix", "version_matrix", "the version matrix did not run: {0}".format((result or {}).get("msg")), "see the version_matrix task's error"
                )
            ],
        )
    findings = result["findings"]
    count = len([f for f in findings if f["severity"] != "info"])
    return judged(
        "matrix", "installed versions fit together{0}".format("" if not count else " ({0} finding(s))".format(count)), {}, result.get("matrix") or {}, findings
    )


# =============================================================================
# report
# =============================================================================


def _mig_units(gpu: dict[str, t.Any]) -> int | None:
    """Placement units of the GPU's memory-slice grid (from NVML profiles, else the model table)."""
    mig = gpu.get("mig") or {}
    ends = [p["start"] + p["size"] for profile in mig.get("profiles") or [] for p in profile.get("placements") or []]
    if ends:
        return max(ends)
    matrix = Matrix()
    model = matrix.model_for(str(gpu.get("name") or ""))
    if model and model.get("mig_units"):
        return int(model["mig_units"])
    ends = [gi["placement"]["start"] + gi["placement"]["size"] for gi in mig.get("gpu_instances") or []]
    return max(8, *ends) if ends else (8 if mig.get("capable") else None)


def _report_fabric(fabric: t.Any) -> dict[str, t.Any] | None:
    """A GPU's fabric registration for the report: None where it has none, or it was not read."""
    if not isinstance(fabric, dict) or fabric.get("state") in (None, "not_supported"):
        return None
    return {key: fabric.get(key) for key in ("state", "status", "clique_id", "cluster_uuid")}


def report_gpus(nvml: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    """The GPUs of a report: identity and the MIG layout as placements (what the picture draws)."""
    gpus = []
    for gpu in nvml.get("gpus") or []:
        mig = gpu.get("mig") or {}
        gpus.append(
            {
                "index": gpu.get("index"),
                "name": gpu.get("name"),
                "uuid": gpu.get("uuid"),
                "architecture": gpu.get("architecture"),
                "memory_total_mib": gpu.get("memory_total_mib"),
                # The NVLink fabric registration, where the health layer read one (NVSwitch systems).
                "fabric": _report_fabric((gpu.get("health") or {}).get("fabric")),
                "mig": {
                    "capable": bool(mig.get("capable")),
                    "enabled": bool(mig.get("enabled")),
                    "pending_enabled": bool(mig.get("pending_enabled")),
                    "units": _mig_units(gpu),
                    "gpu_instances": [
                        {
                            "id": gi.get("id"),
                            "profile": gi.get("profile_name") or "profile {0}".format(gi.get("profile_id")),
                            "start": (gi.get("placement") or {}).get("start"),
                            "size": (gi.get("placement") or {}).get("size"),
                            "compute_instances": [
                                {"id": ci.get("id"), "start": (ci.get("placement") or {}).get("start"), "size": (ci.get("placement") or {}).get("size")}
                                for ci in gi.get("compute_instances") or []
                            ],
                        }
                        for gi in mig.get("gpu_instances") or []
                    ],
                },
            }
        )
    return gpus


def not_read(nvml: dict[str, t.Any], versions: dict[str, t.Any], not_checked: dict[str, t.Any] | None = None) -> dict[str, str]:
    """What the report could not read, and why: `not_checked` as given (the engine's version, say), and the
    driver, CUDA and GPU fields when NVML did not answer. Empty values are dropped."""
    found = {str(key): str(why) for key, why in (not_checked or {}).items() if why}
    status = nvml.get("status")
    if status != "ok":
        why = "NVML status {0}".format(status) if status else "NVML was not read"
        for key in ("driver", "cuda"):
            if not versions.get(key):
                found.setdefault(key, why)
        found.setdefault("gpus", why)
    return dict(sorted(found.items()))


def build_report(
    host: str,
    checks: list[dict[str, t.Any]],
    nvml: dict[str, t.Any],
    versions: dict[str, t.Any] | None = None,
    not_checked: dict[str, t.Any] | None = None,
    boot_id: str | None = None,
    time: str | None = None,
    previous: t.Any = None,
    extra: dict[str, t.Any] | None = None,
) -> dict[str, t.Any]:
    """One host's report: checks in site.yml order, versions, GPUs, and `not_checked` (what could not be read,
    and why) where anything was not.

    `boot_id` (the node's /proc/sys/kernel/random/boot_id) says which boot the readings belong to: a reader
    (the Slurm guard) ignores a report of an earlier boot, whose findings a reboot may have cleared. `time` is
    when the readings were taken; where `previous` (the report the node holds) reads the same but for its time,
    its time is kept, so a run that finds the node unchanged rewrites nothing (idempotence) and `time` says
    since when, in this boot, the node has read so. `extra`: more keys of the report (the role's cuda_images and
    schedulers), part of what must read the same."""
    order = {layer: i for i, layer in enumerate(LAYERS + ("dra", "workload", "health", "matrix"))}
    checks = sorted(checks, key=lambda c: order.get(c["layer"], len(order)))
    findings = [f for c in checks for f in c["findings"]]
    counts = {level: sum(1 for f in findings if f["severity"] == level) for level in SEVERITIES}
    statuses = [c["status"] for c in checks]
    status = "fail" if "fail" in statuses else "warn" if ("warn" in statuses or "not_available" in statuses) else "pass"
    report = {
        "schema": REPORT_SCHEMA,
        "host": host,
        "status": status,
        "summary": counts,
        "versions": dict(sorted((versions or {}).items())),
        "checks": checks,
        "gpus": report_gpus(nvml),
    }
    unread = not_read(nvml, versions or {}, not_checked)
    if unread:
        report["not_checked"] = unread
    report.update(extra or {})
    if boot_id:
        report["boot_id"] = boot_id.strip()
    if time:
        report["time"] = time
        # Compared as written (JSON): the report built here may hold tuples where the file holds lists.
        if isinstance(previous, dict) and previous.get("time") and _as_written(dict(previous, time=time)) == _as_written(report):
            report["time"] = previous["time"]
    return report


def _as_written(report: dict[str, t.Any]) -> str:
    return json.dumps(report, sort_keys=True, default=str)


def previous_report(text: t.Any) -> dict[str, t.Any] | None:
    """The report the node holds (verify_report_path), or None where it is missing or not a report."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        report = json.loads(text)
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def gate(report: dict[str, t.Any], fail_on: str) -> list[dict[str, t.Any]]:
    """Findings at or above fail_on (error | warning | never)."""
    return fails([f for c in report["checks"] for f in c["findings"]], fail_on)


def stats(report: dict[str, t.Any]) -> dict[str, t.Any]:
    """What set_stats returns to AWX for one host: status, counts, versions, each layer's status, the findings
    that are not info; and what was not read (a null version is never "none installed")."""
    out = {
        "status": report["status"],
        "summary": report["summary"],
        "versions": report["versions"],
        "checks": {item["layer"]: item["status"] for item in report["checks"]},
        "findings": [finding for item in report["checks"] for finding in item["findings"] if finding["severity"] != "info"],
    }
    if report.get("not_checked"):
        out["not_checked"] = report["not_checked"]
    return out


def summary_lines(report: dict[str, t.Any]) -> list[str]:
    """One line per layer for a person reading the play's output."""
    counts = report["summary"]
    lines = ["{0}: {1} ({2} error(s), {3} warning(s))".format(report["host"], report["status"].upper(), counts["error"], counts["warning"])]
    for item in report["checks"]:
        lines.append("  {0:<18} {1:<13} {2}".format(item["layer"], item["status"], item["summary"]))
    return lines
