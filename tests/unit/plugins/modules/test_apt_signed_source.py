# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""apt_signed_source: real gpg keys, served over HTTP on loopback, checked by the real gpg; the files it writes
are read back by apt-get itself (the key must verify the repository's signature)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play
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
    # One file, the trusted key and another: what a tampered key download looks like.
    (served / "both.asc").write_text(gpg(trusted, "--armor", "--export") + gpg(other, "--armor", "--export"))
    # The trusted key in gpg's binary format: the module writes the armoured export, never these bytes.
    subprocess.run(["gpg", "--batch", "--homedir", str(trusted), "--output", str(served / "trusted-binary.asc"), "--export"], check=True)
    (served / "repo" / "Packages").write_text("")
    release = served / "repo" / "Release"
    release.write_text(subprocess.run(["apt-ftparchive", "release", "."], cwd=served / "repo", capture_output=True, check=True, text=True).stdout)
    gpg(trusted, "--clearsign", "--output", str(served / "repo" / "InRelease"), str(release))
    # The same Release signed by the other key: a repository the pinned key must not let through.
    gpg(other, "--clearsign", "--output", str(tmp_path / "InRelease.other"), str(release))
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


@pytest.mark.skipif(not shutil.which("apt-ftparchive"), reason="needs apt-ftparchive")
def test_a_second_source_of_the_repository_with_another_key_is_refused_before_anything_is_written(site: dict[str, t.Any]) -> None:
    """Another file names the repository with another Signed-By (the driver layer's CUDA repository when a role adds
    it again): apt itself refuses the whole source list then. The module stops first, naming that file."""
    other = site["etc"] / "sources.list.d" / "gpufleet-nvidia-driver.list"
    other.write_text("deb [signed-by=/etc/apt/keyrings/gpufleet-nvidia-cuda.asc] {0}/repo/ /\n".format(site["url"]))
    refused = module_result("apt_signed_source", args(site), check=True)
    assert refused["failed"] and str(other) in refused["msg"] and "{0}/repo /".format(site["url"]) in refused["msg"], refused
    assert "every apt call on the node would fail" in refused["msg"]
    assert not os.listdir(site["etc"] / "keyrings") and os.listdir(site["etc"] / "sources.list.d") == [other.name]
    # What it prevents, as apt sees it: the two files side by side stop apt-get update.
    Path(args(site)["sources_path"]).write_text(args(site)["sources_content"])
    update = apt_update(site)
    assert update.returncode != 0 and "Conflicting values set for option Signed-By" in update.stderr, update.stderr
    # The same key is no conflict, nor is the module's own file on a second run.
    other.write_text("deb [signed-by={0}] {1}/repo/ /\n".format(args(site)["key_path"], site["url"]))
    assert not module_result("apt_signed_source", args(site))["failed"]
    other.unlink()
    assert not module_result("apt_signed_source", args(site))["failed"]


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
    refusal = "is refused: it holds the key(s) {0}, not the pinned {1}".format(site["fpr"]["other"], site["fpr"]["trusted"])
    assert served_other["failed"] and refusal in served_other["msg"], served_other["msg"]
    assert "Nothing was written" in served_other["msg"] and Path(args(site)["key_path"]).exists()
    # The declaration withdraws its trust in the key on the node: that key goes, the sources file stays.
    withdrawn = module_result("apt_signed_source", args(site, fingerprint="0" * 40))
    assert withdrawn["failed"] and "was removed" in withdrawn["msg"], withdrawn["msg"]
    assert not Path(args(site)["key_path"]).exists() and Path(args(site)["sources_path"]).read_text() == sources


def gpgv(keyring: Path, signed: Path) -> subprocess.CompletedProcess[str]:
    """gpgv, as apt runs it on an InRelease file, with `keyring` as the only trusted keys."""
    dearmored = keyring.with_suffix(".gpg.test")
    subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "--output", str(dearmored), str(keyring)], check=True, capture_output=True)
    return subprocess.run(["gpgv", "--keyring", str(dearmored), str(signed)], capture_output=True, text=True, check=False)


