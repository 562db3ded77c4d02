# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every pinned artifact resolved against its source before any layer runs.
Controller side only (the preflight role's gpufleet.nvidia.pinned_artifacts).

Two steps, so that a fleet fetches each source once, not once per node:

1. plan (per host, no network): from the host's effective variables, which
   artifacts the run will install and where each comes from - the toolkit's
   packages at container_toolkit_version from the toolkit's apt repository,
   crictl's release (and its .sha256) under crictl_download_url - and the
   declared names that can be judged without a source (mig_label against
   its mig-parted config).
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

import yaml

from ansible.module_utils.urls import open_url

from ansible_collections.gpufleet.nvidia.plugins.module_utils._apt_repo import (
    compare_versions, parse_deb822, split_version)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import MigConfigError, parse_config, select_label

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"

# How many offered versions a message lists (newest first) before "and N older".
OFFERED_SHOWN = 8
# Seconds one request may take; a source slower than this is reported as such.
TIMEOUT = 20

# Ansible's architecture fact -> the dpkg architecture in the toolkit repository's path
# (as roles/container_toolkit/vars/Debian.yml builds __container_toolkit_apt_uri).
DEB_ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}

_SHA256 = re.compile(r"^([0-9a-fA-F]{64})(\s|$)")


@functools.lru_cache(maxsize=None)
def role_data(role: str, kind: str, roles_dir: Path = ROLES_DIR) -> dict[str, t.Any]:
    """A role's defaults/main.yml or vars/main.yml, as plain data (the layer roles' own, read, not copied).
    Cached: the files do not change during a run; callers copy before they change anything."""
    path = roles_dir / role / kind / "main.yml"
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


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
    """Where an artifact comes from: kind apt_flat (a flat apt repository's Packages index), checksum (a
    .sha256 file) or exists (a file asked for with HEAD); `variable` is the setting that names it."""
    return {"kind": kind, "url": url, "variable": variable}


def source_key(src: dict[str, str]) -> str:
    return "{0} {1}".format(src["kind"], src["url"])


def plan_toolkit(values: dict[str, t.Any], facts: dict[str, t.Any], toolkit_vars: dict[str, t.Any]) -> dict[str, t.Any]:
    """The toolkit's packages at container_toolkit_version, from its apt repository as the role configures it."""
    if not values.get("container_toolkit_repo_manage", True):
        return {"skip": "container_toolkit: container_toolkit_repo_manage is false, so the packages come from the "
                        "node's own sources, which preflight does not read"}
    family = facts.get("os_family")
    if family != "Debian":
        return {"skip": "container_toolkit: resolved against apt repositories only; {0} nodes are checked by the "
                        "toolkit layer".format(family or "unknown")}
    version = str(values.get("container_toolkit_version") or "")
    if not re.match(r"^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.~+]+)?$", version):
        return {"skip": "container_toolkit: container_toolkit_version {0!r} is judged by the version matrix".format(
            version)}
    arch = DEB_ARCHES.get(str(facts.get("architecture")))
    if not arch:
        return {"skip": "container_toolkit: no toolkit repository path for architecture {0}".format(
            facts.get("architecture"))}
    sets = toolkit_vars.get("__container_toolkit_packages") or {}
    package_set = str(values.get("container_toolkit_package_set") or "full")
    packages = list(sets.get(package_set) or [])
    if values.get("container_toolkit_operator_extensions"):
        packages += list(toolkit_vars.get("__container_toolkit_extension_packages") or [])
    if not packages:
        return {"skip": "container_toolkit: unknown container_toolkit_package_set {0!r}".format(package_set)}
    url = "{0}/{1}".format(str(values["container_toolkit_apt_repo_url"]).rstrip("/"), arch)
    return {"source": source("apt_flat", url, "container_toolkit_apt_repo_url"),
            "requirement": {
                "type": "toolkit", "variable": "container_toolkit_version", "version": version,
                # "1.20.1" -> "1.20.1-1", NVIDIA's packaging revision, as the role pins it.
                "package_version": version if "-" in version else version + "-1",
                "packages": packages, "package_set": package_set}}


