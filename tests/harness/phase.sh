#!/usr/bin/env bash
# Time the phases of a test run and print them as one table at its end.
#
#   phase.sh start                 begin a run: forget the last run's phases
#   phase.sh run NAME CMD [ARG..]  run CMD, record NAME's start, end and result
#   phase.sh begin NAME START      note a phase that has started (timed, Molecule lanes)
#   phase.sh record NAME START END RESULT [CPU [LOG]]
#                                  record a phase timed elsewhere (Molecule lanes)
#   phase.sh table                 print the table (also after a failure, and
#                                  when the run is stopped from outside)
#
# Phases that run side by side overlap: the table shows when each started
# (seconds after `start`) as well as how long it took, so the critical path
# can be read off it. The record is tests/output/phases.tsv; lanes append
# under a lock, so parallel make jobs and Molecule lanes can share it.
#
# Beside the wall time, each phase's CPU seconds (env.sh child_cpu: its own
# process tree), and at the end the whole machine's: how many core-seconds
# were busy out of those the cores had (/proc/stat at start and at table).
# On a machine busy near 100%, only less work shortens the run; below that,
# an earlier start of the longest path does.
#
# Below the table, for each phase that did not pass, the last error lines
# of its log (`run` keeps one under tests/output/phases/), and last a line
# naming every such phase: a CI that keeps only the end of the output still
# says which lane failed and why.
#
# A phase that began but has no record yet is shown as `running`, with its
# time so far: a CI run killed at its time limit (make test prints the table
# when it is stopped) then says which lanes it was still waiting for.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=env.sh
. "$(dirname "$0")/env.sh"

record=$GPUFLEET_ROOT/tests/output/phases.tsv

append() {
  mkdir -p "$(dirname "$record")"
  {
    flock 9
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" "${6:-}" >>"$record"
  } 9>"$record.lock"
}

# machine_cpu: "BUSY TOTAL CORES", the busy and total core-seconds since boot
# (the cpu line of /proc/stat: idle and iowait count as not busy).
machine_cpu() {
  local hz
  hz=$(getconf CLK_TCK)
  awk -v hz="$hz" -v cores="$(nproc)" '$1 == "cpu" {
      total = 0; for (i = 2; i <= NF; i++) total += $i
      printf "%d %d %d", (total - $5 - $6) / hz, total / hz, cores; exit }' /proc/stat
}

case "${1:-}" in
  start)
    mkdir -p "$(dirname "$record")"
    printf 'run\t%s\t\t\t%s\n' "$(date +%s)" "$(machine_cpu)" >"$record"
    ;;
  run)
    [ $# -ge 3 ] || die "usage: phase.sh run NAME COMMAND [ARG...]"
    shift
    timed "$@"
    ;;
  begin)
    [ $# -eq 3 ] || die "usage: phase.sh begin NAME START"
    append "$2" "$3" "" running
    ;;
  record)
    if [ $# -lt 5 ] || [ $# -gt 7 ]; then
      die "usage: phase.sh record NAME START END RESULT [CPU [LOG]]"
    fi
    append "$2" "$3" "$4" "$5" "${6:-}" "${7:-}"
    ;;
  table)
    [ -f "$record" ] || exit 0
    awk -F '\t' -v now="$(machine_cpu)" -v clock="$(date +%s)" '
      $1 == "run" { origin = $2; then = $5; next }
      # A phase still running: kept aside until its record (same name and
      # start) replaces it.
      $4 == "running" { open[$1 SUBSEP $2] = 1; next }
      { n++; name[n] = $1; from[n] = $2; to[n] = $3; result[n] = $4; cpu[n] = ($5 == "" ? "-" : $5); logfile[n] = $6
        delete open[$1 SUBSEP $2]
        if (origin == "") origin = $2
        if ($3 > last) last = $3 }
      END {
        for (key in open) {
          split(key, part, SUBSEP)
          n++; name[n] = part[1]; from[n] = part[2]; to[n] = clock; result[n] = "running"; cpu[n] = "-"
          if (origin == "") origin = part[2]
          last = clock
        }
        printf "\n%-44s %8s %8s %8s %8s  %s\n", "phase", "start s", "wall s", "min", "cpu s", "result"
        for (i = 1; i <= n; i++)
          printf "%-44s %8d %8d %8.1f %8s  %s\n", name[i], from[i] - origin, to[i] - from[i], (to[i] - from[i]) / 60, cpu[i], result[i]
        if (n) printf "%-44s %8s %8d %8.1f\n", "whole run (wall clock)", "", last - origin, (last - origin) / 60
        # busy and total core-seconds: "busy total cores" at start and now.
        split(then, a, " "); split(now, b, " ")
        if (then != "" && b[2] > a[2])
          printf "%-44s %8s %8d %8s %8d  %d%% of %d cores\n", "machine CPU (busy core-seconds)", "", \
            (b[2] - a[2]) / b[3], "", b[1] - a[1], 100 * (b[1] - a[1]) / (b[2] - a[2]), b[3]
        # Last, the phases that did not pass, each with the last error lines
        # of its log.
        for (i = 1; i <= n; i++) {
          if (result[i] == "ok" || result[i] == "passed") continue
          failed = failed (failed == "" ? "" : ", ") name[i] " (" result[i] ")"
          if (logfile[i] == "") continue
          kept = 0
          while ((getline line < logfile[i]) > 0)
            if (line ~ /FAILED|[Ff]ailed|fatal:|ERROR|[Ee]rror:|Traceback|assert/)
              excerpt[++kept % 8] = substr(line, 1, 240)
          close(logfile[i])
          if (kept == 0) continue
          printf "\n%s, the last error lines of %s:\n", name[i], logfile[i]
          for (k = (kept > 8 ? kept - 7 : 1); k <= kept; k++) print "  " excerpt[k % 8]
        }
        if (failed != "") printf "\n%-44s %s\n", "not passed", failed
      }' "$record" >&2
    ;;
  *)
    die "usage: phase.sh start | run NAME CMD... | begin NAME START | record NAME START END RESULT | table"
    ;;
esac
