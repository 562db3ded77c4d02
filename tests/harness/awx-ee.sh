#!/usr/bin/env bash
# The AWX path on the test ground: the execution environment built from
# meta/execution-environment.yml by ansible-builder, and jobs run in it the
# way AWX runs them, through ansible-runner's streaming: the control side's
# `ansible-runner transmit` | `ansible-runner worker` in the EE container |
# `ansible-runner process`, which writes the job's artifact directory.
#
#   awx-ee.sh base   -> the EE's Debian 13 base image (prints its reference)
#   awx-ee.sh ee     -> the EE (prints its reference)
#   awx-ee.sh test   -> the EE, a simulated node reached over SSH, and three
#                       jobs of playbooks/site.yml: --check --diff, a converge,
#                       a re-run; each job's status, rc and set_stats checked
#
# Both images are cached under a content key, like images.sh's: a warm run
# builds nothing. The EE's key covers the definition, its requirement files,
# the collection's own MANIFEST.json (its checksums cover every file), the
# base image and this script; a changed collection rebuilds from the galaxy
# stage on (Podman's layer cache keeps ansible-core, ansible-runner and the
# pip installs before it).
#
# The base image is what ansible-builder's generated scripts need from a
# Debian base (docs/awx.md): a Python whose `-m ensurepip --root /` works
# (the scripts install pip with it). Debian disables ensurepip for its system
# Python ("ensurepip is disabled in Debian/Ubuntu for the system python")
# and marks it EXTERNALLY-MANAGED (PEP 668), so the EE's Python is a venv on
# it, /opt/ee (--build-arg PYCMD), first in PATH: ensurepip works there, and
# pip installs ansible-core and the rest into it, never over dpkg's files.
# Besides: bindep's runtime packages already present (openssh-client), and
# a dnf-like package manager (awx/apt-dnf, --build-arg PKGMGR) for the
# scripts' `install` and `clean all`. No Galaxy server is reachable here:
# the base carries kubernetes.core (meta/requirements.yml) from the tool
# venv's `ansible` package in /usr/share/ansible/collections, and the galaxy
# stage runs with --offline, which still checks requirements.yml against it.
#
# GPUFLEET_CA_BUNDLE (default /etc/ssl/certs/ca-certificates.crt): the CAs
# the EE build trusts for PyPI.
# GPUFLEET_AWX_KEEP=1 keeps the node and the work directory (the jobs'
# private data directory and artifacts) for a look after a failure.
# GPUFLEET_AWX_SSH_PORT (default 2122): the loopback port of the node's sshd;
# the node and the EE container share the host's network.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"
here=$(cd "$(dirname "$0")" && pwd)

EE_SUITE=trixie
EE_BASE_PACKAGES=python3,python3-venv,openssh-client,ca-certificates
EE_PYTHON=python3.13
EE_VENV=/opt/ee
# What makes the definition's EL defaults fit the Debian base.
EE_BUILD_ARGS=(
  --build-arg PKGMGR=/usr/local/sbin/apt-dnf
  --build-arg PYPKG="$EE_PYTHON"
  --build-arg PYCMD="$EE_VENV/bin/python3"
  --build-arg ANSIBLE_GALAXY_CLI_COLLECTION_OPTS=--offline
)
AWX_NODE=gpufleet-awx-node
GPUFLEET_CA_BUNDLE=${GPUFLEET_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
AWX_SSH_PORT=${GPUFLEET_AWX_SSH_PORT:-2122}

# One scratch directory per run, made and removed by this shell: the build
# functions run in command substitutions, whose own EXIT traps never fire.
RUN_SCRATCH=$(mktemp -d "$GPUFLEET_CACHE/tmp.XXXXXX")
cleanup() { rm -rf "$RUN_SCRATCH"; }
trap cleanup EXIT
scratch_dir() { mktemp -d "$RUN_SCRATCH/XXXXXX"; }

content_key() { sha256sum "$@" | cut -d' ' -f1 | sha256sum | cut -c1-12; }

prune_old() {
  local name=$1 keep=$2 ref
  for ref in $(podman images --filter "label=gpufleet.image=$name" --format '{{.Repository}}:{{.Tag}}'); do
    case "$ref" in *":$keep" | *":latest") ;; *) podman rmi -f "$ref" >/dev/null 2>&1 || true ;; esac
  done
}

