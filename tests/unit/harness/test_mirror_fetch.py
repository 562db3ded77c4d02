"""tests/harness/mirror.py fetch: the answer is kept per request and apt lists, asked again when either changes."""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path

import pytest

MIRROR_PY = Path(__file__).resolve().parents[2] / "harness" / "mirror.py"
DEB = "nvidia-smi_535.261.03-1~deb12u1_amd64.deb"
URI = "'http://debian.invalid/pool/non-free/n/nvidia-graphics-drivers/{0}' {0} 1000 SHA256:{1}"


@pytest.fixture(name="mirror")
def fixture_mirror(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFLEET_CACHE", str(tmp_path))
    spec = importlib.util.spec_from_file_location("gpufleet_test_mirror", MIRROR_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    lists = tmp_path / "apt" / "bookworm" / "lists"
    lists.mkdir(parents=True)
    (lists / "deb.invalid_dists_bookworm_non-free_binary-amd64_Packages").write_text("Package: nvidia-smi\n")
    calls = []

    def run(cmd, **_kwargs):
        calls.append(cmd[0])
        stdout = URI.format(DEB, "0" * 64) if "--print-uris" in cmd else ""
        return argparse.Namespace(stdout=stdout, returncode=0)

    def download(_uri, target, _checksum):
        target.write_bytes(b"deb")

    monkeypatch.setattr(module, "run", run)
    monkeypatch.setattr(module, "_download", download)
    module.calls = calls
    module.lists = lists
    return module


def fetch(mirror, capsys, *packages, suite="bookworm"):
    mirror.cmd_fetch(argparse.Namespace(suite=suite, packages=list(packages), all=False))
    return capsys.readouterr().out.split()


def test_a_second_fetch_is_answered_without_apt(mirror, capsys):
    first = fetch(mirror, capsys, "nvidia-smi")
    assert [Path(p).name for p in first] == [DEB]
    assert mirror.calls == ["apt-get"]  # the lists are fresh: only --print-uris
    asked = len(mirror.calls)
    assert fetch(mirror, capsys, "nvidia-smi") == first
    assert len(mirror.calls) == asked


def test_changed_lists_other_packages_or_a_missing_deb_ask_apt_again(mirror, capsys):
    fetch(mirror, capsys, "nvidia-smi")
    asked = len(mirror.calls)
    fetch(mirror, capsys, "nvidia-smi", "libcuda1")
    assert len(mirror.calls) == asked + 1
    index = next(mirror.lists.iterdir())
    index.write_text("Package: nvidia-smi\nVersion: 2\n")
    os.utime(index, ns=(1, 1))
    fetch(mirror, capsys, "nvidia-smi")
    assert len(mirror.calls) == asked + 2
    deb = Path(fetch(mirror, capsys, "nvidia-smi")[0])
    assert len(mirror.calls) == asked + 2
    deb.unlink()
    assert fetch(mirror, capsys, "nvidia-smi") == [str(deb)]
    assert len(mirror.calls) == asked + 3 and deb.exists()
