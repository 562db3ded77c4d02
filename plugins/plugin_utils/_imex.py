# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The imex layer's plan, and the config.cfg merge; pure functions.

plan(): the IMEX package of the driver's branch at the driver's version, the
CUDA repository path, the domain's nodes (declared, or an inventory group's
addresses), the config.cfg keys to set and the TLS files, or the first
problem with its fix.
merge_config(): the packaged config.cfg with keys set in place: each key's
active line gets the value; a key found only commented out gets its line
after the comment; comments are never rewritten.
"""

from __future__ import annotations

import ipaddress
import os
import re
import typing as t
from collections.abc import Mapping

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import imex as knowledge
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge.packages import IMEX_PACKAGES, imex_package
from ansible_collections.gpufleet.nvidia.plugins.module_utils._verify.imex import NODES_FILE, SERVICE, query_argv
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._dcgm import cuda_repository

_DRIVER_VERSION = re.compile(r"^[0-9]{3}\.[0-9]+(\.[0-9]+)?$")
_CONFIG_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")
# A host name as nodes_config.cfg may carry it (RFC 1123 labels).
_HOSTNAME = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
# "KEY=value" as the daemon reads it: the first "=" splits, blanks around the key are ignored.
_ACTIVE = re.compile(r"^(?P<lead>\s*)(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?P<mid>\s*=\s*)(?P<value>.*?)(?P<eol>\r?\n?)$")
_COMMENTED = re.compile(r"^\s*#+\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=")
TLS_FILE_NAMES = {"key": "imex.key", "cert": "imex.crt", "ca": "ca.crt"}

SETTINGS = (
    "driver_version",
    "nvml",
    "os_family",
    "distribution",
    "distribution_major_version",
    "architecture",
    "repo_url",
    "repo_distro",
    "gpg_key_url",
    "nodes",
    "nodes_group",
    "nodes_address_var",
    "group_addresses",
    "bind_interface_ip",
    "server_port",
    "cmd_bind_interface_ip",
    "cmd_port",
    "cmd_socket",
    "auth_encryption",
    "tls_key_set",
    "tls_cert",
    "tls_ca",
    "tls_target_override",
    "tls_dir",
    "config_settings",
)


class ConfigError(ValueError):
    """A setting merge_config cannot write (a bug in the caller, or bad input named by its key)."""


# --- config.cfg -----------------------------------------------------------------


def _value_text(key: str, value: t.Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    text = "" if value is None else str(value)
    if "\n" in text or "\r" in text:
        raise ConfigError("the value of {0} spans lines; config.cfg takes one line per key".format(key))
    return text


def merge_config(text: str, settings: Mapping[str, t.Any]) -> dict[str, t.Any]:
    """config.cfg with `settings` set in place: {content, changed (the keys whose value changed)}.

    Every active line of a key gets the value (the daemon's reading of a key set twice is not documented, so
    no line is left to disagree); a key with no active line gets one after its commented-out line, else at the
    end. Comment lines, blank lines and other keys are kept byte for byte."""
    wanted = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not _CONFIG_KEY.fullmatch(key):
            raise ConfigError("'{0}' is not a config.cfg key (capitals, digits and _, such as IMEX_CMD_ENABLED)".format(key))
        wanted[key] = _value_text(key, value)
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    seen: set[str] = set()
    changed: list[str] = []
    commented_at: dict[str, int] = {}
    for index, line in enumerate(lines):
        match = _ACTIVE.fullmatch(line)
        if match and not line.lstrip().startswith("#") and match.group("key") in wanted:
            key = match.group("key")
            seen.add(key)
            if match.group("value").strip() != wanted[key]:
                lines[index] = "{0}{1}={2}{3}".format(match.group("lead"), key, wanted[key], match.group("eol") or "\n")
                if key not in changed:
                    changed.append(key)
            continue
        commented = _COMMENTED.match(line)
        if commented and commented.group("key") in wanted:
            commented_at.setdefault(commented.group("key"), index)
    # Keys without an active line: after their commented line (last index first, so earlier ones keep their
    # place), else appended in the order given.
    missing = [key for key in wanted if key not in seen]
    for key in sorted((k for k in missing if k in commented_at), key=lambda k: commented_at[k], reverse=True):
        lines.insert(commented_at[key] + 1, "{0}={1}\n".format(key, wanted[key]))
    appended = [key for key in missing if key not in commented_at]
    if appended:
        lines.append("# Set by gpufleet.nvidia.imex (keys the packaged file does not list)\n")
        lines.extend("{0}={1}\n".format(key, wanted[key]) for key in appended)
    changed.extend(key for key in missing if key not in changed)
    return {"content": "".join(lines), "changed": changed}


# --- the plan ---------------------------------------------------------------------


def _repo(settings: Mapping[str, t.Any]) -> tuple[dict[str, str], str | None]:
    # NVIDIA's CUDA repository, whose directories DCGM's packages come from too: the dcgm plan's resolver.
    return cuda_repository(
        settings,
        "imex",
        "NVIDIA's CUDA repository has no directory for {0} {1} (known: {2}); set imex_repo_distro to your mirror's",
        "NVIDIA's CUDA repository has no packages for the architecture {0}",
    )


def _driver(settings: Mapping[str, t.Any]) -> tuple[str, str, str | None]:
    """(version, where it came from, problem): the running driver's (NVML), else imex_driver_version."""
    nvml = settings["nvml"] or {}
    running = str(nvml.get("driver_version") or "") if nvml.get("driver_loaded") else ""
    declared = str(settings["driver_version"] or "").strip()
    if running:
        # IMEX checks the loaded driver stack at start and aborts on a mismatch: the running driver decides.
        return running, "the running driver (NVML)", None
    if not declared:
        return (
            "",
            "",
            (
                "no NVIDIA driver is running and none is declared, so the IMEX package's version is unknown; set "
                "imex_driver_version (the driver the node will run, such as 580.95.05)"
            ),
        )
    if not _DRIVER_VERSION.fullmatch(declared):
        return "", "", "imex_driver_version must be a full driver version such as 580.95.05 (the IMEX package's version), got '{0}'".format(declared)
    return declared, "imex_driver_version", None


