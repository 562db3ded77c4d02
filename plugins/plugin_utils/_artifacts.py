# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Every pinned artifact resolved against its source before any layer runs.
Controller side only (the preflight role's gpufleet.nvidia.pinned_artifacts).

Two steps, so that a fleet fetches each source once, not once per node:

1. plan (per host, no network): from the host's effective variables, which
   artifacts the run will install and where each comes from - the toolkit's
   packages at container_toolkit_version from the toolkit's apt repository,
   crictl's release tarball under crictl_download_url (its sha256 pinned in
   the crictl role's table or crictl_checksums), the signing
   keys the layers fetch (container_toolkit_gpg_key_url, the driver's key),
   the driver's repository (the CUDA repository's Release, or each suite of
   the distribution mirror) - and the declared names that can be judged
   without a source (mig_label against its mig-parted config).
2. resolve (once per play): every distinct source of all hosts' plans is
   fetched once; each host's requirements are judged against the answer.

Every message names the variable, what the source offers, and the fix.
"""

from __future__ import annotations

import functools
import gzip
import re
import socket
import ssl
import typing as t
import urllib.error
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from ansible.module_utils.urls import open_url

from ansible_collections.gpufleet.nvidia.plugins.module_utils._apt_repo import compare_versions, parse_deb822, split_version
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge.packages import (
    TOOLKIT_EXTENSION_PACKAGES,
    toolkit_packages,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.config import MigConfigError, parse_config, select_label

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"

# How many offered versions a message lists (newest first) before "and N older".
OFFERED_SHOWN = 8
# Seconds one request may take; a source slower than this is reported as such.
TIMEOUT = 20

# Ansible's architecture fact -> the dpkg architecture in the toolkit repository's path
# (as roles/container_toolkit/vars/Debian.yml builds __container_toolkit_apt_uri).
DEB_ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}


@functools.cache
def role_data(role: str, kind: str, roles_dir: Path = ROLES_DIR, name: str = "main") -> dict[str, t.Any]:
    """A role's defaults/main.yml or vars/main.yml, as plain data (the layer roles' own, read, not copied).
    Cached: the files do not change during a run; callers copy before they change anything."""
    path = roles_dir / role / kind / (name + ".yml")
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def role_os_vars(role: str, facts: dict[str, t.Any], roles_dir: Path = ROLES_DIR) -> dict[str, t.Any]:
    """A role's vars/main.yml with its OS files over it, in the order roles/driver/tasks/os.yml loads them
    (family, family release, distribution, distribution release); still untemplated."""
    family = facts.get("os_family")
    distribution = facts.get("distribution")
    major = facts.get("distribution_major_version")
    merged = dict(role_data(role, "vars", roles_dir))
    for name in ("family-{0}".format(family), "family-{0}-{1}".format(family, major), str(distribution), "{0}-{1}".format(distribution, major)):
        merged.update(role_data(role, "vars", roles_dir, name))
    return merged


# The driver role's OS data the plan needs: where its repository and key are.
DRIVER_OS_VARS = ("__driver_backend", "__driver_cuda_repo_arch", "__driver_cuda_repo_name", "__driver_cuda_repo_key", "__driver_distribution_repo")


def newest_first(versions: t.Iterable[str]) -> list[str]:
    return sorted(set(versions), key=functools.cmp_to_key(compare_versions), reverse=True)


def shown(versions: t.Sequence[str], limit: int = OFFERED_SHOWN) -> str:
    """A trimmed list for a message: the newest `limit`, then how many older ones there are."""
    if not versions:
        return "no versions at all"
    text = ", ".join(versions[:limit])
    if len(versions) > limit:
        text += " and {0} older".format(len(versions) - limit)
    return text


# --- 1. plan -----------------------------------------------------------------


def source(kind: str, url: str, variable: str) -> dict[str, str]:
    """Where an artifact comes from: kind apt_flat (a flat apt repository's Packages index), exists (a file
    asked for with HEAD), key (an OpenPGP key), apt_flat_release / apt_suite
    (a flat repository's or a suite's InRelease), dnf_repo (repodata/repomd.xml); `variable` is the setting
    that names it."""
    return {"kind": kind, "url": url, "variable": variable}


def source_key(src: dict[str, str]) -> str:
    return "{0} {1}".format(src["kind"], src["url"])


def plan_toolkit(values: dict[str, t.Any], facts: dict[str, t.Any]) -> dict[str, t.Any]:
    """The toolkit's packages at container_toolkit_version, from its apt repository as the role configures it."""
    if not values.get("container_toolkit_repo_manage", True):
        return {
            "skip": "container_toolkit: container_toolkit_repo_manage is false, so the packages come from the node's own sources, which preflight does not read"
        }
    family = facts.get("os_family")
    if family != "Debian":
        return {"skip": "container_toolkit: resolved against apt repositories only; {0} nodes are checked by the toolkit layer".format(family or "unknown")}
    version = str(values.get("container_toolkit_version") or "")
    if not re.match(role_data("container_toolkit", "vars")["__container_toolkit_version_pattern"], version):
        return {"skip": "container_toolkit: container_toolkit_version {0!r} is judged by the version matrix".format(version)}
    arch = DEB_ARCHES.get(str(facts.get("architecture")))
    if not arch:
        return {"skip": "container_toolkit: no toolkit repository path for architecture {0}".format(facts.get("architecture"))}
    # The role installs the same tables (its vars read them through the knowledge lookup).
    package_set = str(values.get("container_toolkit_package_set") or "full")
    packages = list(toolkit_packages(package_set))
    if values.get("container_toolkit_operator_extensions"):
        packages += list(TOOLKIT_EXTENSION_PACKAGES["value"])
    if not packages:
        return {"skip": "container_toolkit: unknown container_toolkit_package_set {0!r}".format(package_set)}
    url = "{0}/{1}".format(str(values["container_toolkit_apt_repo_url"]).rstrip("/"), arch)
    return {
        "source": source("apt_flat", url, "container_toolkit_apt_repo_url"),
        "requirement": {
            "type": "toolkit",
            "variable": "container_toolkit_version",
            "version": version,
            # "1.20.1" -> "1.20.1-1", NVIDIA's packaging revision, as the role pins it.
            "package_version": version if "-" in version else version + "-1",
            "packages": packages,
            "package_set": package_set,
        },
    }


