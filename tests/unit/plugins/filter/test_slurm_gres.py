# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""slurm_gres_plan on real NVML facts (nvml_info against the simulated library),
checked against GRES worked out by hand from Slurm's gpu/nvml naming rule
(SchedMD/slurm src/plugins/gpu/nvml/gpu_nvml.c)."""

from __future__ import annotations

import typing as t

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.slurm_gres import FilterModule, slurm_gres_cgroup_problem, slurm_gres_plan
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._slurm_gres import mig_type, parse_mig_minors
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import mig_expected

BEGIN, END = "# BEGIN gpufleet.nvidia slurm_gres", "# END gpufleet.nvidia slurm_gres"


def facts(sim_node, fixture: str) -> dict[str, t.Any]:
    outcome = sim_node(fixture).run("nvml_info", gather_health=False)
    assert outcome["kind"] == "exit", outcome
    return outcome["result"]["nvml"]


def driver_mig_minors(gpus: int = 8) -> str:
    """mig-minors as the NVIDIA driver lays it out: config 1, monitor 2, then per GPU
    15 GPU instances, each its access minor followed by 8 compute instances."""
    lines, minor = ["config 1", "monitor 2"], 3
    for gpu in range(gpus):
        for gi in range(15):
            lines.append("gpu{0}/gi{1}/access {2}".format(gpu, gi, minor))
            minor += 1
            for ci in range(8):
                lines.append("gpu{0}/gi{1}/ci{2}/access {3}".format(gpu, gi, ci, minor))
                minor += 1
    return "\n".join(lines) + "\n"


def gres_counts(node_gres: str) -> dict[str, int]:
    counts = {}
    for item in node_gres.split(","):
        name, type_name, count = item.split(":")
        assert name == "gpu"
        assert type_name not in counts, "a type listed twice: " + node_gres
        counts[type_name] = int(count)
    return counts


def gres_lines(gres_conf: str) -> list[str]:
    return [line for line in gres_conf.splitlines() if line and not line.startswith("#")]


def test_whole_gpus_dgx_a100(sim_node):
    plan = slurm_gres_plan(facts(sim_node, "dgx-a100-8x40gb"))
    assert plan["problems"] == [] and plan["layout_mismatches"] == [] and plan["warnings"] == []
    assert plan["node_gres"] == "gpu:nvidia_a100-sxm4-40gb:8"
    assert gres_lines(plan["gres_conf"]) == ["AutoDetect=off"] + ["Name=gpu Type=nvidia_a100-sxm4-40gb File=/dev/nvidia{0}".format(n) for n in range(8)]
    assert "Cores=" not in "\n".join(gres_lines(plan["gres_conf"]))


def test_mixed_models_keep_their_own_types(sim_node):
    plan = slurm_gres_plan(facts(sim_node, "mixed-a100-h100-l40s"))
    assert plan["problems"] == []
    # "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3", "NVIDIA L40S": lower case, spaces to "_".
    assert plan["node_gres"] == "gpu:nvidia_a100-sxm4-40gb:2,gpu:nvidia_h100_80gb_hbm3:2,gpu:nvidia_l40s:1"
    assert [line.split()[1] for line in gres_lines(plan["gres_conf"])[1:]] == [
        "Type=nvidia_a100-sxm4-40gb",
        "Type=nvidia_a100-sxm4-40gb",
        "Type=nvidia_h100_80gb_hbm3",
        "Type=nvidia_h100_80gb_hbm3",
        "Type=nvidia_l40s",
    ]


# dgx-a100-mig-mixed, by hand: GPU 0 3g.20gb + 2g.10gb + 1g.5gb x2, GPU 1 1g.5gb x7,
# GPU 2 one 3g.20gb cut into three 1c.3g.20gb, GPU 3 MIG on without devices (nothing),
# GPU 4 MIG pending (whole, for now), GPUs 5-7 whole. A MIG type is the GPU's type cut
# at the first "-" ("nvidia_a100") plus "_<profile>".
MIG_MIXED_DECLARED = mig_expected.config(
    "lab",
    {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.20gb": 1, "2g.10gb": 1, "1g.5gb": 2}},
    {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
    {"devices": [2], "mig-enabled": True, "mig-devices": {"1c.3g.20gb": 3}},
    {"devices": [3], "mig-enabled": True, "mig-devices": {}},
    {"devices": [4, 5, 6, 7], "mig-enabled": False},
)


def test_mixed_mig(sim_node):
    nvml = facts(sim_node, "dgx-a100-mig-mixed")
    plan = slurm_gres_plan(nvml, mig_label="lab", mig_config=MIG_MIXED_DECLARED, mig_minors=driver_mig_minors())
    assert plan["problems"] == [] and plan["layout_mismatches"] == []
    assert gres_counts(plan["node_gres"]) == {
        "nvidia_a100_3g.20gb": 1,
        "nvidia_a100_2g.10gb": 1,
        "nvidia_a100_1g.5gb": 9,
        "nvidia_a100_1c.3g.20gb": 3,
        "nvidia_a100-sxm4-40gb": 4,
    }
    assert len(plan["warnings"]) == 2
    assert "GPU 3" in plan["warnings"][0] and "no MIG devices" in plan["warnings"][0]
    assert "GPU 4" in plan["warnings"][1] and "changes to on" in plan["warnings"][1]
    # A MIG device holds its GPU's file and the caps of its GPU and compute instance:
    # minors 3 + 135 * gpu + 9 * gi (GI access) and + 1 + ci (CI access).
    mig_lines = [line for line in gres_lines(plan["gres_conf"]) if "MultipleFiles=" in line]
    assert len(mig_lines) == 14
    for device in nvml["gpus"][1]["mig"]["devices"]:
        gi, ci = device["gpu_instance_id"], device["compute_instance_id"]
        gi_minor = 3 + 135 + 9 * gi
        line = "Name=gpu Type=nvidia_a100_1g.5gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap{0},/dev/nvidia-caps/nvidia-cap{1}".format(
            gi_minor, gi_minor + 1 + ci
        )
        assert line in mig_lines
    assert "Name=gpu Type=nvidia_a100-sxm4-40gb File=/dev/nvidia4" in gres_lines(plan["gres_conf"])
    assert "/dev/nvidia3" not in plan["gres_conf"]


def test_autodetect_writes_one_line_and_the_same_gres(sim_node):
    nvml = facts(sim_node, "mixed-a100-h100-l40s")
    explicit = slurm_gres_plan(nvml)
    auto = slurm_gres_plan(nvml, autodetect="nvml", header="# managed")
    assert gres_lines(auto["gres_conf"]) == ["AutoDetect=nvml"]
    assert auto["gres_conf"].startswith("# managed\n")
    assert auto["node_gres"] == explicit["node_gres"]


def test_autodetect_refuses_a_gpu_with_mig_on_and_no_devices(sim_node):
    plan = slurm_gres_plan(
        facts(sim_node, "dgx-a100-mig-mixed"), autodetect="nvml", mig_label="lab", mig_config=MIG_MIXED_DECLARED, mig_minors=driver_mig_minors()
    )
    assert len(plan["problems"]) == 1
    assert plan["problems"][0].startswith("GPU 3 (NVIDIA A100-SXM4-40GB): MIG is on but the GPU has no MIG devices; AutoDetect=nvml would offer it whole")
    assert 'slurm_gres_autodetect: "off"' in plan["problems"][0]


def test_a_layout_not_applied_yet_is_a_mismatch(sim_node):
    config = mig_expected.config("all-1g", {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}})
    plan = slurm_gres_plan(facts(sim_node, "dgx-a100-8x40gb"), mig_label="all-1g", mig_config=config)
    assert len(plan["layout_mismatches"]) == 8
    assert "GPU 0 (NVIDIA A100-SXM4-40GB): mig_label 'all-1g' (mig-configs.all-1g[0]) declares MIG on, but NVML shows it off" in plan["layout_mismatches"][0]
    assert "apply the layout first" in plan["layout_mismatches"][0]


def test_mig_devices_other_than_declared_are_a_mismatch(sim_node):
    config = mig_expected.config("lab", {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.5gb": 6}})
    plan = slurm_gres_plan(facts(sim_node, "dgx-a100-mig-mixed"), mig_label="lab", mig_config=config, mig_minors=driver_mig_minors())
    assert plan["layout_mismatches"] == [
        "GPU 1 (NVIDIA A100-SXM4-40GB): mig_label 'lab' (mig-configs.lab[0]) declares MIG devices 1g.5gb x6, but NVML shows 1g.5gb x7; "
        "apply the layout first (the mig role runs before slurm_gres in site.yml)"
    ]


def test_mig_devices_without_their_minors_are_a_problem(sim_node):
    plan = slurm_gres_plan(facts(sim_node, "dgx-a100-mig-mixed"), mig_minors="")
    assert plan["problems"] and all("/proc/driver/nvidia-caps/mig-minors lists no capability minor" in p for p in plan["problems"])


def test_an_unknown_label_is_a_problem_naming_it(sim_node):
    plan = slurm_gres_plan(facts(sim_node, "dgx-a100-8x40gb"), mig_label="lab2", mig_config=MIG_MIXED_DECLARED)
    assert plan["problems"] == [
        "the MIG declaration (mig_label 'lab2' in mig_config): label 'lab2' is not in the config (did you mean 'lab'?); its labels are: lab"
    ]


def test_no_driver_and_a_bad_autodetect_are_problems():
    plan = slurm_gres_plan({"status": "driver_not_loaded", "reason": "nvmlInit_v2: Driver Not Loaded"}, autodetect="rsmi")
    assert plan["problems"][0] == "slurm_gres_autodetect is 'rsmi'; use one of off, nvml"
    assert "NVML is not usable on the node (driver_not_loaded: nvmlInit_v2: Driver Not Loaded)" in plan["problems"][1]
    with pytest.raises(AnsibleFilterError, match="slurm_gres_plan: expects the nvml_info module's `nvml` result"):
        slurm_gres_plan(None)


def test_a_lost_gpu_is_a_problem(sim_node):
    nvml = facts(sim_node, "dgx-a100-8x40gb")
    nvml["gpus"][3]["lost"] = True
    plan = slurm_gres_plan(nvml)
    assert plan["problems"][0].startswith("GPU 3 (GPU-") and "drain the node" in plan["problems"][0]


# NVML's product names; a MIG device's name is its GPU's followed by " MIG <profile>".
A100, H100 = "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(
    "gpu,mig,expected",
    [
        (A100, A100 + " MIG 3g.20gb", "nvidia_a100_3g.20gb"),
        (A100, A100 + " MIG 1c.3g.20gb", "nvidia_a100_1c.3g.20gb"),
        (H100, H100 + " MIG 1g.10gb", "nvidia_h100_80gb_hbm3_1g.10gb"),
        (H100, H100 + " MIG 1g.10gb+me", "nvidia_h100_80gb_hbm3_1g.10gb+me"),
        (A100, A100, None),
    ],
)
def test_mig_type_follows_slurm(gpu, mig, expected):
    assert mig_type(gpu, mig) == expected


def test_mig_minors_parse():
    assert parse_mig_minors("config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n") == {(0, 1, None): 12, (0, 1, 0): 13}


def test_cgroup_conf_line_outside_the_block_is_a_problem():
    site = "CgroupPlugin=autodetect\nConstrainDevices=no\n"
    assert "cgroup.conf line 2 sets 'ConstrainDevices=no' outside the block" in slurm_gres_cgroup_problem(site, BEGIN, END)
    ours = "CgroupPlugin=autodetect\n{0}\nConstrainDevices=yes\n{1}\n".format(BEGIN, END)
    assert slurm_gres_cgroup_problem(ours, BEGIN, END) == ""
    assert slurm_gres_cgroup_problem("", BEGIN, END) == ""


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {"slurm_gres_plan", "slurm_gres_cgroup_problem"}
