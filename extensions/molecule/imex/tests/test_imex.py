"""imex with STAND-IN packages: what the role did, and what verify's imex check says (never IMEX itself).

The stand-in daemon (tests/harness/stand-in-imex/) reads the files the role
wrote and answers nvidia-imex-ctl on its command socket, so the tests ask it
as verify does. Then the node is broken twice - the command service turned
off, the nodes file removed - and verify's check must fail naming the fix;
the imex layer's next run repairs the node.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "_shared"))

# pylint: disable=wrong-import-position
from stack import host_vars, node, scenario_playbook

ROOT = HERE.parents[3]
SCENARIO = HERE.parent
PACKAGE = {"imex-debian12": ("nvidia-imex-570", "570.133.20-1"), "imex-debian13": ("nvidia-imex", "580.159.04-1")}
DOMAIN = ["127.0.0.2", "127.0.0.3"]
CONFIG = "/etc/nvidia-imex/config.cfg"
NODES = "/etc/nvidia-imex/nodes_config.cfg"
SOCKET = "/etc/nvidia-imex/imex_ctrl.sock"
TLS = "/etc/nvidia-imex/tls"
PACKAGED_CONFIG = ROOT / "tests" / "harness" / "stand-in-imex" / "config.cfg"


def name(host) -> str:
    return host.backend.host


def active_keys(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), value.strip())
    return found


def domain_status(host, attempts: int = 20) -> dict:
    """`nvidia-imex-ctl -N -j` once the domain is UP (the peers find each other within a second or two)."""
    status = {}
    for _attempt in range(attempts):
        status = json.loads(node(host).check_output("nvidia-imex-ctl -N -j"))
        if status["status"] == "UP":
            break
        time.sleep(0.5)
    return status


def test_the_drivers_imex_package_is_installed_pinned_and_held(host):
    package, version = PACKAGE[name(host)]
    row = node(host).check_output("dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}' " + package)
    assert row.split()[:3] == [package, version, "hi"], row
    assert "Signed-By: /etc/apt/keyrings/nvidia-imex.asc" in node(host).file("/etc/apt/sources.list.d/nvidia-imex.sources").content_string


def test_the_nodes_file_lists_the_groups_addresses(host):
    nodes = node(host).file(NODES)
    assert nodes.mode == 0o644 and nodes.user == "root"
    assert [line for line in nodes.content_string.splitlines() if not line.startswith("#")] == DOMAIN


def test_config_keys_are_set_in_place_and_the_packaged_comments_stay(host):
    text = node(host).file(CONFIG).content_string
    keys = active_keys(text)
    address = host_vars(host)["imex_address"]
    assert keys["IMEX_CMD_ENABLED"] == "1"
    assert keys["IMEX_CMD_UNIX_DOMAIN_PATH"] == SOCKET
    assert (keys["SERVER_PORT"], keys["IMEX_CMD_PORT"], keys["BIND_INTERFACE_IP"], keys["IMEX_CMD_BIND_INTERFACE_IP"]) == ("1950", "1955", address, address)
    assert keys["IMEX_NODE_CONFIG_FILE"] == NODES
    packaged_comments = [line for line in PACKAGED_CONFIG.read_text().splitlines() if line.startswith("#")]
    written_comments = [line for line in text.splitlines() if line.startswith("#")]
    assert written_comments == packaged_comments
    # The socket's line sits under its commented example, not at the end.
    lines = text.splitlines()
    at = lines.index("IMEX_CMD_UNIX_DOMAIN_PATH=" + SOCKET)
    assert lines[at - 1] == "# IMEX_CMD_UNIX_DOMAIN_PATH=/etc/nvidia-imex/imex_ctrl.sock"


def test_tls_files_and_keys_where_asked_for(host):
    keys = active_keys(node(host).file(CONFIG).content_string)
    if name(host) != "imex-debian13":
        assert keys["IMEX_ENABLE_AUTH_ENCRYPTION"] == "0"
        assert not node(host).file(TLS).exists
        return
    assert node(host).file(TLS).mode == 0o700
    key = node(host).file(TLS + "/imex.key")
    assert (key.mode, key.user, key.content_string) == (0o600, "root", host_vars(host)["imex_tls_key"])
    assert node(host).file(TLS + "/imex.crt").mode == 0o644
    assert (keys["IMEX_ENABLE_AUTH_ENCRYPTION"], keys["IMEX_AUTH_ENCRYPTION_MODE"], keys["IMEX_AUTH_SOURCE"]) == ("1", "SSL_TLS", "FILE")
    assert keys["IMEX_SERVER_KEY"] == keys["IMEX_CLIENT_KEY"] == TLS + "/imex.key"
    assert keys["IMEX_SERVER_CERT_AUTH"] == keys["IMEX_CLIENT_CERT_AUTH"] == TLS + "/ca.crt"
    assert keys["IMEX_SECURITY_TARGET_OVERRIDE"] == "imex.test-ground.invalid"


def test_the_daemon_answers_ready_on_its_socket_and_the_domain_is_up(host):
    assert node(host).service("nvidia-imex").is_running
    assert node(host).service("nvidia-imex").is_enabled
    assert node(host).check_output("nvidia-imex-ctl -u {0} -q".format(SOCKET)) == "READY"
    status = domain_status(host)
    assert status["status"] == "UP", status
    assert sorted(peer["host"] for peer in status["nodes"].values()) == DOMAIN
    # The stand-in's daemon carries its package's version: the driver's.
    assert {peer["version"] for peer in status["nodes"].values()} == {"570.133.20", "580.159.04"}


def test_check_diff_shows_a_changed_port_and_changes_nothing_nor_shows_a_new_key(host):
    if name(host) != "imex-debian13":
        return
    before = node(host).file(CONFIG).content_string
    rotated = {"imex_server_port": 1951, "imex_tls_key": "rotated imex stand-in key material\n"}
    run = scenario_playbook(SCENARIO / "converge.yml", "--limit", name(host), "--check", "--diff", "-e", json.dumps(rotated))
    assert run.returncode == 0, run.stdout
    # The diff lines arrive coloured (ANSI codes), ANSIBLE_NOCOLOR or not.
    diff = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in run.stdout.splitlines()]
    assert "-SERVER_PORT=1950" in diff and "+SERVER_PORT=1951" in diff, run.stdout
    assert "changed=0" not in run.stdout.split("PLAY RECAP")[-1], run.stdout
    assert node(host).file(CONFIG).content_string == before
    # The key would change, and the run says so without showing either key.
    assert "rotated imex stand-in key material" not in run.stdout and host_vars(host)["imex_tls_key"].strip() not in run.stdout
    assert "(item=(censored due to no_log))" in run.stdout, run.stdout


def test_verify_fails_naming_the_fix_for_the_control_socket_and_the_nodes_file_until_the_layer_repairs(host):
    """One node is broken twice; verify names each problem with its fix, and the layer's next run repairs it
    (the daemon READY and the domain UP on the converged node are the test before)."""
    if name(host) != "imex-debian13":
        return
    verify = SCENARIO / "verify-imex.yml"
    node(host).check_output("sed -i 's/^IMEX_CMD_ENABLED=1$/IMEX_CMD_ENABLED=0/' {0} && systemctl restart nvidia-imex".format(CONFIG))
    run = scenario_playbook(verify, "--limit", name(host))
    assert run.returncode != 0, run.stdout
    assert "the IMEX command service is off in {0} (IMEX_CMD_ENABLED=0)".format(CONFIG) in run.stdout, run.stdout
    assert "the IMEX control socket does not answer (nvidia-imex-ctl -q: rc 1" in run.stdout, run.stdout
    assert "fix: set IMEX_CMD_ENABLED=1 and IMEX_CMD_UNIX_DOMAIN_PATH={0} in {1}, restart nvidia-imex".format(SOCKET, CONFIG) in run.stdout

    node(host).check_output("rm {0}".format(NODES))
    run = scenario_playbook(verify, "--limit", name(host))
    assert run.returncode != 0, run.stdout
    assert "{0} is missing: the daemon has no domain - fix: write the domain's nodes: run the imex layer (--tags imex)".format(NODES) in run.stdout

    # The layer repairs both: the key set again, the file written again, the daemon restarted by the handler.
    run = scenario_playbook(SCENARIO / "converge.yml", "--limit", name(host))
    assert run.returncode == 0, run.stdout
    assert "RUNNING HANDLER [gpufleet.nvidia.imex : Restart nvidia-imex]" in run.stdout, run.stdout
    assert domain_status(host)["status"] == "UP"
    run = scenario_playbook(verify, "--limit", name(host))
    assert run.returncode == 0, run.stdout
    assert "imex pass: nvidia-imex READY, domain UP with 2 node(s)" in run.stdout, run.stdout
