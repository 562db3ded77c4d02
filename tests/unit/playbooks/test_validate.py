# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""playbooks/validate.yml on the example inventories, run as a user runs it.

The example fleets must pass; a bad copy of the fleet must fail exactly the
hosts whose declaration is bad, each naming the host, the variables and the
fix. The inventories' hosts are SSH hosts that do not exist: any contact
would make them unreachable.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jinja2
import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.tables import RULES
from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import ansible_env as shared_env
from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import playbook as run_playbook

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "inventory" / "examples"
INVENTORIES = ("fleet", "airgapped")
ROLES = ROOT / "roles"
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.MULTILINE)


def ansible_env() -> dict[str, str]:
    # set_stats data printed at the end, as AWX keeps them as the job's artifacts.
    return shared_env(ANSIBLE_SHOW_CUSTOM_STATS="1")


def playbook(*args: str) -> subprocess.CompletedProcess:
    return run_playbook(*args, env=ansible_env())


def recap(output: str) -> dict[str, dict[str, int]]:
    return {
        m.group(1): {"ok": int(m.group(2)), "changed": int(m.group(3)), "unreachable": int(m.group(4)), "failed": int(m.group(5))}
        for m in RECAP.finditer(output)
    }


def inventory_hosts(hosts_file: Path) -> set[str]:
    def walk(group: dict) -> set[str]:
        names = set((group or {}).get("hosts") or {})
        for child in ((group or {}).get("children") or {}).values():
            names |= walk(child)
        return names

    return walk(yaml.safe_load(hosts_file.read_text())["all"])


def resolve(value: str, variables: dict) -> str:
    """A group_vars value templated with the file's own variables, as Ansible would."""
    for _round in range(5):
        value = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(value).render(variables)
    return value


def custom_stats(output: str) -> dict:
    found = re.search(r"^\s*RUN: (\{.*\})\s*$", output, re.MULTILINE)
    assert found, output
    return json.loads(found.group(1))


def fatal(output: str, host: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("fatal: [{0}]".format(host))]
    assert len(lines) == 1, output
    return lines[0].replace('\\"', '"')


@pytest.fixture(scope="module")
def bad_fleet(tmp_path_factory) -> Path:
    """The example fleet with three bad declarations, each on some hosts only."""
    root = tmp_path_factory.mktemp("bad") / "fleet"
    shutil.copytree(EXAMPLES / "fleet", root)
    # The MIG config the inventory points at, beside it as in the examples.
    shutil.copytree(EXAMPLES / "files" / "fleet", root.parent / "files" / "fleet")
    # A V100 tier on driver branch 590 (R580 is Volta's last branch).
    (root / "group_vars" / "dev.yml").write_text('---\ndriver_gpu_models: ["Tesla V100-SXM2-16GB"]\ndriver_branch: "590"\ndriver_version: ""\n')
    host_vars = root / "host_vars"
    host_vars.mkdir()
    # One training node left on R550 while the images moved to CUDA 13.0.
    (host_vars / "gpu-trn-02.yml").write_text('---\ndriver_branch: "550"\ndriver_version: "550.127.05"\n')
    # A typo in one inference node's MIG label.
    (host_vars / "gpu-inf-03.yml").write_text("---\nmig_label: inferense\n")
    # A label with a newline, present in its config: it would add a line to the boot unit's environment file.
    injected = "inference\nExecStartPre=/bin/sh -c id"
    config = {"version": "v1", "mig-configs": {injected: [{"devices": "all", "mig-enabled": False}]}}
    (host_vars / "gpu-inf-02.yml").write_text(yaml.safe_dump({"mig_label": injected, "mig_config_src": "", "mig_config": config}))
    # A node held back on a toolkit with a container escape (CVE-2024-0132, fixed in 1.16.2).
    (host_vars / "gpu-trn-03.yml").write_text('---\ncontainer_toolkit_version: "1.16.1"\n')
    # DCGM turned on at a release below its security floor, and a device plugin below the fix of its CDI
    # strategies (the fleet declares cdi-cri): both judged only because the host turns those layers on.
    (host_vars / "gpu-trn-04.yml").write_text('---\ndcgm_enabled: true\ndcgm_version: "4.2.0"\ndevice_plugin_version: "v0.17.0"\n')
    return root


