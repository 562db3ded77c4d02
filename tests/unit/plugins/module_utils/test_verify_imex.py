# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""verify's imex check: a serving domain passes; each problem - the service, the command service off, the
control socket silent, a daemon or domain not ready, the nodes file missing or different - fails on its own
with its fix. The last test runs the test ground's stand-in daemon and control tool (two daemons on loopback
addresses) and judges what they print."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_check, verify_imex_reads
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify import imex

ROOT = Path(__file__).parents[4]
STAND_IN = ROOT / "tests" / "harness" / "stand-in-imex"
SOCKET = "/etc/nvidia-imex/imex_ctrl.sock"
NODES = ["10.0.0.1", "10.0.0.2"]
UNIT_RUNNING = "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\n"
CONFIG = "# the command service\nIMEX_CMD_ENABLED=1\nIMEX_CMD_UNIX_DOMAIN_PATH={0}\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n".format(SOCKET)
UP = {"nodes": {"0": {"status": "READY", "host": "10.0.0.1"}, "1": {"status": "READY", "host": "10.0.0.2"}}, "status": "UP"}
DECLARATION = {"managed": True, "reason": "imex_enabled is on", "vars": {"imex_enabled": True, "imex_cmd_socket": SOCKET}}


def ran(stdout: str = "", rc: int = 0, stderr: str = "") -> dict[str, t.Any]:
    return {"rc": rc, "stdout": stdout, "stderr": stderr}


def observed(**over: t.Any) -> dict[str, t.Any]:
    base = {
        "unit": UNIT_RUNNING,
        "config": CONFIG,
        "nodes": "# managed\n10.0.0.1\n10.0.0.2\n",
        "query": ran("READY\n"),
        "domain": ran(json.dumps(UP)),
        "declared_nodes": list(NODES),
    }
    base.update(over)
    return base


def judge(declaration: dict[str, t.Any] | None = None, **over: t.Any) -> dict[str, t.Any]:
    return verify_check(observed(**over), "imex", declaration or DECLARATION)


def subjects(check: dict[str, t.Any]) -> list[str]:
    return [f["subject"] for f in check["findings"]]


def test_a_serving_domain_passes():
    check = judge()
    assert check["status"] == "pass", check
    assert check["summary"] == "nvidia-imex READY, domain UP with 2 node(s)"
    assert check["observed"]["domain"] == {"status": "UP", "nodes": {"10.0.0.1": "READY", "10.0.0.2": "READY"}}


def test_not_managed_reads_and_judges_nothing():
    check = verify_check({}, "imex", {"managed": False, "reason": "imex_enabled is off", "vars": {}})
    assert (check["status"], check["summary"]) == ("not_managed", "not managed: imex_enabled is off")


def test_the_command_service_off_names_the_key_and_the_fix():
    config = CONFIG.replace("IMEX_CMD_ENABLED=1", "IMEX_CMD_ENABLED=0")
    check = judge(config=config, query=ran(rc=1, stderr="The IMEX command service is not enabled"), domain=ran(rc=1))
    assert check["status"] == "fail"
    assert subjects(check) == ["IMEX_CMD_ENABLED", "control", "domain"]
    off, silent = check["findings"][0], check["findings"][1]
    assert off["message"].startswith("the IMEX command service is off in /etc/nvidia-imex/config.cfg (IMEX_CMD_ENABLED=0)")
    assert off["fix"] == "set IMEX_CMD_ENABLED=1 in /etc/nvidia-imex/config.cfg and restart nvidia-imex: run the imex layer (--tags imex)"
    assert silent["message"] == "the IMEX control socket does not answer (nvidia-imex-ctl -q: rc 1: The IMEX command service is not enabled)"
    assert silent["fix"] == (
        "set IMEX_CMD_ENABLED=1 and IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock in /etc/nvidia-imex/config.cfg, "
        "restart nvidia-imex and check that it runs: run the imex layer (--tags imex)"
    )


def test_another_socket_than_declared_is_named():
    check = judge(config=CONFIG.replace(SOCKET, "/run/imex.sock"))
    assert subjects(check) == ["IMEX_CMD_UNIX_DOMAIN_PATH"]
    assert check["findings"][0]["fix"].startswith("set IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock")


@pytest.mark.parametrize(
    "state,fix",
    [
        ("WAITING_FOR_PEERS", "start nvidia-imex on the other nodes of the domain"),
        ("INITIALIZING", "wait for the daemon to finish starting"),
        ("SOMETHING_NEW", "check the nvidia-imex-ctl and nvidia-imex versions"),
    ],
)
def test_a_daemon_that_is_not_ready_is_named_with_its_state(state, fix):
    check = judge(query=ran(state + "\n"))
    assert subjects(check) == ["daemon"]
    assert check["findings"][0]["message"] == "the IMEX daemon on its socket /etc/nvidia-imex/imex_ctrl.sock is {0}, not READY".format(state)
    assert check["findings"][0]["fix"].startswith(fix)


def test_a_degraded_domain_names_the_nodes_that_are_not_ready():
    degraded = {"nodes": {"0": {"status": "READY", "host": "10.0.0.1"}, "1": {"status": "UNAVAILABLE", "host": "10.0.0.2"}}, "status": "DEGRADED"}
    check = judge(domain=ran(json.dumps(degraded)))
    assert check["findings"][0]["message"] == "the IMEX domain is DEGRADED, not UP: 10.0.0.2 UNAVAILABLE"
    assert subjects(judge(domain=ran("not json"))) == ["domain"]