def test_a_key_file_with_the_pinned_key_and_another_is_refused_and_nothing_written(site: dict[str, t.Any]) -> None:
    result = module_result("apt_signed_source", args(site, key="both"))
    assert result["failed"] and "also {0}, which is not pinned".format(site["fpr"]["other"]) in result["msg"], result["msg"]
    assert "Nothing was written" in result["msg"] and result["changed_paths"] == []
    assert not os.listdir(site["etc"] / "keyrings") and not os.listdir(site["etc"] / "sources.list.d")


def test_a_two_key_file_already_on_the_node_is_removed_when_the_mirror_serves_it(site: dict[str, t.Any]) -> None:
    """What an earlier version wrote from a tampered download: apt accepted the other key's signatures with it."""
    key_path = Path(args(site)["key_path"])
    shutil.copy(site["tmp"] / "served" / "both.asc", key_path)
    assert gpgv(key_path, site["tmp"] / "InRelease.other").returncode == 0
    result = module_result("apt_signed_source", args(site, key="both"))
    assert result["failed"] and "was removed" in result["msg"] and not key_path.exists(), result["msg"]


def test_only_the_pinned_key_is_written_and_apts_verifier_accepts_no_other_signer(site: dict[str, t.Any]) -> None:
    result = module_result("apt_signed_source", args(site, key="trusted-binary"))
    assert not result["failed"], result["msg"]
    written = Path(args(site)["key_path"])
    # gpg's export of the pinned key, not the served bytes.
    assert written.read_bytes() != (site["tmp"] / "served" / "trusted-binary.asc").read_bytes()
    assert written.read_text().startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert gpgv(written, site["tmp"] / "served" / "repo" / "InRelease").returncode == 0
    refused = gpgv(written, site["tmp"] / "InRelease.other")
    assert refused.returncode != 0 and "No public key" in refused.stderr, refused.stderr


def test_an_empty_fingerprint_is_refused_naming_the_field(site: dict[str, t.Any]) -> None:
    result = module_result("apt_signed_source", args(site, key="other", fingerprint=""))
    assert result["failed"] and result["msg"].startswith("key_fingerprint: empty") and "allow_unpinned_key" in result["msg"], result["msg"]
    assert not os.listdir(site["etc"] / "keyrings")


def test_an_unpinned_key_is_taken_only_when_allowed_and_the_run_says_so(site: dict[str, t.Any]) -> None:
    result = module_result("apt_signed_source", args(site, key="both", fingerprint="", allow_unpinned_key=True))
    assert not result["failed"] and result["changed"] and result["fingerprint"] == "", result["msg"]
    warning = " ".join(result.get("warnings", []))
    assert "unchecked (allow_unpinned_key)" in warning and site["fpr"]["trusted"] in warning and site["fpr"]["other"] in warning, warning
    assert gpgv(Path(args(site)["key_path"]), site["tmp"] / "InRelease.other").returncode == 0


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
        ({"key_fingerprint": "A" * 40 + "\n"}, "key_fingerprint: expected 40 hexadecimal digits"),
        ({"key_path": "keyrings/repo.asc"}, "key_path: 'keyrings/repo.asc' is not absolute"),
        ({"sources_content": "deb http://example.invalid/ /\n"}, "sources_content: it does not name key_path"),
    ],
)
def test_bad_arguments_name_the_field(site: dict[str, t.Any], change: dict[str, str], message: str) -> None:
    result = module_result("apt_signed_source", {**args(site), **change})
    assert result["failed"] and message in result["msg"], result["msg"]


# -- credentials (issue 37): never in a URL, apt's in a 0600 auth.conf.d file ----------------------------------------
def secret_url(site: dict[str, t.Any], path: str) -> str:
    return site["url"].replace("//", "//fleet:hunter2-51d0@") + path


