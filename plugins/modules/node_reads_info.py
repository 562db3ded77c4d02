#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_reads_info
short_description: Read several files and the output of several commands on the node in one call
version_added: 0.1.0
description:
  - Reads each named file and runs each named command on the node, and returns them all by name, with one round
    trip where a M(ansible.builtin.slurp) or M(ansible.builtin.command) task takes one each. The verify role reads
    every layer's state this way.
  - A missing file is V(null), not an error; a command whose program is not installed gets return code 127 and
    says so on its stderr, not an error. The caller judges what it read.
  - For reads only. It runs only the commands of its named allow-list of read-only probes (see O(commands)), without
    a shell, one after the other, each with a time limit, and refuses any other before it runs anything. It always
    reports C(changed=false).
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.info_module
  - gpufleet.nvidia.attributes.internal
options:
  files:
    description:
      - Names and the absolute paths to read (text; undecodable bytes are replaced).
      - Files are read without blocking, so a character device or a FIFO gives what it holds now and the read
        ends there. C(/dev/kmsg) gives every record of the kernel log buffer, one line
        C(<priority>,<sequence>,<microseconds>,<flags>;<message>) each, with indented C(KEY=value) lines after
        some (reading it needs root, or C(kernel.dmesg_restrict=0)); a record overwritten while it is read is
        skipped.
    type: dict
    default: {}
  kernel_logs:
    description:
      - Names and the absolute paths of kernel logs (C(/dev/kmsg), or a file of kmsg, dmesg, journal or syslog
        lines) whose NVIDIA Xid and fallen-off-the-bus events are wanted. Each is read and parsed here, on the node,
        and only its events travel (RV(kernel_logs)), not the log.
      - C(/dev/kmsg) is read whole (the kernel's ring buffer drops the oldest records itself). Of a file, the last
        O(max_bytes) are read, from the first whole line, so the newest events are never the ones left out.
    type: dict
    default: {}
  nvidia_pci:
    description:
      - Also list the node's NVIDIA PCI functions (vendor C(0x10de) under C(/sys/bus/pci/devices)) with their class
        and the first 256 bytes of their configuration space, as GPU Feature Discovery reads them for its vGPU labels
        (RV(nvidia_pci)). Reading the whole header needs root.
    type: bool
    default: false
  os_facts:
    description:
      - Also gather the facts of M(ansible.builtin.setup)'s C(distribution) and C(platform) subsets (C(os_family),
        C(distribution), C(distribution_major_version), C(distribution_release), C(architecture), C(kernel), ...)
        with ansible-core's own collectors, and return them as facts, as that module would. The later layers then
        skip their own gathering, and a run that needs these facts pays for no call of its own to get them.
    type: bool
    default: false
  commands:
    description:
      - Names and the argument vectors to run (no shell). The program is looked up in C(PATH) and the sbin
        directories.
      - Each must be one of the read-only probes the collection names (C(plugins/module_utils/_read_probes.py)), for
        example a program's C(--version), C(systemctl show), C(stat), C(test), C(dpkg-query), C(rpm -q...),
        C(containerd config dump), C(crictl info), C(ctr plugins ls), C(nvidia-ctk config) without C(--in-place).
        Anything else fails the task, naming the command, before any command runs.
    type: dict
    default: {}
  timeout:
    description: Seconds each command may take before it is stopped (return code 124).
    type: int
    default: 60
  max_bytes:
    description: At most this many bytes of a file or of a command's output are returned.
    type: int
    default: 4194304
requirements:
  - Python 3.8 or later on the target (standard library only).
"""

EXAMPLES = r"""
- name: Read what verify judges, in one call
  gpufleet.nvidia.node_reads_info:
    files:
      proc_version: /proc/driver/nvidia/version
      cdi_spec: /etc/cdi/nvidia.json
    commands:
      engine: [containerd, config, dump]
      crictl_version: [crictl, --version]
  register: reads

- name: Use them
  ansible.builtin.debug:
    msg: "{{ reads.commands.engine.stdout if reads.commands.engine.rc == 0 else 'no containerd' }}"
