# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""release_binary: real tarballs over real HTTP on loopback - verified, installed once, faults change nothing."""

from __future__ import annotations

import functools
import grp
import hashlib
import http.server
import io
import os
import pwd
import stat
import tarfile
import threading
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result

ME = {"owner": pwd.getpwuid(os.getuid()).pw_name, "group": grp.getgrgid(os.getgid()).gr_name}
OLD = b"#!/bin/sh\necho v1.35.0\n"
NEW = b"#!/bin/sh\necho v1.36.0\n"


def tarball(members: dict[str, t.Any]) -> bytes:
    """A .tar.gz; a bytes value is a file, a ('link', target) tuple a symbolic link."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as archive:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(content, tuple):
                info.type, info.linkname = tarfile.SYMTYPE, content[1]
                archive.addfile(info)
            else:
                info.size, info.mode = len(content), 0o755
                archive.addfile(info, io.BytesIO(content))
    return data.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(name="mirror")
def fixture_mirror(tmp_path: Path) -> t.Iterator[tuple[Path, str]]:
    """A directory served over HTTP on loopback: (where to put files, its URL)."""
    root = tmp_path / "mirror"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, "http://127.0.0.1:{0}".format(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def publish(mirror: tuple[Path, str], name: str, data: bytes) -> str:
    """The tarball and its .sha256 beside it, as releases publish them; returns the tarball's URL."""
    root, url = mirror
    (root / name).write_bytes(data)
    (root / (name + ".sha256")).write_text("{0}  {1}\n".format(sha256(data), name))
    return "{0}/{1}".format(url, name)


def run(dest: Path, check: bool = False, diff: bool = False, **args: t.Any) -> dict[str, t.Any]:
    return module_result("release_binary", {"member": "crictl", "dest": str(dest), **ME, **args},
                         check=check, diff=diff)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_installs_the_verified_member_once(mirror: tuple[Path, str], tmp_path: Path) -> None:
    url = publish(mirror, "crictl.tar.gz", tarball({"crictl": NEW, "LICENSE": b"text\n"}))
    dest = tmp_path / "bin" / "crictl"
    first = run(dest, url=url, sha256_url=url + ".sha256")
    assert first["changed"] and first["member_sha256"] == sha256(NEW), first
    assert first["sha256"] == sha256((mirror[0] / "crictl.tar.gz").read_bytes())
    assert dest.read_bytes() == NEW and mode(dest) == 0o755 and mode(dest.parent) == 0o755
    assert [p.name for p in dest.parent.iterdir()] == ["crictl"]
    again = run(dest, url=url, sha256=first["sha256"])
    assert not again["changed"], again


def test_a_new_release_replaces_the_program_and_attributes_are_restored(
        mirror: tuple[Path, str], tmp_path: Path) -> None:
    dest = tmp_path / "crictl"
    old = publish(mirror, "old.tar.gz", tarball({"./crictl": OLD}))
    run(dest, url=old, sha256_url=old + ".sha256")
    assert dest.read_bytes() == OLD
    new = publish(mirror, "new.tar.gz", tarball({"crictl": NEW}))
    replaced = run(dest, url=new, sha256_url=new + ".sha256", diff=True)
    assert replaced["changed"] and dest.read_bytes() == NEW
    assert replaced["diff"]["before"]["sha256"] == sha256(OLD) and replaced["diff"]["after"]["sha256"] == sha256(NEW)
    os.chmod(dest, 0o700)
    restored = run(dest, url=new, sha256_url=new + ".sha256")
    assert restored["changed"] and mode(dest) == 0o755 and dest.read_bytes() == NEW
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".gpufleet-")] == []


