#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_files
short_description: Put a role's own files, directories and links in place in one call
version_added: 0.1.0
description:
  - Brings a list of paths to their declared state (a file with given content, a directory, a symbolic link, or
    nothing) with one round trip to the node, where M(ansible.builtin.copy), M(ansible.builtin.template) and
    M(ansible.builtin.file) take one per path. The roles use it for the files they generate whole (boot units,
    their commands and private libraries, generated configs), so that a no-op run of a role costs one call, not one
    per file.
  - Paths are handled in the order given, so list a directory before what goes into it.
  - A file is replaced atomically (written beside it, then renamed), and only when its content differs; owner,
    group and mode are set when they differ.
  - Not for files that people or other tools also edit; those keep their own modules, with backups.
  - A file's content is never logged or returned (it is C(no_log)); with C(--diff) a changed file shows as a
    diff of its text, unless it is larger than O(diff_max_bytes) or binary, when the diff names its sizes and
    sha256 before and after instead.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.attributes.internal
options:
  files:
    description: The paths and their declared states, handled in this order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: An absolute path on the node.
        type: path
        required: true
      state:
        description:
          - V(file) a regular file with O(files[].content); V(directory) a directory (parents are created);
            V(link) a symbolic link to O(files[].src); V(absent) nothing there (a directory goes with its content).
        type: str
        choices: [file, directory, link, absent]
        default: file
      content:
        description:
          - The file's whole content (text). Required with O(files[].state=file).
          - Never logged or returned; only the diff shows it (see O(diff_max_bytes)).
        type: str
      src:
        description: What the link points at. Required with O(files[].state=link); it need not exist yet.
        type: path
      mode:
        description: The mode of a file or directory, as an octal string.
        type: raw
      owner:
        description: The owner of a file or directory. V("") leaves it as it is (a new path belongs to the user the
          module runs as), for files written as an unprivileged user, such as reports on the controller.
        type: str
        default: root
      group:
        description: The group of a file or directory. V("") leaves it as it is, as for O(files[].owner).
        type: str
        default: root
  diff_max_bytes:
    description:
      - The largest file, before or after, whose text a diff shows. A larger file, and a binary one (with a NUL
        byte, or not UTF-8), is shown as its sizes and sha256 before and after, with the reason.
      - The default is ansible-core's own for M(ansible.builtin.copy) and M(ansible.builtin.template)
        (C(MAX_FILE_SIZE_FOR_DIFF), 104448 bytes), so these files diff as those modules' would. It keeps
        a changed private library or generated config from flooding the output and the controller's memory
        with a diff per host.
      - V(0) shows every changed file as sizes and sha256 only.
    type: int
    default: 104448
  systemd_reload:
    description:
      - After every path is in place, run C(systemctl daemon-reload) in the same call when a path under a unit
        directory of systemd's (C(/etc/systemd/system), C(/run/systemd/system), C(/usr/lib/systemd/system),
        C(/lib/systemd/system)) changed, so that a role writing its unit and its links costs one call, not two.
      - Only on a node booted with systemd (C(/run/systemd/system) exists, as sd_booted(3) tests); elsewhere, such
        as an image built in a chroot, systemd reads the units when it starts. Never in check mode, where
        RV(systemd_reloaded) says whether it would reload.
      - A failing reload fails the task, with the paths already changed in RV(changed_paths).
    type: bool
    default: false
notes:
  - A file's mode defaults to C(0644) and a directory's to C(0755) when they are created without O(files[].mode).
  - A path that exists as another kind (a directory where a file is declared, for example) is an error, not
    replaced.
requirements:
  - Python 3.8 or later on the target (standard library only).
