#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: containerd_drop_in
short_description: Add container runtimes to containerd through a drop-in file and one C(imports) entry
version_added: 0.1.0
description:
  - Writes a containerd drop-in (by default C(/etc/containerd/conf.d/99-nvidia.toml)) that adds runtimes such as
    C(nvidia), optionally makes one the default and turns CDI on, and makes sure the main config imports it.
  - The main config is never rewritten. The only change ever made to it is one element appended to its top-level
    C(imports) array (or one C(imports) line added after C(version)); every other byte, comments included, stays as
    it was. An C(imports) glob that already covers the drop-in counts as the import.
  - containerd before 2.0 replaces a plugin's whole table when it loads an imported file. With
    O(plugin_merge=replace) the drop-in therefore repeats the CRI plugin table that the other files configure (as the
    NVIDIA Container Toolkit's own drop-ins do) and adds the runtimes to it, so the effective configuration keeps
    the registry, CNI and runtime settings of the other files. With O(plugin_merge=deep) (containerd 2.0 and later)
    the drop-in holds only its own settings.
  - The new runtimes copy the options of the default runc runtime (for example C(SystemdCgroup)) so that they use
    the same cgroup driver.
  - After writing, C(containerd config dump) must accept the new files; if it does not, both files are put back as
    they were and the module fails with containerd's message. Restarting containerd is left to the caller.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
options:
  config_path:
    description: The main containerd configuration file. It is created (with O(config_version)) when missing.
    type: path
    default: /etc/containerd/config.toml
  drop_in_path:
    description: The drop-in this module owns. Its directory is created when missing.
    type: path
    default: /etc/containerd/conf.d/99-nvidia.toml
  config_version:
    description:
      - The containerd config version of the drop-in (and of a main config created from nothing).
      - V(2) for containerd 1.x, V(3) for containerd 2.0 to 2.2, V(4) for containerd 2.3 and later. containerd 2.x
        also reads files of older versions.
    type: int
    choices: [2, 3, 4]
    required: true
  plugin_merge:
    description:
      - How this containerd merges the plugin tables of imported files.
      - V(replace) for containerd before 2.0 (an imported table replaces the whole plugin table), V(deep) for 2.0
        and later.
    type: str
    choices: [replace, deep]
    required: true
  runtimes:
    description: The runtimes to add, each a runc-compatible OCI runtime binary.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The runtime name (the CRI runtime handler and Kubernetes RuntimeClass handler).
        type: str
        required: true
      path:
        description: The runtime binary, written as the runc options' C(BinaryName).
        type: path
        required: true
  default_runtime:
    description: The name of one of O(runtimes) to make containerd's default runtime; unset leaves the default alone.
    type: str
  enable_cdi:
    description:
      - Write C(enable_cdi) with this value; unset leaves containerd's default (off in 1.7, on from 2.0).
      - containerd 1.6 has no CDI support; do not set it there.
    type: bool
  cdi_spec_dirs:
    description: The CDI spec directories, written with O(enable_cdi=true).
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  plugin_settings:
    description:
      - Further settings merged into the drop-in's CRI plugin table (C(io.containerd.grpc.v1.cri) for version 2,
        C(io.containerd.cri.v1.runtime) for versions 3 and 4).
      - 'For example C({"device_ownership_from_security_context": true}).'
      - They win over the other files' values.
    type: dict
    default: {}
  sandbox_image:
    description:
      - The pod sandbox (pause) image CRI starts every pod with, pinned by digest. Written to C(sandbox_image) of
        the CRI table (version 2) or C(pinned_images.sandbox) of C(io.containerd.cri.v1.images) (versions 3 and 4).
      - Empty leaves the other files' setting, or containerd's default, which is pulled from its public registry.
    type: str
    default: ""
  comment:
    description: Text written at the top of the drop-in, each line as a TOML comment.
    type: str
    default: ""
  mode:
    description: The drop-in's file mode. It may repeat registry credentials from the main config, hence owner-only.
    type: raw
    default: "0600"
  validate:
    description: Run C(containerd config dump) on the new files and restore the old ones if containerd refuses them.
    type: bool
    default: true
  containerd_path:
    description:
      - The containerd binary. It is asked for its built-in defaults (C(containerd config default)), and runs
        O(validate).
    type: path
    default: containerd
