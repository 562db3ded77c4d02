# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The mig check's findings: one per GPU whose layout differs from the declared label.

The comparison is the MIG planner's (_mig: NodePlan.differences, one line
per GPU); each GPU's plan (_mig.export.plan_to_dict) says what the fix is: a
reset that only activates a mode already requested, or the layer's work.
"""

from __future__ import annotations

import re
import typing as t

from .remedies import Remedies
from .result import finding


def difference_finding(label: str, line: str, plans: dict[t.Any, dict[str, t.Any]], remedies: Remedies) -> dict[str, str]:
    """The finding of one difference line ("GPU 0: expected MIG disabled, found MIG enabled, ...")."""
    match = re.match(r"GPU (\d+): ", str(line))
    if not match:
        return finding("mig", label or "mig", "MIG layout '{0}' is not applied: {1}".format(label, line), remedies.mig)
    index = int(match.group(1))
    gpu = "GPU {0}".format(index)
    plan = plans.get(index) or {}
    if plan.get("reset_required") and not plan.get("changed"):
        # The declared mode is already requested; only the reset that activates it is missing.
        return finding(
            "mig",
            gpu,
            "MIG layout '{0}' waits for a GPU reset or reboot: {1}".format(label, line),
            "reset {0} (nvidia-smi --gpu-reset -i {1}) or reboot the node to finish the MIG mode change".format(gpu, index),
            "warning",
        )
    what = {"disable": "disable MIG on {0}", "enable": "enable MIG on {0} and create the declared instances"}.get(
        plan.get("mode_change") or "", "recreate the MIG instances of {0}"
    )
    return finding("mig", gpu, "MIG layout '{0}' is not applied: {1}".format(label, line), "{0}: {1}".format(what.format(gpu), remedies.mig))


def findings(label: str, differences: t.Sequence[str], plans: t.Sequence[t.Any], remedies: Remedies) -> list[dict[str, str]]:
    """The findings of a compared layout: its difference lines and the GPUs' plans (plan_to_dict's shape)."""
    by_index = {p.get("index"): p for p in plans if isinstance(p, dict)}
    return [difference_finding(label, line, by_index, remedies) for line in differences]
