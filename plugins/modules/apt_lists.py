#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: apt_lists
short_description: Refresh apt's package lists, all of them only when they are old
version_added: 0.2.0
description:
  - Fetches the package lists of the given apt sources files, and refreshes every list (C(apt-get update)) only
    when the last full refresh this module made is older than O(valid_time) or unknown.
  - A role that has just added its repository needs that repository's lists, not a new copy of the
    distribution's. A full C(apt-get update) re-reads every source (for Debian, over 90 MB of lists) and makes
    the next apt call rebuild its cache, seconds each time; the lists of one repository on a mirror take a
    fraction of a second. With several roles each adding a repository, M(ansible.builtin.apt)'s
    O(ansible.builtin.apt#module:update_cache=true) would pay the full price once per role.
  - The time of the last full refresh is kept in O(stamp). apt's own list files cannot tell it (they carry the
    repository's dates), and a refresh of one source must not count as a refresh of all.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
options:
  sources:
    description:
      - Absolute paths of apt sources files, one-line (C(.list)) or deb822 (C(.sources)), whose lists are fetched
        on every call, whatever their age. Usually the file the calling role has just written.
      - Empty when only the age of the lists matters.
    type: list
    elements: path
    default: []
  valid_time:
    description:
      - Seconds a full refresh stays good. Older (or never made by this module), every list is refreshed, which
        includes O(sources). V(0) refreshes every list on every call.
    type: int
    default: 3600
  stamp:
    description: The file whose modification time records the last full refresh.
    type: path
    default: /var/lib/gpufleet/apt-lists.stamp
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is fetched; RV(refreshed) says what would be.
  diff_mode:
    support: none
    details:
      - The lists are a cache of the repositories, not configuration; there is nothing to diff.
  idempotent:
    support: full
    details:
      - Refreshing a cache is not a change to the node; the module always returns C(changed=false).
notes:
  - apt's failure to fetch a list (a mirror down, a key that does not match) fails the task with apt's own
    message, so the install that would follow never runs against half-fetched lists.
requirements:
  - Python 3.8 or later on the target; C(apt-get).
"""

EXAMPLES = r"""
- name: Add the repository
  ansible.builtin.copy:
    dest: /etc/apt/sources.list.d/example.sources
    content: "{{ example_sources }}"
    mode: "0644"

- name: Fetch its lists (and every list, when the last full refresh is over an hour old)
  gpufleet.nvidia.apt_lists:
    sources: [/etc/apt/sources.list.d/example.sources]
    valid_time: 3600

- name: Install from it, without another refresh
  ansible.builtin.apt:
    name: example=1.0-1
"""

RETURN = r"""
refreshed:
  description: V(all) after a full refresh, V(sources) when only O(sources) were fetched, V(none) when neither.
  type: str
  returned: always
  sample: sources
age:
  description: Seconds since the last full refresh, before this call; null when unknown.
  type: int
  returned: always
  sample: 412
"""

import os
import time
import typing as t

from ansible.module_utils.basic import AnsibleModule

_STAMP_TEXT = "The last full apt-get update by gpufleet.nvidia.apt_lists; its modification time is what counts.\n"


class AptLists:
    """Decides between a full refresh and one of the named sources only, and runs it."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.sources: list[str] = module.params["sources"]
        self.valid_time: int = module.params["valid_time"]
        self.stamp: str = module.params["stamp"]
        if self.valid_time < 0:
            module.fail_json(msg="valid_time: {0} is negative; give seconds, or 0 to refresh every list on every "
                                 "call".format(self.valid_time))
        for index, source in enumerate(self.sources):
            if not os.path.isabs(source):
                module.fail_json(msg="sources[{0}]: '{1}' is not absolute; give the sources file's full path".format(
                    index, source))
            # In check mode the repository that writes it may only have been predicted.
            if not os.path.isfile(source) and not module.check_mode:
                module.fail_json(msg="sources[{0}]: {1} does not exist; write the repository's sources file "
                                     "first".format(index, source))

    def age(self) -> int | None:
        try:
            return max(0, int(time.time() - os.stat(self.stamp).st_mtime))
        except FileNotFoundError:
            return None

    def _update(self, options: list[str], what: str) -> None:
        apt_get = self.module.get_bin_path("apt-get", required=True)
        rc, out, err = self.module.run_command([apt_get, "update", "-q"] + options, environ_update={"LC_ALL": "C"})
        # apt-get exits 0 after some fetch failures and says so on stderr with "W: Failed to fetch" or
        # "W: Some index files failed to download"; either way the lists are not what the install needs.
        failed = [line for line in err.splitlines()
                  if line.startswith("E:") or "Failed to fetch" in line or "failed to download" in line]
        if rc != 0 or failed:
            self.module.fail_json(msg="apt-get update of {0} failed: {1}".format(
                what, "; ".join(failed) or err.strip() or out.strip() or "exit code {0}".format(rc)),
                rc=rc, stdout=out, stderr=err)

    def _touch_stamp(self) -> None:
        directory = os.path.dirname(self.stamp)
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o755)
        with open(self.stamp, "w") as handle:
            handle.write(_STAMP_TEXT)
        os.chmod(self.stamp, 0o644)

    def run(self) -> dict[str, t.Any]:
        age = self.age()
        full = self.valid_time == 0 or age is None or age >= self.valid_time
        refreshed = "all" if full else ("sources" if self.sources else "none")
        if not self.module.check_mode:
            if full:
                self._update([], "every source")
                self._touch_stamp()
            else:
                for source in self.sources:
                    # Only this file: no sources.list.d, and the other sources' lists are kept, not cleaned up.
                    self._update(["-o", "Dir::Etc::sourcelist=" + source, "-o", "Dir::Etc::sourceparts=-",
                                  "-o", "APT::Get::List-Cleanup=0"], source)
        return {"changed": False, "refreshed": refreshed, "age": age}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "sources": {"type": "list", "elements": "path", "default": []},
            "valid_time": {"type": "int", "default": 3600},
            "stamp": {"type": "path", "default": "/var/lib/gpufleet/apt-lists.stamp"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**AptLists(module).run())


if __name__ == "__main__":
    main()