def _address_problem(address: str, where: str) -> str | None:
    try:
        ipaddress.ip_address(address)
        return None
    except ValueError:
        pass
    if _HOSTNAME.fullmatch(address):
        return None
    return "{0}: '{1}' is neither an IP address nor a host name".format(where, address)


def nodes(settings: Mapping[str, t.Any]) -> tuple[list[str], str | None]:
    """The domain's node addresses in order, without repeats, or the problem naming the variable and the fix."""
    declared = settings["nodes"]
    group = str(settings["nodes_group"] or "")
    if isinstance(declared, (str, bytes)) or not isinstance(declared, (list, tuple)):
        return [], "imex_nodes must be a list of the IMEX domain's node addresses, got {0}".format(type(declared).__name__)
    if declared and group:
        return [], "set imex_nodes or imex_nodes_group, not both (imex_nodes lists {0} addresses, imex_nodes_group is '{1}')".format(len(declared), group)
    found: list[str] = []
    if group:
        members = settings["group_addresses"]
        variable = str(settings["nodes_address_var"] or "")
        if not isinstance(members, Mapping):
            return [], "imex_nodes_group '{0}' is not a group of the inventory; name the group of the IMEX domain's nodes".format(group)
        for host, address in members.items():
            if address in (None, ""):
                return (
                    [],
                    "imex_nodes_group '{0}': host {1} has no {2}; set {2} for it (the address its IMEX daemon listens on), "
                    "or set imex_nodes_address_var".format(group, host, variable),
                )
            problem = _address_problem(str(address), "imex_nodes_group '{0}': {1} of {2}".format(group, variable, host))
            if problem:
                return [], problem
            found.append(str(address))
    else:
        for index, address in enumerate(declared):
            problem = _address_problem(str(address), "imex_nodes[{0}]".format(index))
            if problem:
                return [], problem
            found.append(str(address))
    unique = list(dict.fromkeys(found))
    if not unique:
        return [], "the IMEX domain has no nodes; list their addresses in imex_nodes, or name their inventory group in imex_nodes_group"
    return unique, None


