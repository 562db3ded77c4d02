#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_fingerprint
short_description: Tell in one call whether a node still matches its last verified converge
version_added: 0.1.0
description:
  - With O(state=recorded), reads what the collection's roles manage on the node - the files under the watched
    paths, the versions and holds of the watched packages, the watched units' states, the kernel, the loaded nvidia
    module and what NVML reports (driver, MIG modes, MIG devices, persistence) - and keeps it, with the
    declaration that produced it, in O(path). C(playbooks/site.yml) records it at the end of a converge that
    passed verify.
  - With O(state=compared), reads the same again (the watched set is the one kept in the record) and compares
    both the node and the declaration with the record. RV(matched) is true only when nothing differs;
    RV(reasons) then names what did (a variable, a path, a package, a unit, NVML). It changes nothing.
  - With O(report), a comparison also needs the node's last verify report to exist and to say C(pass) or C(warn);
    a re-check (C(--tags verify)) that failed after the record was written must not let the next run skip the node.
    The report of a node that matches is returned (RV(report)), so that a run that skips the node still reports it.
  - The declaration (O(declaration)) is computed on the controller by the action plugin of the same name from the
    host's variables whose names start with one of O(prefixes), plus the collection's own content, so that a
    changed variable or an upgraded collection never matches an old record.
  - This is the fast path of a no-op run; it is conservative by design. Anything else that writes under a watched
    path (another tool, a package's maintainer script) only costs one full run.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.internal
attributes:
  check_mode:
    support: full
    details: With O(state=recorded), reports whether the record would change and writes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: A record is rewritten only when the node or the declaration differs from it.
options:
  state:
    description:
      - V(compared) compares the node and the declaration with the record. A node that does not match is about to be
        converged, so the run takes the node's lease in the same call (with O(lease)).
      - V(recorded) writes the record (mode 0600) from the node as it is now and the declaration given, and gives
        the lease back (with O(lease)).
      - V(leased) only takes the lease, as the first node call of a run that compares nothing (a tagged run, the fast
        path off).
      - V(released) only gives the lease back, as the last node call of a run that records nothing.
    type: str
    choices: [compared, recorded, leased, released]
    default: compared
  lease:
    description:
      - The run that takes the node, as the action plugin describes it; a task sets V(true) and the plugin puts the
        run's identity in its place.
      - The lease (O(lease_path)) says which run owns the node. Taking it waits for the node lock (O(lock_path)),
        which the boot units hold while they work, then for another run to give the lease back, up to
        O(lease_wait) seconds; then the task fails naming that run.
      - Taking it over from a run that died starts the services that run had stopped and not started again
        (O(stopped_path)), and says so in RV(restored).
      - Not taken in check mode, and not by a comparison that matched (the run then changes nothing on the node).
    type: dict
    suboptions:
      run_id:
        description: What tells this run from any other (C(<controller>:<pid>:<start ticks>)).
        type: str
        required: true
      controller:
        description: The host the run's ansible-playbook runs on.
        type: str
        default: ""
      user:
        description: Who runs it.
        type: str
        default: ""
      pid:
        description: The ansible-playbook process.
        type: int
      pid_started:
        description: When that process started (clock ticks after the controller's boot), so a reused pid is told apart.
        type: str
        default: ""
      awx_job:
        description: The AWX or AAP job, where the run is one.
        type: str
        default: ""
  lease_wait:
    description: Seconds to wait for the node lock and for another run's lease.
    type: int
    default: 0
  lease_take_over:
    description: The run id of a run known to be dead, whose lease is taken at once.
    type: str
    default: ""
  lease_path:
    description: The lease file.
    type: path
    default: /var/lib/gpufleet/run-lease.json
  lock_path:
    description: The node lock, shared with the boot units.
    type: path
    default: /run/lock/gpufleet.lock
  stopped_path:
    description: The journal of services a step stopped and has not started again.
    type: path
    default: /var/lib/gpufleet/stopped-services.json
  path:
    description: The record on the node.
    type: path
    default: /var/lib/gpufleet/fingerprint.json
  prefixes:
    description:
      - Names of the variables that make up the declaration, by prefix; read by the action plugin, which turns the
        matching host variables into O(declaration). Variables that argument_specs mark C(no_log) count only as set or
        not set, so no digest of a secret reaches the node.
    type: list
    elements: str
    required: true
  report:
    description:
      - The verify report the node keeps (the verify role's C(verify_report_path)). With O(state=compared), a node
        matches only when this report exists and its status is C(pass) or C(warn). Unset, the report is not read.
    type: path
  declaration:
    description:
      - Set by the action plugin; do not give it. One digest per declared variable, plus C((collection)) for the
        collection's own content and C((groups)) for the host's groups.
    type: dict
  watch:
    description: What to read on the node. Required with O(state=recorded); a comparison reads what the record lists.
    type: dict
    suboptions:
      paths:
        description:
          - Files and directories (read recursively, symbolic links not followed). A file up to 1 MiB counts by its
            content, a larger one by its size and modification time; mode and ownership count for both.
        type: list
        elements: path
        default: []
      packages:
        description: Package name patterns (shell-style); each installed match counts by status (with its hold) and version.
        type: list
        elements: str
        default: []
      units:
        description: systemd unit name patterns; each unit file found counts by its load, active and enablement states.
        type: list
        elements: str
        default: []
      nvml:
        description: Whether NVML's view counts (driver version, and per GPU UUID, MIG modes, MIG devices, persistence).
        type: bool
        default: true
notes:
  - NVML errors count by their name (a node without a driver records that), never fail the module.
"""

EXAMPLES = r"""
- name: Does the node still match its last verified converge?
  gpufleet.nvidia.node_fingerprint:
    prefixes: [driver_, cdi_]
  register: fingerprint

- name: Record the node after a verified converge
  gpufleet.nvidia.node_fingerprint:
    state: recorded
    prefixes: [driver_, cdi_]
    watch:
      paths: [/etc/apt/sources.list.d, /etc/cdi]
      packages: ["nvidia-*", "libnvidia-*"]
      units: [containerd.service]
"""

RETURN = r"""
lease:
  description:
    - The lease this call took. C(taken_over) names the run it was taken from (a dead one), or is null;
      C(waited_for) the run it waited for, or null; C(waited) the seconds it waited.
  type: dict
  returned: when the call took the lease
restored:
  description: Services a run that died had stopped, started again when the lease was taken.
  type: list
  elements: str
  returned: when a dead run had left services stopped
lease_released:
  description: Whether this call gave the run's lease back.
  type: bool
  returned: with O(state=recorded) or O(state=released) and O(lease)
lease_holder:
  description: The run that holds the node, when the lease could not be taken.
  type: dict
  returned: failure
matched:
  description: Whether the node and the declaration match the record (always false when no record exists).
  type: bool
  returned: always
reasons:
  description: What differs, one line per kind (empty when RV(matched)).
  type: list
  elements: str
  returned: always
  sample: ["node changed: /etc/crictl.yaml (content)", "declaration changed: crictl_version"]
recorded_at:
  description: When the record was written (UTC, ISO 8601), or null without one.
  type: str
  returned: always
item_count:
  description: How many items the node's fingerprint holds.
  type: int
  returned: always
report:
  description: The node's last verify report (the JSON of O(report)), when RV(matched); null otherwise.
  type: dict
  returned: with O(state=compared)
"""

import datetime
import fnmatch
import hashlib
import json
import os
import stat
import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._driver_state import DriverStateReader
from ansible_collections.gpufleet.nvidia.plugins.module_utils._durable import write_json
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import constants as nvml_constants
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import session as nvml_session
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import values as nvml_values
from ansible_collections.gpufleet.nvidia.plugins.module_utils._run_lease import LeaseBusy, RunLease, StoppedServices

RECORD_FORMAT = 1
LARGE_FILE = 1 << 20
UNIT_DIRS = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
LISTED_CHANGES = 8


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def describe_path(path: str) -> str:
    """One line for one path: its kind, mode, owner and content (or size and time for a large file)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    owner = "{0:o} {1}:{2}".format(stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)
    if stat.S_ISLNK(info.st_mode):
        return "link -> " + os.readlink(path)
    if stat.S_ISDIR(info.st_mode):
        return "directory " + owner
    if not stat.S_ISREG(info.st_mode):
        return "other {0:o}".format(stat.S_IFMT(info.st_mode))
    if info.st_size > LARGE_FILE:
        return "file {0} size {1} mtime {2}".format(owner, info.st_size, info.st_mtime_ns)
    with open(path, "rb") as handle:
        return "file {0} sha256 {1}".format(owner, _digest(handle.read()))


def read_paths(roots: t.Iterable[str]) -> dict[str, str]:
    """Every path under the roots (a root may be a file, or absent), symbolic links not followed."""
    found: dict[str, str] = {}
    for root in roots:
        found["path:" + root] = describe_path(root)
        if not os.path.isdir(root) or os.path.islink(root):
            continue
        for directory, subdirs, files in os.walk(root):
            # Python's bytecode caches come and go with the boot commands' runs.
            subdirs[:] = sorted(name for name in subdirs if name != "__pycache__")
            for name in sorted(subdirs + files):
                path = os.path.join(directory, name)
                found["path:" + path] = describe_path(path)
    return found


def parse_systemctl_show(text: str) -> dict[str, str]:
    """Unit -> "LoadState ActiveState UnitFileState" from `systemctl show` blocks.

    A oneshot unit (the boot units: gpufleet-mig, gpufleet-verify-boot,
    gpufleet-node-labels) is
    inactive after a converge that did its work directly and active after a
    boot that ran it: both are healthy, so either reads "ran-or-idle" and
    only "failed" tells. Otherwise every reboot would cost a full run.
    """
    found = {}
    for block in text.strip().split("\n\n"):
        fields = dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
        if fields.get("Id"):
            active = fields.get("ActiveState", "?")
            if fields.get("Type") == "oneshot" and active != "failed":
                active = "ran-or-idle"
            found["unit:" + fields["Id"]] = "{0} {1} {2}".format(fields.get("LoadState", "?"), active, fields.get("UnitFileState", "?") or "-")
    return found


def read_nvml(library: str | None = None) -> str:
    """NVML's view of the node in one line of JSON, or the NVML error's name."""
    try:
        with nvml_session.NvmlSession(library) as nvml:
            gpus = []
            for index in range(nvml.device_count()):
                device = nvml.device_by_index(index)
                gpu: dict[str, t.Any] = {"uuid": nvml.device_uuid(device)}
                for field, read in (("persistence", nvml.device_persistence_mode), ("mig", nvml.device_mig_mode)):
                    try:
                        value = read(device)
                        gpu[field] = nvml_values.to_dict(value) if field == "mig" else value
                    except nvml_constants.NvmlError as error:
                        gpu[field] = error.name
                if isinstance(gpu["mig"], dict) and gpu["mig"].get("current"):
                    gpu["mig_devices"] = sorted(
                        (nvml.mig_device_gpu_instance_id(mig), nvml.mig_device_compute_instance_id(mig), nvml.device_uuid(mig))
                        for mig in nvml.mig_devices(device)
                    )
                gpus.append(gpu)
            view = {"driver": nvml.driver_version(), "gpus": gpus}
    except nvml_constants.NvmlError as error:
        view = {"error": error.name}
    return json.dumps(view, sort_keys=True)


class NodeFingerprint:
    """Reads the watched state of the node; compares it and the declaration with the record, or records both."""

    def __init__(self, module: AnsibleModule, root: str = "/", unit_dirs: t.Sequence[str] = UNIT_DIRS) -> None:
        self.module = module
        self.params = module.params
        self.unit_dirs = unit_dirs
        # The driver role's reader: the same package query (dpkg or rpm, holds included) as driver_info.
        self.packages = DriverStateReader(lambda argv: module.run_command(argv, environ_update={"LC_ALL": "C"}), root)

    # --- reading the node ---------------------------------------------------
    def read_packages(self, patterns: t.Sequence[str]) -> dict[str, str]:
        """Package -> its version, "held" when it is, "not configured" when dpkg left it half-done."""
        if not patterns:
            return {}
        try:
            packages = self.packages.packages(self.packages.package_manager(), list(patterns))
        except RuntimeError as error:
            return {"package:*": str(error)}
        found: dict[str, str] = {}
        for package in packages:
            line = package["version"] + (" held" if package["held"] else "") + ("" if package["configured"] else " not configured")
            key = "package:" + package["name"]
            # One line per architecture of a multiarch package (the reader drops the :arch).
            found[key] = found[key] + ", " + line if key in found else line
        return found

    def unit_names(self, patterns: t.Sequence[str]) -> list[str]:
        names = {pattern for pattern in patterns if not any(c in pattern for c in "*?[")}
        for directory in self.unit_dirs:
            try:
                entries = os.listdir(directory)
            except OSError:
                continue
            names.update(entry for entry in entries if any(fnmatch.fnmatchcase(entry, pattern) for pattern in patterns))
        return sorted(names)

    def read_units(self, patterns: t.Sequence[str]) -> dict[str, str]:
        names = self.unit_names(patterns)
        if not names:
            return {}
        systemctl = self.module.get_bin_path("systemctl")
        if not systemctl:
            return {"unit:*": "no systemctl"}
        rc, out, err = self.module.run_command([systemctl, "show", "--property=Id,Type,LoadState,ActiveState,UnitFileState", "--"] + names)
        if rc != 0:
            return {"unit:*": "systemctl show failed: " + err.strip()}
        return parse_systemctl_show(out)

    def read_node(self, watch: dict[str, t.Any]) -> dict[str, str]:
        state = {"kernel": os.uname().release}
        try:
            with open("/sys/module/nvidia/version", encoding="utf-8") as handle:
                state["module:nvidia"] = handle.read().strip()
        except OSError:
            state["module:nvidia"] = "not loaded"
        state.update(read_paths(watch.get("paths") or []))
        state.update(self.read_packages(watch.get("packages") or []))
        state.update(self.read_units(watch.get("units") or []))
        if watch.get("nvml", True):
            state["nvml"] = read_nvml()
        return state

    # --- the record -----------------------------------------------------------
    def load_record(self) -> dict[str, t.Any] | None:
        path = self.params["path"]
        try:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # unreadable or torn: as good as none, the next verified converge rewrites it
        if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
            return None
        return record

    @staticmethod
    def differences(label: str, old: dict[str, str], new: dict[str, str], describe: bool) -> str | None:
        """One line naming what differs between two item maps, or None."""
        changed = []
        for key in sorted(set(old) | set(new)):
            before, after = old.get(key), new.get(key)
            if before == after:
                continue
            name = key.split(":", 1)[1] if key.startswith(("path:", "package:", "unit:")) else key
            if before is None:
                changed.append(name + " (new)")
            elif after is None:
                changed.append(name + " (gone)")
            elif describe and not key.startswith(("path:", "nvml")):
                changed.append("{0} ({1} -> {2})".format(name, before, after))
            else:
                changed.append(name)
        if not changed:
            return None
        more = len(changed) - LISTED_CHANGES
        listed = ", ".join(changed[:LISTED_CHANGES]) + (" and {0} more".format(more) if more > 0 else "")
        return "{0} changed: {1}".format(label, listed)

    def read_report(self) -> tuple[dict[str, t.Any] | None, str | None]:
        """The node's last verify report, and why it does not let the node match (None when it does)."""
        path = self.params["report"]
        try:
            with open(path, encoding="utf-8") as handle:
                report = json.load(handle)
        except FileNotFoundError:
            return None, "verify report {0} is missing".format(path)
        except (OSError, ValueError) as error:
            return None, "verify report {0} is unreadable: {1}".format(path, error)
        status = report.get("status") if isinstance(report, dict) else None
        if status not in ("pass", "warn"):
            return None, "verify report {0} says {1}: the last verify did not pass".format(path, status)
        return report, None

    def compare(self) -> dict[str, t.Any]:
        record = self.load_record()
        if record is None:
            return {
                "matched": False,
                "recorded_at": None,
                "item_count": 0,
                "report": None,
                "reasons": ["no fingerprint at {0}: no converge has passed verify here yet (or its record was unreadable)".format(self.params["path"])],
            }
        state = self.read_node(record.get("watch") or {})
        report, report_reason = self.read_report() if self.params["report"] else (None, None)
        reasons = [
            line
            for line in (
                self.differences("declaration", record.get("declaration") or {}, self.params["declaration"], False),
                self.differences("node", record.get("state") or {}, state, True),
                report_reason,
            )
            if line
        ]
        return {
            "matched": not reasons,
            "reasons": reasons,
            "recorded_at": record.get("recorded_at"),
            "item_count": len(state),
            "report": None if reasons else report,
        }

    def record(self) -> dict[str, t.Any]:
        watch = self.params["watch"]
        if watch is None:
            self.module.fail_json(msg="watch is required with state=recorded: list the paths, packages and units the roles manage")
        state = self.read_node(watch)
        old = self.load_record()
        new = {"format": RECORD_FORMAT, "declaration": self.params["declaration"], "watch": watch, "state": state}
        same = old is not None and all(old.get(key) == value for key, value in new.items())
        if same:
            return {"changed": False, "matched": True, "reasons": [], "recorded_at": old.get("recorded_at"), "item_count": len(state)}
        new["recorded_at"] = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        if not self.module.check_mode:
            self.write(new)
        return {"changed": True, "matched": True, "reasons": [], "recorded_at": new["recorded_at"], "item_count": len(state)}

    def write(self, record: dict[str, t.Any]) -> None:
        try:
            write_json(self.params["path"], record)
        except OSError as error:
            self.module.fail_json(msg="cannot write the fingerprint {0}: {1}".format(self.params["path"], error))

    # --- the lease ------------------------------------------------------------
    def take_lease(self, result: dict[str, t.Any]) -> None:
        """Take the node for this run; start what a dead run left stopped. Fails naming the run that holds it."""
        lease = RunLease(self.params["lease_path"], self.params["lock_path"])
        try:
            taken = lease.acquire(self.params["lease"], self.params["lease_wait"], self.params["lease_take_over"])
        except LeaseBusy as busy:
            if busy.holder is None:
                self.module.fail_json(
                    msg="the node lock {0} stayed taken for {1} s: a boot unit (gpufleet-mig, the CDI refresh, "
                    "gpufleet-verify-boot) is still at work; run again once it has finished (systemctl list-jobs)".format(
                        self.params["lock_path"], self.params["lease_wait"]
                    ),
                    lease_holder=None,
                )
            self.module.fail_json(msg="another run holds this node", lease_holder=busy.holder)
        result["lease"] = {"taken_over": taken["previous"], "waited_for": taken["waited_for"], "waited": taken["waited"]}
        journal = self.stopped_services()
        if journal.journalled():
            started, failed = journal.start_all()
            result["restored"] = started
            result["changed"] = bool(started)
            if failed:
                self.module.warn("a run that died had stopped services that do not start again: " + "; ".join(failed))

    def stopped_services(self) -> StoppedServices:
        """The journal of services a step stopped and has not started again (mig_config writes it)."""
        return StoppedServices(self.module.run_command, self.module.get_bin_path("systemctl") or "systemctl", self.params["stopped_path"])

    def give_lease_back(self, result: dict[str, t.Any]) -> None:
        # A short wait: a boot unit holds the node lock only while it works.
        result["lease_released"] = RunLease(self.params["lease_path"], self.params["lock_path"]).release(self.params["lease"]["run_id"], 60)

    def run(self) -> dict[str, t.Any]:
        if self.params["declaration"] is None:
            self.module.fail_json(
                msg="declaration is missing: call gpufleet.nvidia.node_fingerprint by its full name so that its action plugin computes it on the controller"
            )
        state = self.params["state"]
        leasing = self.params["lease"] is not None and not self.module.check_mode
        if state in ("leased", "released"):
            result: dict[str, t.Any] = {"changed": False}
        elif state == "recorded":
            result = self.record()
        else:
            result = self.compare()
            result["changed"] = False
            # A dead run left services stopped: the node is not as recorded, whatever its files say.
            left = self.stopped_services().journalled()
            if left:
                result.update(matched=False, report=None)
                result["reasons"].append("a run that died left {0} stopped".format(", ".join(left)))
        # A comparison that matched changes nothing on the node, so it needs no lease.
        takes = state == "leased" or (state == "compared" and not result["matched"])
        if leasing and takes:
            self.take_lease(result)
        elif leasing and state in ("recorded", "released"):
            self.give_lease_back(result)
        return result


WATCH_SPEC = {
    "paths": {"type": "list", "elements": "path", "default": []},
    "packages": {"type": "list", "elements": "str", "default": []},
    "units": {"type": "list", "elements": "str", "default": []},
    "nvml": {"type": "bool", "default": True},
}

LEASE_SPEC = {
    "run_id": {"type": "str", "required": True},
    "controller": {"type": "str", "default": ""},
    "user": {"type": "str", "default": ""},
    "pid": {"type": "int"},
    "pid_started": {"type": "str", "default": ""},
    "awx_job": {"type": "str", "default": ""},
}

ARGUMENT_SPEC = {
    "state": {"type": "str", "choices": ["compared", "recorded", "leased", "released"], "default": "compared"},
    "lease": {"type": "dict", "options": LEASE_SPEC},
    "lease_wait": {"type": "int", "default": 0},
    "lease_take_over": {"type": "str", "default": ""},
    "lease_path": {"type": "path", "default": "/var/lib/gpufleet/run-lease.json"},
    "lock_path": {"type": "path", "default": "/run/lock/gpufleet.lock"},
    "stopped_path": {"type": "path", "default": "/var/lib/gpufleet/stopped-services.json"},
    "path": {"type": "path", "default": "/var/lib/gpufleet/fingerprint.json"},
    "prefixes": {"type": "list", "elements": "str", "required": True},
    "report": {"type": "path"},
    "declaration": {"type": "dict"},
    "watch": {"type": "dict", "options": WATCH_SPEC},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.exit_json(**NodeFingerprint(module).run())


if __name__ == "__main__":
    main()
