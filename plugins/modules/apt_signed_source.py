#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: apt_signed_source
short_description: Add an apt repository trusted only with its own key, checked by fingerprint, in one call
version_added: 0.1.0
description:
  - Downloads the repository's signing key on the node, checks its primary key's fingerprint, checks that the
    repository answers, and only then writes the key and the sources file that names it with C(Signed-By).
    Nothing on the node changes unless the key matched and the repository answered.
  - The served file is read by C(gpg) in a scratch home and never written as served. Every primary key in it must
    be the pinned one (apt would accept a signature from any key of a C(Signed-By) file), and what is written is
    C(gpg)'s export of the pinned key alone.
  - One round trip to the node, where M(ansible.builtin.get_url), a C(gpg) command, M(ansible.builtin.uri) and
    M(ansible.builtin.template) take five or more.
  - A key file that does not hold exactly the key O(key_fingerprint) is refused, and a key already at O(key_path)
    that is not that key alone is removed, so apt stops trusting what the declaration no longer trusts. The
    sources file is left as it was.
  - Another sources file that names the same repository (URI and suite) with another C(Signed-By) is refused
    before anything is fetched, naming that file; apt would refuse the whole source list, and every apt call on the
    node would fail.
  - Both files are replaced atomically, and only when their content or attributes differ. With C(--diff) the
    sources file shows as a diff of its text and the key as its fingerprint before and after.
  - Downloads go through C(ansible.module_utils.urls), as M(ansible.builtin.get_url)'s do, with its options.
    HTTPS certificates are always verified, so there is no C(validate_certs); a mirror with a private CA is
    trusted with O(ca_path).
  - No URL may carry credentials (C(user:password@)) - not O(key_url), not O(release_url), not a URL in
    O(sources_content) - since the sources file is world-readable and the URLs are echoed in results and logs.
    Such a URL is refused before anything is fetched, and shown masked. The module's own downloads take
    O(url_username) and O(url_password); apt's take O(auth_login) and O(auth_password), written to O(auth_path)
    with mode C(0600).
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.url_options
  - gpufleet.nvidia.attributes.internal
options:
  key_url:
    description: The repository's signing key (ASCII-armoured or binary), by HTTP, HTTPS, FTP or C(file://).
    type: str
    required: true
  key_fingerprint:
    description:
      - The fingerprint of the key's primary key (40 hexadecimal digits, 64 for a v5 or v6 key; spaces are
        ignored, case does not matter). Needs C(gpg) on the node.
      - V("") is refused unless O(allow_unpinned_key) is set.
    type: str
    default: ""
  allow_unpinned_key:
    description:
      - Trust every key the URL serves, unchecked, when O(key_fingerprint) is V(""). For a mirror re-signed with a
        site key that is verified another way; the run warns each time, naming the keys it trusted.
    type: bool
    default: false
  key_path:
    description: Where the key goes, the path the sources file names in C(Signed-By). Its directory must exist.
    type: path
    required: true
  sources_path:
    description: The sources file, one-line (C(.list)) or deb822 (C(.sources)). Its directory must exist.
    type: path
    required: true
  sources_content:
    description: The sources file's whole content. It must name O(key_path) (C(Signed-By) or C(signed-by=)).
    type: str
    required: true
  auth_login:
    description:
      - The login apt gives the repository, written with O(auth_password) to O(auth_path) (apt's C(auth.conf.d),
        the format of C(apt_auth.conf)) with owner C(root) and mode C(0600). The file's content is never shown.
      - V("") leaves O(auth_path) alone.
    type: str
    default: ""
  auth_password:
    description: The password apt gives the repository, with O(auth_login). Never logged, never in a diff.
    type: str
    default: ""
  auth_machine:
    description:
      - The C(machine) the credentials are for, as apt matches it (C(host[:port][/path])).
      - V("") takes the host and port of O(release_url).
    type: str
    default: ""
  auth_path:
    description:
      - Where apt's credentials go. By default C(auth.conf.d/<name>.conf) beside the directory of O(sources_path)
        (C(/etc/apt/sources.list.d/nvidia.sources) gives C(/etc/apt/auth.conf.d/nvidia.conf)); its directory is
        created (mode C(0755)) when missing.
    type: path
  release_url:
    description:
      - A file of the repository that apt fetches (its C(Release) or C(InRelease)). When given, it must answer
        before anything is written, so that a mirror that is down fails the task with nothing changed rather than
        the install after it.
    type: str