notes:
  - Diffs show only the top-level settings of the main config, and registry credentials are redacted in the
    drop-in's diff.
requirements:
  - Python 3.8 or later on the target (standard library only).
seealso:
  - name: containerd configuration
    description: Config versions, imports and the CRI plugin settings.
    link: https://github.com/containerd/containerd/blob/main/docs/man/containerd-config.toml.5.md
"""

EXAMPLES = r"""
- name: Add the nvidia runtime to containerd 1.7 with CDI on
  gpufleet.nvidia.containerd_drop_in:
    config_version: 2
    plugin_merge: replace
    runtimes:
      - name: nvidia
        path: /usr/bin/nvidia-container-runtime
    enable_cdi: true
  register: drop_in

- name: containerd 2.x, nvidia as the default runtime
  gpufleet.nvidia.containerd_drop_in:
    config_version: 3
    plugin_merge: deep
    runtimes:
      - {name: nvidia, path: /usr/bin/nvidia-container-runtime}
      - {name: nvidia-cdi, path: /usr/bin/nvidia-container-runtime.cdi}
    default_runtime: nvidia
"""

RETURN = r"""
config_changed:
  description: Whether the main config got (or in check mode would get) the import.
  type: bool
  returned: always
  sample: true
drop_in_changed:
  description: Whether the drop-in was (or would be) written.
  type: bool
  returned: always
  sample: true
config_created:
  description: Whether the main config did not exist and was (or would be) created.
  type: bool
  returned: always
  sample: false
backup_file:
  description: A copy of the main config as it was before this run, when it was changed.
  type: str
  returned: when the main config existed and was changed
  sample: /etc/containerd/config.toml.1234.2026-01-01@00:00:00~
drop_in_backup:
  description: A copy of the drop-in as it was before this run, when an older one was replaced.
  type: str
  returned: when an existing drop-in was changed
  sample: /etc/containerd/conf.d/99-nvidia.toml.1234.2026-01-01@00:00:00~
drop_in:
  description: The drop-in's content as data.
  type: dict
  returned: always
