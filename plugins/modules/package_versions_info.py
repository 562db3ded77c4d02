#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: package_versions_info
short_description: List the versions a package repository offers, without adding it to the node
version_added: 0.1.0
description:
  - Reads a signed apt or dnf repository in a scratch package-manager configuration under a temporary
    directory, and reports the versions it offers of the given packages. The node's own sources, lists,
    caches and keyrings are left untouched, so a playbook can validate a requested version (and the
    repository's key) before it changes anything.
  - The repository must be signed; its key is verified by the package manager (apt checks the
    C(InRelease) signature with the key as C(signed-by)).
  - A downloaded key must be pinned (O(key_fingerprints)). The served file is read by C(gpg) in a scratch home, and
    every primary key in it must be pinned, and the repository is read with C(gpg)'s export of the pinned keys,
    never the served bytes, so a file that carries another key besides the pinned one is refused.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.info_module
options:
  apt_sources:
    description:
      - One-line apt sources without options, for example C(deb http://deb.debian.org/debian bookworm non-free)
        or C(deb https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64 /).
      - The module adds C(signed-by) with O(key) to each.
    type: list
    elements: str
  dnf_baseurl:
    description: The base URL of a dnf repository.
    type: str
  key:
    description:
      - The repository's signing key, as an C(http(s)://) or C(file://) URL or an absolute path on the node.
      - A path on the node (the distribution's archive keyring) is a key the node already trusts, used as it is.
    type: str
    required: true
  key_fingerprints:
    description:
      - The primary-key fingerprints of the key file, all of them (a vendor's file during a key rotation holds two).
        A primary key in the file that is not listed refuses the key.
      - Required for a key given by URL, unless O(allow_unpinned_key) is set. Needs C(gpg) on the node.
    type: list
    elements: str
    default: []
  allow_unpinned_key:
    description:
      - Read the repository with every key the URL serves, unchecked, when O(key_fingerprints) is empty. The run
        warns, naming the keys.
    type: bool
    default: false
  packages:
    description: The package names to report.
    type: list
    elements: str
    required: true
notes:
  - The repository is fetched from the node, through the node's network path, as the package manager will later.
  - dnf metadata is read with modular filtering off, so packages of module streams are listed too.
requirements:
  - Python 3.8 or later on the target; C(apt-get) and C(apt-cache), or C(dnf).
"""

EXAMPLES = r"""
- name: Which 535 drivers does Debian's non-free offer?
  gpufleet.nvidia.package_versions_info:
    apt_sources:
      - deb http://deb.debian.org/debian bookworm contrib non-free non-free-firmware
      - deb http://deb.debian.org/debian bookworm-backports contrib non-free non-free-firmware
    key: /usr/share/keyrings/debian-archive-keyring.gpg
    packages: [nvidia-kernel-dkms]
  register: offered

- name: And NVIDIA's CUDA repository, with its key checked by fingerprint
  gpufleet.nvidia.package_versions_info:
    apt_sources: [deb https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64 /]
    key: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
    key_fingerprints: [EB693B3035CD5710E231E123A4B469963BF863CC]
    packages: [nvidia-driver-cuda, nvidia-kernel-dkms]
"""

RETURN = r"""
versions:
  description:
    - For every requested package, the versions offered, newest first (an empty list when none is).
    - Ordered as the package manager orders them, dpkg's order for apt and rpm's for dnf, epochs included.
  returned: always
  type: dict
  sample: {"nvidia-kernel-dkms": ["535.261.03-1", "535.216.03-2~bpo12+1"]}
key:
  description: The key the repository was read with.
  returned: always
  type: dict
  contains:
    sha256:
      description: SHA-256 of the key file as downloaded.
      type: str
      returned: always
    fingerprints:
      description: The primary-key fingerprints of the key (empty when C(gpg) is not installed).
      type: list
      elements: str
      returned: always
    export:
      description:
        - For a key given by URL, C(gpg)'s ASCII-armoured export of the key(s) the repository was read with. Write it
          as the repository's C(Signed-By) keyring, so that apt trusts exactly what was checked here.
      type: str
      returned: when O(key) is a URL
"""

import hashlib
import os
import re
import shutil
import tempfile
import typing as t

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.gpufleet.nvidia.plugins.module_utils._fetch import mask_url, refuse_userinfo
from ansible_collections.gpufleet.nvidia.plugins.module_utils._signing_key import KeyPinError, PinnedKey, normalize_fingerprint
from ansible_collections.gpufleet.nvidia.plugins.module_utils._version_order import dpkg_key, rpm_key


def newest_first(versions: list[str], key: t.Callable[[str], t.Any]) -> list[str]:
    """Versions newest first, in the package manager's own order (dpkg_key or rpm_key)."""
    return sorted(versions, key=key, reverse=True)


def parse_madison(text: str) -> dict[str, list[str]]:
    """`apt-cache madison` lines: ` package | version | url suite/component arch Packages`."""
    versions: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) >= 3 and "Packages" in fields[2]:
            versions.setdefault(fields[0], [])
            if fields[1] not in versions[fields[0]]:
                versions[fields[0]].append(fields[1])
    return versions


def parse_repoquery(text: str) -> dict[str, list[str]]:
    """`dnf repoquery --qf '%{name} %{evr}'` lines."""
    versions: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2:
            versions.setdefault(fields[0], [])
            if fields[1] not in versions[fields[0]]:
                versions[fields[0]].append(fields[1])
    return versions


def signed_source(line: str, keyring: str) -> str:
    """`deb URL SUITE...` -> `deb [signed-by=KEYRING] URL SUITE...`."""
    kind, _sep, rest = line.strip().partition(" ")
    if kind not in ("deb", "deb-src") or not rest or rest.lstrip().startswith("["):
        raise ValueError("apt_sources entries must look like 'deb URL SUITE [COMPONENT...]' without options: " + line)
    return "{0} [signed-by={1}] {2}".format(kind, keyring, rest.strip())


class RepositoryProbe:
    """Reads one repository in a scratch configuration below a temporary directory."""

    def __init__(self, module: AnsibleModule, scratch: str) -> None:
        self.module = module
        self.scratch = scratch

    def run(self, argv: list[str], what: str) -> str:
        rc, out, err = self.module.run_command(argv, environ_update={"LC_ALL": "C"})
        if rc != 0:
            self.module.fail_json(msg="{0} failed: {1}".format(what, (err or out).strip()), cmd=argv)
        return out

    # -- key ----------------------------------------------------------------------
    def fetch_key(self, source: str) -> bytes:
        if source.startswith("/"):
            try:
                with open(source, "rb") as handle:
                    return handle.read()
            except OSError as err:
                self.module.fail_json(msg="cannot read the repository key {0}: {1}".format(source, err))
        response, info = fetch_url(self.module, source, method="GET")
        if response is None or info.get("status") not in (200, None):
            self.module.fail_json(msg="cannot download the repository key {0}: {1}".format(mask_url(source), info.get("msg")))
        return response.read()

    def key(self, source: str, expected: list[str], allow_unpinned: bool) -> tuple[str, dict[str, t.Any]]:
        """The keyring to read the repository with, and what the caller learns of the key.

        A key on the node is the node's own trust, used as it is. A downloaded one is gpg's export of its pinned
        primary keys (all of the file's, or it is refused), or of all of them where unpinned is allowed."""
        data = self.fetch_key(source)
        gpg = self.module.get_bin_path("gpg")
        keys = PinnedKey(self.module.run_command, gpg) if gpg else None
        shown = mask_url(source)
        info: dict[str, t.Any] = {"sha256": hashlib.sha256(data).hexdigest(), "fingerprints": []}
        if source.startswith("/") and not expected:
            keyring = os.path.join(self.scratch, "repository-key" + (".asc" if data.lstrip().startswith(b"-----BEGIN PGP") else ".gpg"))
            with open(keyring, "wb") as handle:
                handle.write(data)
            info["fingerprints"] = keys.primary_fingerprints(data) if keys else []
            return keyring, info
        if keys is None:
            self.module.fail_json(msg="gpg is needed to check the repository key {0}; install gnupg".format(shown))
        try:
            if expected:
                exported = keys.export(data, expected, armor=True)
                info["fingerprints"] = sorted(normalize_fingerprint(f) for f in expected)
            elif allow_unpinned:
                exported, info["fingerprints"] = keys.export_all(data, armor=True)
                self.module.warn(
                    "package_versions_info: the repository key {0} is trusted unchecked (allow_unpinned_key): {1}; pin key_fingerprints".format(
                        shown, ", ".join(info["fingerprints"])
                    )
                )
            else:
                self.module.fail_json(
                    msg="key_fingerprints: empty, so nothing would check the repository key {0}. Give the fingerprint of the "
                    "repository's signing key (allow_unpinned_key: true trusts whatever is served)".format(shown)
                )
        except (KeyPinError, ValueError) as err:
            self.module.fail_json(msg="the repository key {0} is refused: {1}".format(shown, err))
        keyring = os.path.join(self.scratch, "repository-key.asc")
        with open(keyring, "wb") as handle:
            handle.write(exported)
        if not source.startswith("/"):
            info["export"] = exported.decode("ascii")
        return keyring, info

    # -- apt ------------------------------------------------------------------------
    def apt(self, sources: list[str], keyring: str, packages: list[str]) -> dict[str, list[str]]:
        base = self.scratch
        for sub in ("lists/partial", "cache/archives/partial", "etc/preferences.d"):
            os.makedirs(os.path.join(base, sub), exist_ok=True)
        with open(os.path.join(base, "sources.list"), "w", encoding="utf-8") as handle:
            handle.write("".join(signed_source(line, keyring) + "\n" for line in sources))
        open(os.path.join(base, "status"), "w").close()
        opts = []
        for option, value in (
            ("Dir::Etc::sourcelist", os.path.join(base, "sources.list")),
            ("Dir::Etc::sourceparts", "-"),
            ("Dir::Etc::preferencesparts", os.path.join(base, "etc/preferences.d")),
            ("Dir::State::Lists", os.path.join(base, "lists")),
            ("Dir::State::status", os.path.join(base, "status")),
            ("Dir::Cache", os.path.join(base, "cache")),
            ("Debug::NoLocking", "true"),
            # The scratch directory is private to root; apt's _apt user could not write it.
            ("APT::Sandbox::User", "root"),
        ):
            opts += ["-o", "{0}={1}".format(option, value)]
        self.run(["apt-get", *opts, "-q", "--error-on=any", "update"], "apt-get update of the repository")
        return parse_madison(self.run(["apt-cache", *opts, "madison", *packages], "apt-cache madison"))

    # -- dnf ------------------------------------------------------------------------
    def dnf(self, baseurl: str, keyring: str, packages: list[str]) -> dict[str, list[str]]:
        repo = "gpufleet-probe"
        argv = [
            "dnf",
            "-q",
            "repoquery",
            "--disablerepo=*",
            "--enablerepo=" + repo,
            "--repofrompath={0},{1}".format(repo, baseurl),
            "--setopt={0}.gpgcheck=1".format(repo),
            "--setopt={0}.gpgkey=file://{1}".format(repo, keyring),
            "--setopt={0}.module_hotfixes=1".format(repo),
            "--setopt=cachedir=" + os.path.join(self.scratch, "cache"),
            "--showduplicates",
            "--qf",
            "%{name} %{evr}",
            *packages,
        ]
        return parse_repoquery(self.run(argv, "dnf repoquery of the repository"))


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            apt_sources=dict(type="list", elements="str"),
            dnf_baseurl=dict(type="str"),
            key=dict(type="str", required=True, no_log=False),
            key_fingerprints=dict(type="list", elements="str", default=[], no_log=False),
            allow_unpinned_key=dict(type="bool", default=False),
            packages=dict(type="list", elements="str", required=True),
        ),
        mutually_exclusive=[("apt_sources", "dnf_baseurl")],
        required_one_of=[("apt_sources", "dnf_baseurl")],
        supports_check_mode=True,
    )
    params = module.params
    # Before anything is fetched: every later message, and the result's invocation, may show these URLs.
    for option, values in (("key", [params["key"]]), ("apt_sources", params["apt_sources"] or []), ("dnf_baseurl", [params["dnf_baseurl"] or ""])):
        for value in values:
            for url in re.findall(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\]]+", value):
                refuse_userinfo(module, url, option, "serve the repository to the node without a login (this probe gives none)")
    scratch = tempfile.mkdtemp(prefix="gpufleet-probe-")
    try:
        probe = RepositoryProbe(module, scratch)
        keyring, key = probe.key(params["key"], params["key_fingerprints"], params["allow_unpinned_key"])
        if params["apt_sources"]:
            try:
                found = probe.apt(params["apt_sources"], keyring, params["packages"])
            except ValueError as err:
                module.fail_json(msg=str(err))
            order = dpkg_key
        else:
            found = probe.dnf(params["dnf_baseurl"], keyring, params["packages"])
            order = rpm_key
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    try:
        versions = {name: newest_first(found.get(name, []), order) for name in params["packages"]}
    except ValueError as err:
        module.fail_json(msg="the repository offers a version its package manager would refuse: {0}".format(err))
    module.exit_json(changed=False, versions=versions, key=key)


if __name__ == "__main__":
    main()