def nodes_content(addresses: t.Sequence[str]) -> str:
    """nodes_config.cfg: one address a line, after a comment that names who writes it."""
    return "# Managed by gpufleet.nvidia.imex (imex_nodes / imex_nodes_group): the IMEX domain's nodes.\n" + "".join(
        "{0}\n".format(address) for address in addresses
    )


def _port(value: t.Any, variable: str, empty: bool = False) -> tuple[str, str | None]:
    text = str(value if value is not None else "").strip()
    if empty and text == "":
        return "", None
    if not text.isdigit() or not 0 < int(text) < 65536:
        return "", "{0} must be a TCP port (1-65535){1}, got '{2}'".format(variable, ", or empty for none" if empty else "", text)
    return text, None


def _port_or_none(value: t.Any, variable: str) -> tuple[str, str | None]:
    return _port(value, variable, empty=True)


def _ip(value: t.Any, variable: str) -> tuple[str, str | None]:
    text = str(value or "").strip()
    if text == "":
        return "", None
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return "", "{0} must be an IP address of this node (or empty), got '{1}'".format(variable, text)
    return text, None


def _config(settings: Mapping[str, t.Any], nodes_file: str) -> tuple[dict[str, str], list[dict[str, t.Any]], str | None]:
    """(config.cfg keys in the order set, TLS files, problem)."""
    values: dict[str, str] = {"IMEX_NODE_CONFIG_FILE": nodes_file}
    for key, variable, check in (
        ("BIND_INTERFACE_IP", "imex_bind_interface_ip", _ip),
        ("SERVER_PORT", "imex_server_port", _port),
        ("IMEX_CMD_BIND_INTERFACE_IP", "imex_cmd_bind_interface_ip", _ip),
        ("IMEX_CMD_PORT", "imex_cmd_port", _port_or_none),
    ):
        value, problem = check(settings[variable[len("imex_") :]], variable)
        if problem:
            return {}, [], problem
        values[key] = value
    socket = str(settings["cmd_socket"] or "")
    if socket and not os.path.isabs(socket):
        return {}, [], "imex_cmd_socket must be an absolute path (the DRA driver's default is /etc/nvidia-imex/imex_ctrl.sock), or empty for none"
    if not socket and not values["IMEX_CMD_PORT"]:
        return (
            {},
            [],
            (
                "imex_cmd_socket and imex_cmd_port are both empty: the command service would have nowhere to listen and "
                "nvidia-imex-ctl (and verify) could not ask the daemon; set imex_cmd_socket (the DRA driver's host-managed "
                "mode reads /etc/nvidia-imex/imex_ctrl.sock) or imex_cmd_port"
            ),
        )
    # The command service is what nvidia-imex-ctl, verify and the DRA driver's host-managed mode talk to.
    values["IMEX_CMD_ENABLED"] = "1"
    values["IMEX_CMD_UNIX_DOMAIN_PATH"] = socket
    tls: list[dict[str, t.Any]] = []
    if settings["auth_encryption"]:
        if not settings["tls_key_set"] or not str(settings["tls_cert"] or "").strip() or not str(settings["tls_ca"] or "").strip():
            return (
                {},
                [],
                (
                    "imex_auth_encryption is on, but imex_tls_key, imex_tls_cert and imex_tls_ca are not all set; give the "
                    "node's private key (vault it), its certificate and the certificate authority's, in PEM"
                ),
            )
        directory = str(settings["tls_dir"] or "")
        if not os.path.isabs(directory):
            return {}, [], "imex_tls_dir must be an absolute path, got '{0}'".format(directory)
        values.update(IMEX_ENABLE_AUTH_ENCRYPTION="1", IMEX_AUTH_ENCRYPTION_MODE="SSL_TLS", IMEX_AUTH_SOURCE="FILE")
        for row in knowledge.IMEX_TLS_KEYS:
            values[row["key"]] = "{0}/{1}".format(directory.rstrip("/"), TLS_FILE_NAMES[row["file"]])
        override, problem = str(settings["tls_target_override"] or ""), None
        if "\n" in override:
            problem = "imex_tls_target_override must be one host name"
        if problem:
            return {}, [], problem
        values["IMEX_SECURITY_TARGET_OVERRIDE"] = override
        tls = [
            {
                "file": name,
                "path": "{0}/{1}".format(directory.rstrip("/"), TLS_FILE_NAMES[name]),
                "mode": "0600" if name == "key" else "0644",
                "secret": name == "key",
            }
            for name in ("key", "cert", "ca")
        ]
    else:
        values["IMEX_ENABLE_AUTH_ENCRYPTION"] = "0"
    extra = settings["config_settings"] or {}
    if not isinstance(extra, Mapping):
        return {}, [], "imex_config_settings must be a mapping of config.cfg keys to values"
    for key, value in extra.items():
        if not isinstance(key, str) or not _CONFIG_KEY.fullmatch(key):
            return {}, [], "imex_config_settings: '{0}' is not a config.cfg key (capitals, digits and _)".format(key)
        if key in values:
            return {}, [], "imex_config_settings sets {0}, which the role sets from its own variables; use those instead".format(key)
        if isinstance(value, (Mapping, list, tuple)):
            return {}, [], "imex_config_settings: the value of {0} must be a string or a number".format(key)
        try:
            values[key] = _value_text(key, value)
        except ConfigError as exc:
            return {}, [], "imex_config_settings: {0}".format(exc)
    return values, tls, None


