# Which Debian/Ubuntu packages this release calls what attnlab needs. Sourced by scripts/setup.sh and
# scripts/prepare_corpus.sh; tests/unit/test_setup_packages.py feeds it os-release variants.
# Functions only; nothing runs when sourced.

# Reads an os-release file ($1, else $ATTNLAB_OS_RELEASE, else /etc/os-release) into OS_ID,
# OS_ID_LIKE, OS_VERSION_ID and OS_CODENAME (in a subshell, so its other variables stay out of ours).
# OS_CODENAME is the Ubuntu release an Ubuntu derivative is built on (Mint's UBUNTU_CODENAME).
attnlab_read_os_release() {
  local file="${1:-${ATTNLAB_OS_RELEASE:-/etc/os-release}}"
  OS_ID="" OS_ID_LIKE="" OS_VERSION_ID="" OS_CODENAME=""
  [ -r "$file" ] || return 1
  local fields
  fields=$(. "$file" && printf '%s\n%s\n%s\n%s\n' "${ID:-}" "${ID_LIKE:-}" "${VERSION_ID:-}" \
           "${UBUNTU_CODENAME:-${VERSION_CODENAME:-}}")
  { read -r OS_ID; read -r OS_ID_LIKE; read -r OS_VERSION_ID; read -r OS_CODENAME; } <<<"$fields"
}

# True on Debian, Ubuntu and their derivatives (ID or ID_LIKE names debian or ubuntu).
attnlab_is_debian_like() {
  case " $OS_ID $OS_ID_LIKE " in
    *" debian "* | *" ubuntu "*) return 0 ;;
  esac
  return 1
}

# X.Y of the release's default python3: the installed python3 package, else apt's candidate for it,
# else the release's own (by codename, for a machine whose package lists are still empty).
attnlab_release_python() {
  local v
  v=$(dpkg-query -W -f='${Version}' python3 2>/dev/null | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p' || true)
  [ -z "$v" ] && v=$(apt-cache policy python3 2>/dev/null |
                     sed -n 's/^ *Candidate: *\([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' || true)
  if [ -z "$v" ]; then
    case "$OS_CODENAME" in
      bullseye) v=3.9 ;;
      bookworm) v=3.11 ;;
      trixie) v=3.13 ;;
      focal) v=3.8 ;;
      jammy) v=3.10 ;;
      noble | oracular) v=3.12 ;;
      plucky | questing) v=3.13 ;;
      *) return 1 ;;
    esac
  fi
  echo "$v"
}

# The documentation package of the release's python3 (the embedded corpus, docs/data.md).
attnlab_python_doc_package() {
  local v
  v=$(attnlab_release_python) || return 1
  echo "python${v}-doc"
}

# The reStructuredText sources of an installed python3.X-doc, the newest X first; nothing when none.
attnlab_python_doc_sources() {
  local root="${1:-/usr/share/doc}" newest
  newest=$(ls -d "$root"/python3.*-doc/html/_sources 2>/dev/null | sort -rV | head -n 1)
  [ -n "$newest" ] && echo "$newest"
}
