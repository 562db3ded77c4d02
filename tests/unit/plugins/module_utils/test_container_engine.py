# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_container_engine: the engines' own error text reduced to the reason, and OCI archives read as ctr reads them."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _container_engine as e

# What crictl 1.36 printed against containerd 1.7.24 (the workload scenario).
CRICTL_CREATE = (
    'time="2026-11-26T02:54:54Z" level=warning msg="cgroup_parent is not set. Use `runtime-config` to get the '
    'runtime cgroup driver"\n'
    'E1126 02:54:54.884947     522 remote_runtime.go:410] "CreateContainer in sandbox from runtime service failed" '
    'err="rpc error: code = Unknown desc = failed to create containerd container: CDI device injection failed: '
    'unresolvable CDI devices nvidia.com/gpu=9" podSandboxID="4a00f30896a0"\n'
    'time="2026-11-26T02:54:54Z" level=fatal msg="creating container: rpc error: code = Unknown desc = failed to '
    'create containerd container: CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=9"\n'
)
CRICTL_RUNP = (
    'time="2026-11-26T02:54:54Z" level=fatal msg="run pod sandbox: rpc error: code = Unknown desc = '
    'failed to get sandbox runtime: no runtime for \\"nvidia\\" is configured"\n'
)


def test_the_engine_reason_is_kept_without_the_client_decoration() -> None:
    assert e.engine_error(CRICTL_CREATE) == ("failed to create containerd container: CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=9")
    assert e.engine_error(CRICTL_RUNP) == 'failed to get sandbox runtime: no runtime for "nvidia" is configured'
    docker = 'docker: Error response from daemon: could not select device driver "cdi" with capabilities: [].\n'
    assert e.engine_error(docker) == docker.strip()
    assert e.engine_error("") == "no output"


def test_pinned_digest() -> None:
    assert e.pinned_digest("r/probe:1.0@sha256:" + "0" * 64) == "sha256:" + "0" * 64
    assert e.pinned_digest("r/probe:1.0") is None
    assert e.pinned_digest("r/probe@sha256:abc") is None


def test_cri_looks_a_pinned_reference_up_without_its_tag() -> None:
    digest = "sha256:" + "0" * 64
    assert e.cri_name("localhost:5000/site/pause:3.10@" + digest) == "localhost:5000/site/pause@" + digest
    assert e.cri_name("localhost:5000/site/pause@" + digest) == "localhost:5000/site/pause@" + digest
    assert e.cri_name("localhost:5000/site/pause:3.10") == "localhost:5000/site/pause:3.10"


def _blob(archive: tarfile.TarFile, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo("blobs/sha256/" + digest.split(":")[1])
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))
    return digest


def oci_archive(path: Path, name: str) -> tuple[str, str]:
    """A one-image OCI archive laid out as `podman save --format oci-archive` writes it."""
    with tarfile.open(path, "w") as archive:
        config = _blob(archive, json.dumps({"architecture": "amd64", "os": "linux"}).encode())
        manifest = _blob(archive, json.dumps({"schemaVersion": 2, "config": {"digest": config}, "layers": []}).encode())
        index = json.dumps(
            {
                "schemaVersion": 2,
                "manifests": [
                    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest, "annotations": {"org.opencontainers.image.ref.name": name}}
                ],
            }
        ).encode()
        info = tarfile.TarInfo("index.json")
        info.size = len(index)
        archive.addfile(info, io.BytesIO(index))
    return manifest, config


def test_an_archive_is_read_by_the_digest_a_reference_pins(tmp_path: Path) -> None:
    path = tmp_path / "probe.oci.tar"
    manifest, config = oci_archive(path, "site/cuda-probe:1.0")
    assert e.archive_images(str(path)) == [{"name": "site/cuda-probe:1.0", "digest": manifest, "config": config}]
    assert e.archive_image_for(str(path), "site/cuda-probe:1.0@" + manifest)["config"] == config
    assert e.archive_image_for(str(path), "site/cuda-probe:1.0")["digest"] == manifest
    with pytest.raises(e.RunFailed, match="does not hold site/cuda-probe:1.0@sha256:0000.*it holds site/cuda-probe:1.0"):
        e.archive_image_for(str(path), "site/cuda-probe:1.0@sha256:" + "0" * 64)


def test_a_file_that_is_no_oci_archive_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broken.tar"
    path.write_bytes(b"not a tar")
    with pytest.raises(e.RunFailed, match="broken.tar is not an OCI image archive"):
        e.archive_images(str(path))


def test_docker_runs_a_loaded_pinned_image_by_the_image_id_the_archive_pins(tmp_path: Path) -> None:
    path = tmp_path / "probe.oci.tar"
    manifest, config = oci_archive(path, "site/cuda-probe:1.0")
    docker = e.DockerEngine({"engine": "docker"}, lambda name: name)
    assert docker.local_ref("site/cuda-probe:1.0@" + manifest, str(path)) == config
    assert docker.local_ref("site/cuda-probe:1.0", str(path)) == "site/cuda-probe:1.0"
    assert e.CRIEngine({"engine": "containerd"}, lambda name: name).local_ref("site/cuda-probe:1.0@" + manifest, str(path)) == "site/cuda-probe:1.0@" + manifest
