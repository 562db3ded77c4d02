#!/usr/bin/env bash
# The workload check's test images (pause and cuda-probe), built with podman
# and published as OCI archives: files/images/<name>-<tag>.oci.tar with .sha256
# (file checksum), .digest (image manifest digest) and .image-id (config
# digest, Docker's image ID). workload-images.sh builds and caches them.
set -euo pipefail
exec "$(dirname "$0")/../workload-images.sh" publish
