# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every example inventory pins a stack without a known hole: no security, CVE or end-of-life finding.

A user starts from a copy of an example; a pin with a security bulletin against it would be copied into
production. playbooks/validate.yml itself judges each example (ansible-playbook, the version matrix on the
controller, as a CI job would run it) and every finding it returns through set_stats is read.

One exception, stated here: the simulated inventory (`make demo`'s node) runs driver R550, past its end of
life, because R550 is the newest branch the test ground's mirror can carry (Debian 13's packages; NVIDIA's
repository is out of its reach). Nothing else is excused, there or anywhere.
"""

from __future__ import annotations

import json
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.tables import RULES
from ansible_collections.gpufleet.nvidia.tests.unit.playbooks.test_validate import EXAMPLES, custom_stats, playbook, recap

# The matrix rules that report a known hole: a driver without its branch's security fixes, a branch or an
# engine line past its end of life, a Container Toolkit below a CVE's fixed release.
HOLE_RULES = frozenset({"driver_security", "branch_lifecycle", "engine_lifecycle"} | {rule for rule in RULES if rule.startswith("ctk_cve_")})
# (inventory, rule, text the finding's message holds): the only findings excused, and why (module docstring).
EXCUSED = {("simulated", "branch_lifecycle", "driver branch R550 ")}
# Every example inventory; the Packer one gets the inventory Packer would write (hosts.yml below).
EXAMPLE_NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "group_vars").is_dir())


def packer_inventory(root: Path) -> Path:
    """What packer build writes beside the group_vars: the builder in gpu_nodes and its tier's group
    (gpu-node.pkr.hcl: groups = ["gpu_nodes", var.tier]), one builder per tier here."""
    shutil.copytree(EXAMPLES / "packer" / "group_vars", root / "group_vars")
    tiers = sorted(p.stem for p in (root / "group_vars").glob("*.yml") if p.stem != "gpu_nodes")
    hosts = {"all": {"children": {"gpu_nodes": {"children": {tier: {"hosts": {"packer-" + tier: None}} for tier in tiers}}}}}
    (root / "hosts.yml").write_text(yaml.safe_dump(hosts))
    return root / "hosts.yml"


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> dict[str, dict]:
    """validate.yml over each example inventory, side by side: the return code, output and set_stats results."""
    inventories = {name: EXAMPLES / name / "hosts.yml" for name in EXAMPLE_NAMES if (EXAMPLES / name / "hosts.yml").is_file()}
    inventories["packer"] = packer_inventory(tmp_path_factory.mktemp("packer"))
    extra = {"packer": ("-e", "gpufleet_bake=true")}  # as the template's extra arguments give it
    with ThreadPoolExecutor(max_workers=len(inventories)) as pool:
        futures = {name: pool.submit(playbook, "playbooks/validate.yml", "-i", str(path), *extra.get(name, ())) for name, path in inventories.items()}
        return {name: {"run": future.result(), "hosts": inventories[name]} for name, future in futures.items()}


def test_every_example_inventory_is_judged(judged: dict[str, dict]) -> None:
    assert sorted(judged) == EXAMPLE_NAMES and {"fleet", "airgapped", "packer", "simulated"} <= set(EXAMPLE_NAMES)
    assert HOLE_RULES <= set(RULES)  # a renamed rule would silently stop being looked for


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_the_example_pins_no_known_hole(judged: dict[str, dict], name: str) -> None:
    run = judged[name]["run"]
    assert run.returncode == 0, run.stdout[-4000:]
    assert all(counts["failed"] == 0 and counts["unreachable"] == 0 for counts in recap(run.stdout).values()), run.stdout[-4000:]
    stats = custom_stats(run.stdout)["gpufleet_preflight"]
    assert stats, run.stdout[-4000:]
    holes = [
        (host, finding["rule"], finding["message"])
        for host, result in sorted(stats.items())
        for finding in result["findings"]
        if finding["rule"] in HOLE_RULES and not any(name == where and finding["rule"] == rule and text in finding["message"] for where, rule, text in EXCUSED)
    ]
    assert holes == [], json.dumps(holes, indent=2)


def test_the_excuse_is_still_needed(judged: dict[str, dict]) -> None:
    """The simulated node's R550 finding is there (the exception above excuses something real); when the
    test ground can carry a supported branch, the exception goes."""
    stats = custom_stats(judged["simulated"]["run"].stdout)["gpufleet_preflight"]
    found = {(finding["rule"], re.sub(r" \(.*", "", finding["message"])[:40]) for result in stats.values() for finding in result["findings"]}
    assert any(rule == "branch_lifecycle" and "R550" in message for rule, message in found), found


def test_the_check_catches_a_pin_with_a_hole(tmp_path: Path) -> None:
    """The fleet example pinned back to 580.95.05 (before bulletins 5747, 5821 and 5861): driver_security."""
    root = tmp_path / "fleet"
    shutil.copytree(EXAMPLES / "fleet", root)
    shutil.copytree(EXAMPLES / "files" / "fleet", tmp_path / "files" / "fleet")
    (root / "host_vars").mkdir()
    (root / "host_vars" / "gpu-trn-01.yml").write_text('---\ndriver_version: "580.95.05"\n')
    run = playbook("playbooks/validate.yml", "-i", str(root / "hosts.yml"), "--limit", "gpu-trn-01")
    stats = custom_stats(run.stdout)["gpufleet_preflight"]
    assert [f["rule"] for f in stats["gpu-trn-01"]["findings"] if f["rule"] in HOLE_RULES] == ["driver_security"], stats
