# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""User hooks, in mig-parted's hooks file format: parsing the file, and running
the hooks at mig-parted's hook points with mig-parted's environment.
"""

from __future__ import annotations

import os
import subprocess
import typing as t
from dataclasses import dataclass

from .config import CONFIG_VERSION, MigConfigError, _type_name, _unknown_keys

# mig-parted's hook points (NVIDIA/mig-parted@2f087e947abe:cmd/nvidia-mig-parted/
# apply/apply.go, ApplyMigConfigWithHooks): apply-start first; pre-apply-mode
# when a MIG mode changes; pre-apply-config when instances change; apply-exit
# last, whatever happened. Hooks files written for it work unchanged.
HOOK_NAMES = ("apply-start", "pre-apply-mode", "pre-apply-config", "apply-exit")
_HOOK_KEYS = ("command", "args", "envs", "workdir")


class MigHookError(Exception):
    """A user hook failed; the message names it, its exit status and its output."""


@dataclass(frozen=True)
class Hook:
    where: str
    command: str
    args: tuple[str, ...] = ()
    envs: tuple[tuple[str, str], ...] = ()
    workdir: str | None = None


def parse_hooks(data: t.Any) -> dict[str, tuple[Hook, ...]]:
    """Check a mig-parted hooks file (version: v1, hooks: {name: [{command, args, envs, workdir}]})."""
    if not data:
        return {}
    if not isinstance(data, dict):
        raise MigConfigError("hooks: expected a mapping with 'version: v1' and 'hooks', got {0}".format(_type_name(data)))
    _unknown_keys(data, ("version", "hooks"), "hooks", "top-level key")
    if data.get("version") != CONFIG_VERSION:
        raise MigConfigError("hooks.version: expected 'v1' (mig-parted's hooks format), got {0!r}".format(data.get("version")))
    named = data.get("hooks") or {}
    if not isinstance(named, dict):
        raise MigConfigError("hooks.hooks: expected a mapping of hook name to a list of commands")
    _unknown_keys(named, HOOK_NAMES, "hooks.hooks", "hook")
    parsed = {}
    for name, items in named.items():
        if not isinstance(items, list):
            raise MigConfigError("hooks.hooks.{0}: expected a list of commands, got {1}".format(name, _type_name(items)))
        hooks = []
        for n, item in enumerate(items):
            where = "hooks.hooks.{0}[{1}]".format(name, n)
            if not isinstance(item, dict):
                raise MigConfigError("{0}: expected a mapping with command (and args, envs, workdir)".format(where))
            _unknown_keys(item, _HOOK_KEYS, where, "key")
            command, args, envs = item.get("command"), item.get("args") or [], item.get("envs") or {}
            if not isinstance(command, str) or not command:
                raise MigConfigError("{0}.command: expected the program to run, e.g. /bin/sh".format(where))
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise MigConfigError("{0}.args: expected a list of strings".format(where))
            if not isinstance(envs, dict) or not all(isinstance(v, str) for v in envs.values()):
                raise MigConfigError("{0}.envs: expected a mapping of name to string value".format(where))
            workdir = item.get("workdir") or None
            if workdir is not None and not isinstance(workdir, str):
                raise MigConfigError("{0}.workdir: expected a directory path".format(where))
            hooks.append(Hook(where, command, tuple(args), tuple(sorted(envs.items())), workdir))
        parsed[name] = tuple(hooks)
    return parsed


class HookRunner:
    """Runs the hooks of one point in order; the first that fails stops the run.

    Each hook gets this process's environment, the hook's `envs`, and the
    MIG_PARTED_* variables mig-parted gives its hooks (config file, selected
    config, hooks file, skip reset, mode only), so its scripts read the same.
    """

    def __init__(self, hooks: dict[str, tuple[Hook, ...]], env: dict[str, str]) -> None:
        self.hooks = hooks
        self.env = env
        self.ran: list[str] = []

    def run(self, name: str) -> None:
        for hook in self.hooks.get(name, ()):
            env = dict(os.environ)
            env.update(hook.envs)
            env.update(self.env)
            try:
                done = subprocess.run(  # pylint: disable=ansible-bad-function
                    [hook.command] + list(hook.args), cwd=hook.workdir, env=env, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
                )
            except OSError as exc:
                raise MigHookError("{0} ({1}) could not run: {2}".format(hook.where, hook.command, exc.strerror))
            self.ran.append(hook.where)
            if done.returncode != 0:
                raise MigHookError(
                    "{0} ({1}) failed with exit {2}: {3}".format(hook.where, hook.command, done.returncode, " ".join(done.stdout.split()) or "no output")
                )


def hook_env(config_file: str, label: str, hooks_file: str, reset: bool) -> dict[str, str]:
    """The variables mig-parted's apply gives its hooks (its flags' EnvVars), with our values."""
    return {
        "MIG_PARTED_CONFIG_FILE": config_file,
        "MIG_PARTED_SELECTED_CONFIG": label,
        "MIG_PARTED_HOOKS_FILE": hooks_file,
        "MIG_PARTED_SKIP_RESET": "false" if reset else "true",
        "MIG_PARTED_MODE_CHANGE_ONLY": "false",
    }
