# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.version_matrix on the controller.

The matrix only computes from its options: run as a module, each host costs
a module transfer and a Python process (about three pings' worth per host
over a fleet). Here it runs in the worker that runs the task, against the
module's own argument spec, with the module's own code
(module_utils/_matrix/judge.py), so the options, their checks and the
return values are the module's. No connection is opened: a host is judged
without being contacted, whatever its ansible_connection.

The knowledge tables and the matrix code are imported with this plugin, which
the controller loads before it forks its workers; a Matrix with the built-in
tables is built then too (plugin_utils/_matrix_action.py), so each host's task
starts from parsed tables.
"""

from __future__ import annotations

import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.judge import argument_spec, judge
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._matrix_action import MatrixAction


class ActionModule(MatrixAction):
    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        result = super().run(tmp, task_vars)
        # The module's own argument spec, so that its options fail as AnsibleModule would fail them.
        params = self.validated_params(argument_spec())
        judged, failure = judge(params)
        result.update(judged)
        result["changed"] = False
        if failure:
            result["failed"] = True
            result["msg"] = failure
        return result
