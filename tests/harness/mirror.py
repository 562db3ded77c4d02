"""The test ground's local package mirror, served on loopback.

One directory tree ($GPUFLEET_MIRROR_ROOT) served over HTTP on 127.0.0.1:
  keys/gpufleet-mirror.asc      throwaway signing key (ASCII armour)
  keys/gpufleet-mirror.gpg      the same key, binary (for signed-by)
  <path>/dists/<suite>/...      Debian-style repositories (e.g. debian/),
  <path>/pool/<suite>/<comp>/   with one pool per suite
  <path>/Packages, InRelease    flat repositories, laid out like NVIDIA's
                                (e.g. libnvidia-container/stable/deb/amd64/)
  files/<path>/<name>           release tarballs, each with <name>.sha256

Roles point their mirror variables at this tree, so the air-gapped path is
the path the tests take. Every apt repository is signed; nothing is served
unsigned.

Subcommands:
  init                                   create the key (once per cache)
  fetch --suite S PKG...                 download PKG and its non-main
                                         dependencies from Debian into the cache
                                         (S may be a pocket: bookworm-backports)
  add-deb --dist PATH SUITE COMP DEB...  add .debs to a Debian-style repository
                                         (COMP "auto": from each package's Section)
  add-deb --flat PATH DEB...             add .debs to a flat repository
  add-file PATH FILE...                  publish files (+ .sha256) under files/PATH
  index                                  regenerate and sign every repository
  serve | stop | status                  the HTTP server on loopback
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

CACHE = Path(os.environ.get("GPUFLEET_CACHE", "/var/cache/gpufleet"))
ROOT = Path(os.environ.get("GPUFLEET_MIRROR_ROOT", str(CACHE / "mirror")))
PORT = int(os.environ.get("GPUFLEET_MIRROR_PORT", "8765"))
DEBIAN = os.environ.get("GPUFLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")
GNUPGHOME = CACHE / "mirror-gnupg"
DEB_CACHE = CACHE / "debs"
KEY_UID = "gpufleet test mirror (throwaway) <mirror@gpufleet.invalid>"
DIST_MARKER = ".gpufleet-dist"
FLAT_MARKER = ".gpufleet-flat"
PIDFILE = CACHE / "mirror-http.pid"
ROOT_MARKER = ".gpufleet-mirror-root"


def log(msg: str) -> None:
    print(f"[mirror] {msg}", file=sys.stderr)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kwargs)


def gpg(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return run(["gpg", "--batch", "--quiet", "--homedir", str(GNUPGHOME), *args], **kwargs)


# --- key ----------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> None:
    GNUPGHOME.mkdir(parents=True, exist_ok=True)
    GNUPGHOME.chmod(0o700)
    listed = gpg("--list-secret-keys", "--with-colons", capture_output=True, text=True).stdout
    if "sec:" not in listed:
        log("generating a throwaway signing key")
        gpg("--passphrase", "", "--quick-gen-key", KEY_UID, "rsa3072", "sign", "never")
    keys = ROOT / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    armour = gpg("--export", "--armor", capture_output=True).stdout
    binary = gpg("--export", capture_output=True).stdout
    _write_if_changed(keys / "gpufleet-mirror.asc", armour)
    _write_if_changed(keys / "gpufleet-mirror.gpg", binary)
    (ROOT / ROOT_MARKER).write_text(str(ROOT) + "\n")


def fingerprint() -> str:
    out = gpg("--list-keys", "--with-colons", capture_output=True, text=True).stdout
    return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))


def _write_if_changed(path: Path, data: bytes) -> None:
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)
        path.chmod(0o644)


# --- fetching from Debian -----------------------------------------------------


def _apt_options(suite: str) -> list[str]:
    """A private apt configuration, so the host's own sources stay untouched."""
    base = CACHE / "apt" / suite
    (base / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (base / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    sources = base / "sources.list"
    sources.write_text(
        f"deb {DEBIAN} {suite} main contrib non-free non-free-firmware\n"
        f"deb {DEBIAN} {suite}-updates main contrib non-free non-free-firmware\n"
        f"deb {DEBIAN} {suite}-backports main contrib non-free non-free-firmware\n"
    )
    status = base / "status"
    status.touch()
    return [
        "-o",
        f"Dir::Etc::sourcelist={sources}",
        "-o",
        "Dir::Etc::sourceparts=-",
        "-o",
        f"Dir::State::Lists={base / 'lists'}",
        "-o",
        f"Dir::State::status={status}",
        "-o",
        f"Dir::Cache={base}",
        "-o",
        f"Dir::Cache::archives={base / 'archives'}",
        "-o",
        "APT::Architecture=amd64",
        "-o",
        "APT::Install-Recommends=false",
        "-o",
        "Debug::NoLocking=true",
    ]


def cmd_fetch(args: argparse.Namespace) -> None:
    """Download packages and the dependencies a main-only target cannot get.

    Targets keep Debian main in their sources (the distribution mirror); the
    local mirror stands in for the non-free/contrib and NVIDIA repositories.
    So a package's dependencies from main are left to the target's apt.
    """
    # A pocket such as bookworm-backports shares its release's apt
    # configuration; -t makes apt resolve the whole closure from the pocket.
    release, _sep, pocket = args.suite.partition("-")
    opts = _apt_options(release)
    target = ["-t", args.suite] if pocket else []
    lists = CACHE / "apt" / release / "lists"
    stale = not any(lists.glob("*_Packages*")) or time.time() - lists.stat().st_mtime > 6 * 3600
    if stale:
        run(["apt-get", *opts, "-qq", "update"])
        lists.touch()
    dest = DEB_CACHE / args.suite
    dest.mkdir(parents=True, exist_ok=True)
    # The answer depends only on the request and apt's lists, which change
    # only when they are updated (above): a warm run reads it back instead of
    # asking apt again (apt-get and one apt-cache per backports package).
    memo = _fetch_memo(lists, args)
    if memo.exists():
        cached = memo.read_text().split()
        if all(Path(path).exists() for path in cached):
            for path in cached:
                print(path)
            return
    out = run(["apt-get", *opts, "-qq", *target, "--print-uris", "install", *args.packages], capture_output=True, text=True).stdout
    fetched = []
    for line in out.splitlines():
        uri, name, _size, *rest = line.split()
        uri = uri.strip("'")
        if "/pool/main/" in uri and not args.all:
            continue
        target = dest / name
        if not target.exists():
            log(f"downloading {name}")
            # apt prints no hash for some pocket entries (backports); never
            # download unverified: take the index's SHA256 instead.
            _download(uri, target, rest[0] if rest else _index_sha256(opts, name))
        fetched.append(str(target))
    _write_if_changed(memo, "".join(f"{path}\n" for path in fetched).encode())
    for path in fetched:
        print(path)


def _fetch_memo(lists: Path, args: argparse.Namespace) -> Path:
    """Where fetch keeps its answer, named by the request and apt's lists."""
    key = hashlib.sha256(repr((args.suite, sorted(args.packages), args.all)).encode())
    for index in sorted(lists.glob("*_Packages*")):
        stat = index.stat()
        key.update(f"{index.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return DEB_CACHE / args.suite / f".fetch-{key.hexdigest()[:16]}"


def _index_sha256(opts: list[str], deb_name: str) -> str:
    """SHA256 of <name>_<version>_<arch>.deb as the signed index lists it."""
    package, version, _arch = deb_name[: -len(".deb")].split("_")
    version = urllib.parse.unquote(version)
    shown = run(["apt-cache", *opts, "show", f"{package}={version}"], capture_output=True, text=True).stdout
    digest = next((line.split()[1] for line in shown.splitlines() if line.startswith("SHA256:")), None)
    if not digest:
        raise SystemExit(f"no SHA256 for {package}={version} in the apt index")
    return f"SHA256:{digest}"


def _download(uri: str, target: Path, checksum: str) -> None:
    algo, _sep, digest = checksum.partition(":")
    algo = {"SHA256": "sha256", "SHA512": "sha512", "MD5Sum": "md5"}.get(algo, algo.lower())
    tmp = target.with_suffix(".part")
    with urllib.request.urlopen(uri, timeout=120) as response, open(tmp, "wb") as fh:
        shutil.copyfileobj(response, fh)
    actual = hashlib.new(algo, tmp.read_bytes()).hexdigest()
    if digest and actual != digest:
        tmp.unlink()
        raise SystemExit(f"checksum mismatch for {uri}: {actual} != {digest}")
    tmp.rename(target)


# --- publishing ---------------------------------------------------------------


def _repo_dir(path: str) -> Path:
    repo = (ROOT / path).resolve()
    if ROOT.resolve() not in repo.parents:
        raise SystemExit(f"repository path {path!r} leaves the mirror root")
    return repo


def _component_of(deb: Path) -> str:
    """Debian's component from the package's Section (e.g. non-free/libs)."""
    section = run(["dpkg-deb", "-f", str(deb), "Section"], capture_output=True, text=True).stdout
    head, sep, _rest = section.strip().partition("/")
    return head if sep and head in ("contrib", "non-free", "non-free-firmware") else "main"


def cmd_add_deb(args: argparse.Namespace) -> None:
    """Copy .debs into a repository; `index` publishes them."""
    if args.dist:
        path, suite, component, *debs = args.dist + args.debs
        repo = _repo_dir(path)
        marker = repo / DIST_MARKER
        entries = set(marker.read_text().splitlines()) if marker.exists() else set()
        placed = []
        for deb in map(Path, debs):
            comp = _component_of(deb) if component == "auto" else component
            entries.add(f"{suite} {comp}")
            # One pool per suite: each suite's index lists only its own
            # packages, as on Debian (bookworm must not offer trixie's).
            placed.append((deb, repo / "pool" / suite / comp))
        repo.mkdir(parents=True, exist_ok=True)
        marker.write_text("\n".join(sorted(e for e in entries if e)) + "\n")
    else:
        path, *debs = args.flat + args.debs
        repo = _repo_dir(path)
        repo.mkdir(parents=True, exist_ok=True)
        (repo / FLAT_MARKER).touch()
        placed = [(Path(deb), repo) for deb in debs]
    for deb, pool in placed:
        if not deb.name.endswith(".deb"):
            raise SystemExit(f"{deb} is not a .deb")
        pool.mkdir(parents=True, exist_ok=True)
        target = pool / deb.name
        source = deb.stat()
        # copy2 keeps the mtime: an unchanged .deb from the cache is not copied again.
        if target.exists() and (target.stat().st_size, target.stat().st_mtime_ns) == (source.st_size, source.st_mtime_ns):
            continue
        shutil.copy2(deb, target)
        target.chmod(0o644)


def cmd_add_file(args: argparse.Namespace) -> None:
    dest = _repo_dir(os.path.join("files", args.path))
    dest.mkdir(parents=True, exist_ok=True)
    for src in map(Path, args.files):
        shutil.copy2(src, dest / src.name)
        digest = hashlib.sha256(src.read_bytes()).hexdigest()
        # Like cri-tools' release assets: the .sha256 file holds the digest only.
        (dest / f"{src.name}.sha256").write_text(digest + "\n")
        print(f"{dest / src.name} {digest}")


def _sign(directory: Path) -> None:
    release = directory / "Release"
    for name in ("InRelease", "Release.gpg"):
        (directory / name).unlink(missing_ok=True)
    gpg("--clearsign", "--digest-algo", "SHA256", "-o", str(directory / "InRelease"), str(release))
    gpg("--detach-sign", "--armor", "--digest-algo", "SHA256", "-o", str(directory / "Release.gpg"), str(release))


def _packages(repo: Path, subdir: str, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    text = run(["apt-ftparchive", "packages", subdir], cwd=repo, capture_output=True).stdout
    (dest / "Packages").write_bytes(text)
    with gzip.GzipFile(dest / "Packages.gz", "wb", mtime=0) as fh:
        fh.write(text)


def _index_dist(repo: Path) -> None:
    by_suite: dict[str, list[str]] = {}
    for entry in filter(None, (repo / DIST_MARKER).read_text().splitlines()):
        suite, component = entry.split()
        by_suite.setdefault(suite, []).append(component)
    for suite, components in by_suite.items():
        dist = repo / "dists" / suite
        for component in components:
            _packages(repo, f"pool/{suite}/{component}", dist / component / "binary-amd64")
        release = run(
            [
                "apt-ftparchive",
                "-o",
                "APT::FTPArchive::Release::Origin=gpufleet-test-mirror",
                "-o",
                f"APT::FTPArchive::Release::Suite={suite}",
                "-o",
                f"APT::FTPArchive::Release::Codename={suite}",
                "-o",
                f"APT::FTPArchive::Release::Components={' '.join(sorted(components))}",
                "-o",
                "APT::FTPArchive::Release::Architectures=amd64",
                "release",
                ".",
            ],
            cwd=dist,
            capture_output=True,
        ).stdout
        (dist / "Release").write_bytes(release)
        _sign(dist)


def _index_flat(repo: Path) -> None:
    _packages(repo, ".", repo)
    for name in ("Release", "InRelease", "Release.gpg"):
        (repo / name).unlink(missing_ok=True)
    release = run(["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=gpufleet-test-mirror", "release", "."], cwd=repo, capture_output=True).stdout
    (repo / "Release").write_bytes(release)
    _sign(repo)


def cmd_index(args: argparse.Namespace) -> None:
    cmd_init(args)
    for marker in sorted(ROOT.rglob(DIST_MARKER)):
        _index_dist(marker.parent)
        log(f"indexed {marker.parent.relative_to(ROOT)}")
    for marker in sorted(ROOT.rglob(FLAT_MARKER)):
        _index_flat(marker.parent)
        log(f"indexed {marker.parent.relative_to(ROOT)} (flat)")


# --- serving ------------------------------------------------------------------


def _served_root() -> str | None:
    try:
        url = f"http://127.0.0.1:{PORT}/{ROOT_MARKER}"
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode().strip()
    except (urllib.error.URLError, OSError):
        return None


def cmd_serve(args: argparse.Namespace) -> None:
    cmd_init(args)
    served = _served_root()
    if served == str(ROOT):
        return
    if served is not None:
        raise SystemExit(f"port {PORT} already serves another mirror ({served}); set GPUFLEET_MIRROR_PORT or stop it")
    logfile = open(CACHE / "mirror-http.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(PORT), "--bind", "127.0.0.1", "--directory", str(ROOT)],
        stdout=logfile,
        stderr=logfile,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    PIDFILE.write_text(f"{proc.pid}\n")
    for _attempt in range(50):
        if _served_root() == str(ROOT):
            log(f"serving {ROOT} on http://127.0.0.1:{PORT}")
            return
        time.sleep(0.1)
    raise SystemExit("the mirror's HTTP server did not come up; see mirror-http.log")


def cmd_stop(args: argparse.Namespace) -> None:
    if PIDFILE.exists():
        try:
            os.kill(int(PIDFILE.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass
        PIDFILE.unlink()


def tarball_pins() -> dict[str, str]:
    """What a site pins for the tarballs this mirror serves, as the roles take it (JSON values): the mirror's builds
    are its own, so their digests are not upstream's. Read from the .sha256 files add-file wrote."""
    crictl: dict[str, dict[str, str]] = {}
    for digest in sorted((ROOT / "files" / "cri-tools").glob("v*/crictl-v*-linux-*.tar.gz.sha256")):
        match = re.fullmatch(r"crictl-(v[0-9.]+)-linux-([a-z0-9]+)\.tar\.gz\.sha256", digest.name)
        if match:
            crictl.setdefault(match.group(1), {})[match.group(2)] = digest.read_text().split()[0]
    exporter = sorted((ROOT / "files" / "dcgm-exporter").glob("*/dcgm-exporter-*-linux-amd64.tar.gz.sha256"))
    return {
        "crictl_checksums": json.dumps(crictl, sort_keys=True, separators=(",", ":")),
        # One stand-in build is seeded (seed.d/60-dcgm-stand-in.sh); the newest wins if there are more.
        "dcgm_exporter_sha256": exporter[-1].read_text().split()[0] if exporter else "",
    }


def cmd_status(args: argparse.Namespace) -> None:
    served = _served_root()
    print(f"root={ROOT} url=http://127.0.0.1:{PORT} serving={'yes' if served == str(ROOT) else 'no'}")
    if (GNUPGHOME / "pubring.kbx").exists():
        print(f"key={fingerprint()}")
    for name, value in tarball_pins().items():
        print(f"{name}={value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("init").set_defaults(func=cmd_init)
    fetch = sub.add_parser("fetch")
    fetch.add_argument("--suite", required=True)
    fetch.add_argument("--all", action="store_true", help="also download dependencies from main")
    fetch.add_argument("packages", nargs="+")
    fetch.set_defaults(func=cmd_fetch)
    add_deb = sub.add_parser("add-deb")
    where = add_deb.add_mutually_exclusive_group(required=True)
    where.add_argument("--dist", nargs=3, metavar=("PATH", "SUITE", "COMPONENT"))
    where.add_argument("--flat", nargs=1, metavar="PATH")
    add_deb.add_argument("debs", nargs="+")
    add_deb.set_defaults(func=cmd_add_deb)
    add_file = sub.add_parser("add-file")
    add_file.add_argument("path")
    add_file.add_argument("files", nargs="+")
    add_file.set_defaults(func=cmd_add_file)
    for name, func in (("index", cmd_index), ("serve", cmd_serve), ("stop", cmd_stop), ("status", cmd_status)):
        sub.add_parser(name).set_defaults(func=func)
    args = parser.parse_args()
    ROOT.mkdir(parents=True, exist_ok=True)
    args.func(args)


if __name__ == "__main__":
    main()
