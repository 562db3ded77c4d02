# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""imex_plan, imex_config_merge and imex_domain_nodes: the package of the driver's branch at the driver's
version, the domain's nodes, the config.cfg keys merged in place with every comment kept, and each problem
named with its variable and fix."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.imex import FilterModule, imex_config_merge, imex_domain_nodes, imex_plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify.imex import read_config

ROOT = Path(__file__).parents[4]
DEFAULTS = yaml.safe_load((ROOT / "roles" / "imex" / "defaults" / "main.yml").read_text())
# The test ground's stand-in of the packaged config.cfg: NVIDIA's keys in NVIDIA's order, each under a comment.
PACKAGED = (ROOT / "tests" / "harness" / "stand-in-imex" / "config.cfg").read_text()
KEY = "-----BEGIN PRIVATE KEY-----\nMIIE...\n-----END PRIVATE KEY-----\n"


def settings(**over: t.Any) -> dict[str, t.Any]:
    """The role's defaults as preflight.yml hands them over, for a Debian 12 node running driver 580.95.05."""
    base = {
        "driver_version": "",
        "nvml": {"driver_version": "580.95.05", "driver_loaded": True},
        "os_family": "Debian",
        "distribution": "Debian",
        "distribution_major_version": "12",
        "architecture": "x86_64",
        "repo_url": DEFAULTS["imex_repo_url"],
        "repo_distro": DEFAULTS["imex_repo_distro"],
        "gpg_key_url": DEFAULTS["imex_gpg_key_url"],
        "nodes": ["10.0.0.1", "10.0.0.2"],
        "nodes_group": DEFAULTS["imex_nodes_group"],
        "nodes_address_var": DEFAULTS["imex_nodes_address_var"],
        "group_addresses": None,
        "bind_interface_ip": DEFAULTS["imex_bind_interface_ip"],
        "server_port": DEFAULTS["imex_server_port"],
        "cmd_bind_interface_ip": DEFAULTS["imex_cmd_bind_interface_ip"],
        "cmd_port": DEFAULTS["imex_cmd_port"],
        "cmd_socket": DEFAULTS["imex_cmd_socket"],
        "auth_encryption": DEFAULTS["imex_auth_encryption"],
        "tls_key_set": False,
        "tls_cert": DEFAULTS["imex_tls_cert"],
        "tls_ca": DEFAULTS["imex_tls_ca"],
        "tls_target_override": DEFAULTS["imex_tls_target_override"],
        "tls_dir": DEFAULTS["imex_tls_dir"],
        "config_settings": DEFAULTS["imex_config_settings"],
    }
    base.update(over)
    return base


def problem(**over: t.Any) -> str:
    found = imex_plan(settings(**over))["problem"]
    assert found, "expected a problem"
    return found


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {"imex_plan", "imex_config_merge", "imex_domain_nodes"}


# --- the package -------------------------------------------------------------------


@pytest.mark.parametrize(
    "running,family,install",
    [
        ("580.95.05", "Debian", ["nvidia-imex=580.95.05-1"]),
        ("570.133.20", "Debian", ["nvidia-imex-570=570.133.20-1"]),
        ("550.127.05", "Debian", ["nvidia-imex-550=550.127.05-1"]),
        ("580.95.05", "RedHat", ["nvidia-imex-580.95.05"]),
        ("570.133.20", "RedHat", ["nvidia-imex-570-570.133.20"]),
    ],
)
def test_the_package_of_the_drivers_branch_at_the_drivers_version(running, family, install):
    distribution, major = ("Debian", "12") if family == "Debian" else ("RedHat", "9")
    plan = imex_plan(
        settings(nvml={"driver_version": running, "driver_loaded": True}, os_family=family, distribution=distribution, distribution_major_version=major)
    )
    assert plan["problem"] == ""
    assert plan["install"] == install
    assert plan["driver_source"] == "the running driver (NVML)"
    assert plan["repo"]["url"].endswith("/debian12/x86_64" if family == "Debian" else "/rhel9/x86_64")


def test_the_running_driver_decides_over_the_declared_one():
    plan = imex_plan(settings(driver_version="580.126.09"))
    assert plan["driver_version"] == "580.95.05"


def test_without_a_running_driver_the_declared_one_is_used():
    plan = imex_plan(settings(nvml={}, driver_version="580.126.09"))
    assert (plan["install"], plan["driver_source"]) == (["nvidia-imex=580.126.09-1"], "imex_driver_version")