"""

EXAMPLES = r"""
- name: Install a boot unit, its command and its config in one call
  gpufleet.nvidia.node_files:
    files:
      - {path: /etc/example, state: directory, mode: "0755"}
      - path: /etc/example/example.json
        content: "{{ example_config | to_nice_json }}\n"
        mode: "0644"
      - path: /usr/local/sbin/example
        content: "{{ lookup('ansible.builtin.file', 'example', rstrip=false) }}"
        mode: "0755"
      - path: /etc/systemd/system/example.service
        content: "{{ lookup('ansible.builtin.template', 'example.service.j2') }}"
      - path: /etc/systemd/system/multi-user.target.wants/example.service
        state: link
        src: /etc/systemd/system/example.service
  register: example_files

- name: Take it all away again
  gpufleet.nvidia.node_files:
    files:
      - {path: /etc/systemd/system/multi-user.target.wants/example.service, state: absent}
      - {path: /etc/systemd/system/example.service, state: absent}
      - {path: /etc/example, state: absent}
"""

RETURN = r"""
diff:
  description:
    - With C(--diff), one entry per change, in the order given. A file's text is shown only where it is at most
      O(diff_max_bytes) and not binary; otherwise C(before) and C(after) give its sizes and sha256, and
      C(dst_larger), C(src_larger), C(dst_binary) or C(src_binary) say why, as ansible-core's own diffs do.
  type: list
  elements: dict
  returned: changed and diff mode
changed_paths:
  description: The paths that were (or in check mode would be) changed, in the order given.
  type: list
  elements: str
  returned: always
  sample: [/etc/systemd/system/example.service]
systemd_reloaded:
  description: Whether systemd was (in check mode would be) told to reload its units (see O(systemd_reload)).
  type: bool
  returned: always
  sample: true
