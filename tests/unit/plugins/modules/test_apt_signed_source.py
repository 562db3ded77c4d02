# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""apt_signed_source: real gpg keys, served over HTTP on loopback, checked by the real gpg; the files it writes
are read back by apt-get itself (the key must verify the repository's signature)."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import threading
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result

pytestmark = pytest.mark.skipif(not shutil.which("gpg") or os.geteuid() != 0, reason="needs gpg, and root for the files' owner")


def gpg(home: Path, *args: str) -> str:
    return subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(home), *args], capture_output=True, check=True, text=True).stdout


def make_key(home: Path, uid: str) -> str:
    """A signing key of its own home; returns its fingerprint."""
    home.mkdir(mode=0o700)
    gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
    return next(line.split(":")[9] for line in gpg(home, "--with-colons", "--list-keys").splitlines() if line.startswith("fpr:"))


@pytest.fixture(name="site")
def fixture_site(tmp_path: Path) -> t.Iterator[dict[str, t.Any]]:
    """A flat repository signed by one key and served over HTTP with that key and another; a node's etc."""
    served = tmp_path / "served"
    (served / "repo").mkdir(parents=True)
    trusted, other = tmp_path / "gpg-trusted", tmp_path / "gpg-other"
    fingerprints = {"trusted": make_key(trusted, "trusted <t@gpufleet.invalid>"), "other": make_key(other, "other <o@gpufleet.invalid>")}
    (served / "trusted.asc").write_text(gpg(trusted, "--armor", "--export"))
    (served / "other.asc").write_text(gpg(other, "--armor", "--export"))
    (served / "repo" / "Packages").write_text("")
    release = served / "repo" / "Release"
    release.write_text(subprocess.run(["apt-ftparchive", "release", "."], cwd=served / "repo", capture_output=True, check=True, text=True).stdout)
    gpg(trusted, "--clearsign", "--output", str(served / "repo" / "InRelease"), str(release))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    etc = tmp_path / "etc"
    (etc / "keyrings").mkdir(parents=True)
    (etc / "sources.list.d").mkdir()
    url = "http://127.0.0.1:{0}".format(server.server_address[1])
    try:
        yield {"tmp": tmp_path, "url": url, "etc": etc, "fpr": fingerprints}
    finally:
        server.shutdown()
        server.server_close()


def args(site: dict[str, t.Any], key: str = "trusted", fingerprint: str = "trusted", **more: t.Any) -> dict[str, t.Any]:
    key_path = str(site["etc"] / "keyrings" / "repo.asc")
    return {
        "key_url": "{0}/{1}.asc".format(site["url"], key),
        "key_fingerprint": site["fpr"].get(fingerprint, fingerprint),
        "key_path": key_path,
        "sources_path": str(site["etc"] / "sources.list.d" / "repo.sources"),
        "sources_content": "Types: deb\nURIs: {0}/repo\nSuites: /\nSigned-By: {1}\n".format(site["url"], key_path),
        "release_url": "{0}/repo/Release".format(site["url"]),
        **more,
    }


def apt_update(site: dict[str, t.Any]) -> subprocess.CompletedProcess[str]:
    """apt-get update of the written sources alone, with scratch lists: the consumer of both files."""
    state = site["tmp"] / "apt-state"
    (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [
            "apt-get",
            "update",
            "-o",
            "Dir::Etc::sourcelist=/dev/null",
            "-o",
            "Dir::Etc::sourceparts={0}".format(site["etc"] / "sources.list.d"),
            "-o",
            "Dir::State::Lists={0}".format(state / "lists"),
            "-o",
            "Debug::NoLocking=1",
        ],
        check=False,
        capture_output=True,
        text=True,
    )


