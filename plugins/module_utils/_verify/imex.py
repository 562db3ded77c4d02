# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""verify's imex check: is the host-managed IMEX daemon serving its domain?

Where imex_enabled is on: nvidia-imex.service is active; config.cfg has the
command service on; `nvidia-imex-ctl -q` answers on it (on the Unix socket
where one is set, as NVIDIA's DRA driver asks in its host-managed mode) with
READY; `nvidia-imex-ctl -N -j` reports the domain UP; nodes_config.cfg exists
and lists the declared nodes. Each failure is a finding with its fix.

Pure functions over what the verify role reads in one node_reads_info call
(reads() says what); standard library only (Python 3.8+), so a boot-time
check could run it too.
"""

from __future__ import annotations

import json
import re
import typing as t

from .._knowledge import imex as knowledge
from .._knowledge.kubernetes import DRA_IMEX_UNIT
from .result import check, finding, judged

LAYER = "imex"
# The unit and the nodes file (where the DRA driver's prerequisites name them), and the service's name.
UNIT = DRA_IMEX_UNIT["value"]["unit"]
NODES_FILE = DRA_IMEX_UNIT["value"]["config"]
SERVICE = UNIT[: -len(".service")] if UNIT.endswith(".service") else UNIT
RUN_LAYER = "run the imex layer (--tags imex)"
_ACTIVE = re.compile(r"^(?P<lead>\s*)(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?P<mid>\s*=\s*)(?P<value>.*?)(?P<eol>\r?\n?)$")


def read_config(text: t.Optional[str]) -> t.Dict[str, str]:
    """The active KEY=value pairs of config.cfg; the first of a key set twice."""
    found: t.Dict[str, str] = {}
    for line in (text or "").splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = _ACTIVE.fullmatch(line)
        if match:
            found.setdefault(match.group("key"), match.group("value").strip())
    return found


def read_nodes(text: t.Optional[str]) -> t.List[str]:
    """The addresses of nodes_config.cfg: one a line, blank lines and # comments skipped."""
    return [line.strip() for line in (text or "").splitlines() if line.strip() and not line.lstrip().startswith("#")]


def query_argv(socket: str) -> t.List[str]:
    """`nvidia-imex-ctl -q` on the Unix socket where one is set (as the DRA driver asks), else through config.cfg."""
    ctl = knowledge.IMEX_CTL["value"]
    where = [ctl["socket_flag"], socket] if socket else [ctl["config_flag"], knowledge.IMEX_CONFIG_FILE["value"]]
    return [ctl["binary"]] + where + list(ctl["query"])


def domain_argv() -> t.List[str]:
    ctl = knowledge.IMEX_CTL["value"]
    return [ctl["binary"], ctl["config_flag"], knowledge.IMEX_CONFIG_FILE["value"]] + list(ctl["domain"])


def reads(socket: str) -> t.Dict[str, t.Any]:
    """What the check reads on the node (node_reads_info's files and commands), for the declared socket."""
    return {
        "files": {"imex_config": knowledge.IMEX_CONFIG_FILE["value"], "imex_nodes": NODES_FILE},
        "commands": {
            "imex_unit": ["systemctl", "show", "--property=LoadState,ActiveState,SubState,UnitFileState", UNIT],
            "imex_query": query_argv(socket),
            "imex_domain": domain_argv(),
        },
    }


def _show(text: t.Optional[str]) -> t.Dict[str, str]:
    props: t.Dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            props[key] = value
    return props


def _command(observed: t.Mapping[str, t.Any], name: str) -> t.Dict[str, t.Any]:
    value = observed.get(name)
    return dict(value) if isinstance(value, t.Mapping) else {"rc": None, "stdout": "", "stderr": ""}


def _text(result: t.Mapping[str, t.Any]) -> str:
    return " ".join(" ".join(str(result.get(stream) or "") for stream in ("stderr", "stdout")).split())[:300]


def _error(subject: str, message: str, fix: str, severity: str = "error") -> t.Dict[str, str]:
    return finding(LAYER, subject, message, fix, severity)


def _unit_findings(show: t.Dict[str, str], seen: t.Dict[str, t.Any]) -> t.List[t.Dict[str, str]]:
    unit = UNIT
    seen["service"] = {key: show.get(key) for key in ("LoadState", "ActiveState", "SubState", "UnitFileState")}
    found = []
    if show.get("LoadState") != "loaded":
        return [
            _error(
                "service",
                "{0} is {1}: the IMEX package is not installed".format(unit, show.get("LoadState") or "not known to systemd"),
                "install the nvidia-imex package of the driver's branch: " + RUN_LAYER,
            )
        ]
    if show.get("ActiveState") != "active":
        found.append(
            _error(
                "service",
                "{0} is {1} ({2})".format(unit, show.get("ActiveState") or "?", show.get("SubState") or "?"),
                "systemctl start {0}; journalctl -u {0} says why it stopped; or {1}".format(unit, RUN_LAYER),
            )
        )
    if show.get("UnitFileState") != "enabled":
        found.append(
            _error(
                "service",
                "{0} is {1}, not enabled: it will not start at boot".format(unit, show.get("UnitFileState") or "?"),
                "systemctl enable {0}; or {1}".format(unit, RUN_LAYER),
                "warning",
            )
        )
    return found


def _config_findings(config: t.Optional[str], socket: str, seen: t.Dict[str, t.Any]) -> t.List[t.Dict[str, str]]:
    path = knowledge.IMEX_CONFIG_FILE["value"]
    if config is None:
        seen["config"] = None
        return [_error("config", "{0} is missing".format(path), "reinstall the nvidia-imex package and " + RUN_LAYER)]
    keys = read_config(config)
    seen["config"] = {key: keys.get(key) for key in ("IMEX_CMD_ENABLED", "IMEX_CMD_UNIX_DOMAIN_PATH", "IMEX_CMD_PORT", "IMEX_NODE_CONFIG_FILE")}
    found = []
    if keys.get("IMEX_CMD_ENABLED") != "1":
        found.append(
            _error(
                "IMEX_CMD_ENABLED",
                "the IMEX command service is off in {0} (IMEX_CMD_ENABLED={1}): nvidia-imex-ctl and the DRA driver cannot ask the daemon".format(
                    path, keys.get("IMEX_CMD_ENABLED", "")
                ),
                "set IMEX_CMD_ENABLED=1 in {0} and restart nvidia-imex: {1}".format(path, RUN_LAYER),
            )
        )
    if socket and keys.get("IMEX_CMD_UNIX_DOMAIN_PATH") != socket:
        found.append(
            _error(
                "IMEX_CMD_UNIX_DOMAIN_PATH",
                "{0} has IMEX_CMD_UNIX_DOMAIN_PATH={1}, not the declared imex_cmd_socket {2}".format(path, keys.get("IMEX_CMD_UNIX_DOMAIN_PATH", ""), socket),
                "set IMEX_CMD_UNIX_DOMAIN_PATH={0} and restart nvidia-imex: {1}".format(socket, RUN_LAYER),
            )
        )
    nodes_file = NODES_FILE
    if keys.get("IMEX_NODE_CONFIG_FILE", nodes_file) != nodes_file:
        found.append(
            _error(
                "IMEX_NODE_CONFIG_FILE",
                "{0} reads the nodes from {1}, not {2}, which the imex layer writes".format(path, keys.get("IMEX_NODE_CONFIG_FILE"), nodes_file),
                "set IMEX_NODE_CONFIG_FILE={0}: {1}".format(nodes_file, RUN_LAYER),
            )
        )
    return found


def _query_findings(result: t.Dict[str, t.Any], socket: str, seen: t.Dict[str, t.Any]) -> t.List[t.Dict[str, str]]:
    ready = knowledge.IMEX_CTL["value"]["ready"]
    where = "on its socket {0}".format(socket) if socket else "through {0}".format(knowledge.IMEX_CONFIG_FILE["value"])
    state = str(result.get("stdout") or "").strip()
    seen["daemon_state"] = state or None
    if result.get("rc") == 127:
        return [_error("control", "nvidia-imex-ctl is not installed", "install the nvidia-imex package of the driver's branch: " + RUN_LAYER)]
    if result.get("rc") != 0 or not state:
        return [
            _error(
                "control",
                "the IMEX control {0} does not answer (nvidia-imex-ctl -q: rc {1}: {2})".format(
                    "socket" if socket else "service", result.get("rc"), _text(result) or "no output"
                ),
                "set IMEX_CMD_ENABLED=1{0} in {1}, restart nvidia-imex and check that it runs: {2}".format(
                    " and IMEX_CMD_UNIX_DOMAIN_PATH={0}".format(socket) if socket else "", knowledge.IMEX_CONFIG_FILE["value"], RUN_LAYER
                ),
            )
        ]
    if state != ready:
        known = knowledge.IMEX_DAEMON_STATES["value"]
        if state in ("WAITING_FOR_PEERS", "WAITING_FOR_RECOVERY"):
            fix = "start nvidia-imex on the other nodes of the domain, and check that they reach each other on SERVER_PORT"
        elif state in known:
            fix = "wait for the daemon to finish starting; journalctl -u nvidia-imex says why it does not"
        else:
            fix = "check the nvidia-imex-ctl and nvidia-imex versions (both the driver's)"
        return [_error("daemon", "the IMEX daemon {0} is {1}, not {2}".format(where, state, ready), fix)]
    return []


def _domain_findings(result: t.Dict[str, t.Any], seen: t.Dict[str, t.Any]) -> t.List[t.Dict[str, str]]:
    up = knowledge.IMEX_DOMAIN_STATES["value"]["up"]
    if result.get("rc") != 0:
        seen["domain"] = None
        return [
            _error(
                "domain",
                "nvidia-imex-ctl -N -j gave no domain status (rc {0}: {1})".format(result.get("rc"), _text(result) or "no output"),
                "check that nvidia-imex runs with its command service on: " + RUN_LAYER,
            )
        ]
    try:
        status = json.loads(str(result.get("stdout") or ""))
    except ValueError:
        status = None
    if not isinstance(status, dict) or not isinstance(status.get("status"), str):
        seen["domain"] = None
        return [
            _error(
                "domain",
                "nvidia-imex-ctl -N -j did not print the domain's JSON status: {0}".format(_text(result) or "no output"),
                "check the nvidia-imex-ctl version (the driver's)",
            )
        ]
    members = status.get("nodes") if isinstance(status.get("nodes"), dict) else {}
    peers = {str(node.get("host") or index): str(node.get("status") or "?") for index, node in sorted(members.items()) if isinstance(node, dict)}
    seen["domain"] = {"status": status["status"], "nodes": peers}
    if status["status"].upper() == up:
        return []
    waiting = ["{0} {1}".format(host, state) for host, state in peers.items() if state != knowledge.IMEX_CTL["value"]["ready"]]
    return [
        _error(
            "domain",
            "the IMEX domain is {0}, not {1}{2}".format(status["status"], up, ": " + ", ".join(waiting) if waiting else ""),
            "start nvidia-imex on every node of nodes_config.cfg and check that they reach each other on SERVER_PORT",
        )
    ]


def _nodes_findings(text: t.Optional[str], declared: t.Sequence[str], seen: t.Dict[str, t.Any]) -> t.List[t.Dict[str, str]]:
    path = NODES_FILE
    if text is None:
        seen["nodes"] = None
        return [_error("nodes", "{0} is missing: the daemon has no domain".format(path), "write the domain's nodes: " + RUN_LAYER)]
    listed = read_nodes(text)
    seen["nodes"] = listed
    missing = [address for address in declared if address not in listed]
    extra = [address for address in listed if address not in declared]
    if not missing and not extra:
        return []
    parts = []
    if missing:
        parts.append("lacks {0}".format(", ".join(missing)))
    if extra:
        parts.append("lists {0}, not declared".format(", ".join(extra)))
    return [_error("nodes", "{0} {1}".format(path, " and ".join(parts)), "write the declared nodes (imex_nodes / imex_nodes_group): " + RUN_LAYER)]


def check_layer(declaration: t.Mapping[str, t.Any], declared_nodes: t.Sequence[str], observed: t.Mapping[str, t.Any]) -> t.Dict[str, t.Any]:
    """declaration: the imex layer of declared_layers; declared_nodes: the addresses the layer writes;
    observed: {unit, config, nodes, query, domain} (systemctl show's text, the two files' text or None, and
    the two nvidia-imex-ctl results {rc, stdout, stderr})."""
    if not declaration.get("managed"):
        return check(LAYER, "not_managed", "not managed: {0}".format(declaration.get("reason", "")))
    wanted = declaration.get("vars") or {}
    socket = str(wanted.get("imex_cmd_socket") or "")
    seen: t.Dict[str, t.Any] = {}
    found = _unit_findings(_show(observed.get("unit")), seen)
    found += _config_findings(observed.get("config"), socket, seen)
    found += _nodes_findings(observed.get("nodes"), list(declared_nodes), seen)
    if seen["service"].get("LoadState") == "loaded":
        found += _query_findings(_command(observed, "query"), socket, seen)
        found += _domain_findings(_command(observed, "domain"), seen)
    expected = {"service": "active", "command_service": socket or "IMEX_CMD_PORT", "daemon": "READY", "domain": "UP", "nodes": list(declared_nodes)}
    summary = "nvidia-imex READY, domain UP with {0} node(s)".format(len(declared_nodes))
    return judged(LAYER, summary, expected, seen, found)
