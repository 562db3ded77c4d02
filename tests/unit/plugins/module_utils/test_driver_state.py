"""DriverStateReader against a fake filesystem tree and recorded command output."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _driver_state as ds

DPKG = (
    "nvidia-kernel-dkms\t535.261.03-1\thi \n"
    "nvidia-smi\t535.261.03-1\tii \n"
    "nvidia-open-kernel-dkms\t535.261.03-1\tiF \n"
    "nvidia-driver\t\tun \n"
    "libcuda1:amd64\t535.261.03-1\thi \n"
    "nvidia-container-toolkit\t1.17.8-1\thi \n"
)
DKMS = (
    "nvidia-current/535.261.03, 6.1.0-56-amd64, x86_64: installed\nnvidia-current-open/535.261.03: added\nnvidia, 470.239.06, 5.10.0-30-amd64, x86_64: built\n"
)


class Commands:
    """Recorded answers by argv prefix."""

    def __init__(self, answers: dict[tuple, tuple[int, str, str]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        for prefix, answer in self.answers.items():
            if tuple(argv[: len(prefix)]) == prefix:
                return answer
        return 1, "", "unexpected command"


def touch(path: Path, data: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def esl(certs: list[bytes]) -> bytes:
    """An EFI_SIGNATURE_LIST of X.509 entries (one list per certificate, as shim writes them)."""
    data = b""
    for cert in certs:
        size = 16 + len(cert)
        data += ds.EFI_CERT_X509 + struct.pack("<III", 28 + size, 0, size) + b"\x11" * 16 + cert
    return data


@pytest.fixture
def node(tmp_path: Path) -> Path:
    touch(tmp_path / "var/lib/dpkg/status")
    touch(tmp_path / "proc/sys/kernel/osrelease", b"6.18.44-host\n")
    for kernel in ("6.1.0-56-amd64", "6.1.0-55-amd64"):
        touch(tmp_path / "boot" / ("vmlinuz-" + kernel))
        touch(tmp_path / "lib/modules" / kernel / "modules.dep")
    touch(tmp_path / "boot/vmlinuz-0-rescue-abc")
    touch(tmp_path / "lib/modules/6.1.0-56-amd64/build/Makefile")
    touch(tmp_path / "usr/sbin/dkms")
    (tmp_path / "usr/sbin/dkms").chmod(0o755)
    touch(tmp_path / "run/.containerenv")
    touch(tmp_path / "proc/modules", b"nvidia_uvm 1 0 - Live 0x0\nnouveau 2 0 - Live 0x0\n")
    for device, vendor, klass in (("0000:07:00.0", "0x10de", "0x068000"), ("0000:08:00.0", "0x10de", "0x030200"), ("0000:09:00.0", "0x8086", "0x068000")):
        touch(tmp_path / "sys/bus/pci/devices" / device / "vendor", vendor.encode() + b"\n")
        touch(tmp_path / "sys/bus/pci/devices" / device / "class", klass.encode() + b"\n")
        # A root read of the configuration: a bare header, no vGPU capability.
        touch(tmp_path / "sys/bus/pci/devices" / device / "config", bytes(4096))
    return tmp_path


def reader(root: Path, modinfo: dict[str, str] | None = None) -> tuple[ds.DriverStateReader, Commands]:
    answers: dict[tuple, tuple[int, str, str]] = {
        ("dpkg-query",): (1, DPKG, "dpkg-query: no packages found matching cuda-drivers*"),
        ("dkms", "status"): (0, DKMS, ""),
    }
    for kernel, version in (modinfo or {}).items():
        answers[("modinfo", "-b", str(root), "-k", kernel, "-F", "version", "nvidia-current")] = (0, version + "\n", "")
    commands = Commands(answers)
    return ds.DriverStateReader(commands, root=str(root)), commands


def test_reads_packages_holds_and_half_installed_ones(node):
    state = reader(node)[0]
    packages = {p["name"]: p for p in state.packages("apt", ["*nvidia*", "libcuda*", "cuda-drivers*"])}
    assert sorted(packages) == ["libcuda1", "nvidia-container-toolkit", "nvidia-kernel-dkms", "nvidia-open-kernel-dkms", "nvidia-smi"]
    assert packages["nvidia-kernel-dkms"] == {"name": "nvidia-kernel-dkms", "version": "535.261.03-1", "held": True, "configured": True}
    assert packages["nvidia-open-kernel-dkms"]["configured"] is False
    assert packages["libcuda1"]["held"] and not packages["nvidia-smi"]["held"]


def test_kernels_headers_and_modules(node):
    state = reader(node, {"6.1.0-56-amd64": "535.261.03"})[0]
    kernels = state.kernels(["nvidia", "nvidia-current"])
    assert kernels["running"] == "6.18.44-host" and kernels["running_installed"] is False
    assert kernels["installed"] == [
        {"release": "6.1.0-55-amd64", "running": False, "headers": False, "module": None, "module_version": None, "modules_absent": []},
        {"release": "6.1.0-56-amd64", "running": False, "headers": True, "module": "nvidia-current", "module_version": "535.261.03", "modules_absent": []},
    ]


# Debian 12's linux-image-6.1.0-*-amd64 lists them so (compressed from Debian 13 on).
MODULES_DEP = (
    "kernel/drivers/infiniband/core/ib_core.ko:\n"
    "kernel/drivers/infiniband/core/ib_umad.ko: kernel/drivers/infiniband/core/ib_core.ko\n"
    "kernel/drivers/infiniband/hw/mlx5/mlx5_ib.ko.xz: kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko.xz\n"
)


def test_other_modules_a_kernel_lacks_and_those_loaded(node):
    """NVLSM's modules: which kernel's index lacks them (a kernel without modules.dep says nothing), which are loaded."""
    touch(node / "lib/modules/6.1.0-56-amd64/modules.dep", MODULES_DEP.encode())
    touch(node / "lib/modules/6.1.0-55-amd64/modules.dep", MODULES_DEP.split("\n", 2)[2].encode())
    touch(node / "boot/vmlinuz-6.1.0-57-amd64")
    touch(node / "proc/modules", b"ib_umad 1 0 - Live 0x0\nnvidia 2 0 - Live 0x0\n")
    read = reader(node)[0].read(["*nvidia*"], ["nvidia"], None, other_modules=["ib_umad", "mlx5-ib"])
    absent = {kernel["release"]: kernel["modules_absent"] for kernel in read["kernels"]["installed"]}
    assert absent == {"6.1.0-55-amd64": ["ib_umad"], "6.1.0-56-amd64": [], "6.1.0-57-amd64": None}
    assert read["other_modules_loaded"] == ["ib_umad"]


def test_dkms_status_both_formats():
    assert ds.parse_dkms_status(DKMS) == [
        {"module": "nvidia-current", "version": "535.261.03", "kernel": "6.1.0-56-amd64", "arch": "x86_64", "state": "installed"},
        {"module": "nvidia-current-open", "version": "535.261.03", "kernel": None, "arch": None, "state": "added"},
        {"module": "nvidia", "version": "470.239.06", "kernel": "5.10.0-30-amd64", "arch": "x86_64", "state": "built"},
    ]


def test_platform_container_nvswitches_nouveau(node):
    state = reader(node)[0]
    read = state.read(["*nvidia*"], ["nvidia-current"], None)
    assert read["container"] == "podman"
    assert read["nvswitches"] == ["0000:07:00.0"]
    assert read["vgpu_guest"] is False
    assert read["nouveau_loaded"] is True
    assert read["package_manager"] == "apt"
    assert read["dkms"][0]["module"] == "nvidia-current"


def test_systemd_container_marker_wins(node):
    touch(node / "run/systemd/container", b"docker\n")
    assert reader(node)[0].container() == "docker"


def test_no_efi_means_no_secure_boot(node):
    sb = reader(node)[0].secure_boot("/var/lib/dkms/mok.pub")
    assert sb["efi"] is False and sb["enabled"] is False and sb["mok_certificate_enrolled"] is None


def test_secure_boot_and_enrolled_machine_owner_keys(node):
    cert, other = b"\x30\x82fake-der-certificate", b"\x30\x82another"
    efivars = node / "sys/firmware/efi/efivars"
    touch(efivars / ("SecureBoot-" + ds.EFI_GLOBAL), b"\x06\x00\x00\x00\x01")
    touch(efivars / ("SetupMode-" + ds.EFI_GLOBAL), b"\x06\x00\x00\x00\x00")
    touch(efivars / ("MokListRT-" + ds.SHIM_GUID), b"\x06\x00\x00\x00" + esl([other, cert]))
    touch(node / "var/lib/dkms/mok.pub", cert)
    sb = reader(node)[0].secure_boot("/var/lib/dkms/mok.pub")
    assert sb["efi"] and sb["enabled"] and not sb["setup_mode"]
    assert sb["mok_certificates_sha256"] == sorted(hashlib.sha256(c).hexdigest() for c in (cert, other))
    assert sb["mok_certificate_enrolled"] is True
    touch(node / "var/lib/dkms/mok.pub", b"\x30\x82not-enrolled")
    assert reader(node)[0].secure_boot("/var/lib/dkms/mok.pub")["mok_certificate_enrolled"] is False


def test_pem_certificates_compare_as_der():
    assert ds.der_of(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n") == b"0\x82\x01"


def test_rpm_and_versionlock():
    locks = ds.versionlock_names("# comment\nkmod-nvidia-open-dkms-3:580.95.05-1.el9.*\nnvidia-driver-cuda-580.95.05-1.el9.*\n")
    assert locks == {"kmod-nvidia-open-dkms", "nvidia-driver-cuda"}
    packages = ds.parse_rpm_query("kmod-nvidia-open-dkms\t3:580.95.05-1.el9\nnvidia-persistenced\t0:580.95.05-1.el9\n", locks)
    assert packages == [
        {"name": "kmod-nvidia-open-dkms", "version": "3:580.95.05-1.el9", "held": True, "configured": True},
        {"name": "nvidia-persistenced", "version": "580.95.05-1.el9", "held": False, "configured": True},
    ]


def test_a_failing_package_query_is_an_error(node):
    state = ds.DriverStateReader(lambda argv: (2, "", "dpkg: database locked"), root=str(node))
    with pytest.raises(RuntimeError, match="database locked"):
        state.packages("apt", ["*nvidia*"])


def test_files_report_mode_and_content(node):
    touch(node / "etc/apt/preferences.d/pin", b"Pin: version 535.261.03-*\n")
    (node / "etc/apt/preferences.d/pin").chmod(0o640)
    files = reader(node)[0].files(["/etc/apt/preferences.d/pin", "/etc/absent"])
    assert files == {
        "/etc/apt/preferences.d/pin": {"exists": True, "mode": "0640", "content": "Pin: version 535.261.03-*\n"},
        "/etc/absent": {"exists": False, "mode": None, "content": None},
    }


def test_units(node):
    commands = Commands(
        {
            ("systemctl", "is-enabled", "nvidia-persistenced"): (0, "enabled\n", ""),
            ("systemctl", "is-active", "nvidia-persistenced"): (3, "inactive\n", ""),
            ("systemctl", "is-enabled", "nvidia-fabricmanager"): (4, "", "Failed to get unit file state"),
        }
    )
    units = ds.DriverStateReader(commands, root=str(node)).units(["nvidia-persistenced", "nvidia-fabricmanager"])
    assert units == {"nvidia-persistenced": {"enabled": "enabled", "active": "inactive"}, "nvidia-fabricmanager": {"enabled": "not-found", "active": "unknown"}}


def test_staged_kernels_report_their_module_and_key_beside_the_running_one(node):
    """A kernel being rolled to: with headers and a module built but no image yet, then with the image."""
    touch(node / "proc/sys/kernel/osrelease", b"6.1.0-56-amd64\n")
    touch(node / "lib/modules/6.12.57+deb12-amd64/build/Makefile")
    touch(node / "lib/modules/6.12.57+deb12-amd64/modules.dep")
    state, commands = reader(node, {"6.1.0-56-amd64": "535.261.03", "6.12.57+deb12-amd64": "535.261.03"})
    for kernel, key in (("6.1.0-56-amd64", "AA:BB"), ("6.12.57+deb12-amd64", "CC:DD")):
        commands.answers[("modinfo", "-b", str(node), "-k", kernel, "-F", "sig_key", "nvidia-current")] = (0, key + "\n", "")
    kernels = state.kernels(["nvidia", "nvidia-current"], staged=["6.12.57+deb12-amd64", "6.13.0-1-amd64"])
    assert kernels["running_sig_key"] == "AA:BB"
    assert kernels["staged"] == [
        {"release": "6.12.57+deb12-amd64", "bootable": False, "headers": True, "module": "nvidia-current", "module_version": "535.261.03", "sig_key": "CC:DD"},
        {"release": "6.13.0-1-amd64", "bootable": False, "headers": False, "module": None, "module_version": None, "sig_key": None},
    ]
    touch(node / "boot/vmlinuz-6.12.57+deb12-amd64")
    assert state.kernels(["nvidia", "nvidia-current"], staged=["6.12.57+deb12-amd64"])["staged"][0]["bootable"] is True
    # Without staged kernels nothing more is asked or reported.
    calls = len(commands.calls)
    assert "staged" not in state.kernels(["nvidia", "nvidia-current"])
    assert not any("sig_key" in call for call in commands.calls[calls:])