"""

import hashlib
import os
import shutil
import stat
import tempfile
import typing as t

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.gpufleet.nvidia.plugins.module_utils._durable import sync_directory, sync_file

_DEFAULT_MODES = {"file": "0644", "directory": "0755"}
# Where systemd looks for unit files (systemd.unit(5)); a change there needs a daemon-reload.
_UNIT_DIRECTORIES = ("/etc/systemd/system/", "/run/systemd/system/", "/usr/lib/systemd/system/", "/lib/systemd/system/")
# sd_booted(3): systemd is the running init when this directory exists.
_SYSTEMD_BOOTED = "/run/systemd/system"
# What a no_log value is replaced by in a result, as ansible-core writes it.
_HIDDEN = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


def _is_text(data: bytes) -> bool:
    """Text a diff can show: no NUL byte (ansible-core's test for binary) and valid UTF-8."""
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _summary(data: bytes | None) -> str:
    """A file as a diff names it when its text is not shown."""
    if data is None:
        return "(absent)\n"
    return "({0} bytes, sha256 {1})\n".format(len(data), hashlib.sha256(data).hexdigest())


def content_diff(path: str, before: bytes | None, after: bytes, max_bytes: int) -> dict[str, t.Any]:
    """The diff of a file's content: its text, or sizes and sha256 where it is too large or binary.

    `before` is None for a file that does not exist yet. The reasons use
    ansible-core's diff keys, which its callbacks print as "diff skipped: ...".
    """
    diff: dict[str, t.Any] = {"before_header": path, "after_header": path}
    if before is not None and len(before) > max_bytes:
        diff["dst_larger"] = max_bytes
    if len(after) > max_bytes:
        diff["src_larger"] = max_bytes
    if before is not None and not _is_text(before):
        diff["dst_binary"] = 1
    if not _is_text(after):
        diff["src_binary"] = 1
    if len(diff) > 2:
        diff["before"], diff["after"] = _summary(before), _summary(after)
    else:
        diff["before"] = "" if before is None else before.decode("utf-8")
        diff["after"] = after.decode("utf-8")
    return diff


class NodeFiles:
    """Declared vs actual for each path, changed in the order given."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.changed_paths: list[str] = []
        self.diffs: list[dict[str, t.Any]] = []
        if module.params["diff_max_bytes"] < 0:
            self.fail("diff_max_bytes: {0} is negative; give 0 or more bytes".format(module.params["diff_max_bytes"]))
        for index, entry in enumerate(module.params["files"]):
            field = "files[{0}]".format(index)
            if not os.path.isabs(entry["path"]):
                self.fail("{0}.path: '{1}' is not absolute; give the full path".format(field, entry["path"]))
            if entry["state"] == "file" and entry["content"] is None:
                self.fail("{0}.content: required with state=file (path {1})".format(field, entry["path"]))
            if entry["state"] == "link" and not entry["src"]:
                self.fail("{0}.src: required with state=link (path {1})".format(field, entry["path"]))

    def fail(self, msg: str, **result: t.Any) -> t.NoReturn:
        self.module.fail_json(msg=msg, invocation=self.invocation(), **result)

    # -- one path ------------------------------------------------------------------------------
    @staticmethod
    def _kind(path: str) -> str:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return "absent"
        if stat.S_ISLNK(mode):
            return "link"
        if stat.S_ISDIR(mode):
            return "directory"
        if stat.S_ISREG(mode):
            return "file"
        return "other"

    def _mismatch(self, path: str, kind: str, declared: str) -> None:
        self.fail("{0} is a {1}, declared a {2}; remove it by hand if it may go".format(path, kind, declared), changed_paths=self.changed_paths)

    def _attributes(self, entry: dict[str, t.Any], diff: dict[str, t.Any]) -> bool:
        # "" leaves the owner or group as it is.
        file_args = {
            "path": entry["path"],
            "mode": entry["mode"],
            "owner": entry["owner"] or None,
            "group": entry["group"] or None,
            "secontext": None,
            "attributes": None,
        }
        return self.module.set_fs_attributes_if_different(file_args, False, diff=diff)

    def _file(self, entry: dict[str, t.Any]) -> bool:
        path, kind = entry["path"], self._kind(entry["path"])
        if kind not in ("absent", "file"):
            self._mismatch(path, kind, "file")
        wanted = to_bytes(entry["content"], errors="surrogate_or_strict")
        before: bytes | None = None
        if kind == "file":
            with open(path, "rb") as handle:
                before = handle.read()
        changed = before != wanted
        if changed:
            self._record(path, True, content_diff(path, before, wanted, self.module.params["diff_max_bytes"]))
        if changed and not self.module.check_mode:
            directory = os.path.dirname(path)
            if not os.path.isdir(directory):
                self.fail("{0}: its directory {1} does not exist; declare it first".format(path, directory), changed_paths=self.changed_paths)
            handle, temp = tempfile.mkstemp(dir=directory, prefix=".gpufleet-")
            with os.fdopen(handle, "wb") as out:
                out.write(wanted)
                # Units, drop-ins and configs the next boot reads: data and rename both down to the disk.
                sync_file(out)
            if kind == "absent":
                # atomic_move keeps an existing file's attributes; a new one starts private and gets its mode below.
                os.chmod(temp, 0o600)
            self.module.atomic_move(temp, path, unsafe_writes=False)
            sync_directory(directory)
        attributes: dict[str, t.Any] = {"before": {"path": path}, "after": {"path": path}}
        if (kind == "file" or not self.module.check_mode) and self._attributes(entry, attributes):
            if not changed:
                self._record(path, True, attributes)
            elif kind == "file":
                self.diffs.append(attributes)
            changed = True
        return changed

    def _directory(self, entry: dict[str, t.Any]) -> bool:
        path, kind = entry["path"], self._kind(entry["path"])
        if kind not in ("absent", "directory"):
            self._mismatch(path, kind, "directory")
        diff: dict[str, t.Any] = {"before": {"path": path}, "after": {"path": path}}
        changed = kind == "absent"
        if changed:
            diff["before"]["state"], diff["after"]["state"] = "absent", "directory"
            if not self.module.check_mode:
                # Several hosts may declare one directory on the controller at once.
                os.makedirs(path, mode=0o755, exist_ok=True)
        if kind == "directory" or not self.module.check_mode:
            changed = self._attributes(entry, diff) or changed
        self._record(path, changed, diff)
        return changed

    def _link(self, entry: dict[str, t.Any]) -> bool:
        path, kind = entry["path"], self._kind(entry["path"])
        if kind not in ("absent", "link"):
            self._mismatch(path, kind, "link")
        current = os.readlink(path) if kind == "link" else None
        changed = current != entry["src"]
        if changed:
            diff = {"before": {"path": path, "src": current or "(absent)"}, "after": {"path": path, "src": entry["src"]}}
            if not self.module.check_mode:
                temp = os.path.join(os.path.dirname(path), ".gpufleet-{0}".format(os.getpid()))
                os.symlink(entry["src"], temp)
                os.rename(temp, path)
                sync_directory(os.path.dirname(path))
            self._record(path, changed, diff)
        return changed

    def _absent(self, entry: dict[str, t.Any]) -> bool:
        path, kind = entry["path"], self._kind(entry["path"])
        if kind == "absent":
            return False
        if not self.module.check_mode:
            if kind == "directory":
                shutil.rmtree(path)
            else:
                os.unlink(path)
            sync_directory(os.path.dirname(path))
        self._record(path, True, {"before": {"path": path, "state": kind}, "after": {"path": path, "state": "absent"}})
        return True

    def _record(self, path: str, changed: bool, diff: dict[str, t.Any]) -> None:
        if changed:
            self.changed_paths.append(path)
            self.diffs.append(diff)

    def _systemd_reload(self) -> bool:
        """daemon-reload once, after everything is in place, when a unit file or link changed (systemd_reload)."""
        if not self.module.params["systemd_reload"] or not os.path.isdir(_SYSTEMD_BOOTED):
            return False
        if not any(path.startswith(_UNIT_DIRECTORIES) for path in self.changed_paths):
            return False
        if self.module.check_mode:
            return True
        rc, out, err = self.module.run_command([self.module.get_bin_path("systemctl", required=True), "daemon-reload"])
        if rc != 0:
            self.fail(
                "systemctl daemon-reload failed after the files were written: {0}".format(err.strip() or out.strip() or "exit code {0}".format(rc)),
                changed=True,
                changed_paths=self.changed_paths,
            )
        return True

    # -- all paths -----------------------------------------------------------------------------
    def invocation(self) -> dict[str, t.Any]:
        """The arguments as a result may show them: every content hidden.

        ansible-core hides a no_log value wherever it appears in the result,
        the diff included; the diff is the one place a file's text may show
        (under --diff, capped), so the contents are taken off that list and
        hidden here instead, in the one other place they would appear.
        """
        files = self.module.params["files"]
        self.module.no_log_values.difference_update(entry["content"] for entry in files if entry["content"])
        shown = [dict(entry, content=_HIDDEN) if entry["content"] is not None else entry for entry in files]
        return {"module_args": dict(self.module.params, files=shown)}

    def run(self) -> dict[str, t.Any]:
        handlers = {"file": self._file, "directory": self._directory, "link": self._link, "absent": self._absent}
        for entry in self.module.params["files"]:
            if entry["state"] in _DEFAULT_MODES and entry["mode"] is None:
                entry["mode"] = _DEFAULT_MODES[entry["state"]]
            handlers[entry["state"]](entry)
        result: dict[str, t.Any] = {"changed": bool(self.changed_paths), "changed_paths": self.changed_paths}
        result["systemd_reloaded"] = self._systemd_reload()
        if self.module._diff and self.diffs:
            result["diff"] = self.diffs
        result["invocation"] = self.invocation()
        return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "path": {"type": "path", "required": True},
                    "state": {"type": "str", "choices": ["file", "directory", "link", "absent"], "default": "file"},
                    "content": {"type": "str", "no_log": True},
                    "src": {"type": "path"},
                    "mode": {"type": "raw"},
                    "owner": {"type": "str", "default": "root"},
                    "group": {"type": "str", "default": "root"},
                },
            },
            "diff_max_bytes": {"type": "int", "default": 104448},
            "systemd_reload": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    module.exit_json(**NodeFiles(module).run())


if __name__ == "__main__":
    main()
