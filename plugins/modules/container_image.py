#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: container_image
short_description: Make a pinned image present in the node's container engine, from an archive or a registry
version_added: 0.1.0
description:
  - Makes O(image) present where the engine's workloads look for it - containerd's C(k8s.io) namespace, which CRI
    uses, or Docker's image store. A node that already has it is left alone.
  - From O(archive) (an OCI archive, as the offline bundle carries images) with C(ctr -n k8s.io images import) or
    C(docker load); nothing is pulled then. A reference pinned by digest must match the archive's manifest digest,
    and containerd then also names the image by that reference, as a pull by digest would, so CRI resolves it.
  - Without an archive, pulls it through the engine (the site's registry) when O(pull=true).
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.attributes.internal
options:
  engine:
    description: The engine.
    type: str
    required: true
    choices: [containerd, docker]
  image:
    description: The reference, pinned by digest (C(name@sha256:...)) or by name and tag.
    type: str
    required: true
  archive:
    description: An OCI archive on the node that holds the image.
    type: path
  pull:
    description: Pull the image when it is missing and no archive is given.
    type: bool
    default: false
requirements:
  - ctr (containerd), crictl to pull through CRI, or docker.
"""

EXAMPLES = r"""
- name: Make the pinned pause image present for containerd's pods
  gpufleet.nvidia.container_image:
    engine: containerd
    image: "{{ site_registry }}/pause:3.10@sha256:0123..."
    archive: /var/lib/gpufleet/images/pause-3.10.oci.tar
"""

RETURN = r"""
local:
  description: The reference the engine knows the image by (Docker - the image ID, for a loaded pinned image).
  type: str
  returned: always
imported:
  description: Whether the archive was imported.
  type: bool
  returned: always
pulled:
  description: Whether the image was pulled.
  type: bool
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._container_engine import ENGINES, RunFailed, program_finder


class ContainerImage:
    """One image, present or made present."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.params = module.params
        self.engine = ENGINES[self.params["engine"]](
            {"engine": self.params["engine"], "endpoint": "", "runtime_handler": "", "hold_command": [], "timeout": 60}, program_finder(module.get_bin_path)
        )

    def run(self) -> dict[str, object]:
        image = self.engine.ensure(self.params["image"], self.params["archive"], self.params["pull"], self.module.check_mode)
        # Check mode imports nothing: an image that is not there would be.
        changed = image["imported"] or image["pulled"] or not image["present"]
        return {"changed": changed, "local": image["local"], "imported": image["imported"], "pulled": image["pulled"]}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "engine": {"type": "str", "required": True, "choices": ["containerd", "docker"]},
            "image": {"type": "str", "required": True},
            "archive": {"type": "path"},
            "pull": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**ContainerImage(module).run())
    except RunFailed as exc:
        module.fail_json(msg="image {0}: {1}".format(module.params["image"], exc))


if __name__ == "__main__":
    main()
