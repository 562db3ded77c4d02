#!/usr/bin/env bash
# The NVIDIA Container Toolkit's Go commands, built from the pinned Go module
# versions (go-tools.txt) and packaged as .debs with the upstream package
# names, versions, file lists and maintainer scripts (the module carries
# NVIDIA's packaging/debian), published in a flat repository laid out like
# NVIDIA's: libnvidia-container/stable/deb/amd64.
#
# Only the base set is built: nvidia-container-toolkit-base (nvidia-ctk,
# nvidia-container-runtime, nvidia-cdi-hook, the CDI refresh units) and
# nvidia-container-toolkit-operator-extensions. nvidia-container-toolkit
# itself depends on libnvidia-container-tools, a C library from another
# repository (NVIDIA/libnvidia-container) that is not a Go module and cannot
# be fetched here, so the full set is not installable from this mirror.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/.. source=../env.sh
. "$(dirname "$0")/../env.sh"
harness=$(cd "$(dirname "$0")/.." && pwd)
repo=libnvidia-container/stable/deb/amd64

package() {
  local version=$1 bin src key out stage name files
  bin=$("$harness/go-build.sh" nvidia-container-toolkit "v$version")
  src=$(cat "$bin/../module-dir")
  key=$( (sha256sum "$bin"/*; cat "$src"/packaging/debian/*; cat "$0") | sha256sum | cut -c1-12)
  out="$GPUFLEET_CACHE/debs-built/nvidia-container-toolkit-$version-$key"
  if [ ! -d "$out" ]; then
    stage=$(mktemp -d "$GPUFLEET_CACHE/debs-built.XXXXXX")
    for name in nvidia-container-toolkit-base nvidia-container-toolkit-operator-extensions; do
      files="$src/packaging/debian/$name.install"
      [ -f "$files" ] || continue
      build_deb "$name" "$version" "$bin" "$src" "$stage"
    done
    mkdir -p "$(dirname "$out")"
    rm -rf "$GPUFLEET_CACHE/debs-built/nvidia-container-toolkit-$version-"*
    mv "$stage" "$out"
  fi
  python3 "$harness/mirror.py" add-deb --flat "$repo" "$out"/*.deb
}

# One .deb: the files its upstream .install lists, a control stanza from the
# upstream control file, the upstream postinst with what debhelper would put
# at #DEBHELPER# (enable and start the packaged systemd units).
build_deb() {
  local name=$1 version=$2 bin=$3 src=$4 stage=$5 root file dest from units=()
  root=$(mktemp -d "$stage/root.XXXXXX")
  while read -r file dest || [ -n "$file" ]; do
    [ -n "$file" ] || continue
    from=""
    for dir in "$bin" "$src/deployments/systemd" "$src/deployments/udev"; do
      [ -e "$dir/$file" ] && { from="$dir/$file"; break; }
    done
    [ -n "$from" ] || die "$name $version: $file (from $name.install) not found"
    mkdir -p "$root/$dest"
    install -m "$([ "$dir" = "$bin" ] && echo 0755 || echo 0644)" "$from" "$root/$dest/"
    case "$file" in *.service | *.path) units+=("$file") ;; esac
  done <"$src/packaging/debian/$name.install"

  mkdir -p "$root/DEBIAN"
  python3 - "$src/packaging/debian/control" "$name" "$version" >"$root/DEBIAN/control" <<'PY'
import re, sys
control, name, version = sys.argv[1:]
text = open(control).read().replace("@VERSION@", version + "-1").replace("@SECTION@", "")
stanzas = [s for s in text.split("\n\n") if s.strip()]
source = dict(re.findall(r"^(Section|Priority|Homepage|Maintainer): (.*)$", stanzas[0], re.M))
pkg = next(s for s in stanzas if re.search(r"^Package: %s$" % re.escape(name), s, re.M))
fields = {}
for line in pkg.splitlines():
    if line.startswith(" ") and fields:
        fields[list(fields)[-1]] += "\n" + line
    else:
        key, _sep, value = line.partition(":")
        fields[key] = value.strip()
out = {"Package": name, "Version": version + "-1", "Architecture": "amd64",
       "Maintainer": source["Maintainer"], "Section": source.get("Section", "utils"),
       "Priority": source.get("Priority", "optional"), "Homepage": source["Homepage"]}
for key in ("Pre-Depends", "Depends", "Breaks", "Replaces"):
    # ${misc:Depends} and friends are debhelper substitutions with nothing to add here.
    items = [i.strip() for i in fields.get(key, "").split(",") if i.strip() and not i.strip().startswith("${")]
    if items:
        out[key] = ", ".join(items)
out["Description"] = fields["Description"] + "\n .\n Rebuilt from the Go module by the gpufleet test harness."
print("\n".join("%s: %s" % kv for kv in out.items()))
PY
  if [ -d "$root/etc" ]; then
    (cd "$root" && find etc -type f | sed 's|^|/|' | sort) >"$root/DEBIAN/conffiles"
  fi
  for script in postinst postrm; do
    local upstream="$src/packaging/debian/$name.$script"
    [ -f "$upstream" ] || continue
    {
      sed '/^#DEBHELPER#$/,$d' "$upstream"
      if [ "$script" = postinst ] && [ "${#units[@]}" -gt 0 ]; then
        # What dh_installsystemd generates for the units the package ships.
        # shellcheck disable=SC2016 # $1 belongs to the generated script
        echo 'if [ "$1" = "configure" ] || [ "$1" = "abort-upgrade" ]; then'
        for unit in "${units[@]}"; do
          echo "  deb-systemd-helper unmask '$unit' >/dev/null || true"
          echo "  if deb-systemd-helper --quiet was-enabled '$unit'; then deb-systemd-helper enable '$unit' >/dev/null || true;"
          echo "  else deb-systemd-helper update-state '$unit' >/dev/null || true; fi"
        done
        echo '  if [ -d /run/systemd/system ]; then'
        echo '    systemctl --system daemon-reload >/dev/null || true'
        echo "    deb-systemd-invoke start ${units[*]} >/dev/null || true"
        echo '  fi'
        echo 'fi'
      fi
      sed -n '/^#DEBHELPER#$/,$p' "$upstream" | sed '1d'
    } >"$root/DEBIAN/$script"
    chmod 0755 "$root/DEBIAN/$script"
  done
  # gzip, not xz: xz took a minute or more of a cold run's CPU for about
  # 100 MB of Go binaries; apt installs either the same.
  dpkg-deb --root-owner-group -Zgzip --build "$root" "$stage/${name}_${version}-1_amd64.deb" >/dev/null
  rm -rf "$root"
}

while read -r version; do
  package "$version"
done < <(go_tool_versions nvidia-container-toolkit | sed 's/^v//')
