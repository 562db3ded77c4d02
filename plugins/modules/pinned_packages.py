#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The documentation of the pinned_packages action plugin (plugins/action/pinned_packages.py), which runs the
# modules it names on the node; there is no module code of its own.

from __future__ import annotations

DOCUMENTATION = r"""
module: pinned_packages
short_description: Install a vendor's packages at one exact version from its key-pinned repository, and hold them
version_added: 0.1.0
description:
  - The step the container_toolkit and dcgm roles share, for apt and dnf - the repository with its key checked
    against a pinned fingerprint, every package of O(packages) at O(version), and the hold (apt) or version lock
    (dnf) that keeps unattended upgrades from moving them.
  - The decisions are made on the controller (C(plugins/plugin_utils/_pinned.py)); the node runs the collection's
    own modules and ansible-core's, each with the task's check and diff modes.
  - On apt it is two calls, a fresh install as a run with nothing to do - M(gpufleet.nvidia.apt_signed_source)
    (the key fetched and checked, the repository asked, then both written), then M(gpufleet.nvidia.apt_install),
    which reads dpkg's state, installs what is not at O(version), and holds (or with O(hold=false) releases) the
    packages in the same call.
  - On dnf it reads the packages and the locks with one M(gpufleet.nvidia.node_reads_info) call, imports the key
    with M(ansible.builtin.rpm_key) (pinned by fingerprint), writes the repository with
    M(ansible.builtin.yum_repository), releases the locks of packages about to change (dnf refuses to move a locked
    package), installs with M(ansible.builtin.dnf) and locks the set again with C(dnf versionlock), installing
    dnf's versionlock plugin when locks are wanted.
  - Every failure is the owner's - its message starts with O(owner) and ends with O(hints).
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.internal
attributes:
  check_mode:
    support: full
    details:
      - Each module runs in check mode. When the repository is new (predicted, not written) its packages cannot be
        rehearsed, so the install of what is not at O(version) is predicted from the package database and
        RV(rehearsed) is V(false).
  diff_mode:
    support: full
    details:
      - The sources file's text, the key's fingerprint and the packages before and after, with their holds; never a
        credential.
  idempotent:
    support: full
options:
  owner:
    description: The calling role's name; it starts every message.
    type: str
    required: true
  manager:
    description: The node's package manager.
    type: str
    choices: [apt, dnf]
    required: true
  packages:
    description: The package names, in install order.
    type: list
    elements: str
    required: true
  version:
    description: The exact version of every package, as the package manager spells it (apt's C(1:4.5.3-1), dnf's C(4.5.3-1)).
    type: str
    required: true
  hold:
    description: Hold (apt) or lock (dnf) the packages at O(version); V(false) releases the holds and locks they have.
    type: bool
    default: true
  repository:
    description:
      - The vendor's repository. Left out, the site provides it, and nothing is written.
      - C(key_url), C(key_fingerprint) (an empty one is refused unless C(allow_unpinned_key)), C(allow_unpinned_key).
      - apt - C(key_path), C(sources_path), C(sources_content) (which names C(key_path) in C(Signed-By)),
        C(release_url), C(auth_login) and C(auth_password) (apt's C(auth.conf.d), mode C(0600)).
      - dnf - C(id), C(description), C(baseurl), C(repomd_url) (asked before anything is written, when a package
        must come from it).
    type: dict
  hints:
    description: What the user should check when the repository or the install fails, naming the role's variables.
    type: str
    default: ""
  lists_valid_time:
    description: Seconds a full refresh of apt's lists stays good (M(gpufleet.nvidia.apt_install)'s O(gpufleet.nvidia.apt_install#module:lists_valid_time)).
    type: int
    default: 3600
notes:
  - A failed install leaves the packages as apt or dnf left them; the holds of what did not change are kept.
requirements:
  - apt - Python 3.8 or later, C(gpg), C(apt-get) and C(dpkg-query) on the node.
  - dnf - C(rpm) and C(dnf) on the node.
"""

EXAMPLES = r"""
- name: Install the Container Toolkit from its key-pinned repository, held at 1.20.1-1
  gpufleet.nvidia.pinned_packages:
    owner: container_toolkit
    manager: "{{ 'dnf' if ansible_facts['os_family'] == 'RedHat' else 'apt' }}"
    packages: [nvidia-container-toolkit-base, libnvidia-container1, libnvidia-container-tools, nvidia-container-toolkit]
    version: 1.20.1-1
    # key_url, key_fingerprint and, for apt, key_path, sources_path, sources_content (naming key_path in
    # Signed-By) and release_url; for dnf, id, baseurl and repomd_url.
    repository: "{{ toolkit_repository }}"
    hints: Check container_toolkit_apt_repo_url and container_toolkit_gpg_key_url.

- name: Install DCGM from the source the site provides, without holds
  gpufleet.nvidia.pinned_packages:
    owner: dcgm
    manager: apt
    packages: [datacenter-gpu-manager-4-core, datacenter-gpu-manager-4-cuda12]
    version: "1:4.5.3-1"
    hold: false
"""

RETURN = r"""
changed_packages:
  description: The packages whose version changed, or would.
  type: list
  elements: str
  returned: always
  sample: [libnvidia-container1, nvidia-container-toolkit]
held_packages:
  description: The packages newly held or locked, or that would be.
  type: list
  elements: str
  returned: always
  sample: [nvidia-container-toolkit]
released_packages:
  description: With O(hold=false), the packages whose hold or lock was released, or would be.
  type: list
  elements: str
  returned: always
  sample: []
changed_paths:
  description: apt - the repository's files that changed (key, sources, credentials), or would.
  type: list
  elements: str
  returned: always
  sample: [/etc/apt/sources.list.d/nvidia-container-toolkit.sources]
rehearsed:
  description: V(false) when check mode predicted the install without asking the package manager (the repository is new).
  type: bool
  returned: always
  sample: true
fingerprint:
  description: apt - the repository key's fingerprint, as checked.
  type: str
  returned: when the repository is managed on apt
  sample: C95B321B61E88C1809C4F759DDCAE044F796ECB0
"""
