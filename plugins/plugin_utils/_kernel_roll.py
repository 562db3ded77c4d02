# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The kernel roll's plan (the `kernel` layer of playbooks/upgrade.yml, which
playbooks/kernel_roll.yml rolls alone): pure functions of the declaration and
what driver_info and apt-cache read on the node. Controller side.

The order the roll follows, and why:

1. the kernel with what the module needs, in one apt transaction (Debian's
   headers depend on the image): the headers, which DKMS builds against, or
   the precompiled module package. The node is still in service;
2. the proof: the driver's module, at the driver's version, in the new
   kernel's module index (modinfo), and under Secure Boot signed with the key
   the running module was accepted with. dkms's exit status is not the proof:
   some setups report success for a build that produced nothing, and missing
   headers are only a skip message;
3. then only, drained, the reboot.

A kernel that cannot be proven is removed again (its headers, module package
and image, never the running kernel): Debian makes the newest installed
kernel the boot default, so no later reboot by anyone lands in it, and the
node stays in service on the kernel it runs. A kernel whose module package
or headers the node's repositories do not offer is refused before anything
is installed.
"""

from __future__ import annotations

import re
import typing as t

# `apt-cache policy` output read as the driver's plan reads it: a package and its candidate version.
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._driver_plan import APT_POLICY

# A Debian/Ubuntu kernel release as uname -r prints it: 6.1.0-41-amd64, 6.12.57+deb12-amd64, 6.8.0-88-generic.
RELEASE = re.compile(r"^(?P<version>\d+\.\d+(?:\.\d+)?)[-+][0-9A-Za-z.+~-]+$")
# The kernel's own version inside a release: 6.12.57 of 6.12.57+deb12-amd64.
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")
# The first dependency of a metapackage that is a kernel image: `Depends: linux-image-6.12.57+deb12-amd64 (= ...)`.
_DEPENDS = re.compile(r"(?m)^Depends: (?P<list>.*)$")
# A build line worth showing from DKMS's make.log.
_BUILD_ERROR = re.compile(r"(error|Error|\*\*\*)")

RELEASE_FIX = 'give the kernel release as `uname -r` prints it (6.12.57+deb12-amd64), or "" for the newest that kernel_roll_metapackage offers'


def _numbers(release: str) -> tuple[int, ...]:
    match = _VERSION.match(release)
    return tuple(int(part or 0) for part in match.groups()) if match else ()


def below_minimum(release: str, branch: t.Any, minimum: dict) -> str | None:
    """The minimum release `release` is below, for the driver branch; None when it is not (or unknown)."""
    if not release or branch in (None, "") or not minimum:
        return None
    try:
        if int(str(branch)) < int(minimum["first_branch"]):
            return None
    except ValueError:
        return None
    return minimum["release"] if _numbers(release) < _numbers(minimum["release"]) else None


def settings_errors(settings: dict, branch: t.Any, minimum: dict) -> list[str]:
    """Every problem with the roll's kernel settings, each naming the variable and the fix (controller, before any node)."""
    errors = []
    release = settings.get("kernel_roll_release")
    if not isinstance(release, str) or (release and not RELEASE.fullmatch(release)):
        errors.append("kernel_roll_release: {0!r} is not a kernel release; {1}.".format(release, RELEASE_FIX))
    elif release:
        floor = below_minimum(release, branch, minimum)
        if floor:
            errors.append(
                "kernel_roll_release: {0} is older than Linux {1}, the oldest kernel NVIDIA's R{2} modules support; declare a newer kernel.".format(
                    release, floor, branch
                )
            )
    for name in ("kernel_roll_metapackage", "kernel_roll_image_prefix", "kernel_roll_headers_prefix"):
        value = settings.get(name)
        if not isinstance(value, str) or not value or not re.fullmatch(r"[a-z0-9][a-z0-9+.-]*", value):
            errors.append("{0}: {1!r} is not a package name (or prefix); give one, such as the default.".format(name, value))
    suite = settings.get("kernel_roll_suite")
    if not isinstance(suite, str) or (suite and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.+_-]*", suite)):
        errors.append('kernel_roll_suite: {0!r} is not an apt suite; give one such as bookworm-backports, or "" for apt\'s own choice.'.format(suite))
    return errors


