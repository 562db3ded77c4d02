# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.preflight_gate: the preflight role's gate in one task.

It judges the host's declaration with the version matrix (the version_matrix
module's options and code, module_utils/_matrix/judge.py), decides with
preflight_fail_on whether the host stops (the preflight_verdict filter's
code), writes the stop message, and hands the judgement to AWX as set_stats
would (`ansible_stats` in the result: the strategy aggregates it like
set_stats' own). Each of those was a task per host, and a task costs every
host of a fleet a worker process.

It does not fail the host itself: the strategy keeps `ansible_stats` only from
a result that did not fail, and AWX must get the judgement of a stopping host
too. The task after it (an assert) stops the host with RV(verdict.message).
Documented in plugins/modules/preflight_gate.py.
"""

from __future__ import annotations

import copy
import typing as t

from ansible.errors import AnsibleActionFail, AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.preflight import preflight_verdict
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.judge import argument_spec, judge
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._matrix_action import MatrixAction

# The matrix's own options, but the gate always judges with fail_on: never
# (the gate's fail_on decides instead) and judges the declaration.
_MATRIX_OPTIONS_NOT_TAKEN = ("fail_on", "target")


def gate_argument_spec() -> dict[str, dict[str, t.Any]]:
    """version_matrix's options (less fail_on and target) and the gate's own."""
    spec = {name: option for name, option in argument_spec().items() if name not in _MATRIX_OPTIONS_NOT_TAKEN}
    spec.update(
        fail_on=dict(type="str", choices=["error", "warning", "never"], default="error"),
        rule_variables=dict(type="dict", required=True),
        layers=dict(type="dict", required=True),
        values=dict(type="dict", default={}),
        declared=dict(type="list", elements="str", default=[]),
        notices=dict(type="list", elements="str", default=[]),
    )
    return copy.deepcopy(spec)


def stop_message(host: str, fail_on: str, verdict: t.Mapping[str, t.Any], notices: t.Sequence[str] = ()) -> str:
    """What the preflight gate's assert has said since 0.1 (the failing findings, the variables with their values,
    the fix); then, briefly, the host's other findings and the gate's notices, which a stopped host shows nowhere
    else (a passing host shows them as the assert's success message)."""
    message = "The declared versions of {0} do not fit together (preflight_fail_on: {1}): {2}. Variables: {3}. Fix: {4}".format(
        host, fail_on, verdict["messages"], verdict["variables"], verdict["fixes"]
    )
    also = [text for text in [verdict["also"], *notices] if text]
    return message + (". Also on this host: " + "; ".join(also) if also else "")


class ActionModule(MatrixAction):
    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        params = self.validated_params(gate_argument_spec())
        gate = {name: params.pop(name) for name in ("fail_on", "rule_variables", "layers", "values", "declared", "notices")}
        params.update(fail_on="never", target="desired")
        judged, failure = judge(params)
        if failure:
            # Only a bad table or rule fails here (fail_on is never): the matrix's own message.
            raise AnsibleActionFail(failure)
        try:
            verdict = preflight_verdict(judged, gate["fail_on"], gate["rule_variables"], gate["layers"], extra=gate["values"], declared=gate["declared"])
        except AnsibleFilterError as exc:
            raise AnsibleActionFail("preflight_gate: {0}".format(exc.message)) from None
        host = str(task_vars.get("inventory_hostname", ""))
        result.update(judged)
        result["verdict"] = {
            "stop": verdict["failed"],
            "message": stop_message(host, gate["fail_on"], verdict, gate["notices"]) if verdict["failed"] else "",
            "failing": verdict["failing"],
        }
        # Aggregated over the hosts into the job's artifacts (AWX), exactly as
        # the set_stats task did: one mapping, host name to judgement.
        result["ansible_stats"] = {"data": {"gpufleet_preflight": {host: verdict["stats"]}}, "per_host": False, "aggregate": True}
        result["changed"] = False
        return result
