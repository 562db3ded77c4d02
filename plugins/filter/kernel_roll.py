# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters of the kernel roll (the `kernel` layer of playbooks/upgrade.yml, playbooks/kernel_roll.yml): its
settings, the kernel to roll to, the node's plan, and the proof. The bodies are plugin_utils/_kernel_roll.py."""

from __future__ import annotations

import typing as t
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _kernel_roll
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def _mapping(name: str, what: str, value: t.Any) -> Mapping:
    if not isinstance(value, Mapping):
        raise AnsibleFilterError("{0}: expected {1} (a mapping), got {2}".format(name, what, type(value).__name__))
    return value


def kernel_roll_settings_errors(settings: t.Any, branch: t.Any = None, minimum: t.Any = None) -> list[str]:
    """Every problem with the kernel roll's settings, each naming the variable and the fix."""
    return _kernel_roll.settings_errors(dict(_mapping("kernel_roll_settings_errors", "the kernel_roll settings", settings)), branch, dict(minimum or {}))


def kernel_roll_release(show_output: t.Any, declaration: t.Any) -> str:
    """The kernel release to roll to: kernel_roll_release, else the one the metapackage's candidate depends on ("" for none)."""
    declaration = _mapping("kernel_roll_release", "the kernel roll's declaration", declaration)
    return declaration.get("release") or _kernel_roll.offered_release(str(show_output or ""), declaration["image_prefix"]) or ""


def kernel_roll_plan(driver: t.Any, declaration: t.Any, policy_output: t.Any = None, reboot_forbidden: str = "") -> dict[str, t.Any]:
    """The node's kernel roll, from driver_info's result (read with the release in staged_kernels)."""
    driver = _mapping("kernel_roll_plan", "driver_info's `driver` result", driver)
    try:
        return _kernel_roll.plan(dict(_mapping("kernel_roll_plan", "the declaration", declaration)), dict(driver), policy_output, reboot_forbidden or "")
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def kernel_roll_proof(driver: t.Any, planned: t.Any, make_log: str = "", cause: str = "", removed: t.Any = None, reason_only: bool = False) -> str:
    """ "" when the staged kernel carries the driver's module; else the whole message of the kernel that cannot be
    proven (`cause`, such as apt's error, overrides what the read says), or with `reason_only` the reason alone."""
    driver = _mapping("kernel_roll_proof", "driver_info's `driver` result", driver)
    planned = _mapping("kernel_roll_proof", "the kernel_roll_plan result", planned)
    kernels = driver.get("kernels") or {}
    staged = next((k for k in kernels.get("staged") or [] if k.get("release") == planned["release"]), {})
    why = cause or _kernel_roll.proof_failure(dict(planned), staged, kernels, dict(driver))
    if not why or reason_only:
        return why
    return _kernel_roll.failure_message(dict(planned), why, make_log or "", list(removed or []))


class FilterModule(FilterTable):
    """Kernel roll filters."""

    FILTERS = (kernel_roll_settings_errors, kernel_roll_release, kernel_roll_plan, kernel_roll_proof)
