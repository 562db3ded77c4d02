# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvml_info's controller side: the run's shared NVML read (run_read).

With run_read=shared the roles of one run share one read of the node: the first asks the node and keeps its read
as the run's (plugin_utils/_run_state); the next ones get it without a call to the node, until a role that changed
what NVML reports (the driver, a MIG layout) forgets it with gpufleet.nvidia.run_state. run_read=fresh always asks
and keeps what it read; own (the default) asks and keeps nothing, as the module alone does.
"""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.modules.nvml_info import ARGUMENT_SPEC
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _run_state

RUN_READS = tuple(ARGUMENT_SPEC["run_read"]["choices"])
# The options a shared read may take: the read must be the one every role of the run would make.
SHARED_OPTIONS = frozenset(("library", "run_read"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        run_read = args.pop("run_read", None) or ARGUMENT_SPEC["run_read"]["default"]
        if run_read not in RUN_READS:
            raise AnsibleActionFail("nvml_info: run_read must be one of {0}, not {1!r}".format(", ".join(RUN_READS), run_read))
        if run_read != "own" and set(self._task.args) - SHARED_OPTIONS:
            raise AnsibleActionFail(
                "nvml_info: run_read={0} is the run's read with the module's defaults; it takes no {1} (use run_read=own for another read)".format(
                    run_read, ", ".join(sorted(set(self._task.args) - SHARED_OPTIONS))
                )
            )
        if run_read == "shared":
            nvml = _run_state.held(task_vars, "nvml")
            if nvml is not None:
                result.update(changed=False, nvml=nvml, run_read="held")
                return result
        read = self._execute_module(module_name="gpufleet.nvidia.nvml_info", module_args=args, task_vars=task_vars)
        result.update(read)
        if run_read != "own" and not read.get("failed") and isinstance(read.get("nvml"), dict):
            result["ansible_facts"] = _run_state.facts_with(task_vars, nvml=read["nvml"])
            result["run_read"] = "read"
        return result