"""

RETURN = r"""
files:
  description: Each name's file content, or V(null) where the file is missing or unreadable.
  type: dict
  returned: always
  sample: {proc_version: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.163.01 ...\n", cdi_spec: null}
file_errors:
  description: Why a file read V(null), by name, where it was not simply missing.
  type: dict
  returned: always
  sample: {}
kernel_logs:
  description:
    - Each name's kernel log events (C(xid), C(bus_id), C(message), C(fallen_off_bus)), how many bytes were read, and
      whether older lines of a file were left out (C(truncated)); V(null) where the log cannot be read.
  type: dict
  returned: always
  sample:
    kernel_log:
      events:
        - {xid: 79, bus_id: "00000000:07:00.0", fallen_off_bus: true, message: "NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus."}
      read_bytes: 48213
      truncated: false
nvidia_pci:
  description:
    - With O(nvidia_pci), the NVIDIA PCI functions by address (C(address), C(class), C(config) in hex,
      C(config_length)), and C(error) when one could not be read (the list then stops there, as GFD's does);
      V(null) without.
  type: dict
  returned: always
  sample: {devices: [{address: "0000:07:00.0", class: "0x03", config: "de10b520...", config_length: 256}], error: null}
commands:
  description: Each name's return code, stdout and stderr.
  type: dict
  returned: always
  sample: {crictl_version: {rc: 0, stdout: "crictl version v1.36.0\n", stderr: ""}}
ansible_facts:
  description: With O(os_facts), the facts of M(ansible.builtin.setup)'s C(distribution) and C(platform) subsets.
  type: dict
  returned: when O(os_facts) is true
  sample: {ansible_os_family: Debian, ansible_distribution: Debian, ansible_distribution_major_version: "13", ansible_architecture: x86_64}
"""

import os
import subprocess
import typing as t

from ansible.module_utils.basic import AnsibleModule

# The non-blocking read is the kernel log reader's: /dev/kmsg is the file that needs it.
from ansible_collections.gpufleet.nvidia.plugins.module_utils._kernel_log import read_available, read_kernel_events
from ansible_collections.gpufleet.nvidia.plugins.module_utils._pci import read_nvidia_functions
from ansible_collections.gpufleet.nvidia.plugins.module_utils._read_probes import probe_names, probe_of

_NOT_INSTALLED = 127
_TIMED_OUT = 124


class NodeReads:
    """Every read by name; nothing is judged here."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.limit: int = module.params["max_bytes"]
        for name, path in module.params["files"].items():
            if not isinstance(path, str) or not os.path.isabs(path):
                module.fail_json(msg="files.{0}: '{1}' is not an absolute path".format(name, path))
        for name, path in module.params["kernel_logs"].items():
            if not isinstance(path, str) or not os.path.isabs(path):
                module.fail_json(msg="kernel_logs.{0}: '{1}' is not an absolute path".format(name, path))
        for name, argv in module.params["commands"].items():
            if not isinstance(argv, list) or not argv or not all(isinstance(arg, (str, int)) for arg in argv):
                module.fail_json(msg="commands.{0}: expected a non-empty list of arguments, got {1!r}".format(name, argv))
            if probe_of(argv) is None:
                module.fail_json(
                    msg="commands.{0}: {1} is none of node_reads_info's read-only probes ({2}); it runs only reads it "
                    "knows. Read with another module, or add a probe to plugins/module_utils/_read_probes.py with why it "
                    "changes nothing.".format(name, " ".join(str(arg) for arg in argv)[:200], ", ".join(probe_names()))
                )

    def _text(self, data: bytes) -> str:
        return data[: self.limit].decode("utf-8", "replace")

    def read_file(self, path: str) -> tuple[str | None, str | None]:
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return None, None
        except OSError as error:
            return None, "{0}: {1}".format(path, error.strerror or error)
        try:
            return self._text(read_available(descriptor, self.limit)), None
        except OSError as error:
            return None, "{0}: {1}".format(path, error.strerror or error)
        finally:
            os.close(descriptor)

    def run_command(self, argv: list[t.Any]) -> dict[str, t.Any]:
        program = self.module.get_bin_path(str(argv[0]))
        if program is None:
            return {"rc": _NOT_INSTALLED, "stdout": "", "stderr": "{0} is not installed".format(argv[0])}
        timeout = self.module.params["timeout"]
        try:
            done = subprocess.run(  # pylint: disable=ansible-bad-function
                [program] + [str(arg) for arg in argv[1:]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as expired:
            return {"rc": _TIMED_OUT, "stdout": self._text(expired.stdout or b""), "stderr": "{0} did not finish within {1} s".format(argv[0], timeout)}
        except OSError as error:
            return {"rc": _NOT_INSTALLED, "stdout": "", "stderr": "{0}: {1}".format(argv[0], error)}
        return {"rc": done.returncode, "stdout": self._text(done.stdout), "stderr": self._text(done.stderr)}

    def run(self) -> dict[str, t.Any]:
        files: dict[str, str | None] = {}
        errors: dict[str, str] = {}
        for name, path in self.module.params["files"].items():
            files[name], error = self.read_file(path)
            if error:
                errors[name] = error
        kernel_logs = {name: read_kernel_events(path, self.limit) for name, path in self.module.params["kernel_logs"].items()}
        commands = {name: self.run_command(argv) for name, argv in self.module.params["commands"].items()}
        nvidia_pci = read_nvidia_functions() if self.module.params["nvidia_pci"] else None
        result = {"changed": False, "files": files, "file_errors": errors, "kernel_logs": kernel_logs, "nvidia_pci": nvidia_pci, "commands": commands}
        if self.module.params["os_facts"]:
            result["ansible_facts"] = self.os_facts()
        return result

    def os_facts(self) -> dict[str, t.Any]:
        """setup's distribution and platform subsets, from the collectors setup itself runs: the same facts, not a copy
        of them, under the names setup returns (ansible_ before each; Ansible stores them without it). Imported here:
        ansible's facts package loads every collector it has (tens of milliseconds), which only this read needs."""
        # pylint: disable-next=import-outside-toplevel
        from ansible.module_utils.facts.system.distribution import DistributionFactCollector

        # pylint: disable-next=import-outside-toplevel
        from ansible.module_utils.facts.system.platform import PlatformFactCollector

        facts: dict[str, t.Any] = {}
        for collector in (PlatformFactCollector(), DistributionFactCollector()):
            facts.update(collector.collect(module=self.module, collected_facts=facts))
        return {"ansible_" + name: value for name, value in facts.items()}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {"type": "dict", "default": {}},
            "kernel_logs": {"type": "dict", "default": {}},
            "commands": {"type": "dict", "default": {}},
            "nvidia_pci": {"type": "bool", "default": False},
            "os_facts": {"type": "bool", "default": False},
            "timeout": {"type": "int", "default": 60},
            "max_bytes": {"type": "int", "default": 4 * 1024 * 1024},
        },
        supports_check_mode=True,
    )
    module.exit_json(**NodeReads(module).run())


if __name__ == "__main__":
    main()