def test_a_driver_unknown_or_too_old_is_named_with_the_fix():
    assert "set imex_driver_version" in problem(nvml={}, driver_version="")
    assert "imex_driver_version must be a full driver version such as 580.95.05" in problem(nvml={}, driver_version="580")
    assert problem(nvml={"driver_version": "535.230.02", "driver_loaded": True}) == (
        "the driver 535.230.02 (R535) has no IMEX package: IMEX ships from R550; run a driver of R550 or later, or set imex_enabled: false"
    )


def test_repository_problems_name_their_variable():
    assert problem(distribution="Debian", distribution_major_version="13").endswith("set imex_repo_distro to your mirror's")
    assert imex_plan(settings(distribution_major_version="13", repo_distro="debian13"))["repo"]["distro"] == "debian13"
    assert problem(repo_url="https://user:secret@mirror.invalid/cuda").startswith("imex_repo_url carries credentials")
    assert "architecture ppc64le" in problem(architecture="ppc64le")


# --- the domain ------------------------------------------------------------------------


def test_the_nodes_file_is_one_address_a_line_without_repeats():
    plan = imex_plan(settings(nodes=["10.0.0.1", "gpu-2.rack.example", "10.0.0.1", "fd00::3"]))
    assert plan["nodes"] == ["10.0.0.1", "gpu-2.rack.example", "fd00::3"]
    assert plan["nodes_content"].splitlines()[1:] == plan["nodes"]
    assert plan["nodes_content"].startswith("# Managed by gpufleet.nvidia.imex")


def test_the_nodes_of_an_inventory_group_are_their_address_variables():
    group = {"gpu-a": "10.1.0.1", "gpu-b": "10.1.0.2"}
    plan = imex_plan(settings(nodes=[], nodes_group="rack1", nodes_address_var="imex_address", group_addresses=group))
    assert plan["nodes"] == ["10.1.0.1", "10.1.0.2"]
    assert imex_domain_nodes({"nodes": [], "nodes_group": "rack1", "nodes_address_var": "imex_address", "group_addresses": group}) == {
        "nodes": ["10.1.0.1", "10.1.0.2"],
        "problem": "",
    }


def test_domain_problems_name_the_variable_and_the_fix():
    assert problem(nodes=[]) == "the IMEX domain has no nodes; list their addresses in imex_nodes, or name their inventory group in imex_nodes_group"
    assert problem(nodes="10.0.0.1").startswith("imex_nodes must be a list")
    assert problem(nodes=["10.0.0.1", "bad address!"]) == "imex_nodes[1]: 'bad address!' is neither an IP address nor a host name"
    assert problem(nodes_group="rack1").startswith("set imex_nodes or imex_nodes_group, not both")
    assert problem(nodes=[], nodes_group="rack1") == "imex_nodes_group 'rack1' is not a group of the inventory; name the group of the IMEX domain's nodes"
    assert problem(nodes=[], nodes_group="rack1", nodes_address_var="imex_address", group_addresses={"gpu-a": "10.1.0.1", "gpu-b": None}) == (
        "imex_nodes_group 'rack1': host gpu-b has no imex_address; set imex_address for it (the address its IMEX daemon listens on), "
        "or set imex_nodes_address_var"
    )


# --- config.cfg keys and TLS ----------------------------------------------------------------


def test_the_defaults_turn_the_command_service_on_on_the_dra_drivers_socket():
    config = imex_plan(settings())["config"]
    assert config["IMEX_CMD_ENABLED"] == "1"
    assert config["IMEX_CMD_UNIX_DOMAIN_PATH"] == "/etc/nvidia-imex/imex_ctrl.sock"
    assert (config["SERVER_PORT"], config["IMEX_CMD_PORT"], config["IMEX_NODE_CONFIG_FILE"]) == ("50000", "50005", "/etc/nvidia-imex/nodes_config.cfg")
    assert config["IMEX_ENABLE_AUTH_ENCRYPTION"] == "0"
    assert imex_plan(settings())["query_argv"] == ["nvidia-imex-ctl", "-u", "/etc/nvidia-imex/imex_ctrl.sock", "-q"]
    assert imex_plan(settings(cmd_socket=""))["query_argv"] == ["nvidia-imex-ctl", "-c", "/etc/nvidia-imex/config.cfg", "-q"]


