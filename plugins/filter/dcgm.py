# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dcgm role's filters: its plan, and readers of dcgmi's output (plugins/plugin_utils/_dcgm.py)."""

from __future__ import annotations

import typing as t

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _dcgm
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import plan_of_mapping


def dcgm_plan(settings: object) -> dict[str, t.Any]:
    """Packages, repository, exporter and dcgmi command lines for one host, or the first problem with its fix."""
    return plan_of_mapping("dcgm_plan", _dcgm.plan, settings, "give the role's settings as a mapping, not {0}")


def dcgm_health_watches(text: object) -> list[str]:
    """The systems `dcgmi health --fetch` reports watched."""
    return _dcgm.health_watches(str(text or ""))


def dcgm_diag_failures(text: object, rc: object = 0) -> list[str]:
    """The failing tests of `dcgmi diag --json`, each with why."""
    return _dcgm.diag_failures(str(text or ""), int(str(rc or 0)))


class FilterModule:
    """The dcgm role's plan and dcgmi readers."""

    def filters(self) -> dict:
        return {"dcgm_plan": dcgm_plan, "dcgm_health_watches": dcgm_health_watches, "dcgm_diag_failures": dcgm_diag_failures}
