#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: cdi_spec
short_description: Generate the NVIDIA CDI spec with nvidia-ctk and replace it only when it really changed
version_added: 0.1.0
description:
  - Runs C(nvidia-ctk cdi generate) into a private directory and checks the result the way the container runtime
    will load it, compares it semantically with the spec at O(path) (same content whatever the key order, formatting
    or device order) and replaces O(path) atomically only when they differ.
  - The check - C(nvidia-ctk cdi list) with C(--spec-dir) set to the private directory loads the new spec with the
    CDI library container runtimes use, and must list every device the spec defines (a spec that library refuses
    lists none). With O(schema) set and the C(jsonschema) Python package importable on the target, the spec must
    also match that JSON schema.
  - A spec at O(path) that cannot be read is replaced. A generation that fails, or a spec that fails either check,
    leaves O(path) untouched and fails the task with nvidia-ctk's or the schema's message.
  - The spec is generated in a private directory beside (not inside) the spec directory and renamed into place,
    so CDI consumers, which scan spec directories for C(*.yaml) and C(*.json), never see a half-written or second
    spec.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
options:
  path:
    description:
      - The spec file, for example C(/etc/cdi/nvidia.json). Its directory is created when missing.
      - It must end in C(.yaml) or C(.json), the only specs CDI consumers load.
    type: path
    required: true
  format:
    description:
      - The spec format; by default taken from the extension of O(path).
      - V(json) needs nothing but Python's standard library. V(yaml) needs PyYAML (C(python3-yaml)) on the target
        to read the spec; without it the module fails and says so.
    type: str
    choices: [yaml, json]
  device_name_strategy:
    description: How devices are named (C(--device-name-strategy), repeated); several strategies give several names.
    type: list
    elements: str
    choices: [index, uuid, type-index]
    default: [index, uuid]
  discovery_mode:
    description: C(--mode) of C(nvidia-ctk cdi generate).
    type: str
    default: auto
  driver_root:
    description: C(--driver-root), where the driver's files are (a driver container's root, for example).
    type: path
  dev_root:
    description: C(--dev-root), where the device nodes are.
    type: path
  extra_args:
    description: Further arguments for C(nvidia-ctk cdi generate).
    type: list
    elements: str
    default: []
  nvidia_ctk:
    description: The nvidia-ctk binary.
    type: path
    default: nvidia-ctk
  schema:
    description:
      - A JSON schema the generated spec must match, checked with the C(jsonschema) Python package (4.18 or later
        with C(referencing); older ones through their C(RefResolver)) when the target can import it. Without
        C(jsonschema) the schema is not checked; the C(nvidia-ctk cdi list) check still runs.
      - The cdi role passes the CDI project's own schema (C(schema.json)), which it ships.
    type: dict
  schema_resources:
    description:
      - The documents O(schema) refers to by C($ref), keyed by the URI its references use; the CDI schema refers
        to C(defs.json).
    type: dict
    default: {}
  mode:
    description: The spec's file mode.
    type: raw
    default: "0644"
notes:
  - A YAML spec is read with PyYAML only; there is no fallback reader, so a spec is never read differently from the
    way the CDI library reads it.
requirements:
  - Python 3.8 or later on the target; PyYAML for O(format=yaml); C(jsonschema) optional, for O(schema).
  - nvidia-ctk (NVIDIA Container Toolkit 1.15 or later - C(cdi list --spec-dir) and repeated
    C(--device-name-strategy)) and a loaded NVIDIA driver.
seealso:
  - name: CDI support in the NVIDIA Container Toolkit
    description: nvidia-ctk cdi generate and its options.
    link: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/cdi-support.html
"""

EXAMPLES = r"""
- name: Keep /etc/cdi/nvidia.json current, checked against the CDI schema where jsonschema is installed
  gpufleet.nvidia.cdi_spec:
    path: /etc/cdi/nvidia.json
    schema: "{{ lookup('ansible.builtin.file', 'cdi-schema/schema.json') | from_json }}"
    schema_resources:
      defs.json: "{{ lookup('ansible.builtin.file', 'cdi-schema/defs.json') | from_json }}"
  register: cdi

- name: Spec under /var/run/cdi, devices named by UUID only
  gpufleet.nvidia.cdi_spec:
    path: /var/run/cdi/nvidia.json
    device_name_strategy: [uuid]
"""

RETURN = r"""
devices:
  description: The device names in the generated spec, sorted.
  type: list
  elements: str
  returned: success
  sample: ["0", "1", "GPU-1824f1c1-4df9-5de1-d253-b56d51415799", "all"]
kind:
  description: The spec's kind.
  type: str
  returned: success
  sample: nvidia.com/gpu
cdi_version:
  description: The CDI spec version nvidia-ctk wrote.
  type: str
  returned: success
  sample: 0.5.0
checks:
  description: What the generated spec was checked with (the schema only where jsonschema is importable).
  type: list
  elements: str
  returned: success
  sample: ["JSON schema (jsonschema)", "nvidia-ctk cdi list"]
