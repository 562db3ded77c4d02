#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_workload
short_description: Start short-lived GPU containers through the node's engine and report what they see
version_added: 0.1.0
description:
  - "Starts one container per requested CDI device through the engine the node runs, the way a workload would -
    containerd and CRI-O through CRI (C(crictl runp), C(create), C(start), with the runtime handler given; all the
    containers of one check run in one pod sandbox, as a pod's containers do), Docker with C(docker run --device).
    Inside, it runs the image's check command (default C(nvidia-smi -L)) and the driver-version command, and
    compares what the container sees with what the host's NVML reports."
  - Every pod and container it creates carries the label C(gpufleet.nvidia/workload-check) and is removed on
    success, failure and timeout; leftovers of an interrupted earlier run are removed first.
  - The image must be on the node, or be importable from O(image_archive) (C(ctr -n k8s.io images import),
    C(docker load)), or pullable when O(pull=true). It is never pulled when an archive is given.
  - Reports C(changed=true) only when it imported or pulled the image; the check itself changes nothing. In check
    mode it does not import or pull; with the image absent the runs are reported as skipped.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.info_module
options:
  engine:
    description: The engine to start the containers through.
    type: str
    required: true
    choices: [containerd, crio, docker]
  runtime_handler:
    description:
      - CRI runtime handler (C(crictl runp --runtime)) or Docker runtime (C(--runtime)); V("") uses the engine's
        default.
    type: str
    default: ""
  endpoint:
    description: CRI endpoint for crictl (C(unix:///run/containerd/containerd.sock)); V("") reads /etc/crictl.yaml.
    type: str
    default: ""
  image:
    description: The image reference, pinned by digest (C(name@sha256:...)) or by name and tag.
    type: str
    required: true
  image_archive:
    description: An OCI or Docker archive on the node to import when the image is not there.
    type: path
  pull:
    description: Pull the image through the engine when it is missing and no archive is given.
    type: bool
    default: false
  devices:
    description:
      - One container per item, requesting the CDI devices in O(devices[].cdi), and what it must see.
    type: list
    elements: dict
    required: true
    suboptions:
      cdi:
        description: Fully qualified CDI device names (C(nvidia.com/gpu=all)).
        type: list
        elements: str
        required: true
      gpus:
        description: GPU UUIDs the container must list, no more and no fewer.
        type: list
        elements: str
        default: []
      migs:
        description: MIG device UUIDs the container must list, no more and no fewer.
        type: list
        elements: str
        default: []
      image:
        description: Another image for this container (a CUDA image under test); pulled when missing and O(pull=true).
        type: str
  driver_version:
    description:
      - The host's driver version (NVML); the container that reads it (O(driver_command)) must report the same.
        V("") skips the comparison.
    type: str
    default: ""
  command:
    description: The check command run in the container; its output is read as C(nvidia-smi -L) output.
    type: list
    elements: str
    default: [nvidia-smi, -L]
  driver_command:
    description:
      - The command that prints the driver version inside the container; V([]) skips it.
      - It runs in the first container of each image only; the driver's libraries reach every container through
        the CDI spec's common edits, whichever device it asks for.
    type: list
    elements: str
    default: [nvidia-smi, --query-gpu=driver_version, "--format=csv,noheader"]
  hold_command:
    description: What keeps the container running while the commands are executed in it.
    type: list
    elements: str
    default: [sleep, "3600"]
  timeout:
    description:
      - Seconds one container may take from creation to removal; past it the run fails and is cleaned up.
      - The pod sandbox on CRI has as long to start; past it every container fails.
    type: int
    default: 30
  parallel:
    description: How many containers run at once (a node with many MIG devices); V(1) runs them one after another.
    type: int
    default: 4
requirements:
  - Python 3.8 or later on the target (standard library only).
  - crictl for containerd and CRI-O; ctr to import an archive into containerd; docker for Docker.
"""

EXAMPLES = r"""
- name: Run nvidia-smi -L in a container that asks for every GPU
  gpufleet.nvidia.gpu_workload:
    engine: containerd
    runtime_handler: nvidia
    image: "{{ site_registry }}/gpufleet/cuda-probe@sha256:0123..."
    image_archive: /var/lib/gpufleet/images/cuda-probe.oci.tar
    devices:
      - cdi: [nvidia.com/gpu=all]
        gpus: "{{ nvml.gpus | map(attribute='uuid') | list }}"
    driver_version: "{{ nvml.driver_version }}"
"""

RETURN = r"""
image:
  description: O(image), whether it was there, and how it got there.
  type: dict
  returned: always
  sample: {ref: "registry/gpufleet/cuda-probe@sha256:0123...", present: true, imported: false, pulled: false, error: null}
images:
  description: Every image the runs used, as RV(image).
  type: list
  elements: dict
  returned: always
runs:
  description: One result per O(devices) item.
  type: list
  elements: dict
  returned: always
  sample:
    - cdi: [nvidia.com/gpu=all]
      status: pass
      seconds: 0.9
      gpus: [GPU-5d5ba0d6-...]
      migs: []
      driver_version: "550.163.01"
      missing: []
      unexpected: []
      error: null
leftovers_removed:
  description: Pods or containers of an earlier, interrupted check that were removed first.
  type: int
  returned: always
"""

import re
import shutil
import tempfile
import time
import typing as t
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._container_engine import ENGINES, KEEP, RunFailed, Timeout, program_finder

# nvidia-smi -L: "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-...)" and, indented,
# "  MIG 1g.5gb     Device  0: (UUID: MIG-...)".
GPU_LINE = re.compile(r"^GPU\s+\d+:.*\(UUID:\s*(GPU-[0-9A-Za-z-]+)\)\s*$")
MIG_LINE = re.compile(r"^\s+MIG\s.*Device\s+\d+:\s*\(UUID:\s*(MIG-[0-9A-Za-z-]+)\)\s*$")


def parse_listing(text: str) -> tuple[list[str], list[str]]:
    """GPU and MIG UUIDs from nvidia-smi -L output, in order."""
    gpus, migs = [], []
    for line in text.splitlines():
        match = GPU_LINE.fullmatch(line)
        if match:
            gpus.append(match.group(1))
            continue
        match = MIG_LINE.fullmatch(line)
        if match:
            migs.append(match.group(1))
    return gpus, migs


class WorkloadCheck:
    """The whole check on one engine: the image, then one container per device set."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.params = module.params
        self.engine = ENGINES[self.params["engine"]](self.params, program_finder(module.get_bin_path))
        if self.params["timeout"] < 1:
            module.fail_json(msg="timeout: must be at least 1 second, got {0}".format(self.params["timeout"]))
        if self.params["parallel"] < 1:
            module.fail_json(msg="parallel: run at least 1 container at a time, got {0}".format(self.params["parallel"]))
        if not self.params["command"]:
            module.fail_json(msg="command: the check command cannot be empty (default: [nvidia-smi, -L])")
        for number, item in enumerate(self.params["devices"]):
            if not item["cdi"]:
                module.fail_json(msg="devices[{0}].cdi: name at least one CDI device (nvidia.com/gpu=all)".format(number))

    def ensure_image(self, ref: str, archive: str | None) -> dict[str, t.Any]:
        image: dict[str, t.Any] = {"ref": ref, "local": ref, "present": False, "imported": False, "pulled": False, "error": None}
        try:
            image.update(self.engine.ensure(ref, archive, self.params["pull"], self.module.check_mode))
        except RunFailed as exc:
            image["error"] = str(exc)
            return image
        if not image["present"]:
            image["error"] = "not on the node; check mode does not download, import or pull it"
        return image

    def not_run(self, item: dict[str, t.Any], ref: str, error: str) -> dict[str, t.Any]:
        """A container that was not started: skipped in check mode, else failed."""
        return {
            "cdi": item["cdi"],
            "image": ref,
            "status": "skipped" if self.module.check_mode else "fail",
            "error": error,
            "seconds": 0.0,
            "gpus": [],
            "migs": [],
            "missing": [],
            "unexpected": [],
        }

    def one(self, item: dict[str, t.Any], image: str, workdir: str, read_driver: bool) -> dict[str, t.Any]:
        result: dict[str, t.Any] = {
            "cdi": item["cdi"],
            "image": image,
            "status": "fail",
            "seconds": 0.0,
            "gpus": [],
            "migs": [],
            "driver_version": None,
            "missing": [],
            "unexpected": [],
            "error": None,
            "output": "",
        }
        started = time.monotonic()
        deadline = started + self.params["timeout"]
        created: list[str] = []
        try:
            handle = self.engine.start(image, item["cdi"], deadline, workdir, created)
            listing = self.engine.exec(handle, self.params["command"], deadline, "the check command ({0})".format(" ".join(self.params["command"])))
            result["output"] = listing[-KEEP:]
            result["gpus"], result["migs"] = parse_listing(listing)
            if read_driver:
                out = self.engine.exec(
                    handle, self.params["driver_command"], deadline, "the driver version command ({0})".format(" ".join(self.params["driver_command"]))
                )
                versions = sorted({line.strip() for line in out.splitlines() if line.strip()})
                result["driver_version"] = ", ".join(versions) or None
            self.compare(item, result, read_driver)
        except RunFailed as exc:
            result["error"] = str(exc)
            result["timed_out"] = isinstance(exc, Timeout)
        finally:
            for what in created:
                leftover = self.engine.remove(what)
                if leftover:
                    result["error"] = (result["error"] or "") + " (and it could not be removed: {0})".format(leftover)
                    result["status"] = "fail"
            result["seconds"] = round(time.monotonic() - started, 2)
        return result

    def compare(self, item: dict[str, t.Any], result: dict[str, t.Any], read_driver: bool) -> None:
        want = list(item["gpus"]) + list(item["migs"])
        seen = result["gpus"] + result["migs"]
        result["missing"] = [uuid_ for uuid_ in want if uuid_ not in seen]
        result["unexpected"] = [uuid_ for uuid_ in seen if uuid_ not in want]
        wanted_driver = self.params["driver_version"]
        problems = []
        if result["missing"]:
            problems.append("the container does not see {0}".format(", ".join(result["missing"])))
        if result["unexpected"]:
            problems.append("the container sees {0}, which it did not ask for".format(", ".join(result["unexpected"])))
        if wanted_driver and read_driver and result["driver_version"] != wanted_driver:
            problems.append("the container reports driver {0}, the host runs {1}".format(result["driver_version"], wanted_driver))
        if problems:
            result["error"] = "; ".join(problems)
        else:
            result["status"] = "pass"

    def run(self) -> dict[str, t.Any]:
        out: dict[str, t.Any] = {
            "changed": False,
            "engine": self.params["engine"],
            "runtime_handler": self.params["runtime_handler"],
            "runs": [],
            "leftovers_removed": 0,
        }
        try:
            out["leftovers_removed"] = 0 if self.module.check_mode else self.engine.remove_leftovers()
        except RunFailed as exc:
            # The engine's client is missing: every container fails alike.
            out["image"] = {"ref": self.params["image"], "present": False, "error": str(exc)}
            out["images"] = [out["image"]]
            out["runs"] = [self.not_run(item, item["image"] or self.params["image"], str(exc)) for item in self.params["devices"]]
            return out
        images: dict[str, dict[str, t.Any]] = {}
        work: list[tuple[dict[str, t.Any], str, dict[str, t.Any]]] = []
        for item in self.params["devices"]:
            ref = item["image"] or self.params["image"]
            if ref not in images:
                images[ref] = self.ensure_image(ref, self.params["image_archive"] if ref == self.params["image"] else None)
            work.append((item, ref, images[ref]))

        # The driver's libraries reach a container through the CDI spec's
        # common edits, whatever device it asks for: the first container of
        # each image reads the driver version, the others (a node's MIG
        # devices) only list what they see.
        readers: dict[str, dict[str, t.Any]] = {}
        for item, ref, _image in work:
            readers.setdefault(ref, item)
        # What the containers share (CRI: their pod sandbox) is made once,
        # and only when a container will start; if it cannot be made, every
        # container fails with its reason.
        workdir = tempfile.mkdtemp(prefix="gpufleet-workload-")
        shared: RunFailed | None = None
        try:
            if any(image["present"] for _item, _ref, image in work):
                try:
                    self.engine.open(time.monotonic() + self.params["timeout"], workdir)
                except RunFailed as exc:
                    shared = exc

            def check(job: tuple[dict[str, t.Any], str, dict[str, t.Any]]) -> dict[str, t.Any]:
                item, ref, image = job
                if not image["present"]:
                    return self.not_run(item, ref, "image {0}: {1}".format(ref, image["error"]))
                if shared is not None:
                    result = self.not_run(item, ref, str(shared))
                    result.update(status="fail", timed_out=isinstance(shared, Timeout))
                    return result
                read_driver = bool(self.params["driver_command"]) and item is readers[ref]
                result = self.one(item, image["local"], workdir, read_driver)
                result["image"] = ref
                return result

            # Containers are independent: a node with many MIG devices checks
            # several at once (each still within its own time limit).
            with ThreadPoolExecutor(max_workers=max(1, min(self.params["parallel"], len(work) or 1))) as pool:
                out["runs"] = list(pool.map(check, work))
        finally:
            leftover = self.engine.close()
            shutil.rmtree(workdir, ignore_errors=True)
        if leftover:
            for result, (_item, _ref, image) in zip(out["runs"], work):
                if image["present"]:
                    result["error"] = (result["error"] or "") + " (and it could not be removed: {0})".format(leftover)
                    result["status"] = "fail"
        out["image"] = images.get(self.params["image"]) or {"ref": self.params["image"], "present": None}
        out["images"] = list(images.values())
        out["changed"] = any(image["imported"] or image["pulled"] for image in images.values())
        return out


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "engine": {"type": "str", "required": True, "choices": ["containerd", "crio", "docker"]},
            "runtime_handler": {"type": "str", "default": ""},
            "endpoint": {"type": "str", "default": ""},
            "image": {"type": "str", "required": True},
            "image_archive": {"type": "path"},
            "pull": {"type": "bool", "default": False},
            "devices": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "cdi": {"type": "list", "elements": "str", "required": True},
                    "gpus": {"type": "list", "elements": "str", "default": []},
                    "migs": {"type": "list", "elements": "str", "default": []},
                    "image": {"type": "str"},
                },
            },
            "driver_version": {"type": "str", "default": ""},
            "command": {"type": "list", "elements": "str", "default": ["nvidia-smi", "-L"]},
            "driver_command": {"type": "list", "elements": "str", "default": ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]},
            "hold_command": {"type": "list", "elements": "str", "default": ["sleep", "3600"]},
            "timeout": {"type": "int", "default": 30},
            "parallel": {"type": "int", "default": 4},
        },
        supports_check_mode=True,
    )
    try:
        result = WorkloadCheck(module).run()
    except RunFailed as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
