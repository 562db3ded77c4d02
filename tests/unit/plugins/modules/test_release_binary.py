# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""release_binary: real tarballs over real HTTP on loopback - verified, installed once, faults change nothing."""

from __future__ import annotations

import base64
import contextlib
import functools
import grp
import hashlib
import http.server
import io
import os
import pwd
import socket
import ssl
import stat
import tarfile
import threading
import time
import typing as t
import urllib.parse
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play
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


def pinned(mirror: tuple[Path, str], url: str) -> str:
    """The digest of a published tarball, as the caller pins it (a role's table, the inventory)."""
    return sha256((mirror[0] / url.rsplit("/", 1)[1]).read_bytes())


def run(dest: Path, check: bool = False, diff: bool = False, **args: t.Any) -> dict[str, t.Any]:
    """The module on `dest`; the test servers are plain HTTP on loopback, allowed unless a test says otherwise."""
    return module_result("release_binary", {"member": "crictl", "dest": str(dest), "allow_insecure_transport": True, **ME, **args}, check=check, diff=diff)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_installs_the_verified_member_once(mirror: tuple[Path, str], tmp_path: Path) -> None:
    url = publish(mirror, "crictl.tar.gz", tarball({"crictl": NEW, "LICENSE": b"text\n"}))
    dest = tmp_path / "bin" / "crictl"
    first = run(dest, url=url, sha256=pinned(mirror, url))
    assert first["changed"] and first["member_sha256"] == sha256(NEW), first
    assert first["sha256"] == sha256((mirror[0] / "crictl.tar.gz").read_bytes())
    assert dest.read_bytes() == NEW and mode(dest) == 0o755 and mode(dest.parent) == 0o755
    assert [p.name for p in dest.parent.iterdir()] == ["crictl"]
    again = run(dest, url=url, sha256=first["sha256"])
    assert not again["changed"], again


def test_a_new_release_replaces_the_program_and_attributes_are_restored(mirror: tuple[Path, str], tmp_path: Path) -> None:
    dest = tmp_path / "crictl"
    old = publish(mirror, "old.tar.gz", tarball({"./crictl": OLD}))
    run(dest, url=old, sha256=pinned(mirror, old))
    assert dest.read_bytes() == OLD
    new = publish(mirror, "new.tar.gz", tarball({"crictl": NEW}))
    replaced = run(dest, url=new, sha256=pinned(mirror, new), diff=True)
    assert replaced["changed"] and dest.read_bytes() == NEW
    assert replaced["diff"]["before"]["sha256"] == sha256(OLD) and replaced["diff"]["after"]["sha256"] == sha256(NEW)
    os.chmod(dest, 0o700)
    restored = run(dest, url=new, sha256=pinned(mirror, new))
    assert restored["changed"] and mode(dest) == 0o755 and dest.read_bytes() == NEW
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".gpufleet-")] == []


def test_check_mode_verifies_and_predicts_but_writes_nothing(mirror: tuple[Path, str], tmp_path: Path) -> None:
    url = publish(mirror, "crictl.tar.gz", tarball({"crictl": NEW}))
    dest = tmp_path / "bin" / "crictl"
    predicted = run(dest, url=url, sha256=pinned(mirror, url), check=True, diff=True)
    assert predicted["changed"] and predicted["diff"]["before"]["sha256"] == "(absent)", predicted
    assert not dest.parent.exists()
    corrupt = run(dest, url=url, sha256="0" * 64, check=True)
    assert corrupt["failed"] and corrupt["msg"].startswith("checksum mismatch"), corrupt
    run(dest, url=url, sha256=pinned(mirror, url))
    os.chmod(dest, 0o700)
    attributes = run(dest, url=url, sha256=pinned(mirror, url), check=True)
    assert attributes["changed"] and mode(dest) == 0o700


