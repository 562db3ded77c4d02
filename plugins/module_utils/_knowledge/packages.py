# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Package names and package-manager query formats.

The Container Toolkit's package sets, the packages whose installed version
tells a component's version, and the one dpkg-query and the one rpm query
format the collection reads packages with, next to the parsers of their
output. Node-side code imports this module (Python 3.8+, standard library
only); roles read the tables through the gpufleet.nvidia.knowledge lookup and
parse the query output with the gpufleet.nvidia.package_query filter.
"""

from __future__ import annotations

import typing as t

_TOOLKIT_INSTALL_GUIDE = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"
_DPKG_QUERY_MANUAL = "https://manpages.debian.org/bookworm/dpkg/dpkg-query.1.en.html"

# The Container Toolkit's packages, in install order (a package after the
# ones it depends on). "sets" are the values of container_toolkit_package_set
# that install the package; "release_version" marks the packages built from
# the toolkit's own repository, whose version is the toolkit release (the
# libnvidia-container packages come from NVIDIA/libnvidia-container and carry
# the same version only since 1.11.0).
TOOLKIT_PACKAGE_SETS: tuple[dict[str, t.Any], ...] = (
    {
        "package": "nvidia-container-toolkit-base",
        "sets": ("full", "base"),
        "release_version": True,
        # nvidia-ctk, nvidia-container-runtime and the CDI tools; the base set
        # alone is enough for CDI-only hosts.
        "note": "v1.11.0-rc.3: 'Introduce an nvidia-container-toolkit-base package for better dependency management'",
        "source": "NVIDIA/nvidia-container-toolkit@v1.11.0:CHANGELOG.md",
        "checked": "2026-11-25",
    },
    {
        "package": "libnvidia-container1",
        "sets": ("full",),
        "release_version": False,
        "note": "the library under nvidia-container-cli; the install guide pins it with the others",
        "source": _TOOLKIT_INSTALL_GUIDE,
        "checked": "2026-11-25",
    },
    {
        "package": "libnvidia-container-tools",
        "sets": ("full",),
        "release_version": False,
        "note": "nvidia-container-cli; nvidia-container-toolkit depends on it (roles/container_toolkit/README.md)",
        "source": _TOOLKIT_INSTALL_GUIDE,
        "checked": "2026-11-25",
    },
    {
        "package": "nvidia-container-toolkit",
        "sets": ("full",),
        "release_version": True,
        "note": "the runtime hook; depends on the base package and on nvidia-container-cli's package",
        "source": _TOOLKIT_INSTALL_GUIDE,
        "checked": "2026-11-25",
    },
)

# Installed on top of either set when container_toolkit_operator_extensions
# is true (the .cdi and .legacy runtimes).
TOOLKIT_EXTENSION_PACKAGES: dict[str, t.Any] = {
    "value": ("nvidia-container-toolkit-operator-extensions",),
    # Ships nvidia-container-runtime.cdi and .legacy; the spec's
    # "%package operator-extensions" requires nvidia-container-toolkit-base
    # == %{version}-%{release}.
    "source": "NVIDIA/nvidia-container-toolkit@v1.13.0:packaging/rpm/SPECS/nvidia-container-toolkit.spec",
    "checked": "2026-11-25",
}

# Packages whose installed version is a component's version, read by the
# version matrix's "installed" view and by the verify role (Debian/Ubuntu and
# RHEL spellings, first installed wins; a name ending in "*" is a prefix).
# The toolkit's are in TOOLKIT_PACKAGE_SETS (release_version).
COMPONENT_PACKAGES: tuple[dict[str, t.Any], ...] = (
    {
        "component": "fabricmanager",
        # One package per driver branch (nvidia-fabricmanager-570), and the
        # CUDA repository's meta package.
        "packages": ("nvidia-fabricmanager*", "nvidia-fabric-manager*", "cuda-drivers-fabricmanager*"),
        "source": "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html",
        "checked": "2026-11-25",
    },
    {
        "component": "containerd",
        "packages": ("containerd", "containerd.io"),
        "source": "https://docs.docker.com/engine/install/debian/ (containerd.io); Debian bookworm's containerd",
        "checked": "2026-11-25",
    },
    {
        "component": "docker",
        "packages": ("docker-ce", "docker.io", "moby-engine", "docker"),
        "source": "https://docs.docker.com/engine/install/ (docker-ce); Debian's docker.io; Fedora's moby-engine",
        "checked": "2026-11-25",
    },
    {
        "component": "crio",
        "packages": ("cri-o",),
        "source": "https://github.com/cri-o/packaging/blob/main/README.md",
        "checked": "2026-11-25",
    },
    {
        "component": "crictl",
        "packages": ("cri-tools",),
        "source": "https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/install-kubeadm/",
        "checked": "2026-11-25",
    },
    {
        "component": "cuda_compat",
        # cuda-compat-<major>-<minor>: the forward-compatibility libraries.
        "packages": ("cuda-compat*",),
        "source": "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html",
        "checked": "2026-11-25",
    },
)

# The one dpkg-query format (dpkg-query -W -f): the package without its
# architecture qualifier is in ${binary:Package} before the ":"; ${Version}
# carries the epoch when there is one; ${db:Status-Abbrev} is three letters:
# selection, state, error flag.
DPKG_QUERY_FORMAT: dict[str, t.Any] = {
    "value": "${binary:Package}\t${Version}\t${db:Status-Abbrev}\n",
    "source": _DPKG_QUERY_MANUAL,
    "checked": "2026-11-25",
}

# The letters of ${db:Status-Abbrev}, spelled as ${db:Status-Want},
# ${db:Status-Status} and ${db:Status-Eflag} spell them.
DPKG_STATUS_ABBREV: dict[str, t.Any] = {
    "value": {
        "selection": {"u": "unknown", "i": "install", "h": "hold", "r": "deinstall", "p": "purge"},
        "status": {
            "n": "not-installed",
            "c": "config-files",
            "H": "half-installed",
            "U": "unpacked",
            "F": "half-configured",
            "W": "triggers-awaited",
            "t": "triggers-pending",
            "i": "installed",
        },
        "error": {" ": None, "R": "reinst-required"},
    },
    "source": _DPKG_QUERY_MANUAL,
    "checked": "2026-11-25",
}

# The one rpm query format (rpm -qa --qf); EPOCHNUM is 0 where the package
# has no epoch.
RPM_QUERY_FORMAT: dict[str, t.Any] = {
    "value": "%{NAME}\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\n",
    "source": "https://rpm-software-management.github.io/rpm/manual/queryformat.html",
    "checked": "2026-11-25",
}


# NVIDIA's IMEX daemon (multi-node NVLink) ships as a package of the driver's
# branch: nvidia-imex-<branch> for R550 to R575, nvidia-imex from R580 on
# (NVIDIA's driver container installs it so); none before R550. Its version is
# the driver's, and its service nvidia-imex reads /etc/nvidia-imex/config.cfg.
IMEX_PACKAGES: tuple[dict[str, t.Any], ...] = (
    {
        "first_branch": "550",
        "last_branch": "575",
        "package": "nvidia-imex-{branch}",
        "source": "NVIDIA/gpu-driver-container@06a208c:ubuntu22.04/precompiled/nvidia-driver (ef2d9d1: DRIVER_BRANCH -ge 550)",
        "checked": "2026-11-29",
    },
    {
        "first_branch": "580",
        "last_branch": None,
        "package": "nvidia-imex",
        "source": "NVIDIA/gpu-driver-container@06a208c:ubuntu22.04/precompiled/nvidia-driver ; "
        "https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/gettingstarted.html",
        "checked": "2026-11-29",
    },
)


def imex_package(branch: t.Any) -> str | None:
    """The IMEX package of a driver branch (nvidia-imex-570, nvidia-imex); None where the branch has none."""
    number = int(str(branch))
    for row in IMEX_PACKAGES:
        if number >= int(row["first_branch"]) and (row["last_branch"] is None or number <= int(row["last_branch"])):
            return row["package"].format(branch=number)
    return None


def toolkit_packages(package_set: str | None = None, release_version: bool | None = None) -> tuple[str, ...]:
    """The toolkit's package names in install order: of one set, or only those carrying the release version."""
    return tuple(
        row["package"]
        for row in TOOLKIT_PACKAGE_SETS
        if (package_set is None or package_set in row["sets"]) and (release_version is None or row["release_version"] is release_version)
    )