def plan_crictl(values: dict[str, t.Any], facts: dict[str, t.Any], crictl_vars: dict[str, t.Any]) -> dict[str, t.Any]:
    """crictl's release tarball, and its .sha256 when the role checks against the release's own file."""
    explicit = str(values.get("crictl_version") or "")
    kubernetes = str(values.get("crictl_kubernetes_version") or "")
    table = crictl_vars.get("__crictl_release_for_kubernetes") or {}
    known = newest_first(table.values())
    release = explicit or table.get(kubernetes, "")
    variable = "crictl_version" if explicit else "crictl_kubernetes_version"
    if not release:
        return {"error": "crictl_kubernetes_version {0} has no cri-tools release this collection knows (it knows "
                         "Kubernetes {1}); set crictl_version to the release to install, such as {2}".format(
                             kubernetes, ", ".join(sorted(table)), known[0] if known else "v1.36.0")}
    if not re.match(r"^v[0-9]+\.[0-9]+\.[0-9]+$", release):
        return {"error": "crictl_version must look like v1.36.0, got {0!r}; set crictl_version to a cri-tools "
                         "release ({1}) or to '' to follow crictl_kubernetes_version".format(release, shown(known))}
    arch = (crictl_vars.get("__crictl_arches") or {}).get(str(facts.get("architecture")))
    if not arch:
        return {"skip": "crictl: no cri-tools build for architecture {0}".format(facts.get("architecture"))}
    tarball = "{0}/{1}/crictl-{1}-linux-{2}.tar.gz".format(str(values["crictl_download_url"]).rstrip("/"), release, arch)
    requirement = {"type": "crictl", "variable": variable, "release": release, "arch": arch, "known": known,
                   "kubernetes": kubernetes, "explicit": bool(explicit)}
    if values.get("crictl_checksum_source") == "release":
        return {"source": source("checksum", tarball + ".sha256", "crictl_download_url"), "requirement": requirement}
    digests = dict(crictl_vars.get("__crictl_sha256") or {})
    for version, by_arch in (values.get("crictl_checksums") or {}).items():
        digests[version] = dict(digests.get(version) or {}, **(by_arch or {}))
    if not re.match(r"^[0-9a-f]{64}$", str((digests.get(release) or {}).get(arch, ""))):
        return {"error": "crictl {0} on {1} has no sha256 in the crictl role's table (crictl_checksum_source: table); "
                         "add it as crictl_checksums: {{\"{0}\": {{\"{1}\": \"<sha256 from the release's .sha256 "
                         "file>\"}}}}, or set crictl_checksum_source: release".format(release, arch)}
    return {"source": source("exists", tarball, "crictl_download_url"), "requirement": requirement}


def check_mig_label(label: str, config: t.Any, config_src: str) -> str | None:
    """mig_label against its config, with the MIG layer's own message (module_utils._mig.select_label)."""
    variable = "mig_config_src" if config_src else "mig_config"
    if not config:
        return ("mig_label is {0!r}, so set exactly one of mig_config (an inline mig-parted v1 config) and "
                "mig_config_src (a mig-parted config file on the controller); neither is set".format(label))
    try:
        configs = parse_config(config)
    except MigConfigError as exc:
        return "mig_label {0!r}: {1} is not a valid mig-parted config: {2}; fix {1}".format(
            label, "mig_config_src {0}".format(config_src) if config_src else "mig_config", exc)
    try:
        select_label(configs, label)
    except MigConfigError as exc:
        return "mig_label: {0} ({1}{2}); set mig_label to one of them, or add the label to {1}".format(
            exc, variable, " " + config_src if config_src else "")
    return None