def plan(settings: Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The imex role's plan for one host; `problem` is "" or the first problem with its fix."""
    missing = sorted(set(SETTINGS) - set(settings))
    if missing:
        raise ValueError("settings lack {0}".format(", ".join(missing)))
    result: dict[str, t.Any] = {"problem": ""}
    repo, problem = _repo(settings)
    if not problem:
        version, driver_source, problem = _driver(settings)
    if not problem:
        branch = version.split(".", maxsplit=1)[0]
        package = imex_package(branch)
        if package is None:
            first = min((row["first_branch"] for row in IMEX_PACKAGES), key=int)
            problem = "the driver {0} (R{1}) has no IMEX package: IMEX ships from R{2}; run a driver of R{2} or later, or set imex_enabled: false".format(
                version, branch, first
            )
    if not problem:
        addresses, problem = nodes(settings)
    if not problem:
        config, tls, problem = _config(settings, NODES_FILE)
    if problem:
        result["problem"] = problem
        return result
    manager = "dnf" if settings["os_family"] == "RedHat" else "apt"
    pinned = knowledge.IMEX_PACKAGE_VERSION["value"][manager].format(version=version)
    separator = "-" if manager == "dnf" else "="
    result.update(
        manager=manager,
        driver_version=version,
        driver_source=driver_source,
        packages=[package],
        package_version=pinned,
        install=["{0}{1}{2}".format(package, separator, pinned)],
        repo=repo,
        nodes=addresses,
        nodes_file=NODES_FILE,
        nodes_content=nodes_content(addresses),
        config_file=knowledge.IMEX_CONFIG_FILE["value"],
        config=config,
        tls=tls,
        service=SERVICE,
        query_argv=query_argv(config.get("IMEX_CMD_UNIX_DOMAIN_PATH") or ""),
    )
    return result