def version_packages() -> dict[str, tuple[str, ...]]:
    """Component -> the packages whose installed version is its version, first installed wins."""
    names = {"container_toolkit": toolkit_packages(release_version=True)}
    names.update((row["component"], tuple(row["packages"])) for row in COMPONENT_PACKAGES)
    return names


def dpkg_query_rows(text: str) -> list[dict[str, t.Any]]:
    """Every package in the output of `dpkg-query -W -f DPKG_QUERY_FORMAT`, installed or not.

    {name, version, selection, status, error}: the words ${db:Status-Want},
    ${db:Status-Status} and ${db:Status-Eflag} print (error None when clear).
    Lines that are not the format's are skipped.
    """
    letters = DPKG_STATUS_ABBREV["value"]
    rows = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 3 or len(fields[2]) < 2:
            continue
        name, version, abbrev = fields
        error = abbrev[2:3] or " "
        rows.append(
            {
                "name": name.split(":")[0],
                "version": version,
                "selection": letters["selection"].get(abbrev[0], abbrev[0]),
                "status": letters["status"].get(abbrev[1], abbrev[1]),
                "error": letters["error"].get(error, error),
            }
        )
    return rows


def rpm_query_rows(text: str) -> list[dict[str, t.Any]]:
    """Every package in the output of `rpm -qa --qf RPM_QUERY_FORMAT` (all installed).

    The rows have dpkg_query_rows' keys; version is `version-release`, led by
    `epoch:` when the epoch is not 0, as dpkg writes a Debian version.
    """
    rows = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 2 or ":" not in fields[1]:
            continue
        name, evr = fields
        epoch, version = evr.split(":", 1)
        rows.append(
            {
                "name": name,
                "version": version if epoch == "0" else evr,
                "selection": "install",
                "status": "installed",
                "error": None,
            }
        )
    return rows