def test_the_release_in_place_is_not_fetched_again(mirror: tuple[Path, str], tmp_path: Path) -> None:
    """version + version_argv: the program in place is asked first, in the same call; the release it names is not
    downloaded (the tarball is gone from the mirror: a fetch would fail), another version is replaced."""
    dest = tmp_path / "bin" / "crictl"
    old = publish(mirror, "old.tar.gz", tarball({"crictl": OLD}))
    asked = {"version": "v1.36.0", "version_argv": [str(dest)]}
    run(dest, url=old, sha256=pinned(mirror, old))
    new = publish(mirror, "new.tar.gz", tarball({"crictl": NEW}))
    digest = pinned(mirror, new)
    replaced = run(dest, url=new, sha256=digest, **asked)
    assert replaced["changed"] and replaced["fetched"] and dest.read_bytes() == NEW, replaced
    (mirror[0] / "new.tar.gz").unlink()
    kept = run(dest, url=new, sha256=digest, **asked)
    assert not kept["changed"] and not kept["fetched"] and kept["installed_version"] == "v1.36.0", kept
    assert kept["member_sha256"] == sha256(NEW) and "sha256" not in kept
    # The leading v is the release's spelling, not the program's: "1.36.0" names the same release.
    assert not run(dest, url=new, sha256=digest, version="1.36.0", version_argv=[str(dest)])["fetched"]
    # Only the attributes of the release in place are set, without a download; check mode predicts it.
    os.chmod(dest, 0o700)
    assert run(dest, url=new, sha256=digest, check=True, **asked)["changed"] and mode(dest) == 0o700
    fixed = run(dest, url=new, sha256=digest, **asked)
    assert fixed["changed"] and not fixed["fetched"] and mode(dest) == 0o755


def test_a_missing_or_failing_program_is_installed_from_the_tarball(mirror: tuple[Path, str], tmp_path: Path) -> None:
    url = publish(mirror, "crictl.tar.gz", tarball({"crictl": NEW}))
    dest = tmp_path / "crictl"
    first = run(dest, url=url, sha256=pinned(mirror, url), version="v1.36.0", version_argv=[str(dest)])
    assert first["changed"] and first["fetched"] and dest.read_bytes() == NEW, first
    dest.write_bytes(b"#!/bin/sh\necho v1.36.0\nexit 3\n")  # names the release, but fails: not trusted
    again = run(dest, url=url, sha256=pinned(mirror, url), version="v1.36.0", version_argv=[str(dest)])
    assert again["changed"] and again["fetched"] and dest.read_bytes() == NEW, again
    missing = run(dest, url=url, sha256=pinned(mirror, url), version="v1.36.0", version_argv=[str(tmp_path / "nowhere")])
    assert not missing["changed"] and missing["fetched"], missing
    alone = run(dest, url=url, sha256=pinned(mirror, url), version="v1.36.0")
    assert alone["failed"] and "version_argv" in alone["msg"], alone


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
    refused = run(dest, url="http://127.0.0.1:9/crictl.tar.gz", sha256="0" * 64)
    assert refused["failed"] and "Connection refused" in refused["msg"], refused
    missing = run(dest, url=mirror[1] + "/none.tar.gz", sha256="0" * 64)
    assert missing["failed"] and missing["status"] == 404 and "none.tar.gz" in missing["msg"], missing
    assert not dest.exists()


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({"bin/crictl": NEW}, "has no member 'crictl'"),
        ({"crictl": ("link", "/bin/sh")}, "'crictl' is not a regular file"),
    ],
)
def test_a_tarball_without_the_program_is_an_error(mirror: tuple[Path, str], tmp_path: Path, members: dict[str, t.Any], message: str) -> None:
    url = publish(mirror, "crictl.tar.gz", tarball(members))
    result = run(tmp_path / "crictl", url=url, sha256=pinned(mirror, url))
    assert result["failed"] and message in result["msg"], result
    assert not (tmp_path / "crictl").exists()


def test_not_a_tarball_is_an_error(mirror: tuple[Path, str], tmp_path: Path) -> None:
    url = publish(mirror, "crictl.tar.gz", b"<html>a login page</html>\n")
    result = run(tmp_path / "crictl", url=url, sha256=pinned(mirror, url))
    assert result["failed"] and "is not a readable tarball" in result["msg"], result


def test_bad_arguments_name_the_field(tmp_path: Path) -> None:
    url = "http://127.0.0.1:9/crictl.tar.gz"
    assert run(Path("crictl"), url=url, sha256="0" * 64)["msg"].startswith("dest:")
    assert run(tmp_path / "crictl", url=url, sha256="abc")["msg"].startswith("sha256:")
    assert run(tmp_path / "c", url=url, member="../crictl", sha256="0" * 64)["msg"].startswith("member:")
    neither = run(tmp_path / "crictl", url=url)
    assert neither["failed"] and "missing required arguments: sha256" in neither["msg"], neither
    # The release's own .sha256 is no longer read: it came from the server it was meant to check.
    published = run(tmp_path / "crictl", url=url, sha256="0" * 64, sha256_url=url + ".sha256")
    assert published["failed"] and "Unsupported parameters" in published["msg"] and "sha256_url" in published["msg"], published


