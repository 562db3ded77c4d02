# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""Read how the NVIDIA driver is installed on a node, without changing it.

Everything the driver role decides from, in one pass: installed packages and
their holds, the kernels the node can boot and whether each has headers and an
nvidia module, DKMS state, Secure Boot and enrolled MOK certificates, whether
this is a container, and NVSwitch bridges on the PCI bus.

Target-side code: Python 3.8+ standard library only. Every path is read below
`root` so that tests can point the reader at a fake filesystem tree.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import struct
import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils._gfd_labels import vgpu_guest
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import packages as knowledge_packages
from ansible_collections.gpufleet.nvidia.plugins.module_utils._pci import read_nvidia_functions

# Runs a command and returns (rc, stdout, stderr); AnsibleModule.run_command fits.
Runner = t.Callable[[t.List[str]], t.Tuple[int, str, str]]

EFI_GLOBAL = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
SHIM_GUID = "605dab50-e046-4300-abb6-3dd810dd8b23"
# EFI_CERT_X509_GUID as it is laid out in memory (mixed-endian GUID).
EFI_CERT_X509 = bytes.fromhex("a159c0a5e494a74a87b5ab155c2bf072")

NVIDIA_PCI_VENDOR = "0x10de"
PCI_CLASS_BRIDGE_OTHER = "0x0680"  # how NVSwitches enumerate
# Configuration files are small; anything bigger is reported without content.
MAX_FILE_CONTENT = 64 * 1024

# dpkg states in which the package's files are on disk.
_DPKG_PRESENT = frozenset(("installed", "half-configured", "unpacked", "half-installed", "triggers-awaited", "triggers-pending"))

# dkms 3: "nvidia-current/535.261.03, 6.1.0-56-amd64, x86_64: installed"
# dkms 2: "nvidia, 535.261.03, 6.1.0-56-amd64, x86_64: installed"
_DKMS_LINE = re.compile(
    r"^(?P<module>[^/,\s]+)[/,]\s*(?P<version>[^,:\s]+)"
    r"(?:,\s*(?P<kernel>[^,:\s]+),\s*(?P<arch>[^:\s]+))?:\s*(?P<state>[\w-]+)"
)


def kernel_release_of(vmlinuz: str) -> str | None:
    """`vmlinuz-6.1.0-56-amd64` -> `6.1.0-56-amd64`; rescue images are no kernels to boot into."""
    if not vmlinuz.startswith("vmlinuz-") or "rescue" in vmlinuz:
        return None
    return vmlinuz[len("vmlinuz-") :] or None


def module_name(name: str) -> str:
    """A kernel module's name as the kernel lists it (/proc/modules): dashes are underscores."""
    return name.replace("-", "_")


def modules_dep_names(text: str) -> list[str]:
    """The module names a modules.dep lists, from its paths (kernel/drivers/infiniband/core/ib_umad.ko.xz: ...)."""
    names = []
    for line in text.splitlines():
        path = line.split(":", 1)[0].strip()
        if path:
            names.append(module_name(path.rsplit("/", 1)[-1].split(".ko", 1)[0]))
    return names


def parse_dkms_status(text: str) -> list[dict[str, str | None]]:
    entries = []
    for line in text.splitlines():
        match = _DKMS_LINE.match(line.strip())
        if match:
            entries.append(match.groupdict())
    return entries


# The knowledge base's query formats, which parse_dpkg_query and
# parse_rpm_query read (apt_install imports the dpkg one from here).
DPKG_QUERY_FORMAT = knowledge_packages.DPKG_QUERY_FORMAT["value"]
RPM_QUERY_FORMAT = knowledge_packages.RPM_QUERY_FORMAT["value"]


def parse_dpkg_query(text: str) -> list[dict[str, t.Any]]:
    """The packages in dpkg-query's DPKG_QUERY_FORMAT output whose files are on disk."""
    return [
        {
            "name": row["name"],
            "version": row["version"],
            "held": row["selection"] == "hold",
            "configured": row["status"] == "installed",
        }
        for row in knowledge_packages.dpkg_query_rows(text)
        if row["status"] in _DPKG_PRESENT
    ]