notes:
  - The key is downloaded on every run (it is small), to check that the mirror still serves the trusted key.
  - The key and sources files are written with owner C(root), group C(root) and mode C(0644), since apt reads them
    as an unprivileged user (C(_apt)); the credentials file with mode C(0600), which apt reads before it drops
    privileges.
requirements:
  - Python 3.8 or later on the target (standard library only), and C(gpg).
"""

EXAMPLES = r"""
- name: Add the NVIDIA Container Toolkit's repository from the site mirror
  gpufleet.nvidia.apt_signed_source:
    key_url: "{{ site_mirror }}/keys/nvidia-container-toolkit.asc"
    key_fingerprint: "C95B 321B 61E8 8C18 09C4 F759 DDCA E044 F796 ECB0"
    key_path: /etc/apt/keyrings/nvidia-container-toolkit.asc
    sources_path: /etc/apt/sources.list.d/nvidia-container-toolkit.sources
    sources_content: |
      Types: deb
      URIs: {{ site_mirror }}/libnvidia-container/stable/deb/amd64
      Suites: /
      Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc
    release_url: "{{ site_mirror }}/libnvidia-container/stable/deb/amd64/Release"

- name: The same from a mirror that wants a login, from the module (the key) and from apt (the packages)
  gpufleet.nvidia.apt_signed_source:
    key_url: "{{ site_mirror }}/keys/nvidia-container-toolkit.asc"
    key_fingerprint: "C95B 321B 61E8 8C18 09C4 F759 DDCA E044 F796 ECB0"
    key_path: /etc/apt/keyrings/nvidia-container-toolkit.asc
    sources_path: /etc/apt/sources.list.d/nvidia-container-toolkit.sources
    sources_content: |
      Types: deb
      URIs: {{ site_mirror }}/libnvidia-container/stable/deb/amd64
      Suites: /
      Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc
    release_url: "{{ site_mirror }}/libnvidia-container/stable/deb/amd64/Release"
    url_username: fleet
    url_password: "{{ mirror_password }}"
    force_basic_auth: true
    auth_login: fleet
    auth_password: "{{ mirror_password }}"
"""

RETURN = r"""
fingerprint:
  description: The primary key's fingerprint of the key the URL served, as checked; V("") when O(key_fingerprint) was.
  type: str
  returned: success
  sample: C95B321B61E88C1809C4F759DDCAE044F796ECB0
changed_paths:
  description: The files that changed, or would in check mode.
  type: list
  elements: str
  returned: always
  sample: [/etc/apt/keyrings/nvidia-container-toolkit.asc]
