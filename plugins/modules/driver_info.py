#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: driver_info
short_description: Read how the NVIDIA driver is installed on a node
version_added: 0.1.0
description:
  - Reports, in one pass and without changing anything, what the NVIDIA driver's installation depends on
    and what it left behind. The installed driver packages with their versions and holds (dpkg selections
    or dnf versionlock), the kernels the node can boot with their headers and nvidia module version, DKMS
    state, Secure Boot with the enrolled MOK certificates, whether the node is a container, NVSwitch
    bridges on the PCI bus, and whether nouveau is loaded.
  - It does not talk to the GPU; use M(gpufleet.nvidia.nvml_info) for the loaded driver and the GPUs.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.info_module
options:
  packages:
    description:
      - Package name patterns (shell globs) to report when installed.
    type: list
    elements: str
    default: ["*nvidia*", "libcuda*", "cuda-drivers*", "nvlsm*"]
  kernel_modules:
    description:
      - Names under which the driver's kernel module may be installed, tried in order for every installed kernel.
      - Debian's packages install it as C(nvidia-current).
    type: list
    elements: str
    default: [nvidia, nvidia-current]
  other_modules:
    description:
      - Kernel modules besides the driver's that the node needs (NVLSM's C(ib_umad) and C(mlx5_ib) on NVLink5
        systems). Each installed kernel reports those of them its module index lacks
        (RV(driver.kernels.installed[].modules_absent)), and RV(driver.other_modules_loaded) those loaded now.
    type: list
    elements: str
    default: []
  staged_kernels:
    description:
      - Kernel releases being prepared for a roll (C(playbooks/kernel_roll.yml)), installed or not. Each is reported in
        RV(driver.kernels.staged) with the driver's module found for it, and RV(driver.kernels.running_sig_key) gives
        the key the running kernel's module is signed with. Unset, neither is reported.
    type: list
    elements: str
  mok_certificate:
    description:
      - A certificate (DER or PEM) whose enrolment as a Machine Owner Key is reported in
        RV(driver.secure_boot.mok_certificate_enrolled).
    type: path
  files:
    description:
      - Configuration files to report with their mode and content (up to 64 KiB), so that a playbook can skip
        rewriting the ones that are already right.
    type: list
    elements: path
    default: []
  units:
    description:
      - systemd units to report as C(systemctl is-enabled) and C(systemctl is-active) see them.
    type: list
    elements: str
    default: []
notes:
  - Kernels are the C(vmlinuz-*) images in C(/boot) (rescue images excluded); a kernel has headers when
    C(/lib/modules/<release>/build/Makefile) exists.
  - In a container, the running kernel is the host's; it is reported but is usually not installed.
requirements:
  - Python 3.8 or later on the target (standard library only); C(dpkg-query) or C(rpm), C(modinfo).
seealso:
  - module: gpufleet.nvidia.nvml_info
"""

EXAMPLES = r"""
- name: Read the driver's installation state
  gpufleet.nvidia.driver_info:
  register: driver_state

- name: Refuse to continue when an installed kernel has no nvidia module
  ansible.builtin.assert:
    that: driver_state.driver.kernels.installed | selectattr('module_version', 'none') | list | length == 0
    fail_msg: "no nvidia module for {{ driver_state.driver.kernels.installed | selectattr('module_version', 'none') | map(attribute='release') }}"