def plan_crictl(values: dict[str, t.Any], facts: dict[str, t.Any], crictl_vars: dict[str, t.Any]) -> dict[str, t.Any]:
    """crictl's release tarball, with its sha256 pinned in the role's table or crictl_checksums and a download URL
    the role accepts (https, or crictl_allow_insecure_transport)."""
    explicit = str(values.get("crictl_version") or "")
    kubernetes = str(values.get("crictl_kubernetes_version") or "")
    table = crictl_vars.get("__crictl_release_for_kubernetes") or {}
    known = newest_first(table.values())
    release = explicit or table.get(kubernetes, "")
    variable = "crictl_version" if explicit else "crictl_kubernetes_version"
    if not release:
        return {
            "error": "crictl_kubernetes_version {0} has no cri-tools release this collection knows (it knows "
            "Kubernetes {1}); set crictl_version to the release to install, such as {2}".format(
                kubernetes, ", ".join(sorted(table)), known[0] if known else "v1.36.0"
            )
        }
    if not re.fullmatch(r"^v[0-9]+\.[0-9]+\.[0-9]+$", release):
        return {
            "error": "crictl_version must look like v1.36.0, got {0!r}; set crictl_version to a cri-tools "
            "release ({1}) or to '' to follow crictl_kubernetes_version".format(release, shown(known))
        }
    arch = (crictl_vars.get("__crictl_arches") or {}).get(str(facts.get("architecture")))
    if not arch:
        return {"skip": "crictl: no cri-tools build for architecture {0}".format(facts.get("architecture"))}
    tarball = "{0}/{1}/crictl-{1}-linux-{2}.tar.gz".format(str(values["crictl_download_url"]).rstrip("/"), release, arch)
    requirement = {
        "type": "crictl",
        "variable": variable,
        "release": release,
        "arch": arch,
        "known": known,
        "kubernetes": kubernetes,
        "explicit": bool(explicit),
    }
    digests = dict(crictl_vars.get("__crictl_sha256") or {})
    for version, by_arch in (values.get("crictl_checksums") or {}).items():
        digests[version] = dict(digests.get(version) or {}, **(by_arch or {}))
    if not re.fullmatch(r"^[0-9a-f]{64}$", str((digests.get(release) or {}).get(arch, ""))):
        return {
            "error": "crictl {0} on {1} has no sha256 in the crictl role's table; add it as "
            'crictl_checksums: {{"{0}": {{"{1}": "<sha256 of the tarball>"}}}}'.format(release, arch)
        }
    transport = urlsplit(str(values["crictl_download_url"]))
    if "@" in transport.netloc:
        return {"error": "crictl_download_url carries credentials (user:password@), which runs show in results and logs; remove them from the URL"}
    if transport.scheme.lower() != "https" and not values.get("crictl_allow_insecure_transport"):
        return {
            "error": "crictl_download_url {0} is fetched over {1}, which does not authenticate the server; use an "
            "https:// mirror, or set crictl_allow_insecure_transport: true".format(values["crictl_download_url"], transport.scheme or "no scheme")
        }
    return {"source": source("exists", tarball, "crictl_download_url"), "requirement": requirement}


