#!/bin/sh
# cli_expect.sh STATUS MATCH NOMATCH CLI ARGS...: run the command-line tool with ARGS and fail
# unless it exits with STATUS, its output (stdout and stderr) matches the extended regular
# expression MATCH and, if NOMATCH is not empty, no line matches NOMATCH. The output is printed
# so a failing CTest shows it.
want=$1 match=$2 nomatch=$3
shift 3
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$want" ]; then
  echo "cli_expect: exit status $rc, expected $want"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$match"; then
  echo "cli_expect: no line matches '$match'"
  exit 1
fi
if [ -n "$nomatch" ] && printf '%s\n' "$out" | grep -Eq -- "$nomatch"; then
  echo "cli_expect: a line matches '$nomatch'"
  exit 1
fi
exit 0