# kubernetes.core as the tool venv's `ansible` package ships it.
kubernetes_core_dir() {
  "$GPUFLEET_VENV/bin/python" -c 'import ansible_collections.kubernetes.core as m; print(list(m.__path__)[0])' \
    || die "the tool venv has no kubernetes.core (the ansible package): make venv"
}

build_ee_base() {
  local kcore key ref rootfs name=ee-base-debian13
  kcore=$(kubernetes_core_dir)
  key=$(content_key "$here/awx/apt-dnf" "$kcore/MANIFEST.json" \
    <(printf '%s\n' "$EE_SUITE" "$EE_BASE_PACKAGES"; declare -f build_ee_base))
  ref="$GPUFLEET_IMAGE_PREFIX/$name:$key"
  if ! podman image exists "$ref"; then
    log "building $ref with debootstrap ($EE_SUITE); about a minute"
    rootfs=$(scratch_dir)
    debootstrap --variant=minbase --include="$EE_BASE_PACKAGES" "$EE_SUITE" "$rootfs" \
      "$GPUFLEET_DEBIAN_MIRROR" >"$GPUFLEET_CACHE/debootstrap-$name.log" 2>&1 \
      || die "debootstrap failed, see $GPUFLEET_CACHE/debootstrap-$name.log"
    printf 'deb %s %s main\n' "$GPUFLEET_DEBIAN_MIRROR" "$EE_SUITE" >"$rootfs/etc/apt/sources.list"
    install -m 0755 "$here/awx/apt-dnf" "$rootfs/usr/local/sbin/apt-dnf"
    chroot "$rootfs" "$EE_PYTHON" -m venv --without-pip "$EE_VENV"
    mkdir -p "$rootfs/usr/share/ansible/collections/ansible_collections/kubernetes"
    cp -a "$kcore" "$rootfs/usr/share/ansible/collections/ansible_collections/kubernetes/core"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
    tar -C "$rootfs" --numeric-owner -c . \
      | podman import --quiet --change 'CMD ["/bin/bash"]' \
        --change "ENV PATH=$EE_VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change "LABEL gpufleet.image=$name" --change "LABEL gpufleet.key=$key" - "$ref" >/dev/null
    prune_old "$name" "$key"
  fi
  podman tag "$ref" "$GPUFLEET_IMAGE_PREFIX/$name:latest"
  echo "$ref"
}

# build/gpufleet-nvidia-<version>.tar.gz, as `make build` makes it; only one
# version in build/, because the definition copies them by a glob.
build_collection() {
  rm -f "$GPUFLEET_ROOT"/build/gpufleet-nvidia-*.tar.gz
  "$GPUFLEET_VENV/bin/ansible-galaxy" collection build --force --output-path "$GPUFLEET_ROOT/build" \
    "$GPUFLEET_ROOT" >/dev/null
  echo "$GPUFLEET_ROOT"/build/gpufleet-nvidia-*.tar.gz
}