def parse_rpm_query(text: str, locked: set[str]) -> list[dict[str, t.Any]]:
    """The packages in rpm's RPM_QUERY_FORMAT output; `locked` names are held."""
    return [
        {"name": row["name"], "version": row["version"], "held": row["name"] in locked, "configured": True} for row in knowledge_packages.rpm_query_rows(text)
    ]


def versionlock_names(text: str) -> set[str]:
    """Package names locked in dnf4's versionlock.list, or in `dnf versionlock list`'s output
    (`name-epoch:version-release.*` lines; dnf5's "Package name: name" lines). `!` lines exclude, not lock."""
    names = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("!"):
            continue
        match = re.fullmatch(r"^Package name:\s*(?P<name>\S+)$", line) or re.fullmatch(r"^(?P<name>.+?)-(?:\d+:)?[^-]+-[^-]+$", line)
        if match:
            names.add(match.group("name"))
    return names


def x509_certificates(esl: bytes) -> list[bytes]:
    """DER certificates in a list of EFI_SIGNATURE_LISTs (MokListRT's payload)."""
    certs = []
    offset = 0
    while offset + 28 <= len(esl):
        sig_type = esl[offset : offset + 16]
        list_size, header_size, sig_size = struct.unpack_from("<III", esl, offset + 16)
        if list_size < 28 or offset + list_size > len(esl) or sig_size <= 16:
            break
        if sig_type == EFI_CERT_X509:
            start = offset + 28 + header_size
            while start + sig_size <= offset + list_size:
                certs.append(esl[start + 16 : start + sig_size])  # skip the owner GUID
                start += sig_size
        offset += list_size
    return certs


def der_of(certificate: bytes) -> bytes:
    """A certificate in DER, whether the file holds DER or PEM."""
    text = certificate.strip()
    if not text.startswith(b"-----BEGIN"):
        return certificate
    import base64  # only needed for PEM input

    body = b"".join(line for line in text.splitlines() if not line.startswith(b"-----"))
    return base64.b64decode(body)