def plan_toolkit_key(values: dict[str, t.Any]) -> dict[str, t.Any] | None:
    """The key the toolkit layer downloads (get_url on apt, the yum repository's gpgkey on dnf)."""
    url = str(values.get("container_toolkit_gpg_key_url") or "")
    if not values.get("container_toolkit_repo_manage", True) or not url:
        return None
    return {"source": source("key", url, "container_toolkit_gpg_key_url"), "requirement": {"type": "key", "what": "signing key"}}


def _is_url(value: str) -> bool:
    return bool(re.match(r"^https?://", value))


def plan_driver(values: dict[str, t.Any], facts: dict[str, t.Any], os_vars: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    """The repository and key the driver layer adds, as roles/driver/tasks/plan.yml builds __driver_repo.

    os_vars: DRIVER_OS_VARS templated for the host (role_os_vars, then the host's facts and settings).
    The driver's packages themselves are left to the driver layer: it asks the repository for the exact
    versions (naming driver_version / driver_branch and the versions on offer) before it changes the node,
    and it is the first layer that changes anything; the CUDA repository's Packages index is several MB."""
    if str(values.get("driver_state") or "present") != "present":
        return [{"skip": "driver: driver_state is {0}, so no repository is added".format(values.get("driver_state"))}]
    backend = os_vars.get("__driver_backend")
    if backend not in ("apt", "dnf"):
        return [{"skip": "driver: no repository layout for {0} nodes".format(facts.get("os_family") or "unknown")}]
    driver_source = str(values.get("driver_source") or "cuda")
    parts: list[dict[str, t.Any]] = []
    if driver_source == "cuda":
        name = str(os_vars.get("__driver_cuda_repo_name") or "")
        arch = (os_vars.get("__driver_cuda_repo_arch") or {}).get(str(facts.get("architecture")), facts.get("architecture"))
        root = str(values.get("driver_cuda_repo_url") or "").rstrip("/")
        if not name or not arch or not _is_url(root):
            return [
                {
                    "skip": "driver: no CUDA repository path for this node ({0} {1}, {2})".format(
                        facts.get("distribution"), facts.get("distribution_version"), facts.get("architecture")
                    )
                }
            ]
        base = "{0}/{1}/{2}".format(root, name, arch)
        # apt reads a flat repository's InRelease (Release as a fallback); dnf its repomd.xml.
        kind = "apt_flat_release" if backend == "apt" else "dnf_repo"
        parts.append(
            {
                "source": source(kind, base, "driver_cuda_repo_url"),
                "requirement": {"type": "repository", "what": "CUDA repository {0}/{1}".format(name, arch), "layout": "{0}/{1}".format(name, arch)},
            }
        )
        key_url = str(values.get("driver_cuda_repo_key_url") or "")
        key_file = str(os_vars.get("__driver_cuda_repo_key") or "")
        if key_url:
            parts.append({"source": source("key", key_url, "driver_cuda_repo_key_url"), "requirement": {"type": "key", "what": "signing key"}})
        elif key_file:
            # The key NVIDIA publishes in the repository: named by the URL it was derived from.
            parts.append(
                {
                    "source": source("key", "{0}/{1}".format(base, key_file), "driver_cuda_repo_url"),
                    "requirement": {"type": "key", "what": "signing key", "alternative": "driver_cuda_repo_key_url"},
                }
            )
        return parts
    if driver_source == "distribution":
        repo = os_vars.get("__driver_distribution_repo") or {}
        mirror = str(values.get("driver_distribution_mirror_url") or repo.get("url") or "").rstrip("/")
        suites = [str(suite) for suite in (repo.get("suites") or [])]
        if backend != "apt" or not suites or not _is_url(mirror):
            return [{"skip": "driver: no distribution repository for {0} nodes".format(facts.get("distribution") or "unknown")}]
        for suite in suites:
            parts.append(
                {
                    "source": source("apt_suite", "{0}/dists/{1}".format(mirror, suite), "driver_distribution_mirror_url"),
                    "requirement": {
                        "type": "repository",
                        "what": "suite {0}".format(suite),
                        "suite": suite,
                        "mirror": mirror,
                        "backports": suite.endswith("-backports"),
                    },
                }
            )
        key_url = str(values.get("driver_distribution_key_url") or "")
        if key_url:
            parts.append({"source": source("key", key_url, "driver_distribution_key_url"), "requirement": {"type": "key", "what": "signing key"}})
        return parts
    return [{"skip": "driver: driver_source {0!r} is judged by the driver layer's validation".format(driver_source)}]


def check_mig_label(label: str, config: t.Any, config_src: str) -> str | None:
    """mig_label against its config, with the MIG layer's own message (module_utils._mig.config.select_label)."""
    variable = "mig_config_src" if config_src else "mig_config"
    if not config:
        return (
            "mig_label is {0!r}, so set exactly one of mig_config (an inline mig-parted v1 config) and "
            "mig_config_src (a mig-parted config file on the controller); neither is set".format(label)
        )
    try:
        configs = parse_config(config)
    except MigConfigError as exc:
        return "mig_label {0!r}: {1} is not a valid mig-parted config: {2}; fix {1}".format(
            label, "mig_config_src {0}".format(config_src) if config_src else "mig_config", exc
        )
    try:
        select_label(configs, label)
    except MigConfigError as exc:
        return "mig_label: {0} ({1}{2}); set mig_label to one of them, or add the label to {1}".format(exc, variable, " " + config_src if config_src else "")
    return None


def plan_host(
    values: dict[str, t.Any],
    layers: dict[str, t.Any],
    facts: dict[str, t.Any],
    mig_config: t.Any = None,
    roles_dir: Path = ROLES_DIR,
    driver_os: dict[str, t.Any] | None = None,
) -> dict[str, t.Any]:
    """One host's plan: {checks: [{source, requirement}], errors: [...], skipped: [...]}.

    values: the effective settings of the driver, toolkit and crictl roles (host value, else role default).
    layers: the declared_layers lookup's answer (which layers the run applies).
    driver_os: the driver role's OS data for the host, templated (DRIVER_OS_VARS); without it the driver's
    repository is not planned.
    """
    plan: dict[str, t.Any] = {"checks": [], "errors": [], "skipped": []}

    def add(part: dict[str, t.Any]) -> None:
        if "error" in part:
            plan["errors"].append(part["error"])
        elif "skip" in part:
            plan["skipped"].append(part["skip"])
        else:
            plan["checks"].append(part)

    def managed(layer: str) -> bool:
        return bool((layers.get(layer) or {}).get("managed"))

    if managed("driver"):
        if driver_os is None:
            plan["skipped"].append("driver: the driver role's OS data for this node could not be read")
        else:
            for part in plan_driver(values, facts, driver_os):
                add(part)
    if managed("container_toolkit"):
        add(plan_toolkit(values, facts))
        key = plan_toolkit_key(values)
        if key:
            add(key)
    if managed("crictl"):
        add(plan_crictl(values, facts, role_data("crictl", "vars", roles_dir)))
    if managed("mig"):
        mig = (layers.get("mig") or {}).get("vars") or {}
        src = str(mig.get("mig_config_src") or "")
        inline = mig.get("mig_config") or {}
        if inline and src:
            plan["errors"].append("mig_label is {0!r}, so set exactly one of mig_config and mig_config_src; both are set".format(mig.get("mig_label")))
        else:
            error = check_mig_label(str(mig.get("mig_label")), inline or mig_config, src)
            if error:
                plan["errors"].append(error)
    return plan


# --- 2. resolve --------------------------------------------------------------


class SourceError(Exception):
    """A source that did not answer as it must; `reason` is for a message ("connection refused", "HTTP 404")."""

    def __init__(self, reason: str, url: str, status: int | None = None, reached: bool | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.url = url
        self.status = status
        # Reached: the server answered (an HTTP error, content that is not what it must be).
        self.reached = status is not None if reached is None else reached


Opener = t.Callable[..., t.Any]


def describe(exc: BaseException) -> tuple[str, int | None]:
    """A fetch error as a few words a user recognises, and the HTTP status where there is one."""
    if isinstance(exc, urllib.error.HTTPError):
        return "HTTP {0}{1}".format(exc.code, " " + exc.reason if isinstance(exc.reason, str) and exc.reason else ""), exc.code
    reason: t.Any = getattr(exc, "reason", exc)
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused", None
    if isinstance(reason, socket.gaierror):
        return "the host name does not resolve", None
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "no answer within {0} s".format(TIMEOUT), None
    if isinstance(reason, ssl.SSLCertVerificationError):
        return "its TLS certificate is not valid ({0})".format(reason.verify_message or reason), None
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror.lower(), None
    return str(reason), None


class Fetcher:
    """GET/HEAD through ansible.module_utils.urls (certificates validated, proxies from the environment)."""

    def __init__(self, opener: Opener = open_url, timeout: int = TIMEOUT) -> None:
        self.opener = opener
        self.timeout = timeout

    def get(self, url: str, method: str = "GET", limit: int | None = None) -> bytes:
        """The body (its first `limit` bytes when given: enough to tell what a file is without its size)."""
        try:
            response = self.opener(url, method=method, timeout=self.timeout, validate_certs=True, http_agent="gpufleet-preflight")
            if method != "GET":
                return b""
            return response.read() if limit is None else response.read(limit)
        except Exception as exc:
            reason, status = describe(exc)
            raise SourceError(reason, url, status) from None


def read_flat_packages(fetcher: Fetcher, base: str) -> dict[str, list[str]]:
    """A flat repository's Packages index (gzip first, as apt prefers): {package: versions}."""
    last = SourceError("no Packages index there", base)
    for name in ("Packages.gz", "Packages"):
        url = "{0}/{1}".format(base, name)
        try:
            data = fetcher.get(url)
        except SourceError as exc:
            if exc.status == 404:
                last = exc
                continue
            raise
        # A version dpkg refuses (compare_versions raises IndexError_) makes the index unusable, as for apt.
        try:
            text = gzip.decompress(data).decode("utf-8") if name.endswith(".gz") else data.decode("utf-8")
            versions: dict[str, list[str]] = {}
            for stanza in parse_deb822(text):
                if stanza.package and stanza.version:
                    versions.setdefault(stanza.package, []).append(stanza.version)
            return {package: newest_first(found) for package, found in versions.items()}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise SourceError("{0} is not an apt Packages index ({1})".format(name, exc), url, reached=True) from None
    raise SourceError("no Packages index there ({0})".format(last.reason), last.url, last.status)


# An OpenPGP public key as apt and dnf take it: ASCII armour, or a binary packet stream that starts with a
# public-key packet (tag 6, old or new packet format; RFC 4880 section 4.2).
_ARMOUR = b"-----BEGIN PGP PUBLIC KEY BLOCK-----"
KEY_BYTES = 512


def read_key(fetcher: Fetcher, url: str) -> str:
    head = fetcher.get(url, limit=KEY_BYTES)
    if head.lstrip().startswith(_ARMOUR):
        return "armoured"
    first = head[0] if head else 0
    tag = (first & 0x3F) if first & 0x40 else (first >> 2) & 0x0F
    if first & 0x80 and tag == 6:
        return "binary"
    shown_head = head.lstrip()[:40].decode("utf-8", "replace")
    raise SourceError("not an OpenPGP key ({0})".format("an empty file" if not head.strip() else "it starts {0!r}".format(shown_head)), url, reached=True)


def read_release(fetcher: Fetcher, base: str) -> str:
    """Whether an apt repository answers: its InRelease, else its Release, as apt asks (the first bytes only)."""
    status: int | None = 404
    reason = ""
    for name in ("InRelease", "Release"):
        url = "{0}/{1}".format(base, name)
        try:
            fetcher.get(url, limit=64)
            return name
        except SourceError as exc:
            if exc.status != 404:
                raise
            status, reason = exc.status, exc.reason
    raise SourceError(reason, "{0}/InRelease".format(base), status)


def fetch_source(fetcher: Fetcher, src: dict[str, str]) -> t.Any:
    if src["kind"] == "apt_flat":
        return read_flat_packages(fetcher, src["url"])
    if src["kind"] == "exists":
        return fetcher.get(src["url"], method="HEAD")
    if src["kind"] == "key":
        return read_key(fetcher, src["url"])
    if src["kind"] in ("apt_flat_release", "apt_suite"):
        return read_release(fetcher, src["url"])
    if src["kind"] == "dnf_repo":
        fetcher.get(src["url"] + "/repodata/repomd.xml", limit=64)
        return "repomd.xml"
    raise ValueError("unknown source kind {0}".format(src["kind"]))


def _offered_toolkit(versions: list[str]) -> list[str]:
    """As container_toolkit_version takes them: bare where the revision is NVIDIA's "-1"."""
    out = []
    for version in versions:
        _epoch, upstream, revision = split_version(version)
        text = upstream if revision == "1" and ":" not in version else version
        if text not in out:
            out.append(text)
    return out


def judge_toolkit(req: dict[str, t.Any], src: dict[str, str], offered: dict[str, list[str]]) -> str | None:
    where = "the toolkit repository {0} (container_toolkit_apt_repo_url)".format(src["url"])
    main = req["packages"][0]
    if req["package_version"] not in offered.get(main, []):
        return "container_toolkit_version {0} is not offered by {1}: {2} has {3}; set container_toolkit_version to one of them".format(
            req["version"], where, main, shown(_offered_toolkit(offered.get(main, [])))
        )
    missing = [p for p in req["packages"][1:] if req["package_version"] not in offered.get(p, [])]
    if missing:
        return (
            "container_toolkit_package_set {0} needs {1} at {2}, which {3} does not offer ({4}); set "
            "container_toolkit_package_set: base, or mirror the whole package set".format(
                req["package_set"],
                ", ".join(missing),
                req["package_version"],
                where,
                "; ".join("{0} has {1}".format(p, shown(_offered_toolkit(offered.get(p, [])))) for p in missing),
            )
        )
    return None


def judge_crictl(req: dict[str, t.Any], src: dict[str, str], error: SourceError | None) -> str | None:
    if error is None:
        return None
    what = "its tarball"
    if error.status == 404:
        chosen = (
            "crictl_version {0}".format(req["release"])
            if req["explicit"]
            else "crictl_kubernetes_version {0} (release {1})".format(req["kubernetes"], req["release"])
        )
        return (
            "{0} is not published under crictl_download_url for {1}: {2} {3} answered {4}; releases this "
            "collection knows: {5}; set crictl_version to a published release, or to '' to take the release "
            "of crictl_kubernetes_version".format(chosen, req["arch"], what, error.url, error.reason, shown(req["known"]))
        )
    return None


def judge_repository(req: dict[str, t.Any], src: dict[str, str], error: SourceError) -> str | None:
    """A repository that answered 404: the suite or the CUDA repository layout is not there."""
    if error.status != 404:
        return None
    variable = src["variable"]
    if "suite" in req:
        backports = ", or set driver_distribution_backports: false" if req["backports"] else ""
        return "{0}: {1} has no suite {2} (HTTP 404 for dists/{2}/InRelease and Release); set {0} to a mirror that carries {2}{3}".format(
            variable, req["mirror"], req["suite"], backports
        )
    return (
        "{0}: {1} has no CUDA repository {2} (HTTP 404 for its InRelease and Release); set {0} to the root of "
        "NVIDIA's CUDA repositories or of a mirror with their layout (the driver role appends "
        "<distribution><release>/<arch>)".format(variable, src["url"], req["layout"])
    )


def judge_key(req: dict[str, t.Any], src: dict[str, str], error: SourceError) -> str | None:
    """A key URL that answered, but not with a key."""
    if not error.reached:
        return None
    alternative = req.get("alternative")
    return "{0}: {1} is not a signing key this run can use: {2}; set {3} to the URL of the repository's OpenPGP key".format(
        src["variable"], error.url, error.reason, alternative or src["variable"]
    )


def unreachable(src: dict[str, str], error: SourceError) -> str:
    if not error.reached:
        return "{0}: {1} is unreachable ({2}); check the mirror, or set {0} to a source that answers".format(src["variable"], error.url, error.reason)
    return "{0}: {1} is not a source this run can use: {2}; check that {0} points at the mirror's root, or set it to one that has the artifact".format(
        src["variable"], error.url, error.reason
    )


class ArtifactResolver:
    """Fetches every distinct source of the hosts' plans once and judges each host's requirements."""

    def __init__(self, fetcher: Fetcher | None = None) -> None:
        self.fetcher = fetcher or Fetcher()
        self.answers: dict[str, tuple[t.Any, SourceError | None]] = {}

    def answer(self, src: dict[str, str]) -> tuple[t.Any, SourceError | None]:
        key = source_key(src)
        if key not in self.answers:
            try:
                self.answers[key] = (fetch_source(self.fetcher, src), None)
            except SourceError as exc:
                self.answers[key] = (None, exc)
        return self.answers[key]

    def judge(self, check: dict[str, t.Any]) -> str | None:
        src, req = check["source"], check["requirement"]
        data, error = self.answer(src)
        if req["type"] == "crictl":
            message = judge_crictl(req, src, error)
            if message or error is None:
                return message
        if req["type"] == "repository" and error is not None:
            return judge_repository(req, src, error) or unreachable(src, error)
        if req["type"] == "key" and error is not None:
            return judge_key(req, src, error) or unreachable(src, error)
        if error is not None:
            return unreachable(src, error)
        if req["type"] in ("repository", "key"):
            return None
        if req["type"] == "toolkit":
            return judge_toolkit(req, src, data)
        raise ValueError("unknown requirement type {0}".format(req["type"]))

    def resolve(self, plans: dict[str, dict[str, t.Any]]) -> dict[str, dict[str, t.Any]]:
        """{host: {errors: [...], resolved: [...]}}: the plan's own errors, then its sources' verdicts."""
        result = {}
        for host in sorted(plans):
            plan = plans[host] or {}
            errors = list(plan.get("errors") or [])
            resolved = []
            for check in plan.get("checks") or []:
                message = self.judge(check)
                if message:
                    errors.append(message)
                else:
                    req = check["requirement"]
                    resolved.append("{0} from {1}".format(req.get("package_version") or req.get("release") or req.get("what"), check["source"]["url"]))
            result[host] = {"errors": errors, "resolved": resolved, "skipped": list(plan.get("skipped") or [])}
        return result