def offered_release(show_output: str, image_prefix: str) -> str | None:
    """The kernel release a metapackage's candidate depends on (`apt-cache show --no-all-versions` output)."""
    for match in _DEPENDS.finditer(show_output or ""):
        for alternative in re.split(r"[,|]", match.group("list")):
            name = alternative.strip().split(" ", 1)[0]
            if name.startswith(image_prefix) and RELEASE.fullmatch(name[len(image_prefix) :]):
                return name[len(image_prefix) :]
    return None


def _offered(policy_output: str) -> set[str]:
    return {name for name, candidate in APT_POLICY.findall(policy_output or "") if candidate != "(none)"}


def _driver_module(kernels: dict, release: str) -> tuple[str | None, str]:
    """The driver module version the new kernel must carry (the running kernel's; in a container or a bake, where
    the running kernel is not the node's, the one every other installed kernel carries), or None and why."""
    installed = [k for k in kernels.get("installed") or [] if k.get("release") != release]
    running = next((k for k in installed if k.get("running")), None)
    if running is not None:
        if running.get("module_version"):
            return running["module_version"], ""
        return None, "the running kernel {0} has no NVIDIA module".format(running["release"])
    versions = {k.get("module_version") for k in installed}
    if len(versions) == 1 and None not in versions:
        return versions.pop(), ""
    return None, "the installed kernels do not carry one NVIDIA module ({0})".format(
        ", ".join("{0}: {1}".format(k["release"], k.get("module_version") or "none") for k in installed) or "no kernel installed"
    )


def _build(driver: dict, kernels: dict) -> tuple[str | None, str]:
    """dkms, or precompiled with the module package's name before its kernel release; None where neither is found."""
    if any(entry.get("module") for entry in driver.get("dkms") or []):
        return "dkms", ""
    releases = [k["release"] for k in kernels.get("installed") or []] + [kernels.get("running") or ""]
    for package in driver.get("packages") or []:
        for release in releases:
            name = package.get("name", "")
            if release and name.startswith("linux-modules-nvidia-") and name.endswith("-" + release):
                return "precompiled", name[: -len(release)]
    return None, ""