"""

import os
import re
import tempfile
import typing as t
from urllib.parse import urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.gpufleet.nvidia.plugins.module_utils._apt_sources import conflicts, node_entries
from ansible_collections.gpufleet.nvidia.plugins.module_utils._apt_sources import parse as parse_sources
from ansible_collections.gpufleet.nvidia.plugins.module_utils._fetch import FetchError, mask_url, open_url, refuse_userinfo, url_options_spec
from ansible_collections.gpufleet.nvidia.plugins.module_utils._signing_key import KEY_MAX_BYTES, KeyPinError, PinnedKey, normalize_fingerprint

# A URL in a sources file, one-line or deb822 (URIs:), to look for credentials in.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\]]+")


class SignedSource:
    """Fetch and check the key, ask the repository, then write: the node changes only after both checks."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        # What fail() reports, so set before the first check can fail.
        self.changed_paths: list[str] = []
        self.diffs: list[dict[str, t.Any]] = []
        params = module.params
        # First: every later message may name these URLs.
        refuse_userinfo(module, params["key_url"], "key_url")
        if params["release_url"]:
            refuse_userinfo(module, params["release_url"], "release_url")
        for url in _URL.findall(params["sources_content"]):
            # The sources file is world-readable: apt's own login goes to a 0600 file.
            refuse_userinfo(module, url, "sources_content", "give apt's login as auth_login and auth_password")
        self.auth = self._auth(params)
        self.fingerprint = ""
        if params["key_fingerprint"].strip():
            try:
                self.fingerprint = normalize_fingerprint(params["key_fingerprint"])
            except ValueError as error:
                self.fail("key_fingerprint: {0}".format(error))
        elif not params["allow_unpinned_key"]:
            self.fail(
                "key_fingerprint: empty, so nothing would check the key {0} before apt trusts it. Set it to the "
                "fingerprint of the repository's signing key (allow_unpinned_key: true trusts whatever is served)".format(mask_url(params["key_url"]))
            )
        for option in ("key_path", "sources_path"):
            if not os.path.isabs(params[option]):
                self.fail("{0}: '{1}' is not absolute; give the full path".format(option, params[option]))
        self.key_path: str = params["key_path"]
        self.sources_path: str = params["sources_path"]
        if self.key_path not in params["sources_content"]:
            self.fail("sources_content: it does not name key_path {0} (Signed-By), so apt would not use the key".format(self.key_path))
        self.refuse_a_second_key()
        self.keys = PinnedKey(module.run_command, module.get_bin_path("gpg", required=True))

    def refuse_a_second_key(self) -> None:
        """apt refuses the whole source list when another file names this repository with another Signed-By, and
        every apt call on the node then fails: stop before anything is fetched or written, naming that file."""
        directory = os.path.dirname(self.sources_path)
        main_list = os.path.join(os.path.dirname(directory), "sources.list")
        ours = parse_sources(self.sources_path, self.module.params["sources_content"])
        for entry, other in conflicts(ours, node_entries(directory, main_list)):
            self.fail(
                "sources_content: {0} already names the repository {1} {2} with Signed-By {3}; apt refuses one repository "
                "with two keys, and every apt call on the node would fail. Let one source own it: remove {0}, or do not "
                "add this one (the role that adds it may have a switch for that, e.g. dcgm_repo_manage)".format(
                    other.path, entry.uri, entry.suite, other.signed_by or "(none: the node's trusted keys)"
                )
            )

    def _auth(self, params: dict[str, t.Any]) -> tuple[str, bytes, str] | None:
        """(path, content, machine) of apt's credentials file, or None when no login is given."""
        if not params["auth_login"]:
            return None
        machine = params["auth_machine"] or (urlsplit(params["release_url"]).netloc if params["release_url"] else "")
        if not machine:
            self.fail("auth_machine: empty and there is no release_url to take the host from; set auth_machine to the repository's host")
        # apt_auth.conf is whitespace-separated tokens: a space or a newline would end the value or start a line.
        for option, value in (("auth_login", params["auth_login"]), ("auth_password", params["auth_password"]), ("auth_machine", machine)):
            if not value or re.search(r"\s", value):
                self.fail("{0}: must be non-empty and hold no whitespace (apt_auth.conf splits on it)".format(option))
        path = params["auth_path"] or os.path.join(
            os.path.dirname(os.path.dirname(params["sources_path"])), "auth.conf.d", os.path.splitext(os.path.basename(params["sources_path"]))[0] + ".conf"
        )
        if not os.path.isabs(path):
            self.fail("auth_path: '{0}' is not absolute; give the full path".format(path))
        content = "machine {0}\nlogin {1}\npassword {2}\n".format(machine, params["auth_login"], params["auth_password"])
        return path, to_bytes(content, errors="surrogate_or_strict"), machine

    def fail(self, msg: str) -> t.NoReturn:
        self.module.fail_json(msg=msg, changed_paths=self.changed_paths)

    @staticmethod
    def _read(path: str) -> bytes | None:
        try:
            with open(path, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def fetch_key(self) -> bytes:
        url = self.module.params["key_url"]
        try:
            return open_url(self.module, url).read(KEY_MAX_BYTES + 1)
        except FetchError as error:
            self.fail("{0}; the repository was not added".format(error))

    def check_release(self) -> None:
        url = self.module.params["release_url"]
        try:
            open_url(self.module, url).read(1)
        except FetchError as error:
            self.fail("the repository does not answer ({0}); nothing was changed".format(error))

    def trusted_key(self, served: bytes) -> bytes:
        """What goes to key_path: gpg's export of the pinned key, or of every served key when unpinned is allowed."""
        armor = not self.key_path.endswith(".gpg")
        url = mask_url(self.module.params["key_url"])
        if not self.fingerprint:
            try:
                key, found = self.keys.export_all(served, armor)
            except KeyPinError as error:
                self.fail("the key at {0} is refused: {1}. Nothing was written".format(url, error))
            self.module.warn(
                "apt_signed_source: {0} trusts the key(s) {1} from {2} unchecked (allow_unpinned_key); pin key_fingerprint".format(
                    self.key_path, ", ".join(found), url
                )
            )
            return key
        try:
            return self.keys.export(served, [self.fingerprint], armor)
        except KeyPinError as error:
            self.refuse(str(error))

    def refuse(self, why: str) -> t.NoReturn:
        """The served key is not the pinned key alone: apt must not trust the key at key_path either unless it is."""
        current = self._read(self.key_path)
        removed = current is not None and self.keys.primary_fingerprints(current) != [self.fingerprint]
        if removed:
            self.changed_paths.append(self.key_path)
            if not self.module.check_mode:
                os.unlink(self.key_path)
        self.fail(
            "the key at {0} is refused: {1} (declared key_fingerprint {2}). {3}; the sources file was left as it was".format(
                mask_url(self.module.params["key_url"]),
                why,
                self.fingerprint,
                "The key at {0} was removed".format(self.key_path) if removed else "Nothing was written",
            )
        )

    def _write(self, path: str, content: bytes, shown: dict[str, str], mode: int = 0o644) -> None:
        before = self._read(path)
        changed = before != content
        if changed:
            self.changed_paths.append(path)
            self.diffs.append({"before_header": path, "after_header": path, "before": shown["before"] if before is not None else "", "after": shown["after"]})
            if not self.module.check_mode:
                handle, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".gpufleet-")
                with os.fdopen(handle, "wb") as out:
                    out.write(content)
                    out.flush()
                    os.fsync(out.fileno())
                # mkstemp made it 0600: a credentials file is never readable by others, not even for a moment.
                os.chmod(temp, mode)
                self.module.atomic_move(temp, path, unsafe_writes=False)
        attributes = {"path": path, "mode": "{0:04o}".format(mode), "owner": "root", "group": "root", "secontext": None, "attributes": None}
        if os.path.exists(path) and self.module.set_fs_attributes_if_different(attributes, False) and path not in self.changed_paths:
            self.changed_paths.append(path)

    def run(self) -> dict[str, t.Any]:
        params = self.module.params
        served = self.fetch_key()
        key = self.trusted_key(served)
        sources = to_bytes(params["sources_content"], errors="surrogate_or_strict")
        if params["release_url"]:
            self.check_release()
        current_key = self._read(self.key_path)
        before_fpr = ", ".join(self.keys.primary_fingerprints(current_key)) if current_key is not None and current_key != key else ""
        for path in (self.key_path, self.sources_path):
            if not os.path.isdir(os.path.dirname(path)):
                self.fail("{0}: its directory does not exist; create it first".format(path))
        self._write(
            self.key_path,
            key,
            {"before": "fingerprint {0}\n".format(before_fpr or "(none)"), "after": "fingerprint {0}\n".format(self.fingerprint or "(not checked)")},
        )
        current_sources = self._read(self.sources_path)
        self._write(
            self.sources_path,
            sources,
            {"before": (current_sources or b"").decode("utf-8", "replace"), "after": params["sources_content"]},
        )
        if self.auth is not None:
            auth_path, auth_content, machine = self.auth
            if not os.path.isdir(os.path.dirname(auth_path)) and not self.module.check_mode:
                os.makedirs(os.path.dirname(auth_path), mode=0o755)
            # The diff says that the credentials changed, never what they are.
            self._write(auth_path, auth_content, {"before": "(other credentials)\n", "after": "credentials for {0}\n".format(machine)}, mode=0o600)
        result: dict[str, t.Any] = {"changed": bool(self.changed_paths), "changed_paths": self.changed_paths, "fingerprint": self.fingerprint}
        if self.module._diff and self.diffs:
            result["diff"] = self.diffs
        return result


def argument_spec() -> dict[str, dict[str, t.Any]]:
    spec = url_options_spec()
    spec.update(
        {
            # A public key's address and fingerprint, no secrets.
            "key_url": {"type": "str", "required": True, "no_log": False},
            "key_fingerprint": {"type": "str", "default": "", "no_log": False},
            "allow_unpinned_key": {"type": "bool", "default": False},
            "key_path": {"type": "path", "required": True},
            "sources_path": {"type": "path", "required": True},
            "sources_content": {"type": "str", "required": True},
            "release_url": {"type": "str"},
            "auth_login": {"type": "str", "default": ""},
            "auth_password": {"type": "str", "default": "", "no_log": True},
            "auth_machine": {"type": "str", "default": ""},
            "auth_path": {"type": "path"},
        }
    )
    return spec


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    module.exit_json(**SignedSource(module).run())


if __name__ == "__main__":
    main()