def plan_host(values: dict[str, t.Any], layers: dict[str, t.Any], facts: dict[str, t.Any],
              mig_config: t.Any = None, roles_dir: Path = ROLES_DIR) -> dict[str, t.Any]:
    """One host's plan: {checks: [{source, requirement}], errors: [...], skipped: [...]}.

    values: the effective settings of the toolkit and crictl roles (host value, else role default).
    layers: the declared_layers lookup's answer (which layers the run applies).
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

    if managed("container_toolkit"):
        add(plan_toolkit(values, facts, role_data("container_toolkit", "vars", roles_dir)))
    if managed("crictl"):
        add(plan_crictl(values, facts, role_data("crictl", "vars", roles_dir)))
    if managed("mig"):
        mig = (layers.get("mig") or {}).get("vars") or {}
        src = str(mig.get("mig_config_src") or "")
        inline = mig.get("mig_config") or {}
        if inline and src:
            plan["errors"].append("mig_label is {0!r}, so set exactly one of mig_config and mig_config_src; both "
                                  "are set".format(mig.get("mig_label")))
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
        return "HTTP {0}{1}".format(exc.code, " " + exc.reason if isinstance(exc.reason, str) and exc.reason else ""), \
            exc.code
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

    def get(self, url: str, method: str = "GET") -> bytes:
        try:
            response = self.opener(url, method=method, timeout=self.timeout, validate_certs=True,
                                   http_agent="gpufleet-preflight")
            return response.read() if method == "GET" else b""
        except Exception as exc:  # noqa: BLE001 - every way a fetch fails is reported the same way
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


def read_checksum(fetcher: Fetcher, url: str) -> str:
    text = fetcher.get(url).decode("utf-8", "replace").strip()
    match = _SHA256.match(text)
    if not match:
        raise SourceError("it holds no sha256 checksum (it starts {0!r})".format(text[:40]), url, reached=True)
    return match.group(1).lower()


def fetch_source(fetcher: Fetcher, src: dict[str, str]) -> t.Any:
    if src["kind"] == "apt_flat":
        return read_flat_packages(fetcher, src["url"])
    if src["kind"] == "checksum":
        return read_checksum(fetcher, src["url"])
    if src["kind"] == "exists":
        return fetcher.get(src["url"], method="HEAD")
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
        return ("container_toolkit_version {0} is not offered by {1}: {2} has {3}; set container_toolkit_version to "
                "one of them".format(req["version"], where, main, shown(_offered_toolkit(offered.get(main, [])))))
    missing = [p for p in req["packages"][1:] if req["package_version"] not in offered.get(p, [])]
    if missing:
        return ("container_toolkit_package_set {0} needs {1} at {2}, which {3} does not offer ({4}); set "
                "container_toolkit_package_set: base, or mirror the whole package set".format(
                    req["package_set"], ", ".join(missing), req["package_version"], where,
                    "; ".join("{0} has {1}".format(p, shown(_offered_toolkit(offered.get(p, []))))
                              for p in missing)))
    return None


def judge_crictl(req: dict[str, t.Any], src: dict[str, str], error: SourceError | None) -> str | None:
    if error is None:
        return None
    what = "its .sha256 file" if src["kind"] == "checksum" else "its tarball"
    if error.status == 404:
        chosen = ("crictl_version {0}".format(req["release"]) if req["explicit"] else
                  "crictl_kubernetes_version {0} (release {1})".format(req["kubernetes"], req["release"]))
        return ("{0} is not published under crictl_download_url for {1}: {2} {3} answered {4}; releases this "
                "collection knows: {5}; set crictl_version to a published release, or to '' to take the release "
                "of crictl_kubernetes_version".format(chosen, req["arch"], what, error.url, error.reason,
                                                      shown(req["known"])))
    return None


def unreachable(src: dict[str, str], error: SourceError) -> str:
    if not error.reached:
        return ("{0}: {1} is unreachable ({2}); check the mirror, or set {0} to a source that answers".format(
            src["variable"], error.url, error.reason))
    return ("{0}: {1} is not a source this run can use: {2}; check that {0} points at the mirror's root, or set it "
            "to one that has the artifact".format(src["variable"], error.url, error.reason))


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
        if error is not None:
            return unreachable(src, error)
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
                    resolved.append("{0} from {1}".format(
                        check["requirement"].get("package_version") or check["requirement"].get("release"),
                        check["source"]["url"]))
            result[host] = {"errors": errors, "resolved": resolved, "skipped": list(plan.get("skipped") or [])}
        return result