# -- the HTTP client: ansible.module_utils.urls, with get_url's options -------------------------------------------
class Recorder(http.server.SimpleHTTPRequestHandler):
    """Serves a directory and notes each request; a proxy's absolute URI is served from the same directory.

    `password` (class attribute of a subclass) asks for HTTP Basic authentication as user "fleet".
    """

    requests: list[dict[str, t.Any]] = []
    password: str | None = None

    def log_message(self, *args: t.Any) -> None:  # pylint: disable=arguments-differ
        pass

    def do_GET(self) -> None:
        proxied = self.path.startswith("http://")
        self.requests.append({"path": self.path, "proxied": proxied, "headers": dict(self.headers)})
        if proxied:
            self.path = urllib.parse.urlsplit(self.path).path
        if self.password is not None:
            token = base64.b64encode("fleet:{0}".format(self.password).encode()).decode()
            if self.headers.get("Authorization") != "Basic " + token:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="mirror"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        super().do_GET()


@contextlib.contextmanager
def serving(root: Path, password: str | None = None, tls: ssl.SSLContext | None = None) -> t.Iterator[tuple[str, list[dict[str, t.Any]]]]:
    """`root` over HTTP (or HTTPS with `tls`) on loopback: (its URL, the requests it got)."""
    handler = type("Handler", (Recorder,), {"requests": [], "password": password})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "{0}://127.0.0.1:{1}".format("https" if tls else "http", server.server_address[1]), handler.requests
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(name="release")
def fixture_release(tmp_path: Path) -> tuple[Path, str]:
    """A directory with a published crictl tarball: (the directory, the tarball's digest)."""
    root = tmp_path / "release"
    root.mkdir()
    data = tarball({"crictl": NEW})
    (root / "crictl.tar.gz").write_bytes(data)
    return root, sha256(data)


def test_a_proxy_from_the_environment_is_used_unless_use_proxy_is_false(release: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, digest = release
    with serving(root) as (proxy, requests):
        monkeypatch.setenv("http_proxy", proxy)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        # A name that resolves nowhere (RFC 6761): only the proxy can answer for it.
        url = "http://mirror.invalid/crictl.tar.gz"
        through = run(tmp_path / "crictl", url=url, sha256=digest)
        assert through["changed"] and (tmp_path / "crictl").read_bytes() == NEW, through
        assert [(r["path"], r["proxied"]) for r in requests] == [(url, True)]
        direct = run(tmp_path / "other", url=url, sha256=digest, use_proxy=False)
        assert direct["failed"] and len(requests) == 1, direct


def test_credentials_come_from_the_options_or_netrc(release: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, digest = release
    with serving(root, password="s3cret") as (url, requests):
        tarball_url = url + "/crictl.tar.gz"
        denied = run(tmp_path / "crictl", url=tarball_url, sha256=digest)
        assert denied["failed"] and denied["status"] == 401, denied
        given = run(
            tmp_path / "crictl",
            url=tarball_url,
            sha256=digest,
            url_username="fleet",
            url_password="s3cret",
            force_basic_auth=True,
            headers={"X-Fleet": "node-7"},
            http_agent="gpufleet-test",
        )
        assert given["changed"], given
        assert requests[-1]["headers"]["X-Fleet"] == "node-7"
        assert requests[-1]["headers"]["User-Agent"] == "gpufleet-test"
        netrc = tmp_path / "netrc"
        netrc.write_text("machine 127.0.0.1 login fleet password s3cret\n")
        netrc.chmod(0o600)
        monkeypatch.setenv("NETRC", str(netrc))
        from_netrc = run(tmp_path / "netrc-crictl", url=tarball_url, sha256=digest)
        assert from_netrc["changed"] and (tmp_path / "netrc-crictl").read_bytes() == NEW, from_netrc
        ignored = run(tmp_path / "no-netrc", url=tarball_url, sha256=digest, use_netrc=False)
        assert ignored["failed"] and ignored["status"] == 401, ignored


def _certificate(name: str, key: t.Any, issuer: tuple[t.Any, t.Any] | None = None, ca: bool = False) -> t.Any:
    """An X.509 certificate for `name` (a CA's when `ca`), signed by `issuer` (certificate, key) or itself."""
    # cryptography comes with ansible-core on the controller only: imported where it is used.
    # pylint: disable=import-outside-toplevel
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    signer_cert, signer_key = issuer if issuer else (None, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(signer_cert.subject if signer_cert else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(name))])
            if name == "127.0.0.1"
            else x509.SubjectAlternativeName([x509.DNSName(name)]),
            critical=False,
        )
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if name == "127.0.0.1" else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key()), critical=False)
    return builder.sign(signer_key, hashes.SHA256())


