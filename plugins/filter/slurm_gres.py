# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_gres_plan, slurm_gres_cgroup_problem: the Slurm GRES layer's plan, on the controller."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _slurm_gres


def slurm_gres_plan(
    nvml: t.Any, mig_label: str = "", mig_config: t.Any = None, mig_minors: str = "", autodetect: str = "off", header: str = ""
) -> dict[str, t.Any]:
    """gres.conf, the Gres= value and what is wrong, from the nvml_info result and the MIG declaration."""
    if not isinstance(nvml, t.Mapping):
        raise AnsibleFilterError("slurm_gres_plan: expects the nvml_info module's `nvml` result (a mapping), got {0}".format(type(nvml).__name__))
    return _slurm_gres.gres_plan(
        nvml, mig_label=mig_label or "", mig_config=mig_config, mig_minors=mig_minors or "", autodetect=str(autodetect), header=header or ""
    )


def slurm_gres_cgroup_problem(existing: t.Any, block_begin: str, block_end: str) -> str:
    """Why the role cannot set ConstrainDevices in this cgroup.conf; "" when it can."""
    return _slurm_gres.cgroup_conf_problem(str(existing or ""), block_begin, block_end) or ""


class FilterModule:
    """The slurm_gres role's plan."""

    def filters(self) -> dict:
        return {"slurm_gres_plan": slurm_gres_plan, "slurm_gres_cgroup_problem": slurm_gres_cgroup_problem}