build_ee() {
  local base tarball key ref ctx start name=ee
  base=$(build_ee_base)
  tarball=$(build_collection)
  key=$(content_key "$GPUFLEET_ROOT"/meta/{execution-environment.yml,requirements.txt,bindep.txt,requirements.yml} \
    <(tar -xzOf "$tarball" MANIFEST.json) \
    <(echo "$base" "${EE_BUILD_ARGS[*]}"; "$GPUFLEET_VENV/bin/ansible-builder" --version; declare -f build_ee))
  ref="$GPUFLEET_IMAGE_PREFIX/$name:$key"
  if ! podman image exists "$ref"; then
    log "building $ref with ansible-builder (on $base); a few minutes cold"
    ctx=$(scratch_dir)
    start=$(date +%s)
    # Podman's layer cache stays on (no --no-cache): a new collection
    # rebuilds from the galaxy stage on. Host network: the build reaches PyPI,
    # trusting the host's CA bundle (a site's TLS proxy), which is mounted
    # over the image's own for the build's steps only.
    "$GPUFLEET_VENV/bin/ansible-builder" build -v 3 --container-runtime podman \
      -f "$GPUFLEET_ROOT/meta/execution-environment.yml" --context "$ctx" -t "$ref" \
      --build-arg EE_BASE_IMAGE="$base" "${EE_BUILD_ARGS[@]}" \
      --extra-build-cli-args "--network host -v $GPUFLEET_CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro --label gpufleet.image=$name --label gpufleet.key=$key" \
      >"$GPUFLEET_CACHE/ansible-builder-ee.log" 2>&1 \
      || { tail -40 "$GPUFLEET_CACHE/ansible-builder-ee.log" >&2; die "ansible-builder failed, see $GPUFLEET_CACHE/ansible-builder-ee.log"; }
    log "built $ref in $(($(date +%s) - start))s"
    prune_old "$name" "$key"
  fi
  podman tag "$ref" "$GPUFLEET_IMAGE_PREFIX/$name:latest"
  echo "$ref"
}

