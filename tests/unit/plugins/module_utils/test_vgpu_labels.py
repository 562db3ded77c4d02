# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GFD's vGPU labels (nvidia.com/vgpu.present, vgpu.host-driver-*) from the
node's NVIDIA PCI functions: configuration spaces built here byte by byte, as
the PCI specification lays them out and as GFD's internal/vgpu reads them
(the vendor-specific capability, ID 0x09, with "VF" at its bytes 3-4, then a
chain of records whose zero record holds the host driver's version and branch).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _gfd_labels, _pci

STATUS, CAPABILITY_LIST = 0x06, 0x34


def config(*capabilities: bytes, size: int = 256, listed: bool = True) -> str:
    """A type-0 header (NVIDIA's vendor id) with the capabilities chained from 0x40, 0x20 bytes apart, in hex."""
    space = bytearray(size)
    space[0:2] = b"\xde\x10"
    if listed and capabilities:
        space[STATUS] = 0x10
        space[CAPABILITY_LIST] = 0x40
    for number, capability in enumerate(capabilities):
        at = 0x40 + 0x20 * number
        following = at + 0x20 if number + 1 < len(capabilities) else 0
        space[at : at + len(capability)] = capability
        space[at + 1] = following
    return bytes(space).hex()


def vgpu_capability(version: bytes = b"550.90.05", branch: bytes = b"r550_00", records: bytes = b"\x01\x03\xaa") -> bytes:
    """ID 0x09, its length, "VF", the records (type, length, data...), then the zero record with the host driver."""
    body = b"VF" + records + b"\x00\x00" + version.ljust(10, b"\x00") + branch.ljust(10, b"\x00")
    return bytes([0x09, 0x00, 3 + len(body)]) + body


PCI_EXPRESS = bytes([0x10, 0x00, 0x3C, 0x02])  # a PCI Express capability: every GPU has one


def functions(*configs: str) -> dict:
    return {
        "devices": [{"address": "0000:{0:02x}:00.0".format(n), "class": "0x03", "config": c, "config_length": len(c) // 2} for n, c in enumerate(configs)],
        "error": None,
    }


def test_bare_metal_and_passthrough_gpus_are_no_vgpu():
    assert _gfd_labels.vgpu_labels(functions(config(PCI_EXPRESS), config(listed=False))) == {"nvidia.com/vgpu.present": "false"}
    assert _gfd_labels.vgpu_labels(functions()) == {"nvidia.com/vgpu.present": "false"}


def test_a_vgpu_guest_names_its_host_driver():
    found = _gfd_labels.vgpu_labels(functions(config(PCI_EXPRESS, vgpu_capability())))
    assert found == {
        "nvidia.com/vgpu.present": "true",
        "nvidia.com/vgpu.host-driver-version": "550.90.05",
        "nvidia.com/vgpu.host-driver-branch": "r550_00",
    }


def test_only_the_first_vendor_capability_counts_and_it_must_say_vf():
    other_vendor_capability = bytes([0x09, 0x00, 0x08]) + b"XY" + bytes(3)
    assert _gfd_labels.vgpu_labels(functions(config(other_vendor_capability, vgpu_capability())))["nvidia.com/vgpu.present"] == "false"


def test_a_capability_list_that_loops_ends():
    space = bytearray.fromhex(config(PCI_EXPRESS))
    space[0x41] = 0x40  # points back at itself
    assert _gfd_labels.vgpu_labels(functions(space.hex())) == {"nvidia.com/vgpu.present": "false"}


def test_an_unprivileged_read_or_a_failed_one_gives_no_vgpu_label():
    # GFD logs the error and its vGPU labeller gives nothing; the other labels stay.
    assert _gfd_labels.vgpu_labels(functions(config(PCI_EXPRESS, size=64))) == {}
    assert _gfd_labels.vgpu_labels({"devices": [], "error": "unable to read PCI bus devices: Permission denied"}) == {}
    assert _gfd_labels.vgpu_labels(None) == {}


def test_a_vgpu_capability_without_its_host_driver_record_fails_as_gfd_does():
    truncated = bytes([0x09, 0x00, 0x09]) + b"VF" + b"\x01\x03\xaa\x00"
    with pytest.raises(ValueError, match="0000:00:00.0 has no host driver record"):
        _gfd_labels.vgpu_labels(functions(config(truncated)))


def test_a_node_without_gpus_gets_only_the_vgpu_label():
    nvml = {"status": "ok", "gpus": []}
    assert _gfd_labels.labels(nvml, {"mig_strategy": "none"}, {"nvidia_pci": functions()}) == {"nvidia.com/vgpu.present": "false"}


def _function(root: Path, address: str, vendor: str, space: bytes | None) -> None:
    (root / address).mkdir()
    (root / address / "vendor").write_text(vendor + "\n")
    (root / address / "class").write_text("0x030200\n")
    if space is not None:
        (root / address / "config").write_bytes(space)


def test_the_node_read_lists_nvidias_functions_only(tmp_path: Path):
    _function(tmp_path, "0000:00:1f.0", "0x8086", bytes(256))
    _function(tmp_path, "0000:07:00.0", "0x10de", bytes.fromhex(config(PCI_EXPRESS, vgpu_capability())) + bytes(3840))
    read = _pci.read_nvidia_functions(str(tmp_path))
    assert read["error"] is None
    assert [(d["address"], d["class"], d["config_length"]) for d in read["devices"]] == [("0000:07:00.0", "0x03", 256)]
    assert _gfd_labels.vgpu_labels(read)["nvidia.com/vgpu.host-driver-version"] == "550.90.05"


def test_a_function_that_cannot_be_read_ends_the_read(tmp_path: Path):
    _function(tmp_path, "0000:07:00.0", "0x10de", None)
    read = _pci.read_nvidia_functions(str(tmp_path))
    assert read["devices"] == [] and read["error"].startswith("unable to read PCI device 0000:07:00.0")
    assert _pci.read_nvidia_functions(str(tmp_path / "absent"))["error"].startswith("unable to read PCI bus devices")


# -- nvidia.com/gpu.clique (GFD's IMEX labeller, go-nvlib's IsFabricAttached) ------------------------------------

UUID = "8f4a2c1e-5b7d-4e3a-9c6f-0d1e2f3a4b5c"


def fabric(state: str = "completed", status: str = "NVML_SUCCESS", clique: int = 32766, cluster: str = UUID) -> dict:
    return {"health": {"fabric": {"state": state, "status": status, "clique_id": clique, "cluster_uuid": cluster}}}


def test_fabric_attached_gpus_that_agree_name_their_clique():
    assert _gfd_labels.clique_labels([fabric(), fabric()]) == {"nvidia.com/gpu.clique": UUID + ".32766"}
    # A GPU whose probe is not done, or that has no fabric, does not count.
    assert _gfd_labels.clique_labels([fabric(), fabric(state="in_progress"), {"health": {"fabric": None}}]) == {"nvidia.com/gpu.clique": UUID + ".32766"}


@pytest.mark.parametrize(
    "gpus",
    [
        [fabric(state="in_progress")],
        [fabric(status="NVML_ERROR_NOT_READY")],
        [fabric(cluster="00000000-0000-0000-0000-000000000000")],
        [fabric(), fabric(clique=7)],
        [fabric(), fabric(cluster="11111111-2222-3333-4444-555555555555")],
        [{"health": {"fabric": None}}],
        [{}],
    ],
)
def test_no_clique_label_without_one_agreed_clique(gpus: list):
    assert _gfd_labels.clique_labels(gpus) == {}
