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

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _driver_plan
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def driver_kernel_module(gpus: list, requested: str, branch: t.Any, source: str, vgpu_guest: t.Any = False) -> dict[str, t.Any]:
    """Decide (auto) or check the kernel-module flavour for a node's GPUs (the driver plan's kernel_module)."""
    try:
        return _driver_plan.kernel_module(gpus, requested, branch, source, vgpu_guest)
    except ValueError as exc:
        raise AnsibleFilterError("driver_kernel_module: {0}".format(exc)) from None


def _mapping(name: str, argument: str, value: t.Any) -> dict:
    if not isinstance(value, dict):
        raise AnsibleFilterError("{0}: {1} must be a mapping, not {2}".format(name, argument, type(value).__name__))
    return value


def driver_decision(declaration: dict, os_data: dict, info: dict, nvml: dict) -> dict[str, t.Any]:
    """Validate the declaration; settle the branch, the module build and the kernel-module flavour."""
    for argument, value in (("declaration", declaration), ("os_data", os_data), ("info", info), ("nvml", nvml)):
        _mapping("driver_decision", argument, value)
    return _driver_plan.decide(declaration, os_data, info, nvml)


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
    return _driver_plan.select(plan, offered, "" if version is None else str(version), nvml, bake)


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
