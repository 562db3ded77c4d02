# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of gpufleet.nvidia.node_fingerprint: turns the host's
declaration into one digest per variable, then runs the module on the node.

The digests are computed here, not on the node, because only the controller
sees the inventory; the node keeps them in its record so that the next run can
name the variable that changed."""

from __future__ import annotations

import hashlib
import json
import typing as t
from pathlib import Path

import yaml
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.modules.node_fingerprint import ARGUMENT_SPEC
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._run_state import process_started, this_run

COLLECTION_ROOT = Path(__file__).resolve().parents[2]
# What the roles run: a change to any of it (an upgraded collection) must not
# match a record that older code made.
CONTENT_DIRS = ("roles", "plugins", "playbooks", "meta")

_cache: dict[str, t.Any] = {}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_digest(root: Path = COLLECTION_ROOT) -> str:
    """One digest of the collection's roles, plugins, playbooks and metadata (paths and contents)."""
    digest = hashlib.sha256()
    for directory in CONTENT_DIRS:
        for path in sorted((root / directory).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(_digest(path.read_bytes()).encode() + b"\0")
    return digest.hexdigest()


def role_options(root: Path = COLLECTION_ROOT) -> tuple[frozenset[str], frozenset[str]]:
    """Every role's options as argument_specs name them, and those it marks no_log (secrets)."""
    names, secrets = set(), set()
    for spec_file in sorted((root / "roles").glob("*/meta/argument_specs.yml")):
        specs = (yaml.safe_load(spec_file.read_text(encoding="utf-8")) or {}).get("argument_specs") or {}
        for entry in specs.values():
            for name, option in ((entry or {}).get("options") or {}).items():
                names.add(name)
                if (option or {}).get("no_log"):
                    secrets.add(name)
    return frozenset(names), frozenset(secrets)


# State the roles share within one run (gpufleet_run_state: the run's NVML read, the node runtime): outputs of the
# run, like the facts below, though under the collection's own prefix.
RUN_FACT_PREFIX = "gpufleet_run_"


def declared(name: str, prefixes: t.Sequence[str], options: t.Collection[str]) -> bool:
    """Whether a host variable is part of the declaration: it has one of the prefixes and is a role's option, or a
    collection-wide switch (gpufleet_*, but not gpufleet_run_*). A fact a role publishes under its prefix
    (node_labels_summary, slurm_gres_node_gres) or a run-scoped fact (gpufleet_run_state) is an output of the run, not a
    declaration: the next run's comparison, made before any role ran, would see it gone and never take the fast path."""
    if name.startswith(RUN_FACT_PREFIX):
        return False
    return name.startswith(tuple(prefixes)) and (name in options or name.startswith("gpufleet_"))


def canonical(value: t.Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def declaration(values: dict[str, t.Any], groups: t.Sequence[str], secrets: t.Collection[str], content: str) -> dict[str, str]:
    """Variable -> digest of its value; a secret counts only as set or unset, so no digest of it leaves here."""
    declared = {"(collection)": content, "(groups)": _digest(canonical(sorted(groups)).encode())}
    for name, value in values.items():
        if name in secrets:
            declared[name] = "set" if value else "unset"
        else:
            declared[name] = _digest(canonical(value).encode())
    return declared


def dead_here(holder: dict[str, t.Any], controller: str) -> bool:
    """Whether the run holding a lease is known to be gone: it ran on this controller, and its process has ended (or
    the pid now belongs to a process that started later). A run elsewhere cannot be seen from here."""
    if holder.get("controller") != controller or not holder.get("pid_started") or not isinstance(holder.get("pid"), int):
        return False
    return process_started(holder["pid"]) != holder["pid_started"]


def busy_message(holder: dict[str, t.Any], wait: int) -> str:
    who = "run {0} by {1} on {2}{3}, since {4}".format(
        holder.get("run_id"),
        holder.get("user") or "?",
        holder.get("controller") or "?",
        " (AWX job {0})".format(holder["awx_job"]) if holder.get("awx_job") else "",
        holder.get("acquired") or "?",
    )
    return (
        "another run holds this node: {0}. It did not give it back within gpufleet_lock_timeout={1} s. Wait for it to "
        "finish; if it is gone (a cancelled job, a lost controller), take the node over with "
        "-e gpufleet_lock_take_over={2}".format(who, wait, holder.get("run_id"))
    )


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    # The module's options, less the declaration this plugin computes.
    _VALID_ARGS = frozenset(ARGUMENT_SPEC) - {"declaration"}

    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        prefixes = args.get("prefixes")
        if not isinstance(prefixes, list) or not prefixes or not all(isinstance(p, str) and p for p in prefixes):
            raise AnsibleActionFail("prefixes must be a non-empty list of variable name prefixes, e.g. [driver_, cdi_]")
        if "content" not in _cache:
            _cache["content"] = content_digest()
            _cache["options"], _cache["secrets"] = role_options()
        values = {}
        for name in sorted(task_vars):
            if not declared(name, prefixes, _cache["options"]):
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except Exception as error:  # pylint: disable=broad-except
                # The roles would fail on it too; the marker keeps the run a full one until it is fixed.
                values[name] = "unresolved ({0}): {1!r}".format(type(error).__name__, task_vars[name])
        args["declaration"] = declaration(values, task_vars.get("group_names") or [], _cache["secrets"], _cache["content"])
        if not args.get("lease"):
            args.pop("lease", None)
            result.update(self._execute_module(module_name="gpufleet.nvidia.node_fingerprint", module_args=args, task_vars=task_vars))
            return result
        # The lease: `lease: true` in the task, the run's identity from here.
        run = this_run()
        args["lease"] = run
        wait = int(args.pop("lease_wait", 0) or 0)
        # First without waiting: a holder that is known to be dead is taken over at once, not waited for.
        answer = self._execute_module(module_name="gpufleet.nvidia.node_fingerprint", module_args=dict(args, lease_wait=0), task_vars=task_vars)
        holder = answer.get("lease_holder")
        if answer.get("failed") and holder:
            if dead_here(holder, run["controller"]):
                self._display.warning(
                    "{0}: run {1} died (its ansible-playbook, pid {2}, is gone) holding this node; taking it over".format(
                        task_vars.get("inventory_hostname"), holder.get("run_id"), holder.get("pid")
                    )
                )
                args["lease_take_over"] = holder.get("run_id")
            answer = self._execute_module(module_name="gpufleet.nvidia.node_fingerprint", module_args=dict(args, lease_wait=wait), task_vars=task_vars)
            if answer.get("failed") and answer.get("lease_holder"):
                answer["msg"] = busy_message(answer["lease_holder"], wait)
        answer["run_id"] = run["run_id"]
        result.update(answer)
        return result
