#!/usr/bin/env bash
# Time the phases of a test run and print them as one table at its end.
#
#   phase.sh start                 begin a run: forget the last run's phases
#   phase.sh run NAME CMD [ARG..]  run CMD, record NAME's start, end and result
#   phase.sh record NAME START END RESULT
#                                  record a phase timed elsewhere (Molecule lanes)
#   phase.sh table                 print the table (also after a failure)
#
# Phases that run side by side overlap: the table shows when each started
# (seconds after `start`) as well as how long it took, so the critical path
# can be read off it. The record is tests/output/phases.tsv; lanes append
# under a lock, so parallel make jobs and Molecule lanes can share it.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

record=$GPUFLEET_ROOT/tests/output/phases.tsv

append() {
  mkdir -p "$(dirname "$record")"
  {
    flock 9
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$record"
  } 9>"$record.lock"
}

case "${1:-}" in
  start)
    mkdir -p "$(dirname "$record")"
    printf 'run\t%s\t\t\n' "$(date +%s)" >"$record"
    ;;
  run)
    [ $# -ge 3 ] || die "usage: phase.sh run NAME COMMAND [ARG...]"
    shift
    timed "$@"
    ;;
  record)
    [ $# -eq 5 ] || die "usage: phase.sh record NAME START END RESULT"
    append "$2" "$3" "$4" "$5"
    ;;
  table)
    [ -f "$record" ] || exit 0
    awk -F '\t' '
      $1 == "run" { origin = $2; next }
      { n++; name[n] = $1; from[n] = $2; to[n] = $3; result[n] = $4
        if (origin == "") origin = $2
        if ($3 > last) last = $3 }
      END {
        printf "\n%-44s %8s %8s %8s  %s\n", "phase", "start s", "wall s", "min", "result"
        for (i = 1; i <= n; i++)
          printf "%-44s %8d %8d %8.1f  %s\n", name[i], from[i] - origin, to[i] - from[i], (to[i] - from[i]) / 60, result[i]
        if (n) printf "%-44s %8s %8d %8.1f\n", "whole run (wall clock)", "", last - origin, (last - origin) / 60
      }' "$record" >&2
    ;;
  *)
    die "usage: phase.sh start | run NAME CMD... | record NAME START END RESULT | table"
    ;;
esac