def _pem(tmp_path: Path, name: str, *objects: t.Any) -> str:
    # pylint: disable=import-outside-toplevel
    from cryptography.hazmat.primitives import serialization

    path = tmp_path / name
    path.write_bytes(
        b"".join(
            item.public_bytes(serialization.Encoding.PEM)
            if hasattr(item, "public_bytes") and not hasattr(item, "sign")
            else item.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            for item in objects
        )
    )
    return str(path)


def test_https_is_verified_against_ca_path_and_a_client_certificate_is_presented(release: tuple[Path, str], tmp_path: Path) -> None:
    # pylint: disable-next=import-outside-toplevel
    from cryptography.hazmat.primitives.asymmetric import ec

    ca_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1()))
    ca = _certificate("gpufleet test CA", ca_key, ca=True)
    ca_path = _pem(tmp_path, "ca.pem", ca)
    client_cert = _pem(tmp_path, "client.pem", _certificate("node-7", client_key, (ca, ca_key)))
    client_key_path = _pem(tmp_path, "client.key", client_key)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(_pem(tmp_path, "server.pem", _certificate("127.0.0.1", server_key, (ca, ca_key))), _pem(tmp_path, "server.key", server_key))
    tls.load_verify_locations(ca_path)
    tls.verify_mode = ssl.CERT_REQUIRED  # the mirror takes only nodes with a certificate of its CA
    root, digest = release
    with serving(root, tls=tls) as (url, requests):
        tarball_url = url + "/crictl.tar.gz"
        untrusted = run(tmp_path / "crictl", url=tarball_url, sha256=digest, client_cert=client_cert, client_key=client_key_path)
        assert untrusted["failed"] and "CERTIFICATE_VERIFY_FAILED" in untrusted["msg"], untrusted
        anonymous = run(tmp_path / "crictl", url=tarball_url, sha256=digest, ca_path=ca_path)
        assert anonymous["failed"] and not (tmp_path / "crictl").exists(), anonymous
        assert requests == []
        presented = run(tmp_path / "crictl", url=tarball_url, sha256=digest, ca_path=ca_path, client_cert=client_cert, client_key=client_key_path)
        assert presented["changed"] and (tmp_path / "crictl").read_bytes() == NEW, presented
        assert [r["path"] for r in requests] == ["/crictl.tar.gz"]


def test_certificates_cannot_be_switched_off(tmp_path: Path) -> None:
    refused = run(tmp_path / "crictl", url="https://127.0.0.1:9/crictl.tar.gz", sha256="0" * 64, validate_certs=False)
    assert refused["failed"] and "validate_certs" in refused["msg"], refused


def test_a_server_that_does_not_answer_times_out(tmp_path: Path) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # accepted by the kernel, never answered
        started = time.monotonic()
        result = run(tmp_path / "crictl", url="http://127.0.0.1:{0}/crictl.tar.gz".format(silent.getsockname()[1]), sha256="0" * 64, timeout=1)
        assert result["failed"] and "timed out" in result["msg"], result
        assert time.monotonic() - started < 15


def test_a_url_with_credentials_is_refused_before_any_request_and_masked(release: tuple[Path, str], tmp_path: Path) -> None:
    root, digest = release
    with serving(root) as (url, requests):
        refused = run(tmp_path / "crictl", url=url.replace("//", "//fleet:hunter2@") + "/crictl.tar.gz", sha256=digest)
    assert refused["failed"] and refused["msg"].startswith("url: "), refused
    assert "url_username and url_password" in refused["msg"] and "hunter2" not in str(refused), refused
    assert requests == [] and not (tmp_path / "crictl").exists()