effective:
  description:
    - What C(containerd config dump) reports (all files and containerd's defaults together), after the change.
    - V(null) when O(validate=false), and in check mode when a change is predicted.
  type: dict
  returned: always
  contains:
    config_version:
      description: The config version containerd works with.
      type: int
      sample: 3
    address:
      description: containerd's gRPC socket.
      type: str
      sample: /run/containerd/containerd.sock
    default_runtime:
      description: The default runtime name.
      type: str
      sample: runc
    runtimes:
      description: Every runtime by name, with its C(runtime_type) and the C(BinaryName) option as C(binary).
      type: dict
      sample: {nvidia: {runtime_type: io.containerd.runc.v2, binary: /usr/bin/nvidia-container-runtime}}
    enable_cdi:
      description: Whether CDI is on; V(null) when this containerd has no such setting.
      type: bool
      sample: true
    cdi_spec_dirs:
      description: The CDI spec directories.
      type: list
      elements: str
      sample: [/etc/cdi, /var/run/cdi]
"""

import os
import tempfile
import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._containerd import (
    MERGE_REPLACE,
    ContainerdConfigError,
    DropInSpec,
    drop_in_data,
    effective_view,
    import_covers,
    load_chain,
    merge,
    preamble,
    redact,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._durable import sync_directory, sync_file
from ansible_collections.gpufleet.nvidia.plugins.module_utils._toml import (
    TomlError,
    TomlNullError,
    add_to_top_level_array,
    dumps,
    loads,
)


class ContainerdDropIn:
    """Desired vs actual for the main config's import and our drop-in."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        p = module.params
        self.config_path: str = p["config_path"]
        self.drop_in_path: str = p["drop_in_path"]
        names = [r["name"] for r in p["runtimes"]]
        if len(set(names)) != len(names):
            module.fail_json(msg="runtimes: each runtime name may appear once, got {0}".format(names))
        if p["default_runtime"] and p["default_runtime"] not in names:
            module.fail_json(
                msg="default_runtime: '{0}' is not one of the runtimes {1}; add it to runtimes or leave default_runtime unset".format(
                    p["default_runtime"], names
                )
            )
        self.spec = DropInSpec(
            config_version=p["config_version"],
            plugin_merge=p["plugin_merge"],
            runtimes=[(r["name"], r["path"]) for r in p["runtimes"]],
            default_runtime=p["default_runtime"],
            enable_cdi=p["enable_cdi"],
            cdi_spec_dirs=p["cdi_spec_dirs"],
            plugin_settings=p["plugin_settings"],
            sandbox_image=p["sandbox_image"] or None,
        )

    # -- reading ------------------------------------------------------------------------------
    @staticmethod
    def _read(path: str) -> str | None:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def desired_config(self, current: str | None) -> str:
        """The main config with our import, or a new minimal one."""
        import_line = 'imports = ["{0}"]\n'.format(self.drop_in_path)
        if current is None:
            return "version = {0}\n{1}".format(self.spec.config_version, import_line)
        try:
            data = loads(current)
        except TomlError as err:
            raise ContainerdConfigError(
                "{0} is not valid TOML ({1}); containerd cannot start with it either, fix it first".format(self.config_path, err)
            ) from None
        version = int(data.get("version") or 1)
        if version > self.spec.config_version:
            raise ContainerdConfigError(
                "{0} is config version {1}, newer than this containerd reads (config_version={2})".format(self.config_path, version, self.spec.config_version)
            )
        if version < 2 and data.get("plugins") and self.spec.plugin_merge == MERGE_REPLACE:
            raise ContainerdConfigError(
                "{0} is config version 1 (no 'version = 2' line); containerd 1.x cannot mix it with a version 2 "
                "drop-in. Convert it to version 2 first (containerd 1.x: 'containerd config default' shows the "
                "layout)".format(self.config_path)
            )
        imports = data.get("imports") or []
        if not isinstance(imports, list):
            raise ContainerdConfigError("{0}: 'imports' must be an array".format(self.config_path))
        if import_covers(self.config_path, imports, self.drop_in_path):
            return current
        return add_to_top_level_array(current, "imports", self.drop_in_path, after="version")

    def defaults(self) -> dict[str, t.Any]:
        rc, out, err = self.module.run_command([self.module.params["containerd_path"], "config", "default"])
        if rc != 0:
            raise ContainerdConfigError("'{0} config default' failed: {1}".format(self.module.params["containerd_path"], (err or out).strip()))
        try:
            return loads(out)
        except TomlError as err:
            raise ContainerdConfigError("could not read 'containerd config default' output: {0}".format(err)) from None

    def desired_drop_in(self) -> tuple[dict[str, t.Any], str]:
        chain = load_chain(self.config_path, skip=self.drop_in_path)
        data = drop_in_data(merge(chain, self.spec.plugin_merge), self.spec, self.defaults())
        header = "".join("# {0}\n".format(line).replace("# \n", "#\n") for line in self.module.params["comment"].splitlines())
        try:
            text = dumps(data)
        except TomlNullError as err:
            # Only plugin_settings can hold a None (the other files are TOML, which has none).
            raise ContainerdConfigError("plugin_settings: {0}".format(err)) from None
        return data, header + ("\n" if header else "") + text

    # -- writing ------------------------------------------------------------------------------
    def _write(self, path: str, text: str, mode: t.Any = None) -> None:
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".gpufleet-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            # containerd reads it at every start: data and rename both down to the disk.
            sync_file(handle)
        self.module.atomic_move(tmp, path)
        sync_directory(directory)
        if mode is not None:
            self.module.set_mode_if_different(path, mode, False)

    def _restore(self, path: str, text: str | None) -> None:
        if text is None:
            if os.path.exists(path):
                os.unlink(path)
        else:
            self._write(path, text)

    def _dump(self) -> dict[str, t.Any]:
        rc, out, err = self.module.run_command([self.module.params["containerd_path"], "--config", self.config_path, "config", "dump"])
        if rc != 0:
            raise ContainerdConfigError((err or out).strip() or "containerd config dump exited with {0}".format(rc))
        try:
            return effective_view(loads(out))
        except TomlError as err:
            raise ContainerdConfigError("could not read containerd config dump output: {0}".format(err)) from None

    # -- the run --------------------------------------------------------------------------------
    def run(self) -> dict[str, t.Any]:
        config_before = self._read(self.config_path)
        drop_in_before = self._read(self.drop_in_path)
        config_after = self.desired_config(config_before)
        data, drop_in_after = self.desired_drop_in()

        config_changed = config_after != config_before
        drop_in_changed = drop_in_after != drop_in_before
        result: dict[str, t.Any] = {
            "changed": config_changed or drop_in_changed,
            "config_changed": config_changed,
            "config_created": config_before is None,
            "drop_in_changed": drop_in_changed,
            "drop_in": data,
            "effective": None,
        }
        if drop_in_before is not None and not drop_in_changed:
            # Content right, mode maybe not (set_mode_if_different honours check mode).
            result["changed"] = self.module.set_mode_if_different(self.drop_in_path, self.module.params["mode"], result["changed"])
        if self.module._diff:
            result["diff"] = [
                {
                    "before_header": self.config_path + " (top-level settings)",
                    "after_header": self.config_path + " (top-level settings)",
                    "before": preamble(config_before or ""),
                    "after": preamble(config_after),
                },
                {"before_header": self.drop_in_path, "after_header": self.drop_in_path, "before": redact(drop_in_before or ""), "after": redact(drop_in_after)},
            ]
        if self.module.check_mode:
            if not result["changed"] and self.module.params["validate"]:
                result["effective"] = self._dump()
            return result

        if config_changed and config_before is not None:
            result["backup_file"] = self.module.backup_local(self.config_path)
        if drop_in_changed and drop_in_before is not None:
            result["drop_in_backup"] = self.module.backup_local(self.drop_in_path)
        try:
            if drop_in_changed:
                self._write(self.drop_in_path, drop_in_after, self.module.params["mode"])
            if config_changed:
                self._write(self.config_path, config_after, None if config_before is not None else "0644")
            if self.module.params["validate"] and (config_changed or drop_in_changed):
                result["effective"] = self._dump()
        except (ContainerdConfigError, OSError) as err:
            self._restore(self.config_path, config_before)
            self._restore(self.drop_in_path, drop_in_before)
            raise ContainerdConfigError("containerd refused the new configuration, the previous files are back in place: {0}".format(err)) from None
        if self.module.params["validate"] and result["effective"] is None:
            result["effective"] = self._dump()
        return result


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            config_path=dict(type="path", default="/etc/containerd/config.toml"),
            drop_in_path=dict(type="path", default="/etc/containerd/conf.d/99-nvidia.toml"),
            config_version=dict(type="int", choices=[2, 3, 4], required=True),
            plugin_merge=dict(type="str", choices=["replace", "deep"], required=True),
            runtimes=dict(
                type="list",
                elements="dict",
                required=True,
                options=dict(
                    name=dict(type="str", required=True),
                    path=dict(type="path", required=True),
                ),
            ),
            default_runtime=dict(type="str"),
            enable_cdi=dict(type="bool"),
            cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
            plugin_settings=dict(type="dict", default={}),
            sandbox_image=dict(type="str", default=""),
            comment=dict(type="str", default=""),
            mode=dict(type="raw", default="0600"),
            validate=dict(type="bool", default=True),
            containerd_path=dict(type="path", default="containerd"),
        ),
        supports_check_mode=True,
    )
    try:
        result = ContainerdDropIn(module).run()
    except ContainerdConfigError as err:
        module.fail_json(msg=str(err))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
