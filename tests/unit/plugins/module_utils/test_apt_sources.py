# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_apt_sources: the repositories apt's sources name, and the Signed-By clashes apt refuses."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _apt_sources as sources

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"


def test_both_formats_name_the_repository_as_apt_compares_it() -> None:
    one_line = sources.parse(
        "/etc/apt/sources.list.d/driver.list",
        "# a comment\ndeb [arch=amd64 signed-by=/k/cuda.asc] {0}/ /\ndeb http://deb.debian.org/debian bookworm main contrib\n".format(CUDA),
    )
    assert [(e.uri, e.suite, e.signed_by) for e in one_line] == [(CUDA, "/", "/k/cuda.asc"), ("http://deb.debian.org/debian", "bookworm", "")]
    deb822 = sources.parse(
        "/etc/apt/sources.list.d/dcgm.sources",
        "Types: deb\nURIs: {0}\nSuites: /\nSigned-By: /k/dcgm.asc\n\nTypes: deb\nURIs: http://x/ y/\nSuites: a b\nEnabled: no\n"
        "\nTypes: deb\nURIs: http://z\nSuites: s\nSigned-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n -----END PGP PUBLIC KEY BLOCK-----\n".format(CUDA),
    )
    assert [(e.uri, e.suite, e.signed_by) for e in deb822] == [(CUDA, "/", "/k/dcgm.asc"), ("http://z", "s", "(an inline key)")]


def test_a_clash_is_one_repository_with_two_keys_in_two_files(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "driver.list").write_text("deb [signed-by=/k/cuda.asc] {0}/ /\n".format(CUDA))
    (tmp_path / "sources.list.d" / "ignored.save").write_text("deb [signed-by=/k/x.asc] {0}/ /\n".format(CUDA))
    (tmp_path / "sources.list").write_text("deb {0} /\n".format(CUDA))
    found = sources.node_entries(str(tmp_path / "sources.list.d"), str(tmp_path / "sources.list"))
    assert len(found) == 2
    ours = sources.parse(str(tmp_path / "sources.list.d" / "dcgm.sources"), "Types: deb\nURIs: {0}\nSuites: /\nSigned-By: /k/cuda.asc\n".format(CUDA))
    (clash,) = sources.conflicts(ours, found)
    assert clash[1].path.endswith("sources.list") and clash[1].signed_by == ""  # unsigned-by is a different value too
    same_file = sources.parse(str(tmp_path / "sources.list.d" / "driver.list"), "deb [signed-by=/k/other.asc] {0}/ /\n".format(CUDA))
    assert [c[1].path for c in sources.conflicts(same_file, found)] == [str(tmp_path / "sources.list")]


def test_the_install_guides_arch_variable_is_the_repository_it_names(tmp_path: Path) -> None:
    """NVIDIA's Container Toolkit install guide writes $(ARCH) in the URI, and apt expands it: the role's own
    source for the amd64 directory is the same repository, with another key."""
    guide = "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n"
    (tmp_path / "nvidia-container-toolkit.list").write_text(guide)
    found = sources.node_entries(str(tmp_path), str(tmp_path / "none"), arch="amd64")
    assert [e.uri for e in found] == ["https://nvidia.github.io/libnvidia-container/stable/deb/amd64"]
    ours = sources.parse(
        str(tmp_path / "nvidia-container-toolkit.sources"),
        "Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/amd64\nSuites: /\nSigned-By: /etc/apt/keyrings/t.asc\n",
        arch="amd64",
    )
    assert len(sources.conflicts(ours, found)) == 1
    assert sources.dpkg_architecture("x86_64") == "amd64" and sources.dpkg_architecture("aarch64") == "arm64"
