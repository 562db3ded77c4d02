# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""run_state: forget what this run holds of the node (plugin_utils/_run_state), on the controller."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _run_state


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("forget",))

    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        result = super().run(tmp, task_vars)
        forget = self._task.args.get("forget")
        if isinstance(forget, str):
            forget = [forget]
        if not isinstance(forget, list) or not forget or any(key not in _run_state.KEYS for key in forget):
            raise AnsibleActionFail("run_state: forget must list one or more of {0}, not {1!r}".format(", ".join(_run_state.KEYS), forget))
        result.update(
            changed=False,
            forgotten=list(forget),
            ansible_facts=_run_state.facts_with(task_vars, **{key: None for key in forget}),
        )
        return result
