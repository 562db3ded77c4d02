# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""crictl_plan: which cri-tools release, tarball, checksum and CRI endpoints a host gets, or what is wrong."""

from __future__ import annotations

import os
import re
import typing as t
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

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
    if not _RELEASE.fullmatch(release):
        return "crictl_version must look like v1.36.0, got '{0}'".format(release)
    if not arch:
        return "no cri-tools build for the architecture {0}".format(settings["architecture"])
    if not os.path.isabs(str(settings["install_dir"])):
        return "crictl_install_dir must be an absolute path"
    digest = table.get(release, {}).get(arch)
    if not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
        return 'no sha256 for crictl {0} on {1} in the role\'s table; add it as crictl_checksums: {{"{0}": {{"{1}": "<sha256 of the tarball>"}}}}'.format(
            release, arch
        )
    return _transport_problem(str(settings["download_url"]), bool(settings["allow_insecure_transport"]))


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1])) if "@" in parts.netloc else url


def _transport_problem(url: str, allow_insecure: bool) -> str | None:
    """A download URL the module would refuse, said here, before the node is touched."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        # The URL is echoed in results and logs; the node's ~/.netrc or a proxy carries credentials instead.
        return (
            "crictl_download_url carries credentials (user:password@), which results and logs would show; remove them "
            "from the URL (a mirror that needs a login is reached through the node's ~/.netrc)"
        )
    if parts.scheme.lower() != "https" and not allow_insecure:
        return (
            "crictl_download_url {0} is fetched over {1}, which does not authenticate the server; use an https:// "
            "mirror, or set crictl_allow_insecure_transport: true (the pinned sha256 still checks the tarball)".format(url, parts.scheme or "no scheme")
        )
    return None


def crictl_plan(settings: object) -> dict[str, t.Any]:
    """The install and config plan of the crictl role, from its variables and the host's architecture.

    `settings` holds: version, kubernetes_version, release_for_kubernetes, architecture, arches, sha256 (the
    role's table), checksums (the user's), install_dir, download_url, allow_insecure_transport, engine,
    endpoints, runtime_endpoint, image_endpoint. The plan: release, arch, table, sha256 (None with a problem),
    tarball_url, runtime_endpoint, image_endpoint, and problem - "" or the first problem with its fix, said
    before the node is touched.
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
            "install_dir",
            "download_url",
            "allow_insecure_transport",
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
    return {
        "problem": problem,
        "release": release,
        "arch": arch,
        "table": table,
        "sha256": table.get(release, {}).get(arch) if not problem else None,
        # set_fact prints the plan at -v: a URL with credentials (refused above) is shown without them.
        "tarball_url": "{0}/{1}/crictl-{1}-linux-{2}.tar.gz".format(_without_userinfo(str(settings["download_url"])), release, arch),
        "runtime_endpoint": runtime_endpoint,
        "image_endpoint": settings["image_endpoint"] or runtime_endpoint,
    }


class FilterModule(FilterTable):
    """The crictl role's plan."""

    FILTERS = (crictl_plan,)