reason:
  description: Why the spec was (or would be) replaced, or why not.
  type: str
  returned: always
  sample: device list changed
"""

import errno
import json
import os
import shutil
import sys
import tempfile
import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._durable import sync_directory

# Optional on the target: PyYAML reads YAML specs (format=yaml), jsonschema
# checks the O(schema). Nothing stands in for either: a home-made reader or
# validator would judge the spec differently from the CDI library.
try:
    import yaml
except ImportError:
    yaml = None

try:
    import jsonschema
except ImportError:
    jsonschema = None

try:
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7
except ImportError:  # jsonschema before 4.18 (Debian 12 ships 4.10): RefResolver instead
    Registry = Resource = DRAFT7 = None


class CdiSpecError(Exception):
    """Generation or validation failed; the spec on disk was not touched."""


_READ_ERRORS: tuple[type[Exception], ...] = (ValueError,) + ((yaml.YAMLError,) if yaml is not None else ())


def read_spec(text: str, fmt: str) -> t.Any:
    """A spec's data: JSON with the standard library, YAML with PyYAML (the caller made sure it is there)."""
    if fmt == "json":
        return json.loads(text)
    return yaml.safe_load(text)


def schema_problem(data: t.Any, schema: dict[str, t.Any], resources: dict[str, t.Any]) -> str | None:
    """Why `data` breaks `schema` (JSON pointer and jsonschema's message), None when it matches.

    `resources` are the documents the schema's $refs name, by URI (the CDI
    schema's "defs.json#/definitions/..."). Only called with jsonschema importable.
    """
    cls = jsonschema.validators.validator_for(schema)
    if Registry is not None:
        registry = Registry().with_resources((uri, Resource.from_contents(doc, default_specification=DRAFT7)) for uri, doc in resources.items())
        validator = cls(schema, registry=registry)
    else:
        validator = cls(schema, resolver=jsonschema.RefResolver("", schema, store=dict(resources)))
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return None
    return "/{0}: {1}".format("/".join(str(p) for p in error.absolute_path), error.message)


def normalized(spec: t.Any) -> t.Any:
    """What makes two specs the same: devices compared as a set by name."""
    if not isinstance(spec, dict):
        return spec
    result = dict(spec)
    devices = spec.get("devices")
    if isinstance(devices, list) and all(isinstance(d, dict) for d in devices):
        result["devices"] = sorted(devices, key=lambda d: str(d.get("name")))
    return result


def describe(before: t.Any, after: t.Any) -> str:
    if not isinstance(before, dict):
        return "no spec before"
    if set(_names(before)) != set(_names(after)):
        return "device list changed"
    if before.get("cdiVersion") != after.get("cdiVersion"):
        return "CDI version changed"
    return "device edits changed"


def _names(spec: dict[str, t.Any]) -> list[str]:
    return sorted(str(d.get("name")) for d in spec.get("devices") or [] if isinstance(d, dict))