@pytest.mark.skipif(not shutil.which("apt-ftparchive"), reason="needs apt-ftparchive")
def test_writes_the_key_and_the_source_that_apt_then_verifies_and_changes_nothing_again(site: dict[str, t.Any]) -> None:
    first = module_result(
        "apt_signed_source", args(site, key_fingerprint=" ".join(site["fpr"]["trusted"][i : i + 4] for i in range(0, 40, 4)).lower()), diff=True
    )
    assert not first["failed"], first["msg"]
    assert first["changed"] and first["fingerprint"] == site["fpr"]["trusted"]
    assert sorted(first["changed_paths"]) == sorted(args(site)[name] for name in ("key_path", "sources_path"))
    assert "fingerprint {0}".format(site["fpr"]["trusted"]) in first["diff"][0]["after"]
    for name in ("key_path", "sources_path"):
        assert oct(os.stat(args(site)[name]).st_mode & 0o777) == "0o644"
    update = apt_update(site)
    assert update.returncode == 0 and "NO_PUBKEY" not in update.stderr and "not signed" not in update.stderr, update.stderr
    again = module_result("apt_signed_source", args(site))
    assert not again["failed"] and not again["changed"] and again["changed_paths"] == []


def test_check_mode_writes_nothing(site: dict[str, t.Any]) -> None:
    result = module_result("apt_signed_source", args(site), check=True)
    assert not result["failed"] and result["changed"]
    assert not os.listdir(site["etc"] / "keyrings") and not os.listdir(site["etc"] / "sources.list.d")


@pytest.mark.skipif(not shutil.which("apt-ftparchive"), reason="needs apt-ftparchive")
def test_a_key_with_another_fingerprint_is_refused_and_the_untrusted_key_removed(site: dict[str, t.Any]) -> None:
    assert not module_result("apt_signed_source", args(site))["failed"]
    sources = Path(args(site)["sources_path"]).read_text()
    # The mirror now serves another key than the declaration trusts: nothing it serves is written.
    served_other = module_result("apt_signed_source", args(site, key="other"))
    assert served_other["failed"] and "has fingerprint {0}, not the declared {1}".format(site["fpr"]["other"], site["fpr"]["trusted"]) in served_other["msg"]
    assert "Nothing was written" in served_other["msg"] and Path(args(site)["key_path"]).exists()
    # The declaration withdraws its trust in the key on the node: that key goes, the sources file stays.
    withdrawn = module_result("apt_signed_source", args(site, fingerprint="0" * 40))
    assert withdrawn["failed"] and "was removed" in withdrawn["msg"], withdrawn["msg"]
    assert not Path(args(site)["key_path"]).exists() and Path(args(site)["sources_path"]).read_text() == sources


def test_an_empty_fingerprint_takes_the_key_as_served(site: dict[str, t.Any]) -> None:
    result = module_result("apt_signed_source", args(site, key="other", fingerprint=""))
    assert not result["failed"] and result["changed"] and result["fingerprint"] == ""
    assert Path(args(site)["key_path"]).read_text() == (site["tmp"] / "served" / "other.asc").read_text()


def test_a_repository_that_does_not_answer_changes_nothing(site: dict[str, t.Any]) -> None:
    result = module_result("apt_signed_source", args(site, release_url="http://127.0.0.1:9/repo/Release"))
    assert result["failed"] and "the repository does not answer" in result["msg"] and "nothing was changed" in result["msg"]
    assert not os.listdir(site["etc"] / "keyrings") and not os.listdir(site["etc"] / "sources.list.d")


def test_a_key_that_cannot_be_fetched_names_its_url(site: dict[str, t.Any]) -> None:
    result = module_result("apt_signed_source", args(site, key="missing"))
    assert result["failed"] and "could not fetch {0}/missing.asc".format(site["url"]) in result["msg"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"key_fingerprint": "ABCD"}, "key_fingerprint: expected 40 hexadecimal digits"),
        ({"key_path": "keyrings/repo.asc"}, "key_path: 'keyrings/repo.asc' is not absolute"),
        ({"sources_content": "deb http://example.invalid/ /\n"}, "sources_content: it does not name key_path"),
    ],
)
def test_bad_arguments_name_the_field(site: dict[str, t.Any], change: dict[str, str], message: str) -> None:
    result = module_result("apt_signed_source", {**args(site), **change})
    assert result["failed"] and message in result["msg"], result["msg"]
