# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The pinned-package step's decisions (the pinned_packages action); pure functions.

A vendor's packages at one exact version, from the vendor's repository trusted
only with its pinned key, held there: the step the container_toolkit and dcgm
roles share. request() checks the task's arguments and names the field of each
problem; the rest turns what the node said into the next module's arguments.
The action (plugins/action/pinned_packages.py) only runs the modules.
"""

from __future__ import annotations

import re
import typing as t

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.nvidia.plugins.module_utils._driver_state import RPM_QUERY_FORMAT, versionlock_names
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge.packages import rpm_query_rows

MANAGERS = ("apt", "dnf")
# dnf4's versionlock plugin (EL 8 and 9); the driver role installs the same package for its locks.
VERSIONLOCK_PACKAGE = "python3-dnf-plugin-versionlock"
_NAME = re.compile(r"[a-z0-9][a-z0-9+._-]*")
_VERSION = re.compile(r"[0-9][A-Za-z0-9.+:~_-]*")
_FINGERPRINT = re.compile(r"[0-9A-Fa-f ]*")

REPOSITORY_COMMON = ("key_url", "key_fingerprint", "allow_unpinned_key")
REPOSITORY_APT = ("key_path", "sources_path", "sources_content", "release_url", "auth_login", "auth_password")
REPOSITORY_DNF = ("id", "description", "baseurl", "repomd_url")


class RequestError(ValueError):
    """A task argument that cannot be right; the message names it and the fix."""


def request(args: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The task's arguments, checked: every problem names its field."""
    owner = str(args.get("owner") or "")
    if not _NAME.fullmatch(owner):
        raise RequestError("owner: give the role's name (it starts every message), not '{0}'".format(owner))
    manager = args.get("manager")
    if manager not in MANAGERS:
        raise RequestError("manager: '{0}' is none of {1}".format(manager, ", ".join(MANAGERS)))
    packages = args.get("packages")
    if not isinstance(packages, list) or not packages:
        raise RequestError("packages: give the package names, in install order")
    for index, name in enumerate(packages):
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise RequestError("packages[{0}]: '{1}' is not a package name".format(index, name))
    version = str(args.get("version") or "")
    if not _VERSION.fullmatch(version):
        raise RequestError("version: '{0}' is not a package version, as {1} spells it".format(version, manager))
    repository = args.get("repository")
    if repository is not None:
        repository = _repository(repository, manager)
    valid_time = args.get("lists_valid_time", 3600)
    if not isinstance(valid_time, int) or isinstance(valid_time, bool) or valid_time < 0:
        raise RequestError("lists_valid_time: '{0}' is not a number of seconds".format(valid_time))
    return {
        "owner": owner,
        "manager": manager,
        "packages": list(dict.fromkeys(packages)),
        "version": version,
        "hold": _flag(args.get("hold", True), "hold"),
        "repository": repository,
        "hints": str(args.get("hints") or ""),
        "lists_valid_time": valid_time,
    }


def _flag(value: t.Any, field: str) -> bool:
    try:
        return boolean(value, strict=True)
    except TypeError as error:
        raise RequestError("{0}: '{1}' is not true or false".format(field, value)) from error


def _repository(repository: t.Any, manager: str) -> dict[str, t.Any]:
    if not isinstance(repository, dict):
        raise RequestError("repository: give a dictionary, or leave it out when the site provides the repository")
    wanted = REPOSITORY_COMMON + (REPOSITORY_APT if manager == "apt" else REPOSITORY_DNF)
    unknown = sorted(set(repository) - set(REPOSITORY_COMMON + REPOSITORY_APT + REPOSITORY_DNF))
    if unknown:
        raise RequestError("repository: unknown keys {0}".format(", ".join(unknown)))
    checked = {key: repository.get(key) for key in wanted}
    for key in ("key_url",) + (("key_path", "sources_path", "sources_content") if manager == "apt" else ("id", "baseurl")):
        if not checked[key]:
            raise RequestError("repository.{0}: required for {1}".format(key, manager))
    checked["key_fingerprint"] = str(checked["key_fingerprint"] or "")
    if not _FINGERPRINT.fullmatch(checked["key_fingerprint"]):
        raise RequestError("repository.key_fingerprint: '{0}' is not hexadecimal".format(checked["key_fingerprint"]))
    checked["allow_unpinned_key"] = _flag(checked["allow_unpinned_key"] or False, "repository.allow_unpinned_key")
    if not checked["key_fingerprint"] and not checked["allow_unpinned_key"]:
        raise RequestError(
            "repository.key_fingerprint: empty, so nothing would check the key at {0} before {1} trusts it; set it to the "
            "repository's signing key (allow_unpinned_key trusts whatever is served)".format(checked["key_url"], manager)
        )
    return checked


# -- apt ------------------------------------------------------------------------------------------------


