# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure decisions of the driver role: its plan, kernel-module flavour and package versions.

The data (GPU models and architectures, the flavours each runs) is the
knowledge base's (plugins/module_utils/_knowledge), the tables the version
matrix reads too; these functions only apply it. Both
deciding filters return {"error": ...} instead of raising, so the role can
fail with a message that names the variable and the fix, before it changes
anything.
"""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.evaluate import Matrix
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.versions import (
    KERNEL_MODULE_REQUESTS,
    flavours_for,
    gpu_kind,
    kernel_module_flavour,
    open_modules_first_branch,
)
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _driver_plan
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def _upstream_version(version: t.Any) -> str | None:
    """NVIDIA's version inside a package version; None for anything else."""
    return _driver_plan.upstream_version(version)


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


def driver_kernel_module(gpus: list, requested: str, branch: t.Any, source: str, vgpu_guest: t.Any = False) -> dict[str, t.Any]:
    """Decide (auto) or check the kernel-module flavour for a node's GPUs.

    gpus: NVML GPUs (dicts with name and architecture) or declared model names;
    source: where they came from ("nvml" or "driver_gpu_models"), for messages;
    vgpu_guest: the node is a vGPU guest (driver_info's read of its PCI functions).
    The decision is the knowledge base's one rule (matrix.versions.kernel_module_flavour,
    which preflight and verify ask too); this only words its answer for the role.
    """
    if requested not in KERNEL_MODULE_REQUESTS:
        raise AnsibleFilterError("driver_kernel_module: unknown flavour {0!r}".format(requested))
    try:
        branch_number = int(str(branch))
    except ValueError:
        raise AnsibleFilterError("driver_kernel_module: branch {0!r} is not a number".format(branch)) from None

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


def _select_versions(
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
        upstream = _upstream_version(full)
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
        matching = [v for v in versions if _upstream_version(v) == chosen]
        if not matching:
            result["error"] = "{0} {1} is not offered by {2} ({0} has {3}); the repository is incomplete for this driver version".format(
                package, chosen, where, ", ".join(versions) or "no versions"
            )
            return result
        result["packages"][package] = matching[0]
    return result


def _mapping(name: str, argument: str, value: t.Any) -> dict:
    if not isinstance(value, dict):
        raise AnsibleFilterError("{0}: {1} must be a mapping, not {2}".format(name, argument, type(value).__name__))
    return value


def driver_decision(declaration: dict, os_data: dict, info: dict, nvml: dict) -> dict[str, t.Any]:
    """Validate the declaration; settle the branch, the module build and the kernel-module flavour."""
    for argument, value in (("declaration", declaration), ("os_data", os_data), ("info", info), ("nvml", nvml)):
        _mapping("driver_decision", argument, value)
    return _driver_plan.decide(declaration, os_data, info, nvml, driver_kernel_module)


def driver_plan(decision: dict, declaration: dict, os_data: dict, facts: dict, info: dict) -> dict[str, t.Any]:
    """What to install and from where, and how far the node is from it."""
    for argument, value in (("decision", decision), ("declaration", declaration), ("os_data", os_data), ("facts", facts), ("info", info)):
        _mapping("driver_plan", argument, value)
    try:
        return _driver_plan.plan(decision, declaration, os_data, facts, info)
    except KeyError as missing:
        raise AnsibleFilterError("driver_plan: the OS data or the declaration lacks {0}".format(missing)) from None


def driver_selection(plan: dict, offered: t.Any, version: t.Any, nvml: dict, bake: t.Any = False) -> dict[str, t.Any]:
    """The exact versions to install and what changes on the node for them."""
    _mapping("driver_selection", "plan", plan)
    if offered is not None:
        _mapping("driver_selection", "offered", offered)
    return _driver_plan.select(plan, offered, "" if version is None else str(version), nvml, bake, _select_versions)


def driver_files(plan: dict, rendered: list, found: dict) -> dict[str, t.Any]:
    """The role's own files as rendered (in the order of the plan's files), and those to write."""
    _mapping("driver_files", "plan", plan)
    if len(rendered) != len(plan["files"]):
        raise AnsibleFilterError("driver_files: {0} contents for {1} files".format(len(rendered), len(plan["files"])))
    return _driver_plan.files_to_write(plan, list(rendered), found or {})


def driver_package_actions(packages: list, plan: dict, selection: dict) -> dict[str, t.Any]:
    """What to do about the driver's packages as they are now: hold, and (after a failure) remove, restore, the
    holds the rescue sets and dnf's locks."""
    actions: dict[str, t.Any] = {"hold": _driver_plan.holds(selection, packages)}
    actions.update(_driver_plan.rollback(plan, packages))
    actions.update(_driver_plan.rescue_holds(plan, selection, packages))
    actions["lock"] = _driver_plan.dnf_locks(selection, packages)
    return actions


def driver_kernels_missing(plan: dict, query_output: t.Any) -> list[str]:
    """The kernel packages the node's repositories do not offer, from the output of the plan's kernel_query."""
    if not isinstance(query_output, str):
        raise AnsibleFilterError(
            "driver_kernels_missing: expects the stdout of the plan's kernel_query (a string), not {0}".format(type(query_output).__name__)
        )
    return _driver_plan.kernels_missing(plan, query_output)


def driver_reboot(
    nvml: dict, selection: dict, info: dict, reboot: str, bake: t.Any = False, mok_import_changed: t.Any = False, marks: t.Any = None
) -> dict[str, t.Any]:
    """Why the node must reboot ('' when not), why the role may not ('' when it may), and the marks that tell
    Debian's tools (marks: the paths of /run/reboot-required and /run/reboot-required.pkgs)."""
    for argument, value in (("nvml", nvml), ("selection", selection), ("info", info)):
        _mapping("driver_reboot", argument, value)
    required_file, packages_file = list(marks or ["/run/reboot-required", "/run/reboot-required.pkgs"])
    return {
        "reason": _driver_plan.reboot_reason(nvml, selection["version"], _driver_plan.truthy(mok_import_changed), reboot, list(selection["changing"])),
        "forbidden": _driver_plan.reboot_forbidden(bake, info.get("container"), reboot),
        "marks": _driver_plan.reboot_marks(info.get("files") or {}, required_file, packages_file),
    }


class FilterModule(FilterTable):
    """Decisions of the driver role."""

    FILTERS = (
        driver_kernel_module,
        driver_decision,
        driver_plan,
        driver_selection,
        driver_files,
        driver_package_actions,
        driver_kernels_missing,
        driver_reboot,
    )
