# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""dpkg's selections (hold, install) of a list of packages, set in one dpkg call: package_selections and apt_install."""

from __future__ import annotations

import typing as t


def set_selections(module: t.Any, names: list[str], selection: str, current: t.Callable[[], dict[str, str]]) -> None:
    """Set `names` to `selection` with one `dpkg --set-selections`, then check with `current()` (name -> selection,
    read afresh) that dpkg set every one; fails the module otherwise."""
    dpkg = module.get_bin_path("dpkg", required=True)
    rc, out, err = module.run_command(
        [dpkg, "--set-selections"], data="".join("{0} {1}\n".format(name, selection) for name in names), binary_data=True, environ_update={"LC_ALL": "C"}
    )
    if rc != 0 or err.strip():
        module.fail_json(msg="dpkg --set-selections failed: {0}".format(err.strip() or out.strip()), rc=rc, stderr=err)
    after = current()
    unset = [name for name in names if after.get(name) != selection]
    if unset:
        module.fail_json(msg="dpkg did not set {0} to {1}".format(", ".join(unset), selection))
