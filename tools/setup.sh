#!/usr/bin/env bash
# Installs the Debian packages of tools/debian-packages.txt that are missing, then
# configures (once) and builds abg in build/ (Release, Ninja), incrementally.
#
# Usage: tools/setup.sh [TARGET...]     (default: every target)
#
# Idempotent and fast when nothing changed: one dpkg-query for the package check,
# 'apt-get update' only when something must be installed, ninja for the rest.
# Works as root or through sudo; never asks anything.
# Environment: ABG_BUILD_DIR (default: build/), ABG_JOBS (default: nproc).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
list="$root/tools/debian-packages.txt"
build=${ABG_BUILD_DIR:-$root/build}
jobs=${ABG_JOBS:-$(nproc 2>/dev/null || echo 2)}

say() { echo "setup: $*" >&2; }

# --- packages -------------------------------------------------------------------
# Names without comments and blanks.
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$list" | grep -v '^$')
[ "${#wanted[@]}" -gt 0 ] || { say "no package in $list"; exit 1; }

# One dpkg-query for all of them; a package is present when its status is
# "install ok installed" (unknown names print nothing, hence `|| true`).
declare -A installed=()
while read -r name status; do
  [ "$status" = "installed" ] && installed[$name]=1
done < <(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${wanted[@]}" 2>/dev/null || true)

missing=()
for p in "${wanted[@]}"; do
  [ -n "${installed[$p]:-}" ] || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    say "missing packages: ${missing[*]}; run as root or install sudo"
    exit 1
  fi
  say "installing ${#missing[@]} missing package(s): ${missing[*]}"
  apt_env=(env DEBIAN_FRONTEND=noninteractive)
  "${as_root[@]}" "${apt_env[@]}" apt-get update -q
  "${as_root[@]}" "${apt_env[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# --- build ----------------------------------------------------------------------
if [ ! -f "$build/CMakeCache.txt" ]; then
  say "configuring $build (Release, Ninja)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
# ninja re-runs cmake by itself when a CMakeLists.txt or a globbed folder changed.
cmake --build "$build" --parallel "$jobs" ${1+--target "$@"}
