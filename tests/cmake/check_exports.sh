#!/bin/sh
# usage: check_exports.sh NM LIBRARY HEADER
# Fails when the library exports a defined dynamic symbol that is not int8attn_*, or when a
# function declared INT8ATTN_API in the header is not exported.
set -eu
nm_tool="$1"
lib="$2"
header="$3"
symbols=$("$nm_tool" -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)
bad=$(printf '%s\n' "$symbols" | grep -v '^int8attn_' | grep -v '^$' || true)
if [ -n "$bad" ]; then
  echo "error: $lib exports symbols outside the int8attn_ namespace:"
  printf '%s\n' "$bad"
  exit 1
fi
# Declarations may span lines: join the header, then pick the name before '(' after INT8ATTN_API.
declared=$(tr '\n' ' ' < "$header" | grep -o 'INT8ATTN_API[^;(]*(' | grep -o 'int8attn_[a-z0-9_]*[ ]*($' |
           tr -d ' (' | sort -u)
missing=""
for f in $declared; do
  printf '%s\n' "$symbols" | grep -qx "$f" || missing="$missing $f"
done
if [ -n "$missing" ]; then
  echo "error: declared in $header but not exported by $lib:$missing"
  exit 1
fi
n_decl=$(printf '%s\n' "$declared" | grep -c . || true)
n_exp=$(printf '%s\n' "$symbols" | grep -c . || true)
echo "ok: $lib exports $n_exp symbols, all int8attn_*; all $n_decl declared functions present"
