#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: bundle_apt_repository
short_description: Carry a pinned package set from a signed apt repository into an offline bundle
version_added: 0.1.0
description:
  - Reads an upstream apt repository (a Debian-style archive with C(dists/) or a flat repository), checks its
    C(InRelease) signature against the upstream key, checks every index file against the signed C(SHA256) list,
    and works out the packages to carry - the requested ones at their pinned versions plus every dependency the
    same repository satisfies (C(Depends), C(Pre-Depends); no C(Recommends), as the roles install).
  - Downloads those packages into O(dest) with the same relative paths as upstream, each checked against the
    sha256 and size of the signed index, and publishes a repository of exactly them there - C(Packages),
    C(Release), C(InRelease) and C(Release.gpg) - signed with the site's key O(signing_key).
  - O(source) may also be a local directory (a copy of the upstream repository); signatures are checked the same way.
  - Dependencies the repository cannot satisfy (on Debian, packages from C(main)) are returned in RV(external);
    the nodes get them from their own distribution mirror.
  - Runs where the bundle is written (the controller); the nodes never run it.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.attributes.internal
options:
  source:
    description:
      - The upstream repository's URL. With O(suites), the archive root (the directory holding C(dists/));
        without, a flat repository (the directory holding C(InRelease) and C(Packages)).
    type: str
    required: true
  source_name:
    description: What O(source) is called where it was declared (a variable name), to start error messages with.
    type: str
    default: ""
  suites:
    description:
      - The suites to read and publish (C(trixie), C(bookworm-backports)); empty for a flat repository.
    type: list
    elements: str
    default: []
  components:
    description:
      - The components to read and publish in each suite (C(contrib), C(non-free)). Every one is published,
        empty or not, so the nodes' sources lines stay valid.
    type: list
    elements: str
    default: []
  architecture:
    description: The dpkg architecture to carry (C(amd64), C(arm64)).
    type: str
    required: true
  key:
    description:
      - The upstream signing key, as an C(http(s)://) URL or a path on the machine running the module (for
        example C(/usr/share/keyrings/debian-archive-keyring.gpg)).
    type: str
    required: true
  key_fingerprints:
    description:
      - Primary-key fingerprints the signature must come from (any one of them). Empty accepts any key in O(key),
        which is then the trust anchor; give fingerprints whenever O(key) is downloaded.
    type: list
    elements: str
    default: []
  packages:
    description:
      - The packages to carry, resolved against every suite in O(suites) with O(prefer_upstream_version).
      - Nodes that see different suites (Debian 12 and 13 nodes sharing one archive) need their own O(sets).
    type: list
    elements: dict
    default: []
    suboptions: &package_options
      name:
        description: Package name.
        type: str
        required: true
      version:
        description: The exact Debian version (C(1.18.0-1)).
        type: str
        default: ""
      upstream_version:
        description: Any revision of this upstream version, the newest (C(550.163.01) matches C(550.163.01-2)).
        type: str
        default: ""
      required:
        description: Fail when the repository does not offer it; V(false) carries it only when offered.
        type: bool
        default: true
  prefer_upstream_version:
    description:
      - Among dependency candidates, take a version of this upstream version first (the driver role pins the
        driver's packages to the driver version), otherwise the newest.
    type: str
    default: ""
  sets:
    description:
      - More package sets, each resolved on its own against its own suites only (a subset of O(suites)), so that
        a node is never given a dependency from a suite it does not read; the carried packages are the union.
    type: list
    elements: dict
    default: []
    suboptions:
      suites:
        description: The suites this set's nodes read (empty for a flat repository).
        type: list
        elements: str
        default: []
      packages:
        description: As O(packages).
        type: list
        elements: dict
        required: true
        # The same options as the top-level packages.
        suboptions: *package_options
      prefer_upstream_version:
        description: As O(prefer_upstream_version).
        type: str
        default: ""
  dest:
    description: The repository's directory in the bundle; created when missing.
    type: path
    required: true
  signing_key:
    description: Fingerprint of the site key that signs the published repository (its secret key in O(gnupg_home)).
    type: str
    required: true
  gnupg_home:
    description: The GnuPG home holding the site key; empty for GnuPG's default.
    type: path
    default: ""
  plan_only:
    description:
      - Read and verify the upstream metadata and work out the packages, but write nothing (not even in O(dest)).
        For checking every source before anything is written.
    type: bool
    default: false
notes:
  - Only C(InRelease) (a clear-signed Release file) is read upstream; Debian's archive, NVIDIA's repositories and
    apt-ftparchive-made repositories have one.
  - Packages in O(dest) that the current set does not name are removed, so O(dest) must be used by this module only.
requirements:
  - C(gpg) on the machine running the module.
"""

EXAMPLES = r"""
- name: Carry Debian's driver 550.163.01 (contrib/non-free) into the bundle
  gpufleet.nvidia.bundle_apt_repository:
    source: http://deb.debian.org/debian
    suites: [trixie]
    components: [contrib, non-free, non-free-firmware]
    architecture: amd64
    key: /usr/share/keyrings/debian-archive-keyring.gpg
    packages:
      - {name: nvidia-kernel-dkms, upstream_version: "550.163.01"}
      - {name: nvidia-smi, upstream_version: "550.163.01"}
    prefer_upstream_version: "550.163.01"
    dest: /srv/bundle/debian
    signing_key: 0123456789ABCDEF0123456789ABCDEF01234567
  delegate_to: localhost
"""

RETURN = r"""
artifacts:
  description: Every file of the repository in O(dest), packages first, then the indexes.
  returned: always
  type: list
  elements: dict
  contains:
    artifact:
      description: Path relative to O(dest).
      type: str
    source:
      description: Where it came from (a URL for packages; C(generated) for indexes).
      type: str
    sha256:
      description: Its sha256 (for packages, as the signed upstream index lists it).
      type: str
    package:
      description: C(name=version) for packages.
      type: str
external:
  description: Dependencies the repository does not satisfy, left to the nodes' other sources.
  returned: always
  type: list
  elements: str
  sample: ["dkms (>= 2.1.0.0)", "libc6 (>= 2.34)"]
upstream:
  description: What upstream was verified with.
  returned: always
  type: dict
  contains:
    signed_by:
      description: Primary-key fingerprints that signed each C(InRelease) read.
      type: list
      elements: str
    key_sha256:
      description: sha256 of O(key) as read.
      type: str
"""

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import typing as t

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _apt_repo as apt

_VALIDSIG = re.compile(r"^\[GNUPG:\] VALIDSIG (\S+) .* (\S+)$", re.MULTILINE)


class BundleError(Exception):
    pass


class AptBundle:
    """Verify upstream, select, download, publish and sign one repository."""

    def __init__(self, module: AnsibleModule, scratch: str) -> None:
        self.module = module
        self.params = module.params
        self.scratch = scratch
        self.flat = not self.params["suites"]
        self.source = self.params["source"].rstrip("/")
        self.dest = self.params["dest"]
        self.gpg = module.get_bin_path("gpg", required=True)
        self.changes: list[str] = []

    # --- reading upstream ---------------------------------------------------

    def fetch(self, url: str) -> bytes:
        source = self.open_source(url)
        try:
            return source.read()
        finally:
            source.close()

    def open_source(self, url: str) -> t.Any:
        if not url.startswith(("http://", "https://")):
            try:
                return open(url, "rb")  # pylint: disable=consider-using-with
            except OSError as err:
                raise BundleError("cannot read {0}: {1}".format(url, err.strerror)) from None
        response, info = fetch_url(self.module, url, method="GET", timeout=300)
        if info.get("status") != 200 or response is None:
            raise BundleError("cannot fetch {0}: {1}".format(url, info.get("msg", info.get("status"))))
        return response

    def download(self, url: str, target: str, digest: str, size: int) -> None:
        """Into target, atomically, only when sha256 and size are the index's."""
        response = self.open_source(url)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        partial = target + ".part"
        hasher, length = hashlib.sha256(), 0
        with open(partial, "wb") as handle:
            for chunk in iter(lambda: response.read(1 << 20), b""):
                hasher.update(chunk)
                length += len(chunk)
                handle.write(chunk)
        response.close()
        if hasher.hexdigest() != digest or (size and length != size):
            os.unlink(partial)
            raise BundleError(
                "{0}: sha256 {1} ({2} bytes) is not the signed index's {3} ({4} bytes); refusing it".format(url, hasher.hexdigest(), length, digest, size)
            )
        os.chmod(partial, 0o644)
        os.replace(partial, target)

    def gpg_run(self, home: str, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
        """gpg in a GnuPG home ("": GnuPG's default)."""
        argv = [self.gpg, "--batch", "--no-tty", *(["--homedir", home] if home else []), *args]
        return subprocess.run(argv, input=data, capture_output=True, check=False)  # pylint: disable=ansible-bad-function

    def upstream_keyring(self) -> tuple[str, str]:
        """A scratch GnuPG home with only the upstream key; refuses a key without an expected fingerprint."""
        home = os.path.join(self.scratch, "upstream-gnupg")
        os.makedirs(home, mode=0o700)
        key = self.fetch(self.params["key"])
        imported = self.gpg_run(home, "--import", data=key)
        if imported.returncode != 0:
            raise BundleError("{0} is not an OpenPGP key: {1}".format(self.params["key"], imported.stderr.decode()[-300:]))
        listed = self.gpg_run(home, "--with-colons", "--list-keys").stdout.decode()
        primaries = [
            line.split(":")[9] for line, prev in zip(listed.splitlines()[1:], listed.splitlines()) if line.startswith("fpr:") and prev.startswith("pub:")
        ]
        expected = [f.replace(" ", "").upper() for f in self.params["key_fingerprints"]]
        if expected and not set(expected) & set(primaries):
            raise BundleError(
                "the key at {0} has fingerprint(s) {1}, none of the expected {2}".format(
                    self.params["key"], ", ".join(primaries) or "none", ", ".join(expected)
                )
            )
        return home, hashlib.sha256(key).hexdigest()

    def verified_release(self, home: str, url: str) -> tuple[dict[str, t.Any], str]:
        """The Release fields of an InRelease, from the signed text only, and the signer."""
        signed = self.fetch(url)
        out = os.path.join(self.scratch, "release-{0}".format(len(os.listdir(self.scratch))))
        result = self.gpg_run(home, "--status-fd", "1", "--output", out, "--decrypt", data=signed)
        valid = _VALIDSIG.findall(result.stdout.decode())
        expected = [f.replace(" ", "").upper() for f in self.params["key_fingerprints"]]
        signers = [primary for _sig, primary in valid if not expected or primary in expected]
        if result.returncode != 0 or not signers:
            raise BundleError(
                "{0} is not signed by {1} (gpg: {2})".format(url, ", ".join(expected) or self.params["key"], result.stderr.decode().strip()[-300:])
            )
        with open(out, encoding="utf-8") as handle:
            return apt.parse_release(handle.read()), signers[0]

    def read_upstream(self) -> tuple[dict[t.Any, list[tuple[t.Any, list[apt.Stanza]]]], dict[str, t.Any]]:
        """Every index of every suite, verified: {suite: [((suite, component), stanzas)]}."""
        home, key_sha256 = self.upstream_keyring()
        indexes: dict[t.Any, list[tuple[t.Any, list[apt.Stanza]]]] = {}
        signers = set()
        for suite in self.params["suites"] or [None]:
            base = self.source if suite is None else "{0}/dists/{1}".format(self.source, suite)
            release, signer = self.verified_release(home, base + "/InRelease")
            signers.add(signer)
            for component in self.params["components"] if suite else [None]:
                stem = "Packages" if suite is None else "{0}/binary-{1}/Packages".format(component, self.params["architecture"])
                picked = apt.pick_index(release["files"], stem)
                if picked is None:
                    if suite is None:
                        raise BundleError("{0}/InRelease lists no Packages index".format(base))
                    raise BundleError(
                        "{0}/InRelease has no {1}: the suite has no component {2} for {3}".format(base, stem, component, self.params["architecture"])
                    )
                path, digest, size = picked
                data = self.fetch("{0}/{1}".format(base, path))
                if hashlib.sha256(data).hexdigest() != digest or len(data) != size:
                    raise BundleError("{0}/{1} does not match the sha256 the signed InRelease lists".format(base, path))
                try:
                    stanzas = apt.parse_deb822(apt.decompress(path, data))
                except apt.IndexError_ as err:
                    raise BundleError("{0}/{1}: {2}".format(base, path, err)) from None
                indexes.setdefault(suite, []).append(((suite, component), stanzas))
        return indexes, {"signed_by": sorted(signers), "key_sha256": key_sha256}

    def resolve(self, indexes: dict[t.Any, list[tuple[t.Any, list[apt.Stanza]]]]) -> apt.Closure:
        """Each set against the suites its nodes read; the union of what they need."""
        sets = list(self.params["sets"])
        if self.params["packages"]:
            sets.insert(
                0, {"suites": self.params["suites"], "packages": self.params["packages"], "prefer_upstream_version": self.params["prefer_upstream_version"]}
            )
        selected: dict[tuple[t.Any, str, str], tuple[t.Any, apt.Stanza]] = {}
        external: set[str] = set()
        missing: list[str] = []
        for package_set in sets:
            suites = package_set["suites"] or [None]
            unknown = [s for s in suites if s not in indexes]
            if unknown:
                raise BundleError("sets: suites {0} are not among suites {1}".format(unknown, self.params["suites"]))
            index = apt.Index()
            for suite in suites:
                for where, stanzas in indexes[suite]:
                    index.add(where, stanzas)
            requests = [
                apt.Request(p["name"], p.get("version") or "", p.get("upstream_version") or "", p.get("required", True) is not False)
                for p in package_set["packages"]
            ]
            try:
                result = apt.closure(index, requests, package_set["prefer_upstream_version"] or "")
            except apt.IndexError_ as err:
                # A version dpkg itself would refuse, in the index or in a request.
                raise BundleError("sets: {0}".format(err)) from None
            for where, stanza in result.selected:
                selected[(where, stanza.package, stanza.version)] = (where, stanza)
            external.update(result.external)
            missing.extend(m for m in result.missing if m not in missing)
        return apt.Closure([selected[k] for k in sorted(selected, key=lambda k: (k[1], k[2], str(k[0])))], sorted(external), missing)

    # --- the bundle side ------------------------------------------------------

    def site_key_check(self) -> None:
        listed = self.gpg_run(self.params["gnupg_home"], "--with-colons", "--list-secret-keys", self.params["signing_key"])
        if listed.returncode != 0 or "sec:" not in listed.stdout.decode():
            raise BundleError(
                "no secret key {0} in the GnuPG home {1}: the site key signs the bundle".format(
                    self.params["signing_key"], self.params["gnupg_home"] or "(GnuPG's default)"
                )
            )

    def signed_by_site(self, path: str) -> bool:
        with open(path, "rb") as handle:
            result = self.gpg_run(self.params["gnupg_home"], "--status-fd", "1", "--output", os.devnull, "--decrypt", data=handle.read())
        wanted = self.params["signing_key"].replace(" ", "").upper()
        return result.returncode == 0 and any(wanted in pair for pair in _VALIDSIG.findall(result.stdout.decode()))

    def write(self, path: str, data: bytes) -> bool:
        if os.path.exists(path):
            with open(path, "rb") as handle:
                if handle.read() == data:
                    return False
        self.changes.append(os.path.relpath(path, self.dest))
        if not self.module.check_mode:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".part", "wb") as handle:
                handle.write(data)
            os.chmod(path + ".part", 0o644)
            os.replace(path + ".part", path)
        return True

    def publish(self, suite: str | None, selected: list[tuple[t.Any, apt.Stanza]]) -> list[dict[str, str]]:
        """Packages, Release, InRelease and Release.gpg for one suite (or the flat repository)."""
        base = self.dest if suite is None else os.path.join(self.dest, "dists", suite)
        files: dict[str, bytes] = {}
        for component in self.params["components"] if suite else [None]:
            stanzas = [s for (where, s) in selected if where == (suite, component)]
            text = apt.render_packages(stanzas)
            stem = "Packages" if suite is None else "{0}/binary-{1}/Packages".format(component, self.params["architecture"])
            files[stem] = text.encode("utf-8")
            files[stem + ".gz"] = apt.gzip_bytes(text)
        fields = {
            "Origin": "gpufleet-bundle",
            "Label": "gpufleet-bundle",
            "Suite": suite or "",
            "Codename": suite or "",
            "Date": time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()),
            "Architectures": self.params["architecture"],
            "Components": " ".join(self.params["components"]) if suite else "",
            "Description": "gpufleet offline bundle of " + self.source,
        }
        release = apt.render_release(fields, files)
        changed = False
        for name, data in sorted(files.items()):
            changed = self.write(os.path.join(base, name), data) or changed
        release_path = os.path.join(base, "Release")
        current = ""
        if os.path.exists(release_path):
            with open(release_path, encoding="utf-8") as handle:
                current = handle.read()
        resign = (
            changed
            or apt.release_without_date(current) != apt.release_without_date(release)
            or not os.path.exists(os.path.join(base, "InRelease"))
            or not os.path.exists(os.path.join(base, "Release.gpg"))
            or not self.signed_by_site(os.path.join(base, "InRelease"))
        )
        if resign:
            self.write(release_path, release.encode("utf-8"))
            self.sign(base)
        index_files = list(files) + ["Release", "InRelease", "Release.gpg"]
        prefix = "" if suite is None else "dists/{0}/".format(suite)
        return [
            {
                "artifact": prefix + name,
                "source": "generated",
                "package": "",
                "sha256": hashlib.sha256(files[name]).hexdigest() if name in files else self.sha256_of(base, name),
            }
            for name in index_files
        ]

    def sha256_of(self, base: str, name: str) -> str:
        path = os.path.join(base, name)
        if not os.path.exists(path):
            return ""
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()

    def sign(self, base: str) -> None:
        self.changes.extend(os.path.relpath(os.path.join(base, n), self.dest) for n in ("InRelease", "Release.gpg"))
        if self.module.check_mode:
            return
        release = os.path.join(base, "Release")
        for name, mode in (("InRelease", "--clearsign"), ("Release.gpg", "--detach-sign")):
            result = self.gpg_run(
                self.params["gnupg_home"],
                "--yes",
                "--armor",
                "--digest-algo",
                "SHA256",
                "--local-user",
                self.params["signing_key"],
                "--output",
                os.path.join(base, name),
                mode,
                release,
            )
            if result.returncode != 0:
                raise BundleError("gpg could not sign {0} with {1}: {2}".format(release, self.params["signing_key"], result.stderr.decode().strip()[-300:]))
            os.chmod(os.path.join(base, name), 0o644)

    def run(self) -> dict[str, t.Any]:
        indexes, upstream = self.read_upstream()
        result = self.resolve(indexes)
        if result.missing:
            raise BundleError(
                "{0}{1} does not offer: {2}".format(self.source, "" if self.flat else " (" + ", ".join(self.params["suites"]) + ")", "; ".join(result.missing))
            )
        artifacts = []
        for (suite, _component), stanza in result.selected:
            try:
                relative = apt.safe_filename(stanza.filename)
            except apt.IndexError_ as err:
                raise BundleError("{0}: {1}".format(self.source, err)) from None
            artifacts.append(
                {
                    "artifact": relative,
                    "source": "{0}/{1}".format(self.source, relative),
                    "sha256": stanza.sha256,
                    "package": "{0}={1}".format(stanza.package, stanza.version),
                    "size": int(stanza.get("Size") or 0),
                }
            )
        if self.params["plan_only"]:
            return {"changed": False, "artifacts": artifacts, "external": result.external, "upstream": upstream}

        self.site_key_check()
        for artifact in artifacts:
            target = os.path.join(self.dest, artifact["artifact"])
            if os.path.exists(target) and self.sha256_of(self.dest, artifact["artifact"]) == artifact["sha256"]:
                continue
            self.changes.append(artifact["artifact"])
            if not self.module.check_mode:
                self.download(artifact["source"], target, artifact["sha256"], artifact.pop("size"))
        for artifact in artifacts:
            artifact.pop("size", None)
        self.prune({a["artifact"] for a in artifacts})
        for suite in self.params["suites"] or [None]:
            artifacts.extend(self.publish(suite, result.selected))
        return {
            "changed": bool(self.changes),
            "artifacts": artifacts,
            "external": result.external,
            "upstream": upstream,
            "diff": {"before": "", "after": "".join(c + "\n" for c in sorted(self.changes))},
        }

    def prune(self, keep: set[str]) -> None:
        """Packages left from an earlier set: the published index no longer lists them."""
        if not os.path.isdir(self.dest):
            return
        for root, _dirs, names in os.walk(self.dest):
            for name in names:
                relative = os.path.relpath(os.path.join(root, name), self.dest)
                if (name.endswith(".deb") or name.endswith(".part")) and relative not in keep:
                    self.changes.append("removed " + relative)
                    if not self.module.check_mode:
                        os.unlink(os.path.join(root, name))