def test_the_nodes_file_missing_or_different_is_named():
    missing = judge(nodes=None)
    assert missing["findings"][0]["message"] == "/etc/nvidia-imex/nodes_config.cfg is missing: the daemon has no domain"
    assert missing["findings"][0]["fix"] == "write the domain's nodes: run the imex layer (--tags imex)"
    other = judge(nodes="10.0.0.1\n10.0.0.9\n")
    assert other["findings"][0]["message"] == "/etc/nvidia-imex/nodes_config.cfg lacks 10.0.0.2 and lists 10.0.0.9, not declared"


def test_the_service_stopped_or_not_installed():
    stopped = judge(unit="LoadState=loaded\nActiveState=failed\nSubState=failed\nUnitFileState=enabled\n")
    assert stopped["findings"][0]["message"] == "nvidia-imex.service is failed (failed)"
    absent = judge(unit="LoadState=not-found\nActiveState=inactive\n", config=None, nodes=None, query=ran(rc=127), domain=ran(rc=127))
    # Without the package nothing else is asked: one finding per missing thing, not a cascade of silent sockets.
    assert subjects(absent) == ["service", "config", "nodes"]
    assert absent["findings"][0]["fix"].startswith("install the nvidia-imex package of the driver's branch")
    disabled = judge(unit=UNIT_RUNNING.replace("enabled", "disabled"))
    assert (disabled["status"], disabled["findings"][0]["severity"]) == ("warn", "warning")


def test_the_check_needs_the_declared_nodes():
    with pytest.raises(AnsibleFilterError, match="verify_check: imex: the observations lack declared_nodes"):
        verify_check({"unit": UNIT_RUNNING}, "imex", DECLARATION)


def test_the_reads_ask_the_declared_socket_or_the_config():
    reads = verify_imex_reads(SOCKET)
    assert reads["files"] == {"imex_config": "/etc/nvidia-imex/config.cfg", "imex_nodes": "/etc/nvidia-imex/nodes_config.cfg"}
    assert reads["commands"]["imex_query"] == ["nvidia-imex-ctl", "-u", SOCKET, "-q"]
    assert reads["commands"]["imex_domain"] == ["nvidia-imex-ctl", "-c", "/etc/nvidia-imex/config.cfg", "-N", "-j"]
    assert verify_imex_reads("")["commands"]["imex_query"] == ["nvidia-imex-ctl", "-c", "/etc/nvidia-imex/config.cfg", "-q"]
    assert reads["commands"]["imex_unit"][-1] == "nvidia-imex.service"


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def test_the_stand_ins_answers_are_what_the_check_reads(tmp_path: Path):
    """Two stand-in daemons on loopback addresses, asked through the stand-in nvidia-imex-ctl: the check passes
    while both serve, and names the silent socket once one runs with the command service off."""
    addresses = ["127.0.0.42", "127.0.0.43"]
    try:
        port = _free_port(addresses[0])
    except OSError:
        pytest.skip("this host cannot bind 127.0.0.42")
    nodes = tmp_path / "nodes_config.cfg"
    nodes.write_text("\n".join(addresses) + "\n")
    daemons, configs = [], []
    try:
        for index, address in enumerate(addresses):
            config = tmp_path / "config{0}.cfg".format(index)
            config.write_text(
                "DAEMONIZE=0\nBIND_INTERFACE_IP={0}\nSERVER_PORT={1}\nIMEX_NODE_CONFIG_FILE={2}\nIMEX_CMD_ENABLED={3}\nIMEX_CMD_UNIX_DOMAIN_PATH={4}\n".format(
                    address, port, nodes, 1 if index == 0 else 0, tmp_path / "ctl{0}.sock".format(index)
                )
            )
            configs.append(config)
            daemons.append(subprocess.Popen([sys.executable, str(STAND_IN / "nvidia-imex"), "-c", str(config)], stderr=subprocess.DEVNULL))

        def ctl(*args: str) -> dict[str, t.Any]:
            done = subprocess.run([sys.executable, str(STAND_IN / "nvidia-imex-ctl"), *args], capture_output=True, text=True, check=False)
            return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

        sock0 = str(tmp_path / "ctl0.sock")
        for _attempt in range(40):
            domain = ctl("-c", str(configs[0]), "-N", "-j")
            if domain["rc"] == 0 and json.loads(domain["stdout"])["status"] == "UP":
                break
            time.sleep(0.25)
        declaration = {"managed": True, "vars": {"imex_cmd_socket": sock0}}

        def as_on_a_node(config: Path) -> str:
            """The config as the node has it: the nodes file where the imex layer writes it."""
            return config.read_text().replace(str(nodes), "/etc/nvidia-imex/nodes_config.cfg")

        seen = {
            "unit": UNIT_RUNNING,
            "config": as_on_a_node(configs[0]),
            "nodes": nodes.read_text(),
            "query": ctl("-u", sock0, "-q"),
            "domain": domain,
            "declared_nodes": addresses,
        }
        check = imex.check_layer(declaration, addresses, seen)
        assert check["status"] == "pass", check

        sock1 = str(tmp_path / "ctl1.sock")
        seen.update(config=as_on_a_node(configs[1]), query=ctl("-u", sock1, "-q"), domain=ctl("-c", str(configs[1]), "-N", "-j"))
        check = imex.check_layer({"managed": True, "vars": {"imex_cmd_socket": sock1}}, addresses, seen)
        assert subjects(check) == ["IMEX_CMD_ENABLED", "control", "domain"], check
        assert check["findings"][1]["message"].startswith("the IMEX control socket does not answer (nvidia-imex-ctl -q: rc 1: Failed to connect")
    finally:
        for daemon in daemons:
            daemon.terminate()
            daemon.wait(timeout=10)
