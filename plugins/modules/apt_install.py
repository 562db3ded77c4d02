#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: apt_install
short_description: Install Debian packages at exact versions in one apt-get call, fetching only the lists needed
version_added: 0.1.0
description:
  - Installs the packages of O(name) that are not installed and configured at the version asked for, with one
    C(apt-get install), and nothing when all of them are.
  - Before an install it fetches the package lists of O(update_sources) (the repository the calling role has just
    written), and refreshes every list only when the last full refresh this module made is older than
    O(lists_valid_time). A full C(apt-get update) re-reads every source (for Debian, over 90 MB of lists) and makes
    the next apt call rebuild its cache; one repository's lists on a mirror take a fraction of a second.
  - With O(hold) it holds the packages it installed in the same call (one C(dpkg --set-selections)), where a
    separate task would cost another round trip to the node.
  - With O(download_only) it only fetches into apt's archive cache what the install would need, and changes no
    package. A caller that must remove something before it installs (a rollback) learns first that the packages it
    will install can be had, and the install then reads them from the cache.
  - The roles use it in place of M(ansible.builtin.apt), whose python-apt cache costs about 1.5 seconds each
    time it is opened on a node with Debian's lists (several times per call), and whose O(ansible.builtin.apt#module:update_cache)
    refreshes every list on every call.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.internal
