# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The demo's inventory turns the workload check on, with the images the mirror serves.

`make demo` ends with verify's workload check: a container started through the demo node's containerd,
from the probe image, in a pod of the pause image. Neither comes from a registry: the test ground builds them
(tests/harness/workload-images.sh) and the mirror serves each archive under files/images/ beside its manifest
digest (.digest) and sha256 (.sha256). Here Ansible itself templates the inventory's values against a stand-in
for that mirror: both images pinned by the digests it publishes, both archives by its sha256s, under the
names the images were built with.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import sys
import threading
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import ROOT, ansible_env, playbook

INVENTORY = ROOT / "inventory" / "examples" / "simulated"
WORKLOAD_IMAGES = ROOT / "tests" / "harness" / "workload-images.sh"
NAMES = (
    "verify_workload",
    "verify_workload_pull",
    "verify_workload_image",
    "verify_workload_image_archive_url",
    "verify_workload_image_archive_checksum",
    "container_runtime_sandbox_image",
    "container_runtime_sandbox_image_archive_url",
    "container_runtime_sandbox_image_archive_checksum",
)
PLAY = """\
- name: Template the workload check's variables as the roles would read them
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Write them on the controller
      ansible.builtin.copy:
        content: "{{ dict(names | zip(names | map('extract', hostvars[inventory_hostname]))) | to_json }}"
        dest: "{{ out }}"
        mode: "0600"
      delegate_to: localhost
      vars:
        names: %s
"""


def built_refs() -> dict[str, str]:
    """The image references workload-images.sh builds, without their prefix: {"pause": "pause:3.10-gpufleet", ...}."""
    refs = re.findall(r'^(?:PAUSE|PROBE)_REF="\$GPUFLEET_IMAGE_PREFIX/([^"]+)"$', WORKLOAD_IMAGES.read_text(), re.MULTILINE)
    assert len(refs) == 2, refs
    return {ref.split(":")[0]: ref for ref in refs}


def archive(ref: str) -> str:
    """The archive workload-images.sh saves an image to: <name>-<tag>.oci.tar."""
    name, tag = ref.split(":")
    return "{0}-{1}.oci.tar".format(name, tag)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: t.Any) -> None:
        pass


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> t.Iterator[tuple[str, dict[str, dict[str, str]]]]:
    """A stand-in mirror serving files/images/ as mirror.py add-file lays it out; its URL and what it serves."""
    root = tmp_path_factory.mktemp("mirror")
    images = root / "files" / "images"
    images.mkdir(parents=True)
    published = {}
    for n, (name, ref) in enumerate(sorted(built_refs().items())):
        digest, sha256 = "sha256:" + str(n) * 64, "{0:x}".format(10 + n) * 64
        (images / (archive(ref) + ".digest")).write_text(digest + "\n")
        (images / (archive(ref) + ".sha256")).write_text(sha256 + "\n")
        published[name] = {"digest": digest, "sha256": sha256}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:{0}".format(server.server_address[1]), published
    server.shutdown()


def templated(tmp_path: Path, mirror_url: str, **env: str) -> dict[str, t.Any]:
    book, out = tmp_path / "workload-vars.yml", tmp_path / "workload-vars.json"
    book.write_text(PLAY % json.dumps(list(NAMES)))
    options = ("-i", str(INVENTORY), "-e", "out=" + str(out), "-e", "ansible_python_interpreter=" + sys.executable)
    run = playbook(*options, str(book), env=ansible_env(GPUFLEET_MIRROR_URL=mirror_url, **env))
    assert run.returncode == 0, run.stdout[-4000:]
    assert "WARNING]" not in run.stdout, run.stdout
    return json.loads(out.read_text())


@pytest.mark.parametrize("prefix", [None, "localhost/democold"])
def test_the_workload_check_runs_on_the_images_the_mirror_serves(tmp_path, mirror, prefix):
    url, published = mirror
    env = {"GPUFLEET_IMAGE_PREFIX": prefix} if prefix else {}
    values = templated(tmp_path, url, **env)
    expected_prefix = prefix or "localhost/gpufleet"
    refs = built_refs()
    assert values["verify_workload"] is True
    # Imported from the archive, never pulled: the test ground has no registry.
    assert values["verify_workload_pull"] is False
    for name, image in (("cuda-probe", "verify_workload_image"), ("pause", "container_runtime_sandbox_image")):
        assert values[image] == "{0}/{1}@{2}".format(expected_prefix, refs[name], published[name]["digest"])
        assert values[image + "_archive_url"] == "{0}/files/images/{1}".format(url, archive(refs[name]))
        assert values[image + "_archive_checksum"] == "sha256:" + published[name]["sha256"]