def apt_source_args(wanted: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """apt_signed_source's arguments: the key fetched and checked, the repository asked, then both written."""
    repository = wanted["repository"]
    args = {key: repository[key] for key in REPOSITORY_COMMON + ("key_path", "sources_path", "sources_content")}
    if repository["release_url"]:
        args["release_url"] = repository["release_url"]
    login = repository["auth_login"] or ""
    # A mirror behind a login: the module's downloads and apt's, in auth.conf.d (0600); never in a URL.
    args.update(auth_login=login, auth_password=repository["auth_password"] or "")
    if login:
        args.update(url_username=login, url_password=repository["auth_password"] or "")
    return args


def apt_install_args(wanted: t.Mapping[str, t.Any], rehearse: bool) -> dict[str, t.Any]:
    """apt_install's arguments: every package at the version, held (or released) in the same call. apt drops a hold
    when it changes a held package's version, so what the install changed is held again."""
    packages = wanted["packages"]
    return {
        "name": ["{0}={1}".format(name, wanted["version"]) for name in packages],
        "hold": packages if wanted["hold"] else [],
        "release": [] if wanted["hold"] else packages,
        # The repository's own lists always; every list only when the last full refresh is older than lists_valid_time.
        "update_sources": [wanted["repository"]["sources_path"]] if wanted["repository"] else [],
        "lists_valid_time": wanted["lists_valid_time"],
        "install_recommends": False,
        "allow_downgrade": True,
        "allow_change_held_packages": True,
        "rehearse": rehearse,
    }


# -- dnf ------------------------------------------------------------------------------------------------


def dnf_reads(wanted: t.Mapping[str, t.Any]) -> dict[str, list[str]]:
    """node_reads_info's commands: the packages as rpm has them, and the version locks."""
    return {
        "rpm": ["rpm", "-q", "--qf", RPM_QUERY_FORMAT] + wanted["packages"],
        "locks": ["dnf", "-q", "versionlock", "list"],
    }


def _matches(installed: str, version: str) -> bool:
    """The installed version (rpm_query_rows': version-release, led by epoch: when it is not 0) is the wanted
    version: an epoch only where one is given, a release only where one is given (NVIDIA's release is "1", a
    rebuild's may carry a dist tag)."""
    epoch, _sep, rest = installed.rpartition(":")
    wanted_epoch, _sep, wanted_rest = version.rpartition(":")
    if wanted_epoch and wanted_epoch != (epoch or "0"):
        return False
    if "-" in wanted_rest:
        return rest == wanted_rest or rest.startswith(wanted_rest + ".")
    return rest.partition("-")[0] == wanted_rest


def dnf_plan(wanted: t.Mapping[str, t.Any], rpm_stdout: str, locks_stdout: str) -> dict[str, list[str]]:
    """What changes on a dnf node: the packages to install, the locks to release first (dnf refuses to move a locked
    package), and the locks to take after."""
    installed: dict[str, str] = {}
    for row in rpm_query_rows(rpm_stdout):
        installed.setdefault(row["name"], row["version"])
    locked = versionlock_names(locks_stdout)
    packages, version = wanted["packages"], wanted["version"]
    missing = [name for name in packages if name not in installed or not _matches(installed[name], version)]
    if wanted["hold"]:
        unlock = [name for name in missing if name in locked]
        lock = [name for name in packages if name in missing or name not in locked]
    else:
        unlock = [name for name in packages if name in locked]
        lock = []
    spec = version.rpartition(":")[2]
    return {
        "missing": missing,
        "install": ["{0}-{1}".format(name, spec) for name in missing],
        "unlock": unlock,
        "lock": ["{0}-{1}".format(name, spec) for name in lock],
        "locking": lock,
    }


def dnf_repository_args(wanted: t.Mapping[str, t.Any]) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    """rpm_key's and yum_repository's arguments: the key imported only when it is the pinned one."""
    repository = wanted["repository"]
    key = {"key": repository["key_url"]}
    if repository["key_fingerprint"]:
        key["fingerprint"] = repository["key_fingerprint"]
    repo = {
        "name": repository["id"],
        "description": repository["description"] or repository["id"],
        "baseurl": repository["baseurl"],
        "gpgkey": repository["key_url"],
        "gpgcheck": True,
        "repo_gpgcheck": True,
        "sslverify": True,
    }
    return key, repo


# -- the report ----------------------------------------------------------------------------------------


def predicted_line(wanted: t.Mapping[str, t.Any], names: t.Sequence[str]) -> str:
    """What check mode says when the packages cannot be rehearsed: their repository is only predicted."""
    return "would install {0} at {1}{2}".format(", ".join(names), wanted["version"], " and hold them" if wanted["hold"] else "")


def failure(wanted: t.Mapping[str, t.Any], message: str) -> str:
    """A module's failure, as the owner says it, with the variables to check."""
    text = "{0}: {1}".format(wanted["owner"], str(message).rstrip(". "))
    return "{0}. {1}".format(text, wanted["hints"]) if wanted["hints"] else text