@pytest.mark.parametrize(
    ("option", "change"),
    [
        ("key_url", lambda site, a: {"key_url": secret_url(site, "/trusted.asc")}),
        ("release_url", lambda site, a: {"release_url": secret_url(site, "/repo/Release")}),
        ("sources_content", lambda site, a: {"sources_content": a["sources_content"].replace(site["url"], secret_url(site, ""))}),
    ],
)
def test_a_url_with_credentials_is_refused_masked_and_nothing_written(site: dict[str, t.Any], option: str, change: t.Any) -> None:
    base = args(site)
    refused = module_result("apt_signed_source", dict(base, **change(site, base)))
    assert refused["failed"] and refused["msg"].startswith(option + ": "), refused
    fix = "auth_login and auth_password" if option == "sources_content" else "url_username and url_password"
    assert fix in refused["msg"] and "hunter2-51d0" not in str(refused), refused
    assert not os.path.exists(base["key_path"]) and not os.path.exists(base["sources_path"])


def test_the_password_options_are_never_logged() -> None:
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.gpufleet.nvidia.plugins.modules.apt_signed_source import argument_spec

    assert argument_spec()["url_password"]["no_log"] is True and argument_spec()["auth_password"]["no_log"] is True


def test_a_key_url_with_credentials_never_reaches_verbose_output(site: dict[str, t.Any]) -> None:
    """-vvv prints the result's invocation (AWX stores it): the password in the refused URL must be masked there."""
    base = args(site, key_url=secret_url(site, "/trusted.asc"))
    play = site["tmp"] / "play.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - gpufleet.nvidia.apt_signed_source:\n"
        + "".join("        {0}: {1}\n".format(key, json.dumps(value)) for key, value in base.items())
    )
    output = local_play(play, "-vvv", rc=2, env={"ANSIBLE_INJECT_INVOCATION": "1"})
    assert "key_url: " in output and '"invocation"' in output, output
    assert "hunter2-51d0" not in output, output
    assert not os.path.exists(base["key_path"])


def test_apt_credentials_go_to_a_0600_file_never_shown_and_written_once(site: dict[str, t.Any]) -> None:
    auth = {"auth_login": "fleet", "auth_password": "apt-secret-7e3f"}
    path = site["etc"] / "auth.conf.d" / "repo.conf"
    predicted = module_result("apt_signed_source", args(site, **auth), check=True, diff=True)
    assert predicted["changed"] and str(path) in predicted["changed_paths"] and not path.exists(), predicted
    first = module_result("apt_signed_source", args(site, **auth), diff=True)
    assert not first["failed"] and str(path) in first["changed_paths"], first
    host = site["url"].split("//", 1)[1]
    assert path.read_text() == "machine {0}\nlogin fleet\npassword apt-secret-7e3f\n".format(host)
    assert oct(os.stat(path).st_mode & 0o777) == "0o600" and os.stat(path).st_uid == 0
    assert "credentials for {0}".format(host) in str(first["diff"])
    for result in (predicted, first):
        assert "apt-secret-7e3f" not in str(result), result
    again = module_result("apt_signed_source", args(site, **auth), diff=True)
    assert not again["changed"] and again["changed_paths"] == [], again
    os.chmod(path, 0o644)
    repaired = module_result("apt_signed_source", args(site, **auth))
    assert repaired["changed_paths"] == [str(path)] and oct(os.stat(path).st_mode & 0o777) == "0o600"
    rotated = module_result("apt_signed_source", args(site, auth_login="fleet", auth_password="rotated-0a9c"), diff=True)
    assert rotated["changed_paths"] == [str(path)] and "rotated-0a9c" not in str(rotated) and "apt-secret-7e3f" not in str(rotated)
    assert path.read_text().endswith("password rotated-0a9c\n")


def test_apt_credentials_that_would_break_the_file_are_refused(site: dict[str, t.Any]) -> None:
    refused = module_result("apt_signed_source", args(site, auth_login="fleet", auth_password="two words"))
    assert refused["failed"] and refused["msg"].startswith("auth_password: ") and "two words" not in str(refused), refused
    unknown = module_result("apt_signed_source", args(site, auth_login="fleet", auth_password="x", release_url=None))
    assert unknown["failed"] and unknown["msg"].startswith("auth_machine: "), unknown
