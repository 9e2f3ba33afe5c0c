#!/usr/bin/env bash
# attnlab's Debian build dependencies as a bundle, for a machine with no package registry (the GPU
# check, docs/building.md):
#   scripts/offline-deps.sh download DIR        on a machine with apt: the .deb files, and this script, into DIR
#   DIR/offline-deps.sh unpack DIR PREFIX       on the machine without: unpack them under PREFIX and print
#                                               the exports that let CMake and the loader find them
# The target is x86-64 Linux with a glibc at least as new as Debian 12's.
set -euo pipefail
PACKAGES="libyaml-cpp0.7 libyaml-cpp-dev libspdlog1.10 libspdlog-dev libfmt9 libfmt-dev libcli11-dev
nlohmann-json3-dev libgtest-dev libgmock-dev googletest libssl-dev libssl3 libgloo-dev libboost1.74-dev"
usage() { sed -n '2,7p' "$0"; exit 2; }
case "${1:-}" in
  download)
    dir=${2:-}; [ -n "$dir" ] || usage
    mkdir -p "$dir"
    (cd "$dir" && apt-get download $PACKAGES >/dev/null)
    cp "$0" "$dir/offline-deps.sh"  # the unpack step runs this copy
    echo "$(ls "$dir"/*.deb | wc -l) .deb files in $dir" ;;
  unpack)
    dir=${2:-}; prefix=${3:-}; [ -n "$dir" ] && [ -n "$prefix" ] || usage
    mkdir -p "$prefix"
    for deb in "$dir"/*.deb; do dpkg -x "$deb" "$prefix"; done
    echo "export CMAKE_PREFIX_PATH=$prefix/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
    echo "export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" ;;
  *) usage ;;
esac
