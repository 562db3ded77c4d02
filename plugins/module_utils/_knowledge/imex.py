# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""NVIDIA IMEX (the multi-node NVLink memory-export daemon): its config file,
the config.cfg keys the imex role sets, the control tool's commands and the
states it reports, and the package version the CUDA repository spells.

The package names per driver branch are packages.IMEX_PACKAGES; the unit
(nvidia-imex.service) and the nodes file are kubernetes.DRA_IMEX_UNIT, where
the DRA driver's prerequisites name them (not kept twice). Read by the imex role's
plan (plugins/plugin_utils/_imex.py), verify's imex check
(plugins/module_utils/_verify/imex.py) and the test ground's stand-in.
Standard library only.
"""

from __future__ import annotations

import typing as t

_GUIDE = "https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/"
_CONFIG = _GUIDE + "config.html"
_CMDSERVICE = _GUIDE + "cmdservice.html"
_GETTING_STARTED = _GUIDE + "gettingstarted.html"
# The config template the DRA driver gives its own IMEX daemons: every key of
# config.cfg, with the values NVIDIA's own deployment uses.
_DRA_TEMPLATE = "NVIDIA/k8s-dra-driver-gpu@22407113:templates/compute-domain-daemon-config.tmpl.cfg"
# The DRA driver's host-managed IMEX mode (resources.computeDomains.imex.mode=hostManaged): the
# "Host-managed IMEX" section of its prerequisites page. The stored snapshot of the repository
# (22407113, 2026-05-15) predates that section, so no commit of it can be named here; the text
# was read from the project's docs/prerequisites.md as the search index holds it.
_DRA_HOST_MANAGED = "NVIDIA/k8s-dra-driver-gpu:docs/prerequisites.md (Host-managed IMEX; newer than 22407113, commit not stored)"
# DCGM reads both states from nvidia-imex-ctl and names every value it knows.
_DCGM_FIELDS = "NVIDIA/DCGM@72fa3fea:dcgmlib/dcgm_fields.h (DCGM_FI_IMEX_DOMAIN_STATUS, DCGM_FI_IMEX_DAEMON_STATUS)"
_DCGM_IMEX = "NVIDIA/DCGM@72fa3fea:dcgmlib/src/DcgmImexManager.cpp ; dcgmlib/src/tests/DcgmImexManagerTests.cpp"

# The daemon's own configuration file: the service reads it at start (a change
# needs a restart), and nvidia-imex-ctl reads it by default (-c) to find the
# command service.
IMEX_CONFIG_FILE: dict[str, t.Any] = {
    "value": "/etc/nvidia-imex/config.cfg",
    "source": _CMDSERVICE + " (nvidia-imex-ctl -c: 'Default value is /etc/nvidia-imex/config.cfg') ; " + _CONFIG,
    "checked": "2026-12-01",
}

# The config.cfg keys the imex role sets, each with the value NVIDIA's own
# files carry (the DRA driver's template; the guide's pages as the index holds
# them give defaults only for BIND_INTERFACE_IP and SERVER_PORT) and what it
# does. Any other key can be set through imex_config_settings.
IMEX_CONFIG_KEYS: tuple[dict[str, t.Any], ...] = (
    {
        "key": "IMEX_NODE_CONFIG_FILE",
        "default": "/etc/nvidia-imex/nodes_config.cfg",
        "note": "the file with the IP addresses of the domain's nodes, one a line",
        "source": _DRA_TEMPLATE + " ; " + _CONFIG,
        "checked": "2026-12-01",
    },
    {
        "key": "BIND_INTERFACE_IP",
        "default": "",
        "note": "the address the daemon listens on for its peers; empty: the address of the nodes file that matches one of the node's interfaces",
        "source": _CONFIG + " (IMEX Service Communication Socket Interface)",
        "checked": "2026-12-01",
    },
    {
        "key": "SERVER_PORT",
        "default": "50000",
        "note": "the TCP port the daemons of one domain reach each other on (the same on every node)",
        "source": _CONFIG + " (IMEX Service Communication TCP Listening Port)",
        "checked": "2026-12-01",
    },
    {
        "key": "IMEX_CMD_ENABLED",
        "default": "1",
        "note": "the command (control) service nvidia-imex-ctl queries; the DRA driver's host-managed mode needs it on",
        "source": _DRA_TEMPLATE + " ; " + _DRA_HOST_MANAGED + " ; " + _CMDSERVICE,
        "checked": "2026-12-01",
    },
    {
        "key": "IMEX_CMD_BIND_INTERFACE_IP",
        "default": "",
        "note": "the address of the command service's TCP port; empty with a port: every interface",
        "source": _DRA_TEMPLATE,
        "checked": "2026-12-01",
    },
    {
        "key": "IMEX_CMD_PORT",
        "default": "50005",
        "note": "the command service's TCP port",
        "source": _DRA_TEMPLATE,
        "checked": "2026-12-01",
    },
    {
        "key": "IMEX_CMD_UNIX_DOMAIN_PATH",
        "default": "",
        "note": "the command service's Unix socket; the DRA driver's host-managed mode runs nvidia-imex-ctl -q on "
        "/etc/nvidia-imex/imex_ctrl.sock (its Helm value resources.computeDomains.imex.hostSocketPath)",
        "source": _DRA_TEMPLATE + " ; " + _DRA_HOST_MANAGED,
        "checked": "2026-12-01",
    },
    {
        "key": "IMEX_ENABLE_AUTH_ENCRYPTION",
        "default": "0",
        "note": "1: authenticate and encrypt the traffic between the nodes",
        "source": _DRA_TEMPLATE,
        "checked": "2026-12-01",
    },
    {
        "key": "IMEX_AUTH_ENCRYPTION_MODE",
        "default": "SSL_TLS",
        "note": "SSL_TLS (mutual TLS with the keys below), GSS_AUTH_ENCRYPT or GSS_AUTH_ONLY (Kerberos)",
        "source": _DRA_TEMPLATE,
        "checked": "2026-12-01",
    },
    {
        "key": "IMEX_AUTH_SOURCE",
        "default": "",
        "note": "FILE: the key and certificate values below are paths of files (ENV_PATH and ENV_VAL read environment variables; the role writes files)",
        "source": _DRA_TEMPLATE,
        "checked": "2026-12-01",
    },
    {
        "key": "IMEX_SECURITY_TARGET_OVERRIDE",
        "default": "",
        "note": "the host name the peers' certificates are checked against, where their common name is not the node's address",
        "source": _DRA_TEMPLATE,
        "checked": "2026-12-01",
    },
)

# The key and certificate keys of SSL_TLS mode, each the role's file for it
# (with IMEX_AUTH_SOURCE=FILE their values are paths). The role gives the
# server and the client side the same key pair: a node is both to its peers.
# "secret": written 0600 and never logged.
IMEX_TLS_KEYS: tuple[dict[str, t.Any], ...] = (
    {"key": "IMEX_SERVER_KEY", "file": "key", "secret": True, "source": _DRA_TEMPLATE, "checked": "2026-12-01"},
    {"key": "IMEX_SERVER_CERT", "file": "cert", "secret": False, "source": _DRA_TEMPLATE, "checked": "2026-12-01"},
    {"key": "IMEX_SERVER_CERT_AUTH", "file": "ca", "secret": False, "source": _DRA_TEMPLATE, "checked": "2026-12-01"},
    {"key": "IMEX_CLIENT_KEY", "file": "key", "secret": True, "source": _DRA_TEMPLATE, "checked": "2026-12-01"},
    {"key": "IMEX_CLIENT_CERT", "file": "cert", "secret": False, "source": _DRA_TEMPLATE, "checked": "2026-12-01"},
    {"key": "IMEX_CLIENT_CERT_AUTH", "file": "ca", "secret": False, "source": _DRA_TEMPLATE, "checked": "2026-12-01"},
)

# nvidia-imex-ctl: -q asks the local daemon once for its state (one word on
# standard output, READY when it serves); -N the whole domain's, -j as JSON.
# The command service is found through config.cfg (-c, the default) or given
# as a Unix socket (-u <path>). The DRA driver's host-managed check runs -q on
# the socket and accepts only READY.
IMEX_CTL: dict[str, t.Any] = {
    "value": {
        "binary": "nvidia-imex-ctl",
        "query": ["-q"],
        "domain": ["-N", "-j"],
        "config_flag": "-c",
        "socket_flag": "-u",
        "ready": "READY",
    },
    "source": _CMDSERVICE + " (usage) ; NVIDIA/k8s-dra-driver-gpu@22407113:cmd/compute-domain-daemon/main.go (check: -c <config> -q, "
    "'READY\\n') ; " + _DRA_HOST_MANAGED,
    "checked": "2026-12-01",
}

# What `nvidia-imex-ctl -q` answers, in the order a daemon passes through them.
IMEX_DAEMON_STATES: dict[str, t.Any] = {
    "value": ("INITIALIZING", "STARTING_AUTH_SERVER", "WAITING_FOR_PEERS", "WAITING_FOR_RECOVERY", "INIT_GPU", "READY", "SHUTTING_DOWN", "UNAVAILABLE"),
    "source": _DCGM_FIELDS + " ; " + _DCGM_IMEX,
    "checked": "2026-12-01",
}

# The domain's "status" in `nvidia-imex-ctl -N -j` ({"nodes": {"<index>":
# {"status": "READY", "host": "<address>", ...}}, "status": "UP"}): UP, or
# DEGRADED or DOWN. DCGM lists the three and reads the shape; what makes a
# domain DEGRADED rather than DOWN is not defined in any source at hand
# (verify takes only UP as serving).
IMEX_DOMAIN_STATES: dict[str, t.Any] = {
    "value": {"up": "UP", "others": ("DEGRADED", "DOWN")},
    "source": _DCGM_FIELDS + " ; " + _DCGM_IMEX + " (the sample -N -j output in the tests)",
    "checked": "2026-12-01",
}

# The IMEX package's version is the driver's; NVIDIA's driver container pins it
# as <driver version>-1 with apt and as <driver version> with dnf (any release).
IMEX_PACKAGE_VERSION: dict[str, t.Any] = {
    "value": {"apt": "{version}-1", "dnf": "{version}"},
    "source": "NVIDIA/gpu-driver-container@e8abae38:debian13/install.sh (imex_install) ; NVIDIA/gpu-driver-container@038c8b5f:rhel9/install.sh (imex_install)",
    "checked": "2026-12-01",
}
