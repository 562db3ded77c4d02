#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: release_binary
short_description: Install one program from a release tarball verified by its sha256, in one call
version_added: 0.1.0
description:
  - Downloads a release tarball on the node, checks it against the pinned O(sha256), takes one member out of it
    and puts it in place atomically with the declared owner, group and mode. Nothing on the node changes unless
    the tarball matched.
  - The digest is always the caller's (a table in a role, the inventory); a C(.sha256) file from the server that
    serves the tarball would vouch for whatever that server sends, so there is no option to read one.
  - One round trip to the node, where a staging directory, M(ansible.builtin.get_url),
    M(ansible.builtin.unarchive), M(ansible.builtin.copy) and a clean-up take five or more.
  - The download is held in an unnamed temporary file, so nothing is left behind whatever happens; the new program
    is written beside its destination and renamed over it.
  - The program is replaced only when its content or attributes differ, so a repeated run changes nothing. With
    O(version) and O(version_argv), the program in place is asked for its version first, in the same call; when it
    names O(version), nothing is downloaded and only its owner, group and mode are set. Without them the tarball is
    fetched every time the module runs.
  - In check mode the tarball is still fetched and verified (a wrong checksum fails a check run too), and the
    module reports whether the program would change.
  - Downloads go through C(ansible.module_utils.urls), as M(ansible.builtin.get_url)'s do, with its options -
    proxies from the node's environment (C(https_proxy), C(http_proxy), C(no_proxy)) unless O(use_proxy=false),
    credentials from O(url_username) and O(url_password) or C(~/.netrc), client certificates, GSSAPI, headers,
    ciphers and a timeout.
  - Credentials are given as O(url_username) and O(url_password) (never logged); a URL with C(user:password@) in
    it is refused, since the URL is echoed in results and logs. The refusal shows it masked.
  - HTTPS certificates are always verified, so there is no C(validate_certs); a mirror with a private CA is trusted
    with O(ca_path).
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.url_options
  - gpufleet.nvidia.attributes.internal