class DriverStateReader:
    """Reads the driver's installation state below `root` (normally /)."""

    def __init__(self, run: Runner, root: str = "/") -> None:
        self.run = run
        self.root = root

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *(p.lstrip("/") for p in parts))

    def read_bytes(self, *parts: str) -> bytes | None:
        try:
            with open(self.path(*parts), "rb") as handle:
                return handle.read()
        except OSError:
            return None

    def read_text(self, *parts: str) -> str | None:
        data = self.read_bytes(*parts)
        return None if data is None else data.decode("utf-8", "replace")

    def listdir(self, *parts: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(*parts)))
        except OSError:
            return []

    # -- packages ---------------------------------------------------------------
    def package_manager(self) -> str | None:
        if os.path.exists(self.path("var/lib/dpkg/status")):
            return "apt"
        if os.path.isdir(self.path("var/lib/rpm")) or os.path.isdir(self.path("usr/lib/sysimage/rpm")):
            return "dnf"
        return None

    def packages(self, manager: str | None, patterns: list[str]) -> list[dict[str, t.Any]]:
        if manager == "apt":
            # dpkg-query exits 1 when a pattern matches nothing; the rest is still printed.
            rc, out, err = self.run(["dpkg-query", "-W", "-f", DPKG_QUERY_FORMAT] + patterns)
            if rc not in (0, 1):
                raise RuntimeError("dpkg-query failed: " + err.strip())
            found = parse_dpkg_query(out)
        elif manager == "dnf":
            rc, out, err = self.run(["rpm", "-qa", "--qf", RPM_QUERY_FORMAT] + patterns)
            if rc != 0:
                raise RuntimeError("rpm -qa failed: " + err.strip())
            locks = self.read_text("etc/dnf/plugins/versionlock.list") or ""
            found = parse_rpm_query(out, versionlock_names(locks))
        else:
            return []
        # The patterns are matched by the package manager; filter again so a
        # pattern-less call cannot return the whole system.
        return sorted((p for p in found if any(fnmatch.fnmatchcase(p["name"], pat) for pat in patterns)), key=lambda p: p["name"])

    # -- kernels ----------------------------------------------------------------------
    def running_kernel(self) -> str:
        release = self.read_text("proc/sys/kernel/osrelease")
        return release.strip() if release else os.uname().release

    def installed_kernels(self) -> list[str]:
        releases = {kernel_release_of(name) for name in self.listdir("boot")}
        return sorted(r for r in releases if r)

    def module_version(self, kernel: str, names: list[str]) -> tuple[str | None, str | None]:
        """(module name, version) of the first of `names` known to `kernel`'s module index."""
        if not os.path.exists(self.path("lib/modules", kernel, "modules.dep")):
            return None, None
        for name in names:
            rc, out, _err = self.run(["modinfo", "-b", self.root, "-k", kernel, "-F", "version", name])
            if rc == 0 and out.strip():
                return name, out.strip().splitlines()[0]
        return None, None

    def modules_absent(self, kernel: str, names: list[str]) -> list[str] | None:
        """Those of `names` that `kernel`'s module index (modules.dep) does not list; None without an index."""
        if not names:
            return []
        index = self.read_text("lib/modules", kernel, "modules.dep")
        if index is None:
            return None
        listed = set(modules_dep_names(index))
        return [name for name in names if module_name(name) not in listed]

    def module_sig_key(self, kernel: str, module: str | None) -> str | None:
        """The key id `module` of `kernel` is signed with (modinfo's sig_key); None when unsigned or absent."""
        if not module:
            return None
        rc, out, _err = self.run(["modinfo", "-b", self.root, "-k", kernel, "-F", "sig_key", module])
        return out.strip().splitlines()[0] if rc == 0 and out.strip() else None

    def staged_kernel(self, release: str, module_names: list[str]) -> dict[str, t.Any]:
        """A kernel being prepared (its headers or module package, perhaps not its image yet): whether it can boot,
        has headers, and the driver's module built or installed for it, with the key that module is signed with."""
        module, version = self.module_version(release, module_names)
        return {
            "release": release,
            "bootable": release in self.installed_kernels(),
            "headers": os.path.exists(self.path("lib/modules", release, "build", "Makefile")),
            "module": module,
            "module_version": version,
            "sig_key": self.module_sig_key(release, module),
        }

    def kernels(self, module_names: list[str], other_modules: list[str] | None = None, staged: list[str] | None = None) -> dict[str, t.Any]:
        running = self.running_kernel()
        installed = []
        for release in self.installed_kernels():
            module, version = self.module_version(release, module_names)
            installed.append(
                {
                    "release": release,
                    "running": release == running,
                    "headers": os.path.exists(self.path("lib/modules", release, "build", "Makefile")),
                    "module": module,
                    "module_version": version,
                    "modules_absent": self.modules_absent(release, other_modules or []),
                }
            )
        result: dict[str, t.Any] = {
            "running": running,
            "running_installed": any(k["running"] for k in installed),
            "installed": installed,
        }
        if staged is not None:
            # What a staged kernel's module must match under Secure Boot: the key of the module running now, which
            # the firmware accepted.
            current = next((k for k in installed if k["running"]), None)
            result["running_sig_key"] = self.module_sig_key(running, current["module"]) if current else None
            result["staged"] = [self.staged_kernel(release, module_names) for release in staged]
        return result

    def dkms(self) -> list[dict[str, str | None]] | None:
        if not any(os.access(self.path(d, "dkms"), os.X_OK) for d in ("usr/sbin", "usr/bin", "sbin")):
            return None
        rc, out, err = self.run(["dkms", "status"])
        if rc != 0:
            raise RuntimeError("dkms status failed: " + err.strip())
        return parse_dkms_status(out)

    # -- firmware and platform -----------------------------------------------------------
    def efi_variable(self, name: str, guid: str) -> bytes | None:
        # efivarfs prefixes 4 attribute bytes; the mok-variables mirror does not.
        data = self.read_bytes("sys/firmware/efi/efivars", "{0}-{1}".format(name, guid))
        if data is not None:
            return data[4:]
        return self.read_bytes("sys/firmware/efi/mok-variables", name)

    def secure_boot(self, mok_certificate: str | None) -> dict[str, t.Any]:
        efi = os.path.isdir(self.path("sys/firmware/efi"))
        state = self.efi_variable("SecureBoot", EFI_GLOBAL) if efi else None
        setup = self.efi_variable("SetupMode", EFI_GLOBAL) if efi else None
        enrolled = x509_certificates(self.efi_variable("MokListRT", SHIM_GUID) or b"") if efi else []
        result: dict[str, t.Any] = {
            "efi": efi,
            "enabled": bool(state and state[0] == 1),
            "setup_mode": bool(setup and setup[0] == 1),
            "mok_certificates_sha256": sorted(hashlib.sha256(c).hexdigest() for c in enrolled),
            "mok_certificate": mok_certificate,
            "mok_certificate_sha256": None,
            "mok_certificate_enrolled": None,
        }
        if mok_certificate:
            data = self.read_bytes(mok_certificate)
            if data is not None:
                digest = hashlib.sha256(der_of(data)).hexdigest()
                result["mok_certificate_sha256"] = digest
                result["mok_certificate_enrolled"] = digest in result["mok_certificates_sha256"]
        return result

    def container(self) -> str | None:
        """The container manager this node runs under, or None on a host or VM."""
        marker = self.read_text("run/systemd/container")
        if marker and marker.strip():
            return marker.strip()
        if os.path.exists(self.path("run/.containerenv")):
            return "podman"
        if os.path.exists(self.path(".dockerenv")):
            return "docker"
        environ = self.read_bytes("proc/1/environ") or b""
        for item in environ.split(b"\0"):
            if item.startswith(b"container="):
                return item.split(b"=", 1)[1].decode() or None
        return None

    def nvswitches(self) -> list[str]:
        devices = []
        for device in self.listdir("sys/bus/pci/devices"):
            vendor = (self.read_text("sys/bus/pci/devices", device, "vendor") or "").strip().lower()
            klass = (self.read_text("sys/bus/pci/devices", device, "class") or "").strip().lower()
            if vendor == NVIDIA_PCI_VENDOR and klass.startswith(PCI_CLASS_BRIDGE_OTHER):
                devices.append(device)
        return devices

    def vgpu_guest(self) -> bool | None:
        """Whether this node is a vGPU guest, by GPU Feature Discovery's rule on its NVIDIA PCI functions (one with
        NVIDIA's vGPU vendor capability); None when their configuration could not be read (it needs root)."""
        return vgpu_guest(read_nvidia_functions(self.path("sys/bus/pci/devices")))

    def loaded_modules(self) -> list[str]:
        text = self.read_text("proc/modules") or ""
        return sorted(line.split()[0] for line in text.splitlines() if line.strip())

    # -- configuration the caller manages ---------------------------------------------------
    def files(self, paths: list[str]) -> dict[str, dict[str, t.Any]]:
        """Content and mode of small text files, so a caller can skip rewriting what is already right."""
        found = {}
        for path in paths:
            try:
                info = os.stat(self.path(path))
            except OSError:
                found[path] = {"exists": False, "mode": None, "content": None}
                continue
            data = self.read_bytes(path) if info.st_size <= MAX_FILE_CONTENT else None
            found[path] = {
                "exists": True,
                "mode": "0{0:o}".format(info.st_mode & 0o7777),
                "content": data.decode("utf-8", "replace") if data is not None else None,
            }
        return found

    def units(self, names: list[str]) -> dict[str, dict[str, str]]:
        """systemd's enablement and activity of each unit ('not-found' when it does not exist)."""
        found = {}
        for name in names:
            _rc, enabled, _err = self.run(["systemctl", "is-enabled", name])
            _rc, active, _err = self.run(["systemctl", "is-active", name])
            found[name] = {"enabled": enabled.strip() or "not-found", "active": active.strip() or "unknown"}
        return found

    # -- everything ------------------------------------------------------------------------
    def read(
        self,
        patterns: list[str],
        module_names: list[str],
        mok_certificate: str | None,
        files: list[str] | None = None,
        units: list[str] | None = None,
        other_modules: list[str] | None = None,
        staged_kernels: list[str] | None = None,
    ) -> dict[str, t.Any]:
        manager = self.package_manager()
        loaded = self.loaded_modules()
        return {
            "files": self.files(files or []),
            "units": self.units(units or []),
            "package_manager": manager,
            "packages": self.packages(manager, patterns),
            "kernels": self.kernels(module_names, other_modules, staged_kernels),
            "other_modules_loaded": [name for name in other_modules or [] if module_name(name) in loaded],
            "dkms": self.dkms(),
            "secure_boot": self.secure_boot(mok_certificate),
            "container": self.container(),
            "nvswitches": self.nvswitches(),
            "vgpu_guest": self.vgpu_guest(),
            "nouveau_loaded": "nouveau" in loaded,
        }
