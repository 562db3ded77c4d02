# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read one OCI image archive: its sha256 and the manifests its index.json names.

    read_oci_archive.py URL LOCAL PINNED_SHA256

The controller's Python, standard library only. The digest is judged before
anything is written, so the archive is read here, streamed once (sha256 and
tar index together) without being stored: from the bundle when its copy is
already the pinned file (a re-run reads nothing from upstream), else from URL
(get_url then fetches it a second time, on the first run only). Prints
{"sha256": ..., "manifests": [{"digest": ..., "name": ...}]} as JSON.
"""

import hashlib
import json
import os
import sys
import tarfile
import urllib.request


class Hashed:
    def __init__(self, raw):
        self.raw, self.sha256 = raw, hashlib.sha256()

    def read(self, size=-1):
        data = self.raw.read(size)
        self.sha256.update(data)
        return data


def read(stream):
    hashed, manifests = Hashed(stream), []
    with tarfile.open(fileobj=hashed, mode="r|*") as archive:
        for member in archive:
            if member.isfile() and member.name.lstrip("./") == "index.json":
                for m in json.load(archive.extractfile(member)).get("manifests", []):
                    notes = m.get("annotations") or {}
                    manifests.append(
                        {"digest": m.get("digest", ""), "name": notes.get("io.containerd.image.name") or notes.get("org.opencontainers.image.ref.name", "")}
                    )
    while hashed.read(1 << 20):
        pass
    return {"sha256": hashed.sha256.hexdigest(), "manifests": manifests}


def main():
    url, local, pinned = sys.argv[1:4]
    answer = None
    if os.path.isfile(local):
        with open(local, "rb") as stream:
            answer = read(stream)
    if answer is None or answer["sha256"] != pinned:
        with urllib.request.urlopen(url, timeout=60) as stream:
            answer = read(stream)
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
