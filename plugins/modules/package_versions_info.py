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
    C(InRelease) signature with the key as C(signed-by)), and optionally against expected fingerprints.
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
    type: str
    required: true
  key_fingerprints:
    description:
      - Fingerprints the key must carry (any one of them); an empty list skips the check.
      - Needs C(gpg) on the node.
    type: list
    elements: str
    default: []
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
      description: SHA-256 of the key file as downloaded; use it to pin a later download of the same key.
      type: str
      returned: always
    fingerprints:
      description: Fingerprints in the key (empty when C(gpg) is not installed).
      type: list
      elements: str
      returned: always
"""

import hashlib
import os
import shutil
import tempfile
import typing as t

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

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
            self.module.fail_json(msg="cannot download the repository key {0}: {1}".format(source, info.get("msg")))
        return response.read()

    def fingerprints(self, keyring: str) -> list[str]:
        gpg = self.module.get_bin_path("gpg")
        if not gpg:
            return []
        home = os.path.join(self.scratch, "gnupg")
        os.makedirs(home, mode=0o700, exist_ok=True)
        out = self.run([gpg, "--batch", "--homedir", home, "--with-colons", "--show-keys", keyring], "gpg --show-keys")
        return [line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:")]

    def key(self, source: str, expected: list[str]) -> tuple[str, dict[str, t.Any]]:
        data = self.fetch_key(source)
        armored = data.lstrip().startswith(b"-----BEGIN PGP")
        keyring = os.path.join(self.scratch, "repository-key" + (".asc" if armored else ".gpg"))
        with open(keyring, "wb") as handle:
            handle.write(data)
        found = self.fingerprints(keyring)
        if expected:
            if not self.module.get_bin_path("gpg"):
                self.module.fail_json(msg="gpg is needed to check the repository key's fingerprint; install gnupg")
            wanted = {f.replace(" ", "").upper() for f in expected}
            if not wanted & {f.upper() for f in found}:
                self.module.fail_json(
                    msg="the repository key {0} has fingerprints {1}, none of the expected {2}".format(source, found or "(none)", sorted(wanted))
                )
        return keyring, {"sha256": hashlib.sha256(data).hexdigest(), "fingerprints": found}

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
            packages=dict(type="list", elements="str", required=True),
        ),
        mutually_exclusive=[("apt_sources", "dnf_baseurl")],
        required_one_of=[("apt_sources", "dnf_baseurl")],
        supports_check_mode=True,
    )
    params = module.params
    scratch = tempfile.mkdtemp(prefix="gpufleet-probe-")
    try:
        probe = RepositoryProbe(module, scratch)
        keyring, key = probe.key(params["key"], params["key_fingerprints"])
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
