# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""crictl_plan: which cri-tools release, tarball, checksum and CRI endpoints a host gets, or what is wrong."""

from __future__ import annotations

import os
import re
import typing as t
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable

_RELEASE = re.compile(r"^v[0-9]+\.[0-9]+\.[0-9]+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _merged(table: Mapping, extra: Mapping) -> dict:
    """The role's checksum table with the user's crictl_checksums over it, release by release."""
    merged = {release: dict(arches) for release, arches in table.items()}
    for release, arches in extra.items():
        if not isinstance(arches, Mapping):
            raise AnsibleFilterError(
                "crictl_plan: crictl_checksums[{0!r}] must map architectures to sha256 digests, for example "
                '{{"{0}": {{"amd64": "<sha256>"}}}}, got {1!r}'.format(release, arches)
            )
        merged.setdefault(release, {}).update(arches)
    return merged


def _problem(settings: Mapping, release: str, arch: str, table: Mapping) -> str | None:
    """The first thing that stops the install, said with its fix; None when there is none."""
    engine, endpoints = settings["engine"], settings["endpoints"]
    # crictl_engine follows container_runtime_engine by default: a bad value may come from there.
    if engine not in endpoints:
        return "crictl_engine must be one of {0}, got '{1}' (it defaults to container_runtime_engine); set crictl_engine for this host".format(
            ", ".join(endpoints), engine
        )
    if not release:
        return "no cri-tools release is known for crictl_kubernetes_version={0} (known: {1}); set crictl_version explicitly".format(
            settings["kubernetes_version"], ", ".join(settings["release_for_kubernetes"])
        )
    if not _RELEASE.match(release):
        return "crictl_version must look like v1.36.0, got '{0}'".format(release)
    if not arch:
        return "no cri-tools build for the architecture {0}".format(settings["architecture"])
    if not os.path.isabs(str(settings["install_dir"])):
        return "crictl_install_dir must be an absolute path"
    digest = table.get(release, {}).get(arch)
    if settings["checksum_source"] != "release" and not (isinstance(digest, str) and _SHA256.match(digest)):
        return (
            'no sha256 for crictl {0} on {1} in the role\'s table; add it as crictl_checksums: {{"{0}": '
            '{{"{1}": "<sha256 from the release\'s .sha256 file>"}}}}, or set crictl_checksum_source=release'.format(release, arch)
        )
    return None


def crictl_plan(settings: object) -> dict[str, t.Any]:
    """The install and config plan of the crictl role, from its variables and the host's architecture.

    `settings` holds: version, kubernetes_version, release_for_kubernetes, architecture, arches, sha256 (the
    role's table), checksums (the user's), checksum_source, install_dir, download_url, engine, endpoints,
    runtime_endpoint, image_endpoint. The plan: release, arch, table, sha256 (None when the release's own
    .sha256 is read), tarball_url, runtime_endpoint, image_endpoint, and problem - "" or the first problem with
    its fix, said before the node is touched.
    """
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError("crictl_plan: give the role's settings as a mapping, not {0}".format(type(settings).__name__))
    missing = sorted(
        {
            "version",
            "kubernetes_version",
            "release_for_kubernetes",
            "architecture",
            "arches",
            "sha256",
            "checksums",
            "checksum_source",
            "install_dir",
            "download_url",
            "engine",
            "endpoints",
            "runtime_endpoint",
            "image_endpoint",
        }
        - set(settings)
    )
    if missing:
        raise AnsibleFilterError("crictl_plan: settings lack {0}".format(", ".join(missing)))
    version = settings["version"] or ""
    release = str(version) if version else str(settings["release_for_kubernetes"].get(str(settings["kubernetes_version"]), ""))
    arch = str(settings["arches"].get(settings["architecture"], ""))
    table = _merged(settings["sha256"], settings["checksums"] or {})
    problem = _problem(settings, release, arch, table) or ""
    endpoints = settings["endpoints"]
    runtime_endpoint = settings["runtime_endpoint"] or endpoints.get(settings["engine"], "")
    from_table = settings["checksum_source"] != "release"
    return {
        "problem": problem,
        "release": release,
        "arch": arch,
        "table": table,
        "sha256": table.get(release, {}).get(arch) if from_table and not problem else None,
        "tarball_url": "{0}/{1}/crictl-{1}-linux-{2}.tar.gz".format(settings["download_url"], release, arch),
        "runtime_endpoint": runtime_endpoint,
        "image_endpoint": settings["image_endpoint"] or runtime_endpoint,
    }


class FilterModule(FilterTable):
    """The crictl role's plan."""

    FILTERS = (crictl_plan,)
