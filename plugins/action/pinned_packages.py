# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.pinned_packages: a vendor's packages at one exact version, from its repository trusted only
with its pinned key, held there. The decisions are plugins/plugin_utils/_pinned.py's; this runs the modules, each
with the task's check and diff modes, and returns one result. On apt a fresh install is two calls (the source,
then the install with its holds), and so is a run with nothing to do."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _pinned


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("owner", "manager", "packages", "version", "hold", "repository", "hints", "lists_valid_time"))
    _supports_check_mode = True

    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        try:
            wanted = _pinned.request(self._task.args)
        except _pinned.RequestError as error:
            raise AnsibleActionFail(str(error)) from error
        self.task_vars = task_vars
        self.wanted = wanted
        self.outcome: dict[str, t.Any] = {
            "changed": False,
            "changed_packages": [],
            "held_packages": [],
            "released_packages": [],
            "changed_paths": [],
            "rehearsed": True,
            "diff": [],
            "warnings": [],
        }
        if wanted["manager"] == "apt":
            self.apt()
        else:
            self.dnf()
        outcome = self.outcome
        if not outcome["diff"]:
            del outcome["diff"]
        if not outcome["warnings"]:
            del outcome["warnings"]
        result.update(outcome)
        return result

    # -- running modules --------------------------------------------------------------------------------
    def call(self, module: str, args: dict[str, t.Any]) -> dict[str, t.Any]:
        """One module on the node; its failure is the owner's, with the variables to check."""
        answer = self._execute_module(module_name=module, module_args=args, task_vars=self.task_vars)
        self.outcome["warnings"] += answer.get("warnings") or []
        if answer.get("failed"):
            raise AnsibleActionFail(_pinned.failure(self.wanted, answer.get("msg") or "{0} failed".format(module)), result=_quiet(answer))
        if answer.get("changed"):
            self.outcome["changed"] = True
        diff = answer.get("diff")
        if diff:
            self.outcome["diff"] += diff if isinstance(diff, list) else [diff]
        return answer

    def predict(self, names: list[str]) -> None:
        """Check mode, with the repository only predicted: the install is reported, not rehearsed."""
        line = _pinned.predicted_line(self.wanted, names)
        self.outcome.update(changed=True, changed_packages=sorted(names), rehearsed=False, msg=line)
        if self._task.diff:
            self.outcome["diff"].append({"before_header": "installed packages", "after_header": "installed packages", "before": "", "after": line + "\n"})

    # -- apt --------------------------------------------------------------------------------------------
    def apt(self) -> None:
        source_changed = False
        if self.wanted["repository"]:
            source = self.call("gpufleet.nvidia.apt_signed_source", _pinned.apt_source_args(self.wanted))
            source_changed = bool(source.get("changed"))
            self.outcome.update(changed_paths=source.get("changed_paths") or [], fingerprint=source.get("fingerprint", ""))
        # In check mode a repository that is only predicted has no lists on the node, so apt cannot rehearse from it.
        rehearse = not (self._task.check_mode and source_changed)
        install = self.call("gpufleet.nvidia.apt_install", _pinned.apt_install_args(self.wanted, rehearse))
        for key in ("changed_packages", "held_packages", "released_packages", "rehearsed", "refreshed", "initramfs_kernels", "repaired"):
            if key in install:
                self.outcome[key] = install[key]
        if install.get("rehearsed") is False:
            self.outcome["msg"] = _pinned.predicted_line(self.wanted, install.get("changed_packages") or [])

    # -- dnf --------------------------------------------------------------------------------------------
    def dnf(self) -> None:
        wanted = self.wanted
        read = self.call("gpufleet.nvidia.node_reads_info", {"commands": _pinned.dnf_reads(wanted)})
        commands = read.get("commands") or {}
        plan = _pinned.dnf_plan(wanted, commands.get("rpm", {}).get("stdout", ""), commands.get("locks", {}).get("stdout", ""))
        check_mode = bool(self._task.check_mode)
        repository_changed = False
        if wanted["repository"]:
            repository = wanted["repository"]
            if not repository["key_fingerprint"]:
                self.outcome["warnings"].append(
                    "{0}: UNPINNED KEY, the key at {1} is trusted unchecked (allow_unpinned_key)".format(wanted["owner"], repository["key_url"])
                )
            if plan["missing"] and repository["repomd_url"] and not check_mode:
                # Fail while nothing is touched yet when packages must come from it.
                self.call("ansible.legacy.uri", {"url": repository["repomd_url"], "method": "GET", "return_content": False})
            key_args, repo_args = _pinned.dnf_repository_args(wanted)
            key = self.call("ansible.legacy.rpm_key", key_args)
            repo = self.call("ansible.legacy.yum_repository", repo_args)
            repository_changed = bool(key.get("changed") or repo.get("changed"))
        if wanted["hold"] and (plan["unlock"] or plan["lock"]):
            self.call("ansible.legacy.dnf", {"name": [_pinned.VERSIONLOCK_PACKAGE], "state": "present"})
        self.command(["dnf", "versionlock", "delete"] + plan["unlock"])
        if plan["install"]:
            if check_mode and repository_changed:
                self.predict(plan["missing"])
            else:
                self.call("ansible.legacy.dnf", {"name": plan["install"], "allow_downgrade": True, "state": "present"})
                self.outcome["changed_packages"] = plan["missing"]
        self.command(["dnf", "versionlock", "add"] + plan["lock"])
        self.outcome["held_packages"] = plan["locking"]
        self.outcome["released_packages"] = [] if wanted["hold"] else plan["unlock"]

    def command(self, argv: list[str]) -> None:
        """A versionlock change (argv with its operands), reported and not run in check mode."""
        if len(argv) <= 3:
            return
        self.outcome["changed"] = True
        if not self._task.check_mode:
            self.call("ansible.legacy.command", {"argv": argv})


def _quiet(answer: dict[str, t.Any]) -> dict[str, t.Any]:
    """A failed module's result without what the action's own message replaces, nor anything secret."""
    return {key: value for key, value in answer.items() if key in ("rc", "stdout", "stderr", "changed_packages", "held_packages")}
