#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The documentation of the pinned_artifacts action plugin (plugins/action/pinned_artifacts.py);
# it runs on the controller only, so there is no module code.

from __future__ import annotations

DOCUMENTATION = r"""
module: pinned_artifacts
short_description: Resolve every pinned artifact of a run against its source before any layer changes a node
version_added: 0.1.0
description:
  - The preflight role's check that what the layers will install exists where they will fetch it, so that a bad pin,
    a missing release or a mirror that is down stops the run before the driver, toolkit or runtime layers change a
    node.
  - With O(layers), plans one host (no network) - the Container Toolkit's packages at C(container_toolkit_version)
    from its apt repository as the container_toolkit role configures it (C(container_toolkit_apt_repo_url), the
    node's architecture), crictl's release under C(crictl_download_url) with its C(.sha256) (or the digest in the
    crictl role's table), the signing keys the layers fetch (C(container_toolkit_gpg_key_url),
    C(driver_cuda_repo_key_url) or the CUDA repository's own key, C(driver_distribution_key_url)), the driver's
    repository as the driver role builds it from the node's facts (the CUDA repository's C(InRelease), or
    C(dists/<suite>/InRelease) of each suite under C(driver_distribution_mirror_url)), and C(mig_label) against its
    mig-parted config - only for the layers the run applies (P(gpufleet.nvidia.declared_layers#lookup), narrowed by
    O(applied)). Settings come from the host's variables, else the layer role's defaults; the driver role's
    OS-specific data is read from its own C(vars/) files.
  - With O(plans), resolves the plans of many hosts at once (run it with C(run_once)), fetching each distinct source
    once - one request per source for the whole play, whatever the fleet's size. Toolkit versions are read from the
    repository's C(Packages) index over HTTP rather than with C(apt-cache) on the node, because the node does not
    have the repository configured before the toolkit layer adds it, and preflight must not add it.
  - Each error names the variable, what the source offers (newest first), and the fix; a source that does not
    answer is named by its variable and URL, a key URL that answers with something else than an OpenPGP key, and a
    suite the mirror does not have (HTTP 404), as such. Repositories and keys are read only as far as their first
    bytes; a distribution's C(Packages) index is never downloaded.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.info_module
  - gpufleet.nvidia.attributes.internal
options:
  applied:
    description:
      - The layers the playbook applies, when it applies only some (C(upgrade.yml)'s C(upgrade_layers)); the sources
        of the other layers are not planned. Left out, every managed layer is (plan step).
    type: list
    elements: str
  layers:
    description: The P(gpufleet.nvidia.declared_layers#lookup) lookup's answer for the host (plan step).
    type: dict
  mig_config:
    description: The content of C(mig_config_src) when the host declares a config file rather than an inline one.
    type: raw
  plans:
    description: The C(plan) each host's plan step returned, by host (resolve step).
    type: dict
notes:
  - Runs on the controller; sources are fetched from it with certificate validation and the controller's proxy
    settings. Toolkit versions are resolved for Debian-family nodes (apt); other families are left to the toolkit
    layer. The driver's packages are resolved by the driver layer, the first layer that changes a node, before it
    changes anything; here only its repository and key are checked.
requirements:
  - The controller reaches the sources the nodes install from (the same mirror URLs).
"""

EXAMPLES = r"""
- name: Plan this host's pinned artifacts
  gpufleet.nvidia.pinned_artifacts:
    layers: "{{ lookup('gpufleet.nvidia.declared_layers') }}"
  register: artifacts_plan

- name: Resolve all hosts' artifacts, one request per source
  gpufleet.nvidia.pinned_artifacts:
    plans: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'artifacts_plan'))) }}"
  run_once: true
  register: artifacts
"""

RETURN = r"""
plan:
  description: The host's plan (plan step).
  returned: with O(layers)
  type: dict
  contains:
    checks:
      description: Each artifact with its source (kind, URL, the variable naming it) and what must be there.
      type: list
      elements: dict
    errors:
      description: Errors found without a source (a crictl release without a digest, an unknown mig_label).
      type: list
      elements: str
    skipped:
      description: Artifacts that are not resolved here, and why.
      type: list
      elements: str
hosts:
  description: Per host, the errors (empty when every artifact resolved), what was resolved, and what was skipped.
  returned: with O(plans)
  type: dict
  sample:
    gpu-07:
      errors:
        - >-
          container_toolkit_version 1.99.0 is not offered by the toolkit repository
          http://mirror/libnvidia-container/stable/deb/amd64 (container_toolkit_apt_repo_url):
          nvidia-container-toolkit-base has 1.20.1, 1.17.8; set container_toolkit_version to one of them
      resolved: []
      skipped: []
fetched:
  description: The sources fetched (kind and URL), each once.
  returned: with O(plans)
  type: list
  elements: str
"""
