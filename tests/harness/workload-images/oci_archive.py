"""Make `podman save --format oci-archive` output loadable everywhere, byte for byte stable.

    oci_archive.py repack SRC DEST REF   rewrite SRC as DEST; print its manifest digest and config digest
    oci_archive.py inspect ARCHIVE       print each manifest's name, digest and config digest (JSON)

What repack changes, and why:
- index.json names the image twice: podman's org.opencontainers.image.ref.name (the full REF) and
  containerd's io.containerd.image.name, which `ctr images import` prefers over the OCI name in every
  release, so the name does not depend on how a containerd version treats ref.name.
- A Docker manifest.json is added beside the OCI layout (as `docker save` 25+ writes its archives):
  Docker 26's classic image store loads only that form (`docker load` of a bare OCI layout fails with
  "open .../blobs/json: no such file or directory").
- Members are sorted and carry no time, owner or user name: the same image gives the same archive bytes,
  so its .sha256 is stable. The blobs are copied unchanged; the manifest digest is podman's.
Standard library only.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile

CONTAINERD_NAME = "io.containerd.image.name"
OCI_REF_NAME = "org.opencontainers.image.ref.name"
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")


def _blob_path(digest: str) -> str:
    algorithm, _sep, hexdigest = digest.partition(":")
    return f"blobs/{algorithm}/{hexdigest}"


def _read_members(path: str) -> dict[str, bytes]:
    members = {}
    with tarfile.open(path, "r:*") as archive:
        for member in archive.getmembers():
            if member.isfile():
                handle = archive.extractfile(member)
                assert handle is not None
                members[member.name.lstrip("./")] = handle.read()
    return members


def _manifests(members: dict[str, bytes]) -> list[dict]:
    if "index.json" not in members:
        raise SystemExit("not an OCI archive: no index.json")
    found = []
    for desc in json.loads(members["index.json"])["manifests"]:
        if desc.get("mediaType") not in MANIFEST_TYPES:
            raise SystemExit(f"index.json: {desc.get('mediaType')} is not a single-platform image manifest")
        manifest = json.loads(members[_blob_path(desc["digest"])])
        found.append({"descriptor": desc, "manifest": manifest})
    return found


def _write(path: str, members: dict[str, bytes]) -> None:
    directories = sorted({name.rsplit("/", i)[0] + "/" for name in members if "/" in name for i in range(1, name.count("/") + 1)})
    with open(path, "wb") as raw, tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for name in directories:
            info = tarfile.TarInfo(name.rstrip("/"))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            archive.addfile(info)
        # The layout's small files first, as podman and docker write them; then the blobs by digest.
        for name in sorted(members, key=lambda n: (n.startswith("blobs/"), n)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(members[name]), 0o644
            archive.addfile(info, io.BytesIO(members[name]))


def repack(src: str, dest: str, ref: str) -> dict:
    members = _read_members(src)
    images = _manifests(members)
    if len(images) != 1:
        raise SystemExit(f"{src}: expected one image, found {len(images)}")
    index = json.loads(members["index.json"])
    descriptor = index["manifests"][0]
    descriptor.setdefault("annotations", {}).update({OCI_REF_NAME: ref, CONTAINERD_NAME: ref})
    members["index.json"] = json.dumps(index, separators=(",", ":"), sort_keys=True).encode()
    manifest = images[0]["manifest"]
    docker = [{"Config": _blob_path(manifest["config"]["digest"]), "RepoTags": [ref], "Layers": [_blob_path(layer["digest"]) for layer in manifest["layers"]]}]
    members["manifest.json"] = json.dumps(docker, separators=(",", ":")).encode()
    _write(dest, members)
    return {"name": ref, "digest": descriptor["digest"], "config": manifest["config"]["digest"]}


def inspect(path: str) -> list[dict]:
    return [
        {
            "name": image["descriptor"].get("annotations", {}).get(CONTAINERD_NAME, ""),
            "digest": image["descriptor"]["digest"],
            "config": image["manifest"]["config"]["digest"],
        }
        for image in _manifests(_read_members(path))
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("repack")
    one.add_argument("src")
    one.add_argument("dest")
    one.add_argument("ref")
    two = sub.add_parser("inspect")
    two.add_argument("archive")
    args = parser.parse_args()
    if args.command == "repack":
        result = repack(args.src, args.dest, args.ref)
    else:
        result = inspect(args.archive)
    json.dump(result, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