# The simulated node with an sshd: the gpusim image plus Debian's
# openssh-server, cached like the other images (benchmarks install it on
# every fresh node; here a warm run must not wait on the archive).
build_node_image() {
  local gpusim key ref ctx name=debian13-gpusim-sshd
  gpusim=$("$here/images.sh" gpusim debian13)
  key=$( (echo "$gpusim"; declare -f build_node_image) | sha256sum | cut -c1-12)
  ref="$GPUFLEET_IMAGE_PREFIX/$name:$key"
  if ! podman image exists "$ref"; then
    log "building $ref (openssh-server)"
    ctx=$(scratch_dir)
    cat >"$ctx/Containerfile" <<CONTAINERFILE
FROM $gpusim
RUN export DEBIAN_FRONTEND=noninteractive && apt-get update -qq \\
 && apt-get install -y -qq --no-install-recommends openssh-server >/dev/null \\
 && rm -rf /var/cache/apt/archives/*.deb
LABEL gpufleet.image=$name gpufleet.key=$key
CONTAINERFILE
    podman build --quiet --network host -t "$ref" "$ctx" >/dev/null
    prune_old "$name" "$key"
  fi
  echo "$ref"
}

# run_job EE TEMPLATE IDENT [ANSIBLE-PLAYBOOK ARGS]: one job in a private
# data directory of its own, TEMPLATE's copy (AWX makes a fresh one per job;
# runner writes the job's settings into it, env/cmdline among them), streamed
# as AWX streams it (through Receptor, here a pipe). The control side runs in
# the EE too (the test ground has no AWX; ansible-runner is the same), as
# root to read the private data directory; the worker runs as the EE's user.
# Prints the job's private data directory.
run_job() {
  local ee=$1 template=$2 ident=$3 cmdline=${4:-} pdd
  local transmit=(ansible-runner transmit /pdd -p playbooks/site.yml --ident "$ident")
  # One word: argparse would take a separate "--check ..." for an option.
  [ -z "$cmdline" ] || transmit+=("--cmdline=$cmdline")
  pdd=$(dirname "$template")/$ident
  cp -a "$template" "$pdd"
  podman run --rm --user 0 -v "$pdd:/pdd" "$ee" "${transmit[@]}" \
    | podman run --rm -i --network host "$ee" ansible-runner worker --private-data-dir=/runner \
    | podman run --rm -i --user 0 -v "$pdd:/pdd" "$ee" ansible-runner process /pdd --ident "$ident" \
      >"$pdd/$ident.stdout" 2>&1 \
    || true # the artifacts say how the job ended; awx_artifacts.py reads them
  echo "$pdd"
}

# job EE TEMPLATE KIND NAME [ANSIBLE-PLAYBOOK ARGS]: run_job, then judge it.
job() {
  local ee=$1 template=$2 kind=$3 name=$4 cmdline=${5:-} start pdd
  start=$(date +%s)
  pdd=$(run_job "$ee" "$template" "$kind" "$cmdline")
  "$GPUFLEET_VENV/bin/python" "$here/awx_artifacts.py" "$kind" "$pdd/artifacts/$kind" "$AWX_NODE" \
    || { tail -40 "$pdd/$kind.stdout"; die "the $name job failed its checks (GPUFLEET_AWX_KEEP=1 keeps its private data directory)"; }
  log "job $name: $(($(date +%s) - start))s"
}

run_test() {
  local ee node_image work pdd start
  start=$(date +%s)
  ee=$(build_ee)
  log "EE ready after $(($(date +%s) - start))s: $ee"
  node_image=$(build_node_image)
  work=$(scratch_dir)
  # benchmarks/_sim_stack.sh: the node's declaration (every layer of
  # site.yml from the signed local mirror), its key and sshd set-up.
  BENCH_PREFIX=gpufleet-awx- BENCH_SSH_PORT_BASE=$AWX_SSH_PORT BENCH_TRANSPORT=ssh
  # shellcheck source=benchmarks/_sim_stack.sh
  . "$GPUFLEET_ROOT/benchmarks/_sim_stack.sh"
  if [ -z "${GPUFLEET_AWX_KEEP:-}" ]; then
    trap 'podman rm -f "$AWX_NODE" >/dev/null 2>&1 || true; cleanup' EXIT
  else
    trap - EXIT
    log "GPUFLEET_AWX_KEEP: the node $AWX_NODE and $work stay"
  fi
  sim_stack_inventory "$work" "$AWX_NODE"
  # A fresh node every run (node.sh would reuse one kept by GPUFLEET_AWX_KEEP).
  podman rm -f "$AWX_NODE" >/dev/null 2>&1 || true
  "$here/node.sh" up "$AWX_NODE" "$node_image"
  sim_stack_access "$AWX_NODE" "$work"
  ansible-playbook -i "$work/hosts.yml" "$GPUFLEET_ROOT/extensions/molecule/_shared/sim-node.yml" \
    >"$work/prepare.log" 2>&1 || { tail -30 "$work/prepare.log"; die "preparing $AWX_NODE failed"; }

  # The private data directory AWX hands ansible-runner: the project (the
  # checkout's tracked files, as an SCM project checks them out), the
  # inventory, the Machine credential's key (env/ssh_key: runner loads it
  # into an ssh-agent) and the job's environment.
  pdd=$work/template
  mkdir -p "$pdd/project" "$pdd/inventory" "$pdd/env"
  git -C "$GPUFLEET_ROOT" ls-files -z | tar -C "$GPUFLEET_ROOT" --null -T - -c | tar -C "$pdd/project" -x
  cp "$work/hosts.yml" "$pdd/inventory/hosts.yml"
  mkdir "$pdd/inventory/group_vars"
  # The benchmark's declaration, less its controller paths: the key is the
  # credential's, the control sockets and the verify reports live in the
  # job's container.
  grep -vE '^(ansible_ssh_private_key_file|ansible_control_path_dir|verify_report_dir|gpufleet_test_root):' \
    "$work/group_vars/gpu_nodes.yml" >"$pdd/inventory/group_vars/gpu_nodes.yml"
  echo "verify_report_dir: /tmp/gpufleet-verify" >>"$pdd/inventory/group_vars/gpu_nodes.yml"
  cp "$work/id_ed25519" "$pdd/env/ssh_key"
  printf 'ANSIBLE_NOCOLOR: "1"\n' >"$pdd/env/envvars"
  chmod -R go+rX "$pdd"

  job "$ee" "$pdd" check "site.yml --check --diff" "--check --diff"
  job "$ee" "$pdd" converge "site.yml (converge)"
  job "$ee" "$pdd" rerun "site.yml (re-run)"
  log "AWX path passed in $(($(date +%s) - start))s"
}

case "${1:-}" in
  base) build_ee_base ;;
  ee) build_ee ;;
  test) run_test ;;
  *) die "usage: $0 base|ee|test" ;;
esac