def test_setting_problems_name_the_variable():
    assert problem(server_port=70000) == "imex_server_port must be a TCP port (1-65535), got '70000'"
    assert problem(cmd_port="x") == "imex_cmd_port must be a TCP port (1-65535), or empty for none, got 'x'"
    assert problem(bind_interface_ip="eth0") == "imex_bind_interface_ip must be an IP address of this node (or empty), got 'eth0'"
    assert problem(cmd_socket="imex.sock").startswith("imex_cmd_socket must be an absolute path")
    assert problem(cmd_socket="", cmd_port="").startswith("imex_cmd_socket and imex_cmd_port are both empty")
    assert problem(config_settings={"IMEX_CMD_ENABLED": 0}) == (
        "imex_config_settings sets IMEX_CMD_ENABLED, which the role sets from its own variables; use those instead"
    )
    assert problem(config_settings={"log_level": 1}).startswith("imex_config_settings: 'log_level' is not a config.cfg key")
    assert (
        problem(config_settings={"LOG_LEVEL": "4\nIMEX_CMD_ENABLED=0"})
        == "imex_config_settings: the value of LOG_LEVEL spans lines; config.cfg takes one line per key"
    )
    assert imex_plan(settings(config_settings={"LOG_LEVEL": 3}))["config"]["LOG_LEVEL"] == "3"


def test_tls_needs_the_key_the_cert_and_the_ca_and_never_carries_the_key():
    assert problem(auth_encryption=True).startswith("imex_auth_encryption is on, but imex_tls_key, imex_tls_cert and imex_tls_ca are not all set")
    plan = imex_plan(settings(auth_encryption=True, tls_key_set=True, tls_cert="CERT", tls_ca="CA", tls_target_override="imex.rack1"))
    config = plan["config"]
    assert (config["IMEX_ENABLE_AUTH_ENCRYPTION"], config["IMEX_AUTH_ENCRYPTION_MODE"], config["IMEX_AUTH_SOURCE"]) == ("1", "SSL_TLS", "FILE")
    assert config["IMEX_SERVER_KEY"] == config["IMEX_CLIENT_KEY"] == "/etc/nvidia-imex/tls/imex.key"
    assert config["IMEX_SERVER_CERT_AUTH"] == "/etc/nvidia-imex/tls/ca.crt"
    assert config["IMEX_SECURITY_TARGET_OVERRIDE"] == "imex.rack1"
    assert [(f["file"], f["mode"], f["secret"]) for f in plan["tls"]] == [("key", "0600", True), ("cert", "0644", False), ("ca", "0644", False)]
    assert KEY not in repr(plan)


def test_settings_missing_a_key_are_a_bug_not_a_problem():
    broken = settings()
    del broken["cmd_socket"]
    with pytest.raises(AnsibleFilterError, match="imex_plan: settings lack cmd_socket"):
        imex_plan(broken)
    with pytest.raises(AnsibleFilterError, match="imex_plan: give the role's settings as a mapping"):
        imex_plan("nope")


# --- the merge --------------------------------------------------------------------------


def test_the_merge_sets_keys_in_place_and_keeps_every_comment():
    keys = imex_plan(settings())["config"]
    merged = imex_config_merge(PACKAGED, keys)
    comments = [line for line in PACKAGED.splitlines() if line.startswith("#") or not line.strip()]
    assert [line for line in merged["content"].splitlines() if line.startswith("#") or not line.strip()] == comments
    assert {key: read_config(merged["content"])[key] for key in keys} == keys
    # Only the lines of the changed keys differ; the socket, only commented out in the package, follows its comment.
    before, after = PACKAGED.splitlines(), merged["content"].splitlines()
    assert len(after) == len(before) + 1
    at = after.index("IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock")
    assert after[at - 1] == "# IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock"
    assert merged["changed"] == ["IMEX_CMD_ENABLED", "IMEX_CMD_PORT", "IMEX_CMD_UNIX_DOMAIN_PATH"]


def test_the_merge_is_idempotent():
    keys = imex_plan(settings(config_settings={"LOG_LEVEL": 2, "NEW_KEY": "x"}))["config"]
    once = imex_config_merge(PACKAGED, keys)
    twice = imex_config_merge(once["content"], keys)
    assert twice == {"content": once["content"], "changed": []}
    assert once["content"].endswith("# Set by gpufleet.nvidia.imex (keys the packaged file does not list)\nNEW_KEY=x\n")


def test_the_merge_sets_a_key_set_twice_everywhere_and_keeps_line_ends():
    text = "A = 1\r\n# A=commented\nB=2\nA=3"
    merged = imex_config_merge(text, {"A": "9", "B": True})
    assert merged["content"] == "  A=9\r\n# A=commented\nB=1\nA=9\n".lstrip()
    assert merged["changed"] == ["A", "B"]


def test_the_merge_refuses_what_would_write_another_key():
    with pytest.raises(AnsibleFilterError, match="the value of A spans lines"):
        imex_config_merge("A=1\n", {"A": "1\nB=2"})
    with pytest.raises(AnsibleFilterError, match="'a b' is not a config.cfg key"):
        imex_config_merge("A=1\n", {"a b": "1"})
    with pytest.raises(AnsibleFilterError, match="expected config.cfg's text"):
        imex_config_merge(None, {})