class CdiSpec:
    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        p = module.params
        self.path: str = p["path"]
        ext = os.path.splitext(self.path)[1].lstrip(".").lower()
        self.format: str = p["format"] or {"yml": "yaml", "yaml": "yaml", "json": "json"}.get(ext, "")
        if not self.format:
            module.fail_json(msg="path: {0} ends neither in .yaml nor .json, which is all CDI consumers load; rename it or set format".format(self.path))
        if ext not in ("yaml", "yml", "json"):
            module.fail_json(msg="path: CDI consumers only load *.yaml and *.json specs; {0} would be ignored".format(self.path))
        if self.format == "yaml" and yaml is None:
            module.fail_json(
                msg="format: a YAML spec ({0}) is read with PyYAML, which {1} on this node cannot "
                "import; use format json (cdi_format: json in the cdi role, its default) or "
                "install python3-yaml".format(self.path, sys.executable)
            )
        self.checks: list[str] = []

    def generate(self, workdir: str) -> tuple[str, t.Any]:
        """Generate into `workdir`; return the file and its data.

        nvidia-ctk appends the format's extension to an output name without
        one, and exits 0 even when it wrote nothing: so it writes a proper
        nvidia.<format> into a private directory and an empty result counts
        as a failure.
        """
        p = self.module.params
        out = os.path.join(workdir, "nvidia." + self.format)
        argv = [p["nvidia_ctk"], "--quiet", "cdi", "generate", "--output=" + out, "--format=" + self.format, "--mode=" + p["discovery_mode"]]
        argv += ["--device-name-strategy=" + s for s in p["device_name_strategy"]]
        if p["driver_root"]:
            argv.append("--driver-root=" + p["driver_root"])
        if p["dev_root"]:
            argv.append("--dev-root=" + p["dev_root"])
        argv += p["extra_args"]
        rc, stdout, stderr = self.module.run_command(argv)
        text = ""
        if os.path.exists(out):
            with open(out, encoding="utf-8") as handle:
                text = handle.read()
        if rc != 0 or not text.strip():
            raise CdiSpecError("nvidia-ctk cdi generate failed (rc={0}): {1}".format(rc, (stderr or stdout).strip() or "it wrote no spec"))
        try:
            data = read_spec(text, self.format)
        except _READ_ERRORS as exc:
            raise CdiSpecError("nvidia-ctk wrote a spec that cannot be read: {0}".format(exc)) from None
        if not isinstance(data, dict):
            raise CdiSpecError("nvidia-ctk wrote {0}, which is not a CDI spec (a mapping)".format(out))
        if p["schema"] and jsonschema is not None:
            problem = schema_problem(data, p["schema"], p["schema_resources"])
            if problem:
                raise CdiSpecError("the generated spec does not match the CDI schema: {0}".format(problem))
            self.checks.append("JSON schema (jsonschema)")
        self.check_loadable(workdir, data)
        return out, data

    def check_loadable(self, workdir: str, data: dict[str, t.Any]) -> None:
        """The spec loads in the CDI library as a container runtime loads it: `cdi list` lists all its devices.

        nvidia-ctk cdi list exits 0 even when the library refuses the spec: it
        then lists none of its devices and says why on stderr, so what counts
        is the list. The private directory holds this spec only.
        """
        argv = [self.module.params["nvidia_ctk"], "cdi", "list", "--spec-dir=" + workdir]
        rc, stdout, stderr = self.module.run_command(argv)
        if rc != 0:
            raise CdiSpecError(
                "nvidia-ctk cdi list failed (rc={0}), so the new spec cannot be checked the way a "
                "container runtime loads it (it needs NVIDIA Container Toolkit 1.15 or later): "
                "{1}".format(rc, (stderr or stdout).strip())
            )
        listed = {line.strip() for line in stdout.splitlines() if line.strip()}
        expected = ["{0}={1}".format(data.get("kind"), name) for name in _names(data)]
        missing = [name for name in expected if name not in listed]
        if missing or not expected:
            raise CdiSpecError(
                "the generated spec does not load as a container runtime would load it: nvidia-ctk cdi list does not list {0}; it said: {1}".format(
                    ", ".join(missing) or "any device", stderr.strip() or "nothing"
                )
            )
        self.checks.append("nvidia-ctk cdi list")

    def current(self) -> tuple[t.Any, str]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            return None, ""
        try:
            return read_spec(text, self.format), text
        except _READ_ERRORS:
            return {"unreadable": True}, text

    def run(self) -> dict[str, t.Any]:
        directory = os.path.dirname(self.path) or "."
        # The work directory sits beside the spec directory, not in it: CDI
        # consumers scan spec directories recursively for *.yaml and *.json.
        parent = os.path.dirname(os.path.abspath(directory))
        workdir = tempfile.mkdtemp(prefix=".gpufleet-cdi-", dir=parent if os.access(parent, os.W_OK) else None)
        try:
            return self._run(directory, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _run(self, directory: str, workdir: str) -> dict[str, t.Any]:
        generated, new = self.generate(workdir)
        before, before_text = self.current()
        with open(generated, encoding="utf-8") as handle:
            after_text = handle.read()
        same = before is not None and normalized(before) == normalized(new)
        result: dict[str, t.Any] = {
            "changed": not same,
            "devices": _names(new),
            "kind": new.get("kind"),
            "cdi_version": new.get("cdiVersion"),
            "checks": self.checks,
            "reason": "spec unchanged"
            if same
            else ("the spec on disk cannot be read" if isinstance(before, dict) and before.get("unreadable") else describe(before, new)),
        }
        if self.module._diff and not same:
            result["diff"] = {"before_header": self.path, "after_header": self.path, "before": before_text, "after": after_text}
        if same:
            # Content right, mode maybe not (set_mode_if_different honours check mode).
            result["changed"] = self.module.set_mode_if_different(self.path, self.module.params["mode"], False)
            return result
        if self.module.check_mode:
            return result
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        os.chmod(generated, 0o644)
        # The container engines read the spec at every start: its data and its rename both down to the disk.
        with open(generated, "rb") as handle:
            os.fsync(handle.fileno())
        try:
            os.rename(generated, self.path)  # atomic: same filesystem
        except OSError as err:
            if err.errno != errno.EXDEV:
                raise
            self.module.atomic_move(generated, self.path)
        sync_directory(directory)
        self.module.set_mode_if_different(self.path, self.module.params["mode"], False)
        return result


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            format=dict(type="str", choices=["yaml", "json"]),
            device_name_strategy=dict(type="list", elements="str", choices=["index", "uuid", "type-index"], default=["index", "uuid"]),
            discovery_mode=dict(type="str", default="auto"),
            driver_root=dict(type="path"),
            dev_root=dict(type="path"),
            extra_args=dict(type="list", elements="str", default=[]),
            nvidia_ctk=dict(type="path", default="nvidia-ctk"),
            schema=dict(type="dict"),
            schema_resources=dict(type="dict", default={}),
            mode=dict(type="raw", default="0644"),
        ),
        supports_check_mode=True,
    )
    try:
        result = CdiSpec(module).run()
    except CdiSpecError as err:
        module.fail_json(msg=str(err), reason=str(err))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
