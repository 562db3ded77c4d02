# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""playbooks/bundle.yml on the air-gapped example inventory, up to its first upstream request.

The example's declarations must pass the bundle's judgement and turn into the
repositories and files the mirror variables point at; bad declarations must
stop it with the variable named, before anything is written. Upstream is a
closed local port here, so nothing leaves the machine: the run ends at the
first fetch, naming the upstream variable. The real fetch, publication and a
node converged from the result are the Molecule scenario `bundle`'s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbooks.test_validate import EXAMPLES, playbook

INVENTORY = EXAMPLES / "airgapped" / "hosts.yml"
SITE_KEY = "0123456789ABCDEF0123456789ABCDEF01234567"
CLOSED = "http://127.0.0.1:9"
UPSTREAM = {
    "driver_cuda_repo_url": CLOSED + "/cuda/repos",
    "driver_cuda_repo_key_url": CLOSED + "/cuda.pub",
    "driver_cuda_repo_key_fingerprint": "EB693B3035CD5710E231E123A4B469963BF863CC",
    "container_toolkit_apt_repo_url": CLOSED + "/libnvidia-container/stable/deb",
    "crictl_download_url": CLOSED + "/cri-tools",
}

IMAGE = {
    "name": "registry.example.internal/gpufleet/cuda-probe:1.0",
    "digest": "sha256:" + "5" * 64,
    "archive_url": CLOSED + "/images/cuda-probe-1.0.oci.tar",
    "archive_checksum": "sha256:" + "a" * 64,
}


def bundle(tmp_path: Path, *args: str, **extra) -> tuple[str, int]:
    extra_vars = {"bundle_dir": str(tmp_path / "bundle"), "bundle_signing_key": SITE_KEY, "bundle_upstream": UPSTREAM}
    extra_vars.update(extra)
    run = playbook("-i", str(INVENTORY), "playbooks/bundle.yml", "-e", json.dumps(extra_vars), "-v", *args)
    return run.stdout.replace('\\"', '"'), run.returncode


def test_the_example_is_judged_and_planned_then_stops_at_the_first_upstream_fetch(tmp_path):
    out, rc = bundle(tmp_path)
    assert rc != 0
    # Every host passed the judgement; the first repository read is the one that fails.
    assert "Stop on a declaration the bundle cannot carry" in out
    assert "bundle_upstream.driver_cuda_repo_url: cannot fetch " + CLOSED + "/cuda.pub" in out, out[-3000:]
    # The driver's repository goes where driver_cuda_repo_url points, with the pinned packages.
    assert '"dest": "cuda/repos/debian12/x86_64"' in out
    assert '"source": "' + CLOSED + '/cuda/repos/debian12/x86_64"' in out
    for name in ("nvidia-driver-cuda", "nvidia-kernel-open-dkms"):
        assert '{"name": "%s", "upstream_version": "580.178.04"}' % name in out, name
    # Fabric Manager (auto: carried when offered) and NVIDIA's pinning package.
    assert '"name": "nvidia-fabricmanager-580", "required": false' in out
    assert '"name": "nvidia-driver-pinning-580.178.04", "required": false' in out
    assert '"dest": "libnvidia-container/stable/deb/amd64"' in out
    assert '{"name": "nvidia-container-toolkit", "version": "1.20.1-1"}' in out
    assert not (tmp_path / "bundle").exists()


@pytest.mark.parametrize(
    "extra,message",
    [
        ({"driver_version": ""}, 'driver_version is "": the bundle carries exact versions'),
        (
            {"driver_version": "580.95.05", "driver_kernel_module": "proprietary", "driver_gpu_models": ["B200"]},
            "driver_kernel_module: proprietary cannot drive B200 (blackwell)",
        ),
        (
            {"container_toolkit_gpg_key_url": "https://elsewhere.invalid/gpgkey"},
            'container_toolkit_gpg_key_url is "https://elsewhere.invalid/gpgkey", not under bundle_mirror_url',
        ),
        (
            {"driver_cuda_repo_key_fingerprint": "EB693B3035CD5710E231E123A4B469963BF863CC"},
            'driver_cuda_repo_key_fingerprint is "EB693B3035CD5710E231E123A4B469963BF863CC", but the bundle is signed',
        ),
        ({"crictl_version": "", "crictl_kubernetes_version": "1.12"}, 'crictl_kubernetes_version "1.12" has no cri-tools release'),
        ({"crictl_version": "v1.37.0"}, "crictl_checksums has no sha256 for v1.37.0 amd64"),
        ({"bundle_platform": {"distribution": "Debian"}}, 'bundle_platform is {"distribution": "Debian"}'),
        ({"bundle_mirror_url": ""}, "bundle_mirror_url: give the URL the nodes will reach the bundle at"),
        ({"gpufleet_gpu_group": "gpu_fleet_typo"}, "gpufleet_gpu_group: the inventory has no host in group 'gpu_fleet_typo'"),
        ({"bundle_signing_key": "mine"}, "bundle_signing_key: give the 40-hex-digit fingerprint"),
        ({"bundle_dir": "relative/dir"}, "bundle_dir: give the absolute path"),
        ({"bundle_images": {"name": "x"}}, "bundle_images: give a list of {name, digest, archive_url, archive_checksum}"),
        ({"bundle_images": [dict(IMAGE, digest="sha256:abc")]}, 'bundle_images[0].digest is "sha256:abc": pin the image manifest digest'),
        (
            {"bundle_images": [dict(IMAGE, name=IMAGE["name"] + "@" + IMAGE["digest"])]},
            'bundle_images[0].name is "registry.example.internal/gpufleet/cuda-probe:1.0@sha256:',
        ),
        (
            {"bundle_images": [dict(IMAGE, archive_url="images/cuda-probe-1.0.oci.tar")]},
            'bundle_images[0].archive_url is "images/cuda-probe-1.0.oci.tar": give the http(s):// or file:// URL',
        ),
        ({"bundle_images": [dict(IMAGE, archive_checksum="md5:0123")]}, 'bundle_images[0].archive_checksum is "md5:0123": pin the archive file\'s sha256'),
        (
            {"bundle_images": [IMAGE, dict(IMAGE, archive_url="http://elsewhere.invalid/cuda-probe-1.0.oci.tar")]},
            "bundle_images: two archives are named cuda-probe-1.0.oci.tar",
        ),
    ],
    ids=[
        "no version",
        "flavour",
        "url outside",
        "other fingerprint",
        "unknown minor",
        "no checksum",
        "platform",
        "no mirror url",
        "unknown group",
        "signing key",
        "relative dir",
        "images not a list",
        "image digest",
        "image name with digest",
        "image url",
        "image checksum",
        "image file twice",
    ],
)
def test_bad_input_is_named_before_anything_is_written(tmp_path, extra, message):
    out, rc = bundle(tmp_path, **extra)
    assert rc != 0
    assert message in out, out[-3000:]
    assert "Read and verify every upstream repository" not in out
    assert not (tmp_path / "bundle").exists()
    assert not Path("relative/dir").exists()
