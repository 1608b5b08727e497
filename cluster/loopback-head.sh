#!/usr/bin/env bash
# A private Ray head on this machine, for debugging the cluster path (`rlvr submit` to it as to a real
# cluster), and a teardown that stops exactly that head and everything it started, nothing else:
#
#   cluster/loopback-head.sh start DIR [ray start options ...]   # ray start --head --temp-dir DIR ...
#   cluster/loopback-head.sh stop DIR                            # every process of that head, then DIR
#
# Why not `ray stop`: it stops every Ray on the machine (other users', running `rlvr train`s'). Why not
# `pkill -f DIR`: only the head's first few processes name DIR on their command line; the client server,
# the agents and the workers do not (they rename themselves ray::IDLE, ray::DashboardAgent, ...), and
# gcs_server and raylet outlive SIGTERM for many seconds.
# How: `start` runs `ray start` as the leader of a new session (setsid) and records that session's id
# in DIR/rlvr-head.sid. Every process the head starts stays in that session (Ray gives workers their
# own process group, not their own session), except what Ray's job supervisor starts: a job's driver
# (`rlvr submit`'s `python -m rlvr_launch.jobs.driver`) and its watcher get new sessions, but stay children of
# the supervisor. `stop` takes the session and every descendant of it, sends them SIGTERM, waits
# RLVR_HEAD_GRACE_S seconds (default 10), sends SIGKILL to what is left, waits until none is left, and
# removes DIR. It refuses a session none of whose processes names DIR (a stale id), so it cannot hit an
# unrelated session.
set -euo pipefail

usage() {
  echo "usage: $0 start DIR [ray start options ...] | $0 stop DIR" >&2
  exit 2
}

[ $# -ge 2 ] || usage
action=$1
dir=$2
shift 2
case "$dir" in
  /*) ;;
  *) dir="$PWD/$dir" ;;
esac
dir=${dir%/}
sid_file="$dir/rlvr-head.sid"

# Process ids of session $1 that are still running (zombies are gone for our purpose).
session_pids() {
  ps -e -o pid=,sid=,stat= | awk -v s="$1" '$2 == s && $3 !~ /^Z/ {print $1}'
}

# Whether a process of session $1 names DIR on its command line (the head's gcs_server and raylet do).
session_is_this_heads() {
  local pid
  for pid in $(session_pids "$1"); do
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/"; then
      return 0
    fi
  done
  return 1
}

# What is left of the head, one pid a line: the running processes of session $sid, the running pids of
# $snapshot (taken before the first signal: a driver reparented since is no longer found through its
# parent), and all their running descendants, whatever their session. One `ps` call.
left_pids() {
  ps -e -o pid=,ppid=,sid=,stat= | awk -v s="$sid" -v snap="${snapshot:-}" '
    BEGIN { k = split(snap, a, " "); for (i = 1; i <= k; i++) want[a[i]] = 1 }
    $4 !~ /^Z/ { n++; pid[n] = $1; ppid[n] = $2; if ($3 == s || ($1 in want)) mark[$1] = 1 }
    END {
      do {
        changed = 0
        for (i = 1; i <= n; i++)
          if (!(pid[i] in mark) && (ppid[i] in mark)) { mark[pid[i]] = 1; changed = 1 }
      } while (changed)
      for (p in mark) print p
    }'
}

# Wait up to $1 seconds (wall clock) for the head to be gone.
wait_gone() {
  local deadline=$((SECONDS + $1))
  while [ -n "$(left_pids)" ] && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.2
  done
}

case "$action" in
  start)
    if [ -f "$sid_file" ] && [ -n "$(session_pids "$(cat "$sid_file")")" ]; then
      echo "loopback-head: a head started from $dir is still running (session $(cat "$sid_file")):" \
        "stop it first with: $0 stop $dir" >&2
      exit 1
    fi
    command -v ray >/dev/null || { echo "loopback-head: no \`ray\` on PATH: activate the venv" >&2; exit 1; }
    mkdir -p "$dir"
    # setsid (no fork: a child of this script is never a process-group leader) makes the inner shell
    # the session leader; its pid is the session id, and `exec` turns it into `ray start`.
    setsid bash -c 'echo "$$" >"$1"; shift; exec "$@"' bash "$sid_file" \
      ray start --head --temp-dir "$dir" "$@"
    echo "loopback-head: started from $dir (session $(cat "$sid_file")); stop it with: $0 stop $dir"
    ;;
  stop)
    if [ ! -f "$sid_file" ]; then
      echo "loopback-head: $sid_file not found: no head was started from $dir with $0" >&2
      exit 1
    fi
    sid=$(cat "$sid_file")
    if [ -n "$(session_pids "$sid")" ]; then
      if ! session_is_this_heads "$sid"; then
        echo "loopback-head: session $sid has no process of $dir (a stale $sid_file?): not touching it;" \
          "remove $dir by hand" >&2
        exit 1
      fi
      grace=${RLVR_HEAD_GRACE_S:-10}
      snapshot=""
      snapshot=$(left_pids)
      kill -TERM $snapshot 2>/dev/null || true
      wait_gone "$grace"
      left=$(left_pids)
      if [ -n "$left" ]; then
        echo "loopback-head: $(echo $left | wc -w) process(es) still running after ${grace} s: SIGKILL" >&2
        kill -KILL $left 2>/dev/null || true
        wait_gone 30
      fi
      if [ -n "$(left_pids)" ]; then
        echo "loopback-head: processes $(left_pids | tr '\n' ' ')of the head survived SIGKILL" >&2
        exit 1
      fi
    fi
    rm -rf "$dir"
    echo "loopback-head: stopped the head of $dir (session $sid) and removed $dir"
    ;;
  *)
    usage
    ;;
esac