def plan(declaration: dict, driver: dict, policy_output: str | None, reboot_forbidden: str) -> dict[str, t.Any]:
    """What the roll does on this node. `declaration` carries the release to roll to (kernel_roll_release, or the
    one offered_release() found; "" when none was); `driver` is driver_info's result, read with that release in
    staged_kernels; `policy_output` is `apt-cache policy` of the plan's `ask` (None on the first call, which only
    names them); `reboot_forbidden` says why a reboot is not ours ("" when it is)."""
    kernels = driver.get("kernels") or {}
    running = kernels.get("running") or ""
    release = declaration.get("release") or ""
    result: dict[str, t.Any] = {
        "release": release,
        "running": running,
        "needed": False,
        "stage": False,
        "install_image": False,
        "reboot": False,
        "reboot_required": False,
        "module_packages": [],
        "image_package": "",
        "remove_on_failure": [],
        "expected_module": None,
        "ask": [],
        "error": "",
        "findings": [],
        "summary": "",
    }

    def refuse(message: str) -> dict[str, t.Any]:
        result["error"] = message
        result["findings"] = [{"severity": "error", "message": message}]
        result["summary"] = message
        return result

    if driver.get("package_manager") != "apt":
        return refuse(
            "the kernel roll installs kernels with apt (Debian, Ubuntu); this node has {0}.".format(
                driver.get("package_manager") or "no package manager it knows"
            )
        )
    if not release:
        return refuse(
            "kernel_roll_metapackage {0} offers no kernel image{1}; check the node's apt sources, or declare kernel_roll_release.".format(
                declaration["metapackage"], " in " + declaration["suite"] if declaration.get("suite") else ""
            )
        )
    if release == running:
        result["summary"] = "runs kernel {0}".format(release)
        return result
    expected, why = _driver_module(kernels, release)
    if expected is None:
        return refuse("no kernel can be proven: {0}. Bring the driver in place first (site.yml, the driver layer).".format(why))
    result["expected_module"] = expected
    build, precompiled_prefix = _build(driver, kernels)
    if build is None:
        return refuse(
            "the NVIDIA module comes neither from DKMS nor from a linux-modules-nvidia package; the roll cannot build or install it for {0}.".format(release)
        )
    staged = next((k for k in kernels.get("staged") or [] if k.get("release") == release), None)
    if staged is None:
        raise ValueError("kernel_roll_plan: driver_info was not asked for the staged kernel {0}".format(release))
    result["build"] = build
    result["image_package"] = declaration["image_prefix"] + release
    if build == "dkms":
        result["module_packages"] = [declaration["headers_prefix"] + release]
    else:
        result["module_packages"] = [precompiled_prefix + release]
    result["remove_on_failure"] = result["module_packages"] + [result["image_package"]]
    proven = proof_failure(result, staged, kernels, driver) == ""
    if staged.get("bootable") and proven:
        if reboot_forbidden:
            result["reboot_required"] = True
            result["summary"] = "kernel {0} is installed with the NVIDIA {1} module; the reboot into it is not ours ({2})".format(
                release, expected, reboot_forbidden
            )
            return result
        result.update(needed=True, reboot=True)
        result["findings"] = [{"severity": "error", "message": "kernel {0} is proven and installed, and the node still runs {1}".format(release, running)}]
        result["summary"] = "reboot into kernel {0} (proven, installed), from {1}".format(release, running)
        return result
    result["ask"] = [name for name in result["remove_on_failure"] if not (staged.get("bootable") and name == result["image_package"])]
    missing = [] if policy_output is None else [name for name in result["ask"] if name not in _offered(policy_output)]
    if missing:
        return refuse(
            "the node's repositories offer no {0} for kernel {1}{2}, so the NVIDIA module cannot be proven for it; "
            "it stays off the node, which keeps {3}. Declare another kernel_roll_release, or roll later (precompiled "
            "module packages follow new kernels after some days).".format(
                " or ".join(missing), release, " in " + declaration["suite"] if declaration.get("suite") else "", running
            )
        )
    result.update(needed=True, stage=True, install_image=not staged.get("bootable"), reboot=not reboot_forbidden, reboot_required=bool(reboot_forbidden))
    result["findings"] = [{"severity": "error", "message": "kernel {0} is declared and the node runs {1}".format(release, running)}]
    result["summary"] = "stage kernel {0} ({1}), prove the NVIDIA {2} module for it, then {3}".format(
        release, build, expected, "reboot into it" if not reboot_forbidden else "leave the reboot to the node's owner (" + reboot_forbidden + ")"
    )
    return result


def proof_failure(planned: dict, staged: dict, kernels: dict, driver: dict) -> str:
    """Why the staged kernel does not carry the driver (the module missing, another version, or under Secure Boot
    signed with another key than the running module); "" when it does."""
    release, expected = planned["release"], planned["expected_module"]
    if staged.get("module_version") != expected:
        return "kernel {0} has {1} NVIDIA module, the node's driver is {2}".format(
            release, "no" if not staged.get("module_version") else "the " + staged["module_version"], expected
        )
    if (driver.get("secure_boot") or {}).get("enabled") and staged.get("sig_key") != kernels.get("running_sig_key"):
        return "Secure Boot is on and kernel {0}'s NVIDIA module is {1}, not with the key the running module is signed with ({2})".format(
            release, "signed with key " + staged["sig_key"] if staged.get("sig_key") else "not signed", kernels.get("running_sig_key") or "none"
        )
    return ""


def failure_message(planned: dict, cause: str, make_log: str, removed: list) -> str:
    """The message of a kernel the roll could not prove: which kernel, why (with the build's failing lines), what
    was removed, and what the node keeps."""
    lines = [line.strip() for line in (make_log or "").splitlines() if line.strip()]
    failing = [line for line in lines if _BUILD_ERROR.search(line)][:6] or lines[-6:]
    return (
        "kernel {release} cannot carry the NVIDIA {expected} module: {cause}{log}. The roll did not reboot into it: "
        "{removed}the node keeps booting {running} and stays in service. Declare another kernel_roll_release, or roll "
        "once a driver release builds against {release}.".format(
            release=planned["release"],
            expected=planned["expected_module"],
            cause=cause.rstrip(". "),
            log=(" (DKMS make.log: " + " | ".join(failing) + ")") if failing else "",
            removed=("removed again: " + ", ".join(removed) + "; ") if removed else "",
            running=planned["running"],
        )
    )
