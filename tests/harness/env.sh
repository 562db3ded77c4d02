# shellcheck shell=bash
# Shared settings of the test ground. Sourced by every harness script and by
# the Makefile (through `harness/run`), so names and paths live in one place.

GPUFLEET_ROOT=${GPUFLEET_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# Caches survive `git clean` and fresh clones: images, downloaded .debs, the
# mirror's throwaway key. Content keys decide when something is rebuilt.
GPUFLEET_CACHE=${GPUFLEET_CACHE:-/var/cache/gpufleet}
GPUFLEET_MIRROR_ROOT=${GPUFLEET_MIRROR_ROOT:-$GPUFLEET_CACHE/mirror}
GPUFLEET_MIRROR_PORT=${GPUFLEET_MIRROR_PORT:-8765}
GPUFLEET_MIRROR_URL=${GPUFLEET_MIRROR_URL:-http://127.0.0.1:$GPUFLEET_MIRROR_PORT}
GPUFLEET_IMAGE_PREFIX=${GPUFLEET_IMAGE_PREFIX:-localhost/gpufleet}
GPUFLEET_DEBIAN_MIRROR=${GPUFLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
GPUFLEET_VENV=${GPUFLEET_VENV:-$GPUFLEET_ROOT/.venv}
# The oldest ansible-core meta/runtime.yml claims (venv.sh PYTHON oldest).
GPUFLEET_VENV_OLDEST=${GPUFLEET_VENV_OLDEST:-$GPUFLEET_ROOT/.venv-oldest}

export GPUFLEET_ROOT GPUFLEET_CACHE GPUFLEET_MIRROR_ROOT GPUFLEET_MIRROR_PORT \
  GPUFLEET_MIRROR_URL GPUFLEET_IMAGE_PREFIX GPUFLEET_DEBIAN_MIRROR GPUFLEET_VENV GPUFLEET_VENV_OLDEST

# go_tool_versions NAME: the versions of NAME that go-tools.txt pins, one a
# line. With GPUFLEET_MIRROR_SET=demo (mirror-seed.sh demo) only the newest:
# the one `make demo` installs, so a cold demo builds nothing it leaves unused.
go_tool_versions() {
  local versions
  versions=$(awk -v name="$1" '$1 == name { print $3 }' "$GPUFLEET_ROOT/tests/harness/go-tools.txt")
  if [ "${GPUFLEET_MIRROR_SET:-all}" = demo ]; then sort -V <<<"$versions" | tail -n1; else echo "$versions"; fi
}

# go_env CGO GOFLAGS: the Go builds' own GOPATH, module and build caches
# (nothing outside the cache is touched), the local toolchain and the proxy.
go_env() {
  export GOPATH="$GPUFLEET_CACHE/go/path" GOMODCACHE="$GPUFLEET_CACHE/go/mod" \
    GOCACHE="$GPUFLEET_CACHE/go/build-cache" GOTOOLCHAIN=local CGO_ENABLED="$1" \
    GOFLAGS="$2" GOPROXY="${GPUFLEET_GOPROXY:-https://proxy.golang.org}"
}

# go_tool_built NAME VERSION OUT START CPU0: OUT is now the one build of this
# pin in the cache (older builds, by another Go or an older script, are dead
# weight); log it and record the build as a phase (CPU0: child_cpu before it).
go_tool_built() {
  local name=$1 version=$2 out=$3 start=$4 cpu0=$5 cpu old
  for old in "$GPUFLEET_CACHE/go-tools/$name-$version-"*; do
    [ "$old" = "$out" ] || rm -rf "$old"
  done
  cpu_since cpu "$cpu0"
  log "built $name $version in $(($(date +%s) - start))s (CPU ${cpu}s) -> $out"
  "$GPUFLEET_ROOT/tests/harness/phase.sh" record "Go tools: $name $version" "$start" "$(date +%s)" ok "$cpu"
}

# go_tool_lock NAME-VERSION: hold, on fd 9 until the script exits, the lock
# of one Go build in the cache. go-tools.sh builds every pin from the start
# of a run, while the mirror's seeds and the scenarios ask for them: a second
# caller waits here and then finds the build cached.
go_tool_lock() {
  mkdir -p "$GPUFLEET_CACHE/go-tools"
  exec 9>"$GPUFLEET_CACHE/go-tools/.$1.lock"
  flock 9
}

# child_cpu VAR: set VAR to the CPU time, in clock ticks, of every child
# this shell has waited for (with their own waited-for children): fields
# cutime and cstime of /proc/<this shell>/stat. A variable, not $(...): a
# command substitution is another process, with children of its own.
# cpu_since VAR TICKS: set VAR to the seconds of it since TICKS.
# The phase table puts it beside the wall time: on two cores, a phase whose
# CPU is near its wall time holds a core, and one far below it waits (the
# network, dpkg's fsync, a lock). Containers Podman starts run under conmon,
# not under us: a Molecule lane's figure is Ansible's side only.
child_cpu() {
  local stat fields
  read -r stat <"/proc/$BASHPID/stat"
  read -r -a fields <<<"${stat##*) }"
  printf -v "$1" '%d' $((fields[13] + fields[14]))
}
cpu_since() {
  local now
  child_cpu now
  printf -v "$1" '%d' $(((now - $2) / $(getconf CLK_TCK)))
}

# What the test ground pins as a site pins its own, from one `mirror.py
# status`: the mirror's throwaway signing key, and the digests of the
# tarballs it serves (its own builds of crictl and dcgm-exporter, so not
# upstream's). The simulated inventory and the Molecule base read these.
mirror_pins() {
  local status
  status=$(python3 "$GPUFLEET_ROOT/tests/harness/mirror.py" status)
  GPUFLEET_MIRROR_FINGERPRINT=$(sed -n 's/^key=//p' <<<"$status")
  GPUFLEET_CRICTL_CHECKSUMS=$(sed -n 's/^crictl_checksums=//p' <<<"$status")
  GPUFLEET_DCGM_EXPORTER_SHA256=$(sed -n 's/^dcgm_exporter_sha256=//p' <<<"$status")
  export GPUFLEET_MIRROR_FINGERPRINT GPUFLEET_CRICTL_CHECKSUMS GPUFLEET_DCGM_EXPORTER_SHA256
}

log() { printf '\033[1m[harness]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[harness] error:\033[0m %s\n' "$*" >&2; exit 1; }
# timed NAME COMMAND...: run COMMAND (a shell function too) and record it as
# a phase of the run's timing table (phase.sh).
# Its output is also kept in tests/output/phases/NAME.log, for the table's
# excerpt of a failed phase.
timed() {
  local name=$1 begin cpu0 cpu status=0 output
  shift
  output=$GPUFLEET_ROOT/tests/output/phases/$(tr -c 'A-Za-z0-9.\n-' _ <<<"$name").log
  mkdir -p "$(dirname "$output")"
  begin=$(date +%s)
  "$GPUFLEET_ROOT/tests/harness/phase.sh" begin "$name" "$begin"
  child_cpu cpu0
  "$@" > >(tee "$output") 2> >(tee -a "$output" >&2) || status=$?
  cpu_since cpu "$cpu0"
  "$GPUFLEET_ROOT/tests/harness/phase.sh" record "$name" "$begin" "$(date +%s)" \
    "$([ "$status" -eq 0 ] && echo ok || echo FAILED)" "$cpu" "$output"
  return "$status"
}