"""

RETURN = r"""
driver:
  description: What the module found.
  returned: always
  type: dict
  contains:
    package_manager:
      description: C(apt) or C(dnf), from the package database present; V(null) when neither is.
      type: str
      returned: always
      sample: apt
    packages:
      description: Installed packages matching O(packages), sorted by name.
      type: list
      elements: dict
      returned: always
      contains:
        name:
          description: The package name.
          type: str
          returned: always
          sample: nvidia-kernel-dkms
        version:
          description: The package version (rpm versions without a zero epoch).
          type: str
          returned: always
          sample: 535.261.03-1
        held:
          description: Whether upgrades are blocked (dpkg C(hold) selection, or a dnf versionlock entry).
          type: bool
          returned: always
        configured:
          description: Whether the package is fully configured (V(false) for a half-installed dpkg package).
          type: bool
          returned: always
    kernels:
      description: The running kernel and the kernels the node can boot.
      type: dict
      returned: always
      contains:
        running:
          description: The running kernel release.
          type: str
          returned: always
          sample: 6.1.0-56-amd64
        running_installed:
          description: Whether the running kernel is one of the installed ones (V(false) in containers).
          type: bool
          returned: always
        installed:
          description: One entry per bootable kernel, sorted by release.
          type: list
          elements: dict
          returned: always
          contains:
            release:
              description: The kernel release.
              type: str
              returned: always
            running:
              description: Whether it is the running kernel.
              type: bool
              returned: always
            headers:
              description: Whether headers (a kernel build tree) are installed for it.
              type: bool
              returned: always
            module:
              description: The name under which an nvidia module is installed for it; V(null) when none is.
              type: str
              returned: always
              sample: nvidia-current
            module_version:
              description: The version of that module; V(null) when none is installed.
              type: str
              returned: always
              sample: 535.261.03
            modules_absent:
              description:
                - Those of O(other_modules) that the kernel's C(modules.dep) does not list; V(null) when the kernel
                  has no C(modules.dep).
              type: list
              elements: str
              returned: always
              sample: [ib_umad]
        running_sig_key:
          description: The key id the running kernel's driver module is signed with (C(modinfo -F sig_key)); V(null) unsigned.
          type: str
          returned: when O(staged_kernels) is set
          sample: 5A:1B:...
        staged:
          description: One entry per release of O(staged_kernels), in that order.
          type: list
          elements: dict
          returned: when O(staged_kernels) is set
          contains:
            release:
              description: The kernel release.
              type: str
              returned: always
            bootable:
              description: Whether its image is installed (C(/boot/vmlinuz-<release>)).
              type: bool
              returned: always
            headers:
              description: Whether C(/lib/modules/<release>/build/Makefile) exists.
              type: bool
              returned: always
            module:
              description: Which of O(kernel_modules) its module index has.
              type: str
              returned: always
            module_version:
              description: The version of that module; V(null) when none is built or installed for it.
              type: str
              returned: always
            sig_key:
              description: The key id that module is signed with; V(null) when unsigned or absent.
              type: str
              returned: always
    dkms:
      description: C(dkms status) entries; V(null) when DKMS is not installed.
      type: list
      elements: dict
      returned: always
      contains:
        module:
          description: The DKMS module name.
          type: str
          returned: always
          sample: nvidia-current
        version:
          description: The module version.
          type: str
          returned: always
          sample: 535.261.03
        kernel:
          description: The kernel the entry is for; V(null) for a module only added.
          type: str
          returned: always
        arch:
          description: The architecture; V(null) for a module only added.
          type: str
          returned: always
        state:
          description: C(added), C(built) or C(installed).
          type: str
          returned: always
    secure_boot:
      description: UEFI Secure Boot, from the EFI variables.
      type: dict
      returned: always
      contains:
        efi:
          description: Whether the node booted through UEFI (V(false) in most containers).
          type: bool
          returned: always
        enabled:
          description: Whether Secure Boot is enforcing.
          type: bool
          returned: always
        setup_mode:
          description: Whether the firmware is in setup mode.
          type: bool
          returned: always
        mok_certificates_sha256:
          description: SHA-256 of every X.509 certificate enrolled as a Machine Owner Key (C(MokListRT)).
          type: list
          elements: str
          returned: always
        mok_certificate:
          description: O(mok_certificate) as given.
          type: str
          returned: always
        mok_certificate_sha256:
          description: SHA-256 of that certificate in DER; V(null) when it does not exist.
          type: str
          returned: always
        mok_certificate_enrolled:
          description: Whether that certificate is enrolled; V(null) when none was given or it does not exist.
          type: bool
          returned: always
    container:
      description: The container manager the node runs under (C(podman), C(docker), ...); V(null) on a host or VM.
      type: str
      returned: always
      sample: podman
    nvswitches:
      description: PCI addresses of NVIDIA bridge devices (how NVSwitches enumerate).
      type: list
      elements: str
      returned: always
      sample: ["0000:07:00.0"]
    vgpu_guest:
      description:
        - Whether the node is a vGPU guest, by GPU Feature Discovery's rule (an NVIDIA PCI function with NVIDIA's
          vGPU vendor capability); the kernel-module flavour rule then applies its vGPU rows.
        - V(null) when the functions' configuration could not be read (it needs root).
      type: bool
      returned: always
      sample: false
    nouveau_loaded:
      description: Whether the nouveau kernel module is loaded.
      type: bool
      returned: always
    other_modules_loaded:
      description: Those of O(other_modules) that are loaded now (C(/proc/modules)).
      type: list
      elements: str
      returned: always
      sample: [ib_umad, mlx5_ib]
    files:
      description: For every path of O(files), whether it exists, its mode and its content.
      type: dict
      returned: always
      sample: {"/etc/modprobe.d/gpufleet-blacklist-nouveau.conf": {"exists": true, "mode": "0644", "content": "blacklist nouveau\n"}}
    units:
      description: For every unit of O(units), C(enabled) and C(active) as systemctl reports them.
      type: dict
      returned: always
      sample: {"nvidia-persistenced": {"enabled": "enabled", "active": "inactive"}}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._driver_state import DriverStateReader


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type="list", elements="str", default=["*nvidia*", "libcuda*", "cuda-drivers*", "nvlsm*"]),
            kernel_modules=dict(type="list", elements="str", default=["nvidia", "nvidia-current"]),
            other_modules=dict(type="list", elements="str", default=[]),
            mok_certificate=dict(type="path"),
            files=dict(type="list", elements="path", default=[]),
            units=dict(type="list", elements="str", default=[]),
            staged_kernels=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )

    def run(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv, environ_update={"LC_ALL": "C"})

    reader = DriverStateReader(run)
    try:
        state = reader.read(
            module.params["packages"],
            module.params["kernel_modules"],
            module.params["mok_certificate"],
            module.params["files"],
            module.params["units"],
            module.params["other_modules"],
            module.params["staged_kernels"],
        )
    except RuntimeError as err:
        module.fail_json(msg=str(err))
    module.exit_json(changed=False, driver=state)


if __name__ == "__main__":
    main()