@pytest.fixture(scope="module")
def runs(bad_fleet: Path) -> dict[str, subprocess.CompletedProcess]:
    """All validate.yml runs of this module, side by side (each is mostly ansible-playbook's start-up)."""
    inventories = {name: EXAMPLES / name / "hosts.yml" for name in INVENTORIES}
    inventories["bad"] = bad_fleet / "hosts.yml"
    # The fleet as users run it from the installed collection, the others from the checkout.
    playbooks = {"fleet": "gpufleet.nvidia.validate"}
    with ThreadPoolExecutor(max_workers=len(inventories)) as pool:
        futures = {name: pool.submit(playbook, playbooks.get(name, "playbooks/validate.yml"), "-i", str(path)) for name, path in inventories.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", INVENTORIES)
def test_example_inventory_passes_without_contacting_a_node(runs, name):
    run = runs[name]
    assert run.returncode == 0, run.stdout
    hosts = inventory_hosts(EXAMPLES / name / "hosts.yml")
    result = recap(run.stdout)
    assert set(result) == hosts, run.stdout
    for host, counts in result.items():
        # SSH hosts that do not exist: unreachable=0 means nothing tried to reach them.
        assert counts == {"ok": counts["ok"], "changed": 0, "unreachable": 0, "failed": 0}, (host, run.stdout)
    # Each host judged on its own (version_matrix's action plugin, on the controller).
    section = run.stdout.split("TASK [gpufleet.nvidia.preflight : Check the declared versions against the version matrix]", 1)[1].split("TASK [", 1)[0]
    assert sorted(re.findall(r"^ok: \[([^\]]+)\]$", section, re.MULTILINE)) == sorted(hosts), run.stdout
    assert "[WARNING]" not in run.stdout, run.stdout
    # The judgement of every host reaches AWX through set_stats.
    stats = custom_stats(run.stdout)["gpufleet_preflight"]
    assert set(stats) == hosts
    assert all(s["status"] == "pass" and s["summary"]["failed"] is False for s in stats.values()), stats


def test_example_inventory_declares_the_mig_tier(runs):
    """The inference tier's MIG layout is checked, the other tiers have none."""
    run = runs["fleet"]
    section = run.stdout.split("TASK [gpufleet.nvidia.mig : Check the config and the label on the controller]", 1)[1]
    section = section.split("TASK [", 1)[0]
    assert sorted(re.findall(r"ok: \[([^\]]+)\]", section)) == ["gpu-inf-01", "gpu-inf-02", "gpu-inf-03"], run.stdout


def test_bad_declarations_fail_their_hosts_naming_host_variables_and_fix(runs):
    run = runs["bad"]
    assert run.returncode == 2, run.stdout
    result = recap(run.stdout)
    failed = sorted(host for host, counts in result.items() if counts["failed"])
    assert failed == ["gpu-dev-01", "gpu-dev-02", "gpu-inf-02", "gpu-inf-03", "gpu-trn-02", "gpu-trn-03", "gpu-trn-04"], run.stdout
    assert all(counts["unreachable"] == 0 for counts in result.values())

    volta = fatal(run.stdout, "gpu-dev-01")
    assert "The declared versions of gpu-dev-01 do not fit together" in volta
    assert "driver R590 does not support Volta GPUs" in volta
    assert 'driver_branch="590"' in volta and 'driver_gpu_models=["Tesla V100-SXM2-16GB"]' in volta
    assert 'Fix: use driver branch R580 (set driver_branch: "580")' in volta
    # Its warning, which a stopped host showed nowhere else in the output, after the failing finding.
    assert volta.index("does not support Volta") < volta.index("Also on this host: [warning] branch_lifecycle: driver branch R590"), volta

    cuda = fatal(run.stdout, "gpu-trn-02")
    assert "The declared versions of gpu-trn-02 do not fit together" in cuda
    assert "driver 550.127.05 cannot run CUDA 13.0: it needs 580.65.06 or newer" in cuda
    assert 'driver_version="550.127.05"' in cuda and 'preflight_cuda_versions=["12.8", "13.0"]' in cuda
    assert "Fix: use a driver of branch 580 or newer, or build the images with an older CUDA" in cuda

    escape = fatal(run.stdout, "gpu-trn-03")
    assert "CVE-2024-0132" in escape and "1.16.2" in escape, escape
    assert 'container_toolkit_version="1.16.1"' in escape, escape

    services = fatal(run.stdout, "gpu-trn-04")
    assert "CVE-2026-47483" in services and 'dcgm_version="4.2.0"' in services, services
    assert "CVE-2025-23266" in services and 'device_plugin_version="v0.17.0"' in services, services
    assert 'device_plugin_device_list_strategy="cdi-cri"' in services, services

    stats = custom_stats(run.stdout)["gpufleet_preflight"]
    assert {f["rule"] for f in stats["gpu-trn-03"]["findings"] if f["severity"] == "error"} >= {"ctk_cve_2024_0132"}
    assert {f["rule"] for f in stats["gpu-trn-04"]["findings"] if f["severity"] == "error"} == {
        "dcgm_cve_2026_47483",
        "device_plugin_cve_2025_23266",
        "device_plugin_cve_2025_23267",
    }
    assert stats["gpu-dev-01"]["status"] == "fail" and stats["gpu-dev-01"]["summary"]["failed"] is True
    assert [f["rule"] for f in stats["gpu-trn-02"]["findings"] if f["severity"] == "error"] == ["cuda_driver"]
    assert stats["gpu-trn-01"]["status"] == "pass"
    # The MIG label is checked before the matrix: that host stopped there.
    assert "gpu-inf-03" not in stats

    mig = fatal(run.stdout, "gpu-inf-03")
    assert "mig_label 'inferense' is not in the config; its labels are all-1g.10gb, all-disabled, inference" in mig
    injected = fatal(run.stdout, "gpu-inf-02")
    assert "may hold only letters, digits" in injected and "it is written into the boot unit" in injected, injected


def test_every_matrix_rule_names_the_variables_behind_it():
    """The gate looks each failing rule up in this table; a rule missing here would break the message."""
    table = yaml.safe_load((ROLES / "preflight" / "vars" / "main.yml").read_text())["__preflight_rule_variables"]
    # One rule id per CVE, one entry for each component's (the gate reads ctk_cve_* as ctk_cve, and so on).
    assert set(table) == {re.sub(r"^(ctk|dcgm|device_plugin)_cve_.*$", r"\1_cve", rule) for rule in RULES} | {"custom"}
    options = {name for spec in ROLES.glob("*/meta/argument_specs.yml") for name in yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"]}
    for rule, names in table.items():
        assert set(names) <= options, (rule, set(names) - options)


@pytest.mark.parametrize("name", INVENTORIES)
def test_example_group_vars_use_the_roles_real_variables(name):
    """Every role-prefixed variable of the examples is an option of that role (a typo would be silently ignored)."""
    specs = {
        role.name: set(yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"])
        for role in ROLES.iterdir()
        if (role / "meta" / "argument_specs.yml").is_file()
    }
    for path in sorted((EXAMPLES / name / "group_vars").glob("*.yml")):
        for variable in yaml.safe_load(path.read_text()) or {}:
            role = next((r for r in sorted(specs, key=len, reverse=True) if variable.startswith(r + "_")), None)
            if role is not None:
                assert variable in specs[role], "{0}: {1} is not an option of the {2} role".format(path, variable, role)


def test_airgapped_fleet_takes_everything_from_the_mirror():
    """Every role's download URL and key fingerprint points at the internal mirror."""
    declared = yaml.safe_load((EXAMPLES / "airgapped" / "group_vars" / "gpu_nodes.yml").read_text())
    options = {name for spec in ROLES.glob("*/meta/argument_specs.yml") for name in yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"]}
    urls = sorted(name for name in options if name.endswith("_url"))
    fingerprints = sorted(name for name in options if name.endswith("_fingerprint"))
    assert urls and fingerprints
    mirror = declared["gpufleet_mirror_url"]
    for name in urls:
        assert name in declared, "{0} is not declared".format(name)
        # The mirror itself (bundle_mirror_url: the bundle's root) or a path under it.
        resolved = resolve(declared[name], declared)
        assert resolved == mirror or resolved.startswith(mirror + "/"), (name, declared[name])
    for name in fingerprints:
        assert resolve(declared.get(name, ""), declared) == declared["gpufleet_mirror_fingerprint"], name
    assert re.match(r"^[0-9A-F]{40}$", declared["gpufleet_mirror_fingerprint"])


def test_example_inventories_name_no_outside_host():
    """Only the example mirror's host name appears in a URL."""
    for path in sorted(EXAMPLES.glob("fleet/**/*.y*ml")) + sorted(EXAMPLES.glob("airgapped/**/*.y*ml")):
        for host in re.findall(r"[a-z]+://([^/\s\"']+)", path.read_text()):
            assert host == "mirror.example.internal", (path, host)


def test_collection_playbooks_pass_syntax_check():
    run = playbook("gpufleet.nvidia.site", "gpufleet.nvidia.validate", "--syntax-check", "-i", str(EXAMPLES / "fleet" / "hosts.yml"))
    assert run.returncode == 0, run.stdout
    # Resolved in the installed collection, not in a playbooks/ directory next to the caller.
    for name in ("site", "validate"):
        assert "ansible_collections/gpufleet/nvidia/playbooks/{0}.yml".format(name) in run.stdout, run.stdout