PACKAGE_OPTIONS = dict(
    name=dict(type="str", required=True),
    version=dict(type="str", default=""),
    upstream_version=dict(type="str", default=""),
    required=dict(type="bool", default=True),
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", required=True),
            source_name=dict(type="str", default=""),
            suites=dict(type="list", elements="str", default=[]),
            components=dict(type="list", elements="str", default=[]),
            architecture=dict(type="str", required=True),
            key=dict(type="str", required=True, no_log=False),
            key_fingerprints=dict(type="list", elements="str", default=[], no_log=False),
            packages=dict(type="list", elements="dict", default=[], options=PACKAGE_OPTIONS),
            prefer_upstream_version=dict(type="str", default=""),
            sets=dict(
                type="list",
                elements="dict",
                default=[],
                options=dict(
                    suites=dict(type="list", elements="str", default=[]),
                    packages=dict(type="list", elements="dict", required=True, options=PACKAGE_OPTIONS),
                    prefer_upstream_version=dict(type="str", default=""),
                ),
            ),
            dest=dict(type="path", required=True),
            signing_key=dict(type="str", required=True, no_log=False),
            gnupg_home=dict(type="path", default=""),
            plan_only=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    if module.params["suites"] and not module.params["components"]:
        module.fail_json(msg="components: a repository with suites needs its components (for example [main])")
    if not module.params["packages"] and not module.params["sets"]:
        module.fail_json(msg="packages: name the packages to carry (or give sets)")
    scratch = tempfile.mkdtemp(prefix="gpufleet-bundle-")
    try:
        result = AptBundle(module, scratch).run()
    except BundleError as err:
        prefix = module.params["source_name"]
        module.fail_json(msg="{0}{1}".format(prefix + ": " if prefix else "", err))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