def test_the_password_option_is_never_logged() -> None:
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.gpufleet.nvidia.plugins.modules.release_binary import argument_spec

    assert argument_spec()["url_password"]["no_log"] is True


@pytest.mark.parametrize("scheme", ["http", "ftp", "file"])
def test_a_url_that_is_not_https_is_refused_unless_allowed(mirror: tuple[Path, str], tmp_path: Path, scheme: str) -> None:
    # A fake binary and its own digest, from a server nothing authenticates: the finding of issue 37.
    fake = tarball({"crictl": b"#!/bin/sh\necho pwned\n"})
    url = publish(mirror, "crictl.tar.gz", fake)
    url = {"http": url, "ftp": url.replace("http://", "ftp://"), "file": "file://" + str(mirror[0] / "crictl.tar.gz")}[scheme]
    dest = tmp_path / "bin" / "crictl"
    refused = run(dest, url=url, sha256=sha256(fake), allow_insecure_transport=False)
    assert refused["failed"], refused
    assert refused["msg"].startswith("url: ") and "over {0}".format(scheme) in refused["msg"], refused
    assert "allow_insecure_transport: true" in refused["msg"], refused
    assert not dest.parent.exists()


def test_an_allowed_plain_http_url_installs(mirror: tuple[Path, str], tmp_path: Path) -> None:
    url = publish(mirror, "crictl.tar.gz", tarball({"crictl": NEW}))
    allowed = run(tmp_path / "crictl", url=url, sha256=pinned(mirror, url), allow_insecure_transport=True)
    assert allowed["changed"] and (tmp_path / "crictl").read_bytes() == NEW, allowed
    # The mirror is on the loopback: nothing travels a network, so no warning (the flag is still needed).
    assert not [w for w in allowed.get("warnings") or [] if "not https" in w], allowed


@pytest.mark.parametrize(
    "url, warned",
    [
        ("http://mirror.example.internal/crictl.tar.gz", True),
        ("ftp://10.1.2.3/crictl.tar.gz", True),
        ("http://127.0.0.1:8765/crictl.tar.gz", False),
        ("http://[::1]:8765/crictl.tar.gz", False),
        ("http://localhost/crictl.tar.gz", False),
        ("file:///srv/mirror/crictl.tar.gz", False),
    ],
)
def test_an_allowed_insecure_url_warns_unless_it_stays_on_the_node(url: str, warned: bool) -> None:
    from ansible_collections.gpufleet.nvidia.plugins.module_utils._fetch import refuse_insecure_transport

    warnings: list[str] = []

    class Module:
        def warn(self, message: str) -> None:
            warnings.append(message)

        def fail_json(self, **result: object) -> None:
            raise AssertionError(result)

    refuse_insecure_transport(Module(), url, "url", True)  # type: ignore[arg-type]
    assert bool([w for w in warnings if "not https (allow_insecure_transport)" in w]) == warned, warnings


PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - gpufleet.nvidia.release_binary:
        url: "{url}"
        sha256: "{digest}"
        member: crictl
        dest: "{dest}"
        owner: {owner}
        group: {group}
        allow_insecure_transport: true
"""


def test_credentials_in_the_url_never_reach_the_output(release: tuple[Path, str], tmp_path: Path) -> None:
    """The result's invocation (-v shows it, AWX stores it) echoes the URL: the password must be masked there."""
    root, digest = release
    play = tmp_path / "play.yml"
    with serving(root) as (url, requests):
        secret_url = url.replace("//", "//fleet:hunter2-9c1e@") + "/crictl.tar.gz"
        play.write_text(PLAY.format(url=secret_url, digest=digest, dest=tmp_path / "crictl", **ME))
        # ansible-core 2.21 leaves `invocation` out unless asked: ask, so that its masking is what is tested.
        output = local_play(play, "-vvv", rc=2, env={"ANSIBLE_INJECT_INVOCATION": "1"})
    assert "url_username and url_password" in output and '"invocation"' in output, output
    assert "hunter2-9c1e" not in output, output
    assert requests == [] and not (tmp_path / "crictl").exists()