options:
  name:
    description:
      - The packages, each C(name) (any version will do) or C(name=version) (exactly that version).
    type: list
    elements: str
    required: true
  allow_downgrade:
    description: Allow apt to install an older version than the one installed.
    type: bool
    default: false
  allow_change_held_packages:
    description: Allow apt to change packages that are held.
    type: bool
    default: false
  target_release:
    description:
      - The suite apt takes the packages (and what they need) from when it offers them there (C(apt-get -t)), such as
        C(bookworm-backports), whose packages apt otherwise installs only by an explicit version.
    type: str
  install_recommends:
    description: Install the packages' recommended packages too.
    type: bool
    default: false
  update_sources:
    description:
      - Absolute paths of apt sources files, one-line (C(.list)) or deb822 (C(.sources)), whose lists are fetched
        before an install, whatever their age.
    type: list
    elements: path
    default: []
  lists_valid_time:
    description:
      - Seconds a full refresh of every list stays good. When the last one this module made is older (or unknown),
        every list is refreshed before an install, which includes O(update_sources). V(0) refreshes every list
        before every install. Unset, the lists are refreshed only as O(update_sources) says.
    type: int
  lists_stamp:
    description: The file whose modification time records the last full refresh.
    type: path
    default: /var/lib/gpufleet/apt-lists.stamp
  hold:
    description:
      - Packages to hold (dpkg's selection V(hold)) once the install is done, those not held yet. apt drops the hold
        of a package whose version it changes, so what the install changed is held again.
      - Each must be installed already or named in O(name); anything else fails the task before apt runs.
      - Releasing holds of packages installed already is O(release)'s work.
    type: list
    elements: str
    default: []
  release:
    description:
      - Packages whose hold is released (dpkg's selection V(install)) once the install is done, those held; one
        C(dpkg --set-selections), as for O(hold). A package that is not installed has no hold to release.
      - A package cannot be in both O(hold) and O(release).
    type: list
    elements: str
    default: []
  rehearse:
    description:
      - In check mode, rehearse the install with C(apt-get install --simulate) against the lists as they are.
      - V(false) when the packages' repository is not on the node yet (an earlier task only predicted it, in check
        mode), so apt could not find them. The packages of O(name) not installed as asked are reported as the change,
        with no apt call, and RV(rehearsed) says so. Outside check mode it changes nothing.
    type: bool
    default: true
  hold_version:
    description:
      - Also hold every package installed once the install is done whose version, after any epoch, starts with
        this dotted number and goes on with no further digit or dot (V(550.163.01) takes C(550.163.01-1) and
        C(550.163.01-1~deb13u1), not C(550.163.011-1)). The packages of one NVIDIA driver release share it,
        including those apt pulls in besides O(name).
    type: str
  download_only:
    description:
      - Fetch the packages the install of O(name) needs (C(apt-get install --download-only)) into apt's archive cache,
        and install nothing. Packages already installed and configured as asked need nothing.
      - A package apt cannot fetch - not in the lists at that version, or the mirror does not serve it - fails the task
        with apt's error lines; nothing on the node changed.
      - Cannot be combined with O(hold) or O(hold_version).
    type: bool
    default: false
  lock_timeout:
    description:
      - Seconds to wait for another package manager (apt-daily, unattended-upgrades, cloud-init on a new node) to
        release apt's locks - the lists', the archives' and dpkg's. apt-get waits for dpkg's lock only and fails at once
        on the others, so the module runs it again until they are free or this time is up; the message then names
        the lock and the process that holds it.
    type: int
    default: 120
attributes:
  check_mode:
    support: full
    details:
      - In check mode apt rehearses the install (C(apt-get install --simulate)) against the lists as they are;
        nothing is fetched or installed. A package apt cannot find there fails the task, as it would for real.
      - O(hold) and O(release) are reported (RV(held_packages), RV(released_packages), the diff) and not set.
      - With O(rehearse=false) apt is not asked; the install is predicted from what dpkg has.
      - With O(download_only) apt rehearses the install and fetches nothing.
  diff_mode:
    support: full
  idempotent:
    support: full
notes:
  - Configuration files the packages ship are kept as the node has them (C(--force-confold)).
  - The diff lists each package of O(name), O(hold) and what changed as C(name version), followed by C(hold) when
    it is held.
  - A failed install fails the task with apt's own error lines in its message; the packages stay as apt left them.
requirements:
  - Python 3.8 or later on the target; C(apt-get) and C(dpkg-query) (apt 1.9.11 or later for O(lock_timeout)).
"""

EXAMPLES = r"""
- name: Install the driver's packages from the repository just added
  gpufleet.nvidia.apt_install:
    name: [nvidia-driver=550.163.01-1, nvidia-kernel-dkms=550.163.01-1]
    update_sources: [/etc/apt/sources.list.d/gpufleet-nvidia-driver.list]
    lists_valid_time: 3600
    allow_downgrade: true
    allow_change_held_packages: true
    hold: [nvidia-driver, nvidia-kernel-dkms]

- name: Fetch the old driver's packages before anything of the new one is removed
  gpufleet.nvidia.apt_install:
    name: [nvidia-driver=535.216.03-2~bpo12+1, nvidia-kernel-dkms=535.216.03-2~bpo12+1]
    download_only: true
    allow_downgrade: true
    allow_change_held_packages: true

- name: Install containerd at whatever version the lists offer
  gpufleet.nvidia.apt_install:
    name: [containerd]
"""

RETURN = r"""
repaired:
  description:
    - What this call finished, as apt asks, for an earlier dpkg run that was interrupted (a killed run, a cut
      connection, a power loss) before it could install; that is V(dpkg --configure -a). Empty on a healthy node.
      It also warns.
  type: list
  elements: str
  returned: always
  sample: []
changed_packages:
  description:
    - The packages (of O(name) or pulled in by them) whose version or state changed, or would in check mode.
    - Empty with O(download_only).
  type: list
  elements: str
  returned: always
  sample: [nvidia-driver, nvidia-kernel-dkms, libnvidia-compute1]
refreshed:
  description: V(all) after a full refresh of the lists, V(sources) when only O(update_sources) were fetched, V(none)
    when nothing was.
  type: str
  returned: always
  sample: sources
held_packages:
  description:
    - The packages of O(hold) whose selection was (or in check mode would be) set to V(hold), in the order given, then
      those of O(hold_version) in name order.
  type: list
  elements: str
  returned: always
  sample: [nvidia-driver, nvidia-kernel-dkms]
released_packages:
  description: The packages of O(release) whose hold was (or in check mode would be) released, in the order given.
  type: list
  elements: str
  returned: always
  sample: [nvidia-container-toolkit]
rehearsed:
  description:
    - V(false) when the change was predicted from dpkg's state without asking apt (check mode with O(rehearse=false)),
      V(true) otherwise.
  type: bool
  returned: always
  sample: true
downloaded:
  description:
    - With O(download_only), the entries of O(name) not installed as asked, whose packages apt now has in its archive
      cache (with what their install needs besides), or in check mode would fetch; empty otherwise and when nothing
      was needed.
  type: list
  elements: str
  returned: always
  sample: [nvidia-kernel-dkms=535.216.03-2~bpo12+1]
versions:
  description:
    - The version of each package of O(name) once the call is done (in check mode, as predicted), by name;
      V(null) for one that is not installed. A caller that needs the version of what it just installed (an engine's,
      to pick its configuration format) reads it here, without a call of its own.
  type: dict
  returned: always
  sample: {containerd: "1.7.24~ds1-6+b4"}
initramfs_kernels:
  description:
    - The kernel releases whose initramfs C(update-initramfs) generated during the install (a package trigger of
      initramfs-tools), in the order apt printed them. A caller that changed what goes into the initramfs before the
      install (C(/etc/modprobe.d)) need not generate these again.
  type: list
  elements: str
  returned: always
  sample: [6.12.118+deb13-amd64]
"""

import os
import re
import time
import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._dpkg_selections import busy_message, run_dpkg, set_selections
from ansible_collections.gpufleet.nvidia.plugins.module_utils._driver_state import DPKG_QUERY_FORMAT, parse_dpkg_query

_STAMP_TEXT = "The last full apt-get update by gpufleet.nvidia.apt_install; its modification time is what counts.\n"
# No :arch qualifier: dpkg's state is read by bare name (the native architecture).
_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]*(=[A-Za-z0-9.+:~-]+)?$")
# initramfs-tools' trigger says which initramfs it writes, one line per kernel (dpkg's lines end in CR LF: apt
# runs it on a terminal of its own).
_INITRAMFS_GENERATED = re.compile(r"^update-initramfs: Generating /boot/initrd\.img-(\S+)\r?$", re.MULTILINE)
# apt-get exits 0 after some fetch failures and says so with these; the lists are then not what the install needs.
_FETCH_FAILED = ("E:", "W: Failed to fetch", "W: Some index files failed to download")
# The driver release inside a package version, as the driver role reads it (plugin_utils/_driver_plan.py).
_UPSTREAM = re.compile(r"^(?:\d+:)?(?P<upstream>[0-9][0-9.]*[0-9])")
_DOTTED = re.compile(r"^[0-9][0-9.]*[0-9]$")
# apt-get --simulate: "Inst name [old version] (new version release [arch])".
_SIMULATED_INSTALL = re.compile(r"^Inst (\S+) (?:\[\S+\] )?\((\S+) ", re.MULTILINE)
# "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 812 (apt-get)": another package manager
# has the lists, the archives or dpkg's database; apt-get stopped before changing anything, so it can run again.
_LOCK_BUSY = re.compile(r"^E: Could not get lock (?P<path>\S+?)\.?(?: It is held by process (?P<pid>\d+)(?: \((?P<name>[^)]*)\))?)?$", re.MULTILINE)
# How long to wait between two tries while a lock is held.
_LOCK_POLL = 1.0
# "E: dpkg was interrupted, you must manually run 'dpkg --configure -a' to correct the problem.": an earlier dpkg
# run was killed (a cancelled run, a cut connection, a power loss) with packages unpacked but not configured.
_DPKG_INTERRUPTED = "dpkg was interrupted"


class AptInstall:
    """What is installed, what must change, the lists it needs, and the one apt-get call."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        params = module.params
        self.wanted: dict[str, str | None] = {}
        for index, spec in enumerate(params["name"]):
            if not _NAME.fullmatch(spec):
                module.fail_json(msg="name[{0}]: '{1}' is not a package or package=version".format(index, spec))
            package, _sep, version = spec.partition("=")
            self.wanted[package] = version or None
        self.hold: list[str] = list(dict.fromkeys(params["hold"]))
        self.release: list[str] = list(dict.fromkeys(params["release"]))
        # What this call had to finish for an earlier, interrupted dpkg run.
        self.repaired: list[str] = []
        for index, name in enumerate(self.hold):
            if not _NAME.fullmatch(name) or "=" in name:
                module.fail_json(msg="hold[{0}]: '{1}' is not a package name".format(index, name))
        for index, name in enumerate(self.release):
            if not _NAME.fullmatch(name) or "=" in name:
                module.fail_json(msg="release[{0}]: '{1}' is not a package name".format(index, name))
        both = [name for name in self.release if name in self.hold]
        if both:
            module.fail_json(msg="release: {0} also in hold; a package is either held or released".format(", ".join(both)))
        if params["download_only"] and (self.hold or self.release or params["hold_version"] is not None):
            module.fail_json(msg="download_only: installs nothing, so it holds nothing; leave hold, release and hold_version out")
        if params["hold_version"] is not None and not _DOTTED.fullmatch(params["hold_version"]):
            module.fail_json(msg="hold_version: '{0}' is not a dotted version such as 550.163.01".format(params["hold_version"]))
        if params["lists_valid_time"] is not None and params["lists_valid_time"] < 0:
            module.fail_json(
                msg="lists_valid_time: {0} is negative; give seconds, or 0 to refresh every list before every install".format(params["lists_valid_time"])
            )
        for index, source in enumerate(params["update_sources"]):
            if not os.path.isabs(source):
                module.fail_json(msg="update_sources[{0}]: '{1}' is not absolute; give the sources file's full path".format(index, source))
            # In check mode the repository that writes it may only have been predicted.
            if not os.path.isfile(source) and not module.check_mode:
                module.fail_json(msg="update_sources[{0}]: {1} does not exist; write the repository's sources file first".format(index, source))

    def _run(self, argv: list[str], **kwargs: t.Any) -> tuple[int, str, str]:
        return self.module.run_command(argv, environ_update={"LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}, **kwargs)

    def _apt_get(self, argv: list[str]) -> tuple[int, str, str]:
        """apt-get, run again while another package manager holds one of apt's locks, up to lock_timeout, and once
        more after finishing what an interrupted dpkg run left half-done."""
        timeout = self.module.params["lock_timeout"]
        deadline = time.monotonic() + timeout
        while True:
            rc, out, err = self._run(argv)
            if rc != 0 and _DPKG_INTERRUPTED in err and "--simulate" not in argv and not self.repaired:
                self._configure_pending(deadline)
                continue
            busy = _LOCK_BUSY.search(err) if rc != 0 else None
            if busy is None:
                return rc, out, err
            left = deadline - time.monotonic()
            if left <= 0:
                holder = "process {0} ({1})".format(busy.group("pid"), busy.group("name") or "?") if busy.group("pid") else "another process"
                self.module.fail_json(
                    msg="apt is busy: {0} is held by {1} and was not released within lock_timeout={2} s. Another "
                    "package manager (apt-daily, unattended-upgrades, cloud-init) is running: let it finish, or raise "
                    "lock_timeout".format(busy.group("path"), holder, timeout),
                    rc=rc,
                    stdout=out,
                    stderr=err,
                    changed_packages=[],
                )
            time.sleep(min(_LOCK_POLL, left))

    def _configure_pending(self, deadline: float) -> None:
        """`dpkg --configure -a`, as apt asks, waiting for dpkg's lock like apt-get (run_dpkg): what the killed run
        unpacked is configured (its maintainer scripts run) before this run installs."""
        rc, out, err, busy = run_dpkg(self.module, ["--configure", "-a"], deadline, environ={"DEBIAN_FRONTEND": "noninteractive"})
        if busy is not None:
            self.module.fail_json(msg=busy_message(busy, self.module.params["lock_timeout"]), rc=rc, stdout=out, stderr=err, changed_packages=[])
        if rc != 0:
            self.module.fail_json(
                msg="an earlier dpkg run was interrupted, and `dpkg --configure -a` failed to finish it: {0}".format(err.strip() or out.strip()),
                rc=rc,
                stdout=out,
                stderr=err,
                changed_packages=[],
            )
        self.repaired.append("dpkg --configure -a")
        self.module.warn(
            "an earlier dpkg run was interrupted (a killed run, a cut connection or a power loss left packages "
            "unpacked but not configured): ran `dpkg --configure -a` before installing"
        )

    # -- the packages ------------------------------------------------------------------------------
    def packages(self) -> dict[str, dict[str, t.Any]]:
        """Each package whose files are on disk (version, held, configured), read as driver_info reads them."""
        query = self.module.get_bin_path("dpkg-query", required=True)
        rc, out, err = self._run([query, "-W", "-f", DPKG_QUERY_FORMAT])
        # Exit code 1 only says that nothing matched (an empty database).
        if rc not in (0, 1):
            self.module.fail_json(msg="dpkg-query failed: {0}".format(err.strip()), rc=rc, stderr=err)
        found: dict[str, dict[str, t.Any]] = {}
        for package in parse_dpkg_query(out):
            # A multiarch package counts by the first architecture dpkg lists.
            found.setdefault(package["name"], package)
        return found

    @staticmethod
    def configured(packages: dict[str, dict[str, t.Any]]) -> dict[str, str]:
        """Version of each installed and configured package."""
        return {name: package["version"] for name, package in packages.items() if package["configured"]}

    def missing(self, installed: dict[str, str]) -> list[str]:
        return [
            "{0}={1}".format(name, version) if version else name
            for name, version in self.wanted.items()
            if name not in installed or (version is not None and installed[name] != version)
        ]

    # -- the lists ---------------------------------------------------------------------------------
    def _lists_age(self) -> int | None:
        try:
            return max(0, int(time.time() - os.stat(self.module.params["lists_stamp"]).st_mtime))
        except FileNotFoundError:
            return None

    def _update(self, options: list[str], what: str) -> None:
        apt_get = self.module.get_bin_path("apt-get", required=True)
        rc, out, err = self._apt_get([apt_get, "update", "-q"] + options)
        failed = [line for line in err.splitlines() if line.startswith(_FETCH_FAILED)]
        if rc != 0 or failed:
            self.module.fail_json(
                msg="apt-get update of {0} failed: {1}".format(what, "; ".join(failed) or err.strip() or out.strip() or "exit code {0}".format(rc)),
                rc=rc,
                stdout=out,
                stderr=err,
                changed_packages=[],
            )

    def refresh(self) -> str:
        valid_time, sources = self.module.params["lists_valid_time"], self.module.params["update_sources"]
        age = self._lists_age()
        if valid_time is not None and (valid_time == 0 or age is None or age >= valid_time):
            if not self.module.check_mode:
                self._update([], "every source")
                stamp = self.module.params["lists_stamp"]
                if not os.path.isdir(os.path.dirname(stamp)):
                    os.makedirs(os.path.dirname(stamp), mode=0o755)
                with open(stamp, "w") as handle:
                    handle.write(_STAMP_TEXT)
                os.chmod(stamp, 0o644)
            return "all"
        if not self.module.check_mode:
            for source in sources:
                # This file only: no sources.list.d, and the other sources' lists are kept, not cleaned up.
                self._update(["-o", "Dir::Etc::sourcelist=" + source, "-o", "Dir::Etc::sourceparts=-", "-o", "APT::Get::List-Cleanup=0"], source)
        return "sources" if sources else "none"

    # -- the install -------------------------------------------------------------------------------
    def _apt_get_install(self, packages: list[str]) -> str:
        params = self.module.params
        apt_get = self.module.get_bin_path("apt-get", required=True)
        argv = [
            apt_get,
            "install",
            "-y",
            "-q",
            "--install-recommends" if params["install_recommends"] else "--no-install-recommends",
            "-o",
            "Dpkg::Options::=--force-confdef",
            "-o",
            "Dpkg::Options::=--force-confold",
            "-o",
            "DPkg::Lock::Timeout={0}".format(params["lock_timeout"]),
        ]
        if params["allow_downgrade"]:
            argv.append("--allow-downgrades")
        if params["allow_change_held_packages"]:
            argv.append("--allow-change-held-packages")
        if params["target_release"]:
            argv += ["-t", params["target_release"]]
        if self.module.check_mode:
            argv.append("--simulate")
        elif params["download_only"]:
            argv.append("--download-only")
        rc, out, err = self._apt_get(argv + ["--"] + packages)
        if rc != 0:
            errors = [line for line in err.splitlines() if line.startswith("E:")]
            what = "apt-get could not download {0}" if params["download_only"] else "apt-get install {0} failed"
            self.module.fail_json(
                msg="{0}: {1}".format(what.format(" ".join(packages)), " ".join(errors) or err.strip() or "exit code {0}".format(rc)),
                rc=rc,
                stdout=out,
                stderr=err,
                changed_packages=[],
            )
        return out

    # -- the holds ---------------------------------------------------------------------------------
    def _selections(self) -> dict[str, str]:
        return {name: "hold" if package["held"] else "install" for name, package in self.packages().items()}

    def _set_holds(self, after: dict[str, dict[str, t.Any]], changed: list[str]) -> list[str]:
        """Hold what O(hold) names and is not held once the install is done (in check mode: what would be)."""
        removed = [name for name in self.hold if name not in after]
        if removed:
            self.module.fail_json(
                msg="hold: apt {0} {1}; leave {2} out of hold".format(
                    "would remove" if self.module.check_mode else "removed", ", ".join(removed), "it" if len(removed) == 1 else "them"
                ),
                changed_packages=changed,
                held_packages=[],
            )
        holding = [name for name in self.hold if not after[name]["held"]]
        release = self.module.params["hold_version"]
        if release is not None:
            holding += sorted(
                name for name, package in after.items() if name not in holding and not package["held"] and _upstream(package["version"]) == release
            )
        if holding and not self.module.check_mode:
            set_selections(self.module, holding, "hold", self._selections, self.module.params["lock_timeout"])
        for name in holding:
            after[name] = dict(after[name], held=True)
        return holding

    def _release_holds(self, after: dict[str, dict[str, t.Any]]) -> list[str]:
        """Release what O(release) names and is held once the install is done (in check mode: would be)."""
        releasing = [name for name in self.release if name in after and after[name]["held"]]
        if releasing and not self.module.check_mode:
            set_selections(self.module, releasing, "install", self._selections, self.module.params["lock_timeout"])
        for name in releasing:
            after[name] = dict(after[name], held=False)
        return releasing

    def versions(self, packages: dict[str, dict[str, t.Any]]) -> dict[str, str | None]:
        """The version of each package of O(name) in `packages`; None for one that is not installed."""
        return {name: packages[name]["version"] if name in packages else None for name in self.wanted}

    @staticmethod
    def _predict(before: dict[str, dict[str, t.Any]], packages: list[str]) -> dict[str, dict[str, t.Any]]:
        """Check mode: the packages as they would be once each name=version of `packages` is installed, which
        loses its hold (apt drops the hold of a package whose version it changes)."""
        after = dict(before)
        for spec in packages:
            name, _sep, version = spec.partition("=")
            after[name] = {"name": name, "version": version or "(any version)", "held": False, "configured": True}
        return after

    def run(self) -> dict[str, t.Any]:
        before = self.packages()
        unknown = [name for name in self.hold if name not in before and name not in self.wanted]
        if unknown:
            self.module.fail_json(
                msg="hold: {0} {1} neither installed nor in name; add {2} to name or leave {2} out of hold".format(
                    ", ".join(unknown), "is" if len(unknown) == 1 else "are", "it" if len(unknown) == 1 else "them"
                ),
                changed_packages=[],
                held_packages=[],
            )
        packages = self.missing(self.configured(before))
        # self.repaired is filled by the apt-get calls below, if an interrupted dpkg run must be finished first.
        result: dict[str, t.Any] = {
            "changed": False,
            "changed_packages": [],
            "refreshed": "none",
            "initramfs_kernels": [],
            "downloaded": [],
            "repaired": self.repaired,
            "rehearsed": True,
        }
        after = dict(before)
        if packages and self.module.params["download_only"]:
            result["refreshed"] = self.refresh()
            self._apt_get_install(packages)
            # The archive cache is apt's, not the node's packages: nothing changed that a later run would see.
            result.update(downloaded=packages, held_packages=[], released_packages=[], versions=self.versions(before))
            return result
        if packages and self.module.check_mode and not self.module.params["rehearse"]:
            after = self._predict(before, packages)
            result.update(changed=True, changed_packages=sorted(spec.partition("=")[0] for spec in packages), rehearsed=False)
        elif packages:
            result["refreshed"] = self.refresh()
            output = self._apt_get_install(packages)
            if self.module.check_mode:
                # "Inst name [old] (new ...)" and "Remv name [old]": what apt would change.
                installing = {match.group(1): match.group(2) for match in _SIMULATED_INSTALL.finditer(output)}
                removing = {line.split()[1] for line in output.splitlines() if line.startswith(("Remv ", "Purg "))}
                changed = sorted(set(installing) | removing)
                # What apt would install at the version it said, then what was asked for at the version asked
                # (a name asked for without one keeps the version apt said).
                kept = {name: package for name, package in before.items() if name not in removing}
                asked = [spec for spec in packages if "=" in spec or spec not in installing]
                after = self._predict(kept, ["{0}={1}".format(name, version) for name, version in installing.items()] + asked)
            else:
                after = self.packages()
                still = self.missing(self.configured(after))
                if still:
                    self.module.fail_json(
                        msg="apt-get finished, but {0} {1} not installed as asked".format(", ".join(still), "is" if len(still) == 1 else "are"),
                        changed_packages=[],
                        held_packages=[],
                    )
                changed = sorted(name for name in set(before) | set(after) if before.get(name, {}).get("version") != after.get(name, {}).get("version"))
            result.update(changed=True, changed_packages=changed, initramfs_kernels=[] if self.module.check_mode else _INITRAMFS_GENERATED.findall(output))
        result["held_packages"] = self._set_holds(after, result["changed_packages"])
        result["released_packages"] = self._release_holds(after)
        touched = result["held_packages"] or result["released_packages"] or self.repaired
        result["changed"] = result["changed"] or bool(touched)
        result["versions"] = self.versions(after)
        if result["changed"] and self.module._diff:
            shown = sorted(
                set(result["changed_packages"]) | set(self.wanted) | set(self.hold) | set(result["held_packages"]) | set(result["released_packages"])
            )
            result["diff"] = {
                "before_header": "installed packages",
                "after_header": "installed packages",
                "before": "".join(_diff_line(before[name]) for name in shown if name in before),
                "after": "".join(_diff_line(after[name]) for name in shown if name in after),
            }
        return result


def _upstream(version: str) -> str | None:
    match = _UPSTREAM.match(version)
    return match.group("upstream") if match else None


def _diff_line(package: dict[str, t.Any]) -> str:
    return "{0} {1}{2}\n".format(package["name"], package["version"], " hold" if package["held"] else "")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "list", "elements": "str", "required": True},
            "allow_downgrade": {"type": "bool", "default": False},
            "allow_change_held_packages": {"type": "bool", "default": False},
            "target_release": {"type": "str"},
            "install_recommends": {"type": "bool", "default": False},
            "update_sources": {"type": "list", "elements": "path", "default": []},
            "lists_valid_time": {"type": "int"},
            "lists_stamp": {"type": "path", "default": "/var/lib/gpufleet/apt-lists.stamp"},
            "lock_timeout": {"type": "int", "default": 120},
            "hold": {"type": "list", "elements": "str", "default": []},
            "release": {"type": "list", "elements": "str", "default": []},
            "rehearse": {"type": "bool", "default": True},
            "hold_version": {"type": "str"},
            "download_only": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    module.exit_json(**AptInstall(module).run())


if __name__ == "__main__":
    main()