def test_check_mode_verifies_and_predicts_but_writes_nothing(mirror: tuple[Path, str], tmp_path: Path) -> None:
    url = publish(mirror, "crictl.tar.gz", tarball({"crictl": NEW}))
    dest = tmp_path / "bin" / "crictl"
    predicted = run(dest, url=url, sha256_url=url + ".sha256", check=True, diff=True)
    assert predicted["changed"] and predicted["diff"]["before"]["sha256"] == "(absent)", predicted
    assert not dest.parent.exists()
    corrupt = run(dest, url=url, sha256="0" * 64, check=True)
    assert corrupt["failed"] and corrupt["msg"].startswith("checksum mismatch"), corrupt
    run(dest, url=url, sha256_url=url + ".sha256")
    os.chmod(dest, 0o700)
    attributes = run(dest, url=url, sha256_url=url + ".sha256", check=True)
    assert attributes["changed"] and mode(dest) == 0o700


def test_a_tampered_tarball_changes_nothing(mirror: tuple[Path, str], tmp_path: Path) -> None:
    genuine = tarball({"crictl": NEW})
    url = publish(mirror, "crictl.tar.gz", tarball({"crictl": b"#!/bin/sh\nexfiltrate\n"}))
    dest = tmp_path / "bin" / "crictl"
    refused = run(dest, url=url, sha256=sha256(genuine))
    assert refused["failed"], refused
    assert refused["msg"].startswith("checksum mismatch: {0} has sha256 ".format(url)), refused
    assert "expected {0}".format(sha256(genuine)) in refused["msg"]
    assert not dest.parent.exists()


def test_unreachable_or_missing_downloads_fail_cleanly(mirror: tuple[Path, str], tmp_path: Path) -> None:
    dest = tmp_path / "crictl"
    refused = run(dest, url="http://127.0.0.1:9/crictl.tar.gz", sha256_url="http://127.0.0.1:9/crictl.tar.gz.sha256")
    assert refused["failed"] and "Connection refused" in refused["msg"], refused
    missing = run(dest, url=mirror[1] + "/none.tar.gz", sha256="0" * 64)
    assert missing["failed"] and missing["status"] == 404 and "none.tar.gz" in missing["msg"], missing
    (mirror[0] / "bad.sha256").write_text("<html>not a digest</html>\n")
    no_digest = run(dest, url=mirror[1] + "/none.tar.gz", sha256_url=mirror[1] + "/bad.sha256")
    assert no_digest["failed"] and "does not start with a sha256" in no_digest["msg"], no_digest
    assert not dest.exists()


@pytest.mark.parametrize(("members", "message"), [
    ({"bin/crictl": NEW}, "has no member 'crictl'"),
    ({"crictl": ("link", "/bin/sh")}, "'crictl' is not a regular file"),
])
def test_a_tarball_without_the_program_is_an_error(
        mirror: tuple[Path, str], tmp_path: Path, members: dict[str, t.Any], message: str) -> None:
    url = publish(mirror, "crictl.tar.gz", tarball(members))
    result = run(tmp_path / "crictl", url=url, sha256_url=url + ".sha256")
    assert result["failed"] and message in result["msg"], result
    assert not (tmp_path / "crictl").exists()


def test_not_a_tarball_is_an_error(mirror: tuple[Path, str], tmp_path: Path) -> None:
    url = publish(mirror, "crictl.tar.gz", b"<html>a login page</html>\n")
    result = run(tmp_path / "crictl", url=url, sha256_url=url + ".sha256")
    assert result["failed"] and "is not a readable tarball" in result["msg"], result


def test_bad_arguments_name_the_field(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/crictl.tar.gz"
    assert run(Path("crictl"), url=url, sha256="0" * 64)["msg"].startswith("dest:")
    assert run(tmp_path / "crictl", url=url, sha256="abc")["msg"].startswith("sha256:")
    assert module_result("release_binary", {"url": url, "member": "../crictl", "dest": str(tmp_path / "c"),
                                            "sha256": "0" * 64})["msg"].startswith("member:")
    both = run(tmp_path / "crictl", url=url, sha256="0" * 64, sha256_url=url + ".sha256")
    assert both["failed"] and "mutually exclusive" in both["msg"]
    neither = run(tmp_path / "crictl", url=url)
    assert neither["failed"] and "sha256" in neither["msg"]
