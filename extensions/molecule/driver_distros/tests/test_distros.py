"""The CUDA-repository driver on Ubuntu and Rocky: installed at one 580 version, locked."""

from __future__ import annotations


def test_the_driver_is_installed_and_locked(host):
    if host.system_info.distribution == "ubuntu":
        out = host.check_output("dpkg-query -W -f '${Package} ${Version}\\n' 'nvidia-dkms-580-open' 'libnvidia-compute-580'")
        versions = {line.split()[1].split("-")[0] for line in out.splitlines()}
        assert len(versions) == 1 and versions.pop().startswith("580.")
        assert "nvidia-dkms-580-open" in host.check_output("apt-mark showhold")
        assert host.file("/etc/apt/preferences.d/gpufleet-nvidia-driver").contains("Pin-Priority: 1001")
    else:
        rpm = host.check_output("rpm -q --qf '%{VERSION}' kmod-nvidia-open-dkms")
        assert rpm.startswith("580.")
        assert host.file("/etc/dnf/plugins/versionlock.list").contains("kmod-nvidia-open-dkms-")
    assert host.service("nvidia-persistenced").is_enabled
