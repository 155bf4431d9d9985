#!/usr/bin/env bash
# The README's two commands as a new user runs them: a shallow clone of this checkout's last
# commit in an empty temporary directory (nothing beside it), a fresh venv, an empty
# compilation cache, no pip cache. Prints the machine, each command's exit status and time.
#
#   tools/fresh_clone.sh [REPOSITORY]      # default: this checkout
set -uo pipefail
repo=${1:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
tmp=$(mktemp -d)
git clone -q --depth 1 "file://$repo" "$tmp/azjax" && cd "$tmp/azjax" || exit 1
python3 -m venv "$tmp/venv" && . "$tmp/venv/bin/activate" || exit 1
export CI=true AZJAX_COMPILATION_CACHE="$tmp/jax-cache"
echo "in $tmp: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(python --version)"

start=$(date +%s)
(pip install --no-cache-dir -e ".[dev]" && azjax train experiments/tic_tac_toe.yaml) \
  > "$tmp/first.log" 2>&1 </dev/null
echo "first command: exit $? in $(($(date +%s) - start)) s (log $tmp/first.log)"
grep -E "PERFECT|^done" "$tmp/first.log"
echo "lines with a carriage return in the log: $(grep -c $'\r' "$tmp/first.log")"

start=$(date +%s)
python -m pytest -q -n 2 --dist loadfile > "$tmp/second.log" 2>&1 </dev/null
echo "second command: exit $? in $(($(date +%s) - start)) s (log $tmp/second.log)"
tail -1 "$tmp/second.log"
