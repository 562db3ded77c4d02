# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters of the offline bundle (the bundle role, playbooks/bundle.yml): its
plan, as pure functions of the request, each host's declaration and what
upstream answered. The logic is plugins/plugin_utils/_bundle.py's; each filter
here only adapts it and turns a caller's mistake into an AnsibleFilterError."""

from __future__ import annotations

import typing as t
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _bundle
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def _mapping(name: str, value: t.Any, what: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise AnsibleFilterError("{0}: expected {1}, got {2}".format(name, what, type(value).__name__))
    return value


def _call(name: str, function: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
    try:
        return function(*args)
    except (KeyError, TypeError) as error:
        raise AnsibleFilterError("{0}: incomplete input ({1}: {2})".format(name, type(error).__name__, error)) from error


def bundle_request_errors(request: t.Any) -> list[str]:
    """What is wrong with the run's inputs, in the order the run reports them."""
    return _call("bundle_request_errors", _bundle.request_errors, _mapping("bundle_request_errors", request, "a mapping of the run's inputs"))


def bundle_data_files(platform: t.Any, roles_dir: str) -> list[str]:
    """The roles' data files the plan reads for the declared OS (those that exist are read)."""
    return _bundle.data_files(platform, str(roles_dir))


def bundle_host_plan(declaration: t.Any, request: t.Any) -> dict[str, t.Any]:
    """One host's declaration judged and turned into what the bundle carries for it."""
    return _call(
        "bundle_host_plan",
        _bundle.host_plan,
        _mapping("bundle_host_plan", declaration, "the host's declaration, a mapping"),
        _mapping("bundle_host_plan", request, "a mapping of the host's bundle inputs"),
    )


def bundle_plan(hosts: t.Any, images: t.Any, bundle_dir: str) -> dict[str, t.Any]:
    """Every host's plan merged by place in the bundle, with the images and directories."""
    return _call(
        "bundle_plan", _bundle.bundle_plan, _mapping("bundle_plan", hosts, "a mapping of host name to bundle_host_plan's result"), images, str(bundle_dir)
    )


def bundle_image_problem(read: t.Any) -> str:
    """What is wrong with one image archive read, or an empty string."""
    return _call("bundle_image_problem", _bundle.image_problem, _mapping("bundle_image_problem", read, "one registered result of the archive read"))


def bundle_unstaged(plan: t.Any, bundle_dir: str, new_dirs: t.Any) -> list[str]:
    """The files check mode cannot stage, in the directories it has not created."""
    return _call("bundle_unstaged", _bundle.unstaged, _mapping("bundle_unstaged", plan, "bundle_plan's result"), str(bundle_dir), new_dirs)


def bundle_manifest(written: t.Any) -> dict[str, t.Any]:
    """The bundle's manifest.json content."""
    written = _mapping("bundle_manifest", written, "a mapping of what the bundle wrote")
    return _call(
        "bundle_manifest",
        lambda: _bundle.manifest(written["signing_key"], written["repositories"], written["files"], written["images"], written["keys"], written["site_key"]),
    )


class FilterModule(FilterTable):
    FILTERS = (
        bundle_request_errors,
        bundle_data_files,
        bundle_host_plan,
        bundle_plan,
        bundle_image_problem,
        bundle_unstaged,
        bundle_manifest,
    )