options:
  url:
    description:
      - The release tarball (C(.tar.gz), C(.tgz), C(.tar.xz) or C(.tar)), an C(https://) URL. HTTPS certificates
        are always verified.
      - C(http://), C(ftp://) and C(file://) URLs are refused unless O(allow_insecure_transport=true).
      - A URL with credentials in it (C(user:password@)) is refused; use O(url_username) and O(url_password).
    type: str
    required: true
  sha256:
    description:
      - The tarball's expected sha256 (64 hexadecimal digits), pinned by the caller.
    type: str
    required: true
  allow_insecure_transport:
    description:
      - Accept an O(url) that is not C(https://) (C(http://), C(ftp://), C(file://)), for a mirror without TLS. The
        pinned O(sha256) is then all that checks the download; the task warns.
    type: bool
    default: false
  member:
    description: The path of the program inside the tarball (a leading C(./) is ignored).
    type: str
    required: true
  dest:
    description: Where the program goes, an absolute path. Its directory is created (mode C(0755)) when missing.
    type: path
    required: true
  mode:
    description: The program's mode, as an octal string.
    type: raw
    default: "0755"
  owner:
    description: The program's owner.
    type: str
    default: root
  group:
    description: The program's group.
    type: str
    default: root
  version:
    description:
      - The release's version as the program reports it (a leading V(v) on either side is ignored), e.g. V(v1.36.0).
      - Needs O(version_argv).
    type: str
  version_argv:
    description:
      - The command, as an argument list, that prints the version of the program at O(dest), e.g.
        V([/usr/local/bin/crictl, --config, /dev/null, --version]). When its output has O(version) as one of its
        words, the program in place is that release and the tarball is not fetched.
      - A program that is missing, fails or names another version is replaced from the tarball.
      - Needs O(version).
    type: list
    elements: str
notes:
  - The member must be a regular file; links and directories in the tarball are refused.
  - Retries are the task's, as with M(ansible.builtin.get_url) (C(retries), C(delay), C(until)); nothing on the
    node changes unless a download matched, so a retried task is safe.
requirements:
  - Python 3.8 or later on the target (standard library only).
"""

EXAMPLES = r"""
- name: Install crictl from its release, checked against a pinned digest
  gpufleet.nvidia.release_binary:
    url: "{{ mirror }}/v1.36.0/crictl-v1.36.0-linux-amd64.tar.gz"
    sha256: 83855e114566a8a8c44c548d515670f51de3a5e1da8b2effb59870e2f10c25a3
    member: crictl
    dest: /usr/local/bin/crictl
    # Nothing is downloaded where crictl v1.36.0 is already in place.
    version: v1.36.0
    version_argv: [/usr/local/bin/crictl, --config, /dev/null, --version]

- name: The same from a mirror that wants a password and a client certificate
  gpufleet.nvidia.release_binary:
    url: "{{ mirror }}/v1.36.0/crictl-v1.36.0-linux-amd64.tar.gz"
    sha256: 83855e114566a8a8c44c548d515670f51de3a5e1da8b2effb59870e2f10c25a3
    member: crictl
    dest: /usr/local/bin/crictl
    ca_path: /etc/ssl/private-ca.pem
    client_cert: /etc/ssl/node.pem
    client_key: /etc/ssl/node.key
    url_username: fleet
    url_password: "{{ mirror_password }}"
  environment:
    https_proxy: http://proxy.internal:3128
  register: crictl_install
  retries: 3
  delay: 5
  until: crictl_install is succeeded
"""

RETURN = r"""
sha256:
  description: The tarball's sha256, as verified.
  type: str
  returned: when the tarball was fetched
  sample: 83855e114566a8a8c44c548d515670f51de3a5e1da8b2effb59870e2f10c25a3
member_sha256:
  description: The sha256 of the program now at O(dest) (in check mode, the one that would be).
  type: str
  returned: success
dest:
  description: Where the program is.
  type: str
  returned: success
fetched:
  description: Whether the tarball was downloaded; false when the program in place already reported O(version).
  type: bool
  returned: success
installed_version:
  description: What O(version_argv) printed, when it named O(version).
  type: str
  returned: when the program in place is the release
"""

import hashlib
import os
import re
import shutil
import tarfile
import tempfile
import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._fetch import (
    FetchError,
    mask_url,
    open_url,
    refuse_insecure_transport,
    refuse_userinfo,
    url_options_spec,
)

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20


def _inside(name: str) -> str:
    """A tarball path as the module compares it: without a leading ./ ."""
    return name[2:] if name.startswith("./") else name


def _copy_hashing(source: t.BinaryIO, into: t.BinaryIO | None = None) -> str:
    """sha256 of all that source yields, copied into `into` on the way where one is given."""
    digest = hashlib.sha256()
    for chunk in iter(lambda: source.read(_CHUNK), b""):
        digest.update(chunk)
        if into is not None:
            into.write(chunk)
    return digest.hexdigest()


class ReleaseBinary:
    """Fetch, verify, extract, compare, replace: the tarball decides, the node changes only after it matched."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        params = module.params
        self.url: str = params["url"]
        # Before anything else: a refusal further down would echo the URL with its password.
        refuse_userinfo(module, self.url, "url")
        refuse_insecure_transport(module, self.url, "url", params["allow_insecure_transport"])
        # What messages and results name: the URL without a password in it.
        self.shown_url: str = mask_url(self.url)
        self.dest: str = params["dest"]
        self.member: str = _inside(params["member"].lstrip("/"))
        if not os.path.isabs(self.dest):
            module.fail_json(msg="dest: '{0}' is not absolute; give the full path".format(self.dest))
        if not self.member or ".." in self.member.split("/"):
            module.fail_json(msg="member: '{0}' is not a path inside the tarball".format(params["member"]))
        if not _SHA256.fullmatch(params["sha256"].strip().lower()):
            module.fail_json(msg="sha256: expected 64 hexadecimal digits, got '{0}'".format(params["sha256"]))

    # -- downloads -----------------------------------------------------------------------------
    def _open(self, url: str) -> t.Any:
        """A response to read, as get_url opens one; anything but the file itself fails the task."""
        try:
            return open_url(self.module, url)
        except FetchError as error:
            self.module.fail_json(msg=str(error), status=error.status, url=mask_url(url))

    def expected_sha256(self) -> str:
        return self.module.params["sha256"].strip().lower()

    def fetch(self, into: t.BinaryIO) -> str:
        """The tarball into an open file; returns its sha256."""
        digest = _copy_hashing(self._open(self.url), into)
        into.flush()
        into.seek(0)
        return digest

    # -- the program ---------------------------------------------------------------------------
    def extract(self, tarball: t.BinaryIO, into: t.BinaryIO) -> str:
        """The member into an open file; returns its sha256."""
        try:
            with tarfile.open(fileobj=tarball, mode="r:*") as archive:
                found = next((info for info in archive if _inside(info.name) == self.member), None)
                if found is None:
                    self.module.fail_json(msg="{0} has no member '{1}'".format(self.shown_url, self.member))
                if not found.isfile():
                    self.module.fail_json(msg="{0}: '{1}' is not a regular file in the tarball".format(self.shown_url, self.member))
                digest = _copy_hashing(archive.extractfile(found), into)
        except tarfile.TarError as error:
            self.module.fail_json(msg="{0} is not a readable tarball: {1}".format(self.shown_url, error))
        into.flush()
        return digest

    @staticmethod
    def current_sha256(path: str) -> str | None:
        if not os.path.isfile(path) or os.path.islink(path):
            return None
        with open(path, "rb") as handle:
            return _copy_hashing(handle)

    def _attributes(self, path: str, diff: dict[str, t.Any] | None) -> bool:
        params = self.module.params
        file_args = {"path": path, "mode": params["mode"], "owner": params["owner"], "group": params["group"], "secontext": None, "attributes": None}
        return self.module.set_fs_attributes_if_different(file_args, False, diff=diff)

    def install(self, program: t.BinaryIO) -> None:
        directory = os.path.dirname(self.dest)
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o755)
        handle, temp = tempfile.mkstemp(dir=directory, prefix=".gpufleet-")
        try:
            with os.fdopen(handle, "wb") as out:
                program.seek(0)
                shutil.copyfileobj(program, out)
            # Private until its attributes are right; then renamed over the old program in one step.
            os.chmod(temp, 0o700)
            self._attributes(temp, None)
            os.rename(temp, self.dest)
        except BaseException:
            if os.path.lexists(temp):
                os.unlink(temp)
            raise

    # -- the program in place ------------------------------------------------------------------
    def installed_release(self) -> str | None:
        """What version_argv prints, where the program at dest is there and names the declared version; else None."""
        params = self.module.params
        if not params["version_argv"] or not os.path.isfile(self.dest):
            return None
        try:
            rc, out, _err = self.module.run_command(params["version_argv"], handle_exceptions=False, environ_update={"LC_ALL": "C"})
        except OSError:
            return None
        wanted = params["version"].strip().lstrip("v")
        if rc != 0 or wanted not in (word.lstrip("v") for word in out.split()):
            return None
        return out.strip()

    # -- all of it -----------------------------------------------------------------------------
    def run(self) -> dict[str, t.Any]:
        in_place = self.installed_release()
        if in_place is not None:
            # The release is in place: only its owner, group or mode can differ (check mode predicts, not sets).
            diff: dict[str, t.Any] = {"before": {"path": self.dest}, "after": {"path": self.dest}}
            changed = self._attributes(self.dest, diff)
            result = {"changed": changed, "fetched": False, "installed_version": in_place, "member_sha256": self.current_sha256(self.dest), "dest": self.dest}
            if changed and self.module._diff:
                result["diff"] = diff
            return result
        expected = self.expected_sha256()
        with tempfile.TemporaryFile() as tarball, tempfile.TemporaryFile() as program:
            actual = self.fetch(tarball)
            if actual != expected:
                self.module.fail_json(
                    msg="checksum mismatch: {0} has sha256 {1}, expected {2}; it is corrupt or was tampered with, and nothing was installed".format(
                        self.shown_url, actual, expected
                    ),
                    sha256=actual,
                    url=self.shown_url,
                )
            wanted = self.extract(tarball, program)
            before = self.current_sha256(self.dest)
            diff = {"before": {"path": self.dest, "sha256": before or "(absent)"}, "after": {"path": self.dest, "sha256": wanted}}
            changed = before != wanted
            if changed and not self.module.check_mode:
                self.install(program)
            elif not changed:
                # The same program: only its owner, group or mode can differ (check mode predicts, not sets).
                changed = self._attributes(self.dest, diff)
        result = {"changed": changed, "fetched": True, "sha256": actual, "member_sha256": wanted, "dest": self.dest}
        if changed and self.module._diff:
            result["diff"] = diff
        return result


def argument_spec() -> dict[str, dict[str, t.Any]]:
    """ansible.module_utils.urls' options as get_url takes them, less validate_certs, and the module's own."""
    # HTTPS is always verified; the pinned sha256 vouches for the bytes whatever the transport.
    spec = url_options_spec()
    spec.update(
        {
            "url": {"type": "str", "required": True},
            "sha256": {"type": "str", "required": True},
            "allow_insecure_transport": {"type": "bool", "default": False},
            "member": {"type": "str", "required": True},
            "dest": {"type": "path", "required": True},
            "mode": {"type": "raw", "default": "0755"},
            "owner": {"type": "str", "default": "root"},
            "group": {"type": "str", "default": "root"},
            "version": {"type": "str"},
            "version_argv": {"type": "list", "elements": "str"},
        }
    )
    return spec


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True, required_together=[("version", "version_argv")])
    module.exit_json(**ReleaseBinary(module).run())


if __name__ == "__main__":
    main()
