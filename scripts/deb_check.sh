#!/usr/bin/env bash
# Builds Chorus's .deb with CPack, installs it, uses it as a user would (the
# consumer project with find_package and with pkg-config, the chorus command,
# the Python package), removes it and checks that it left nothing behind.
# Needs root or sudo (dpkg). Uses the release tree (scripts/main.sh builds it).
# Usage: scripts/deb_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
fail() { echo "deb_check: $*" >&2; exit 1; }
root=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || fail "needs root or sudo (dpkg -i)"
  root=(sudo)
fi
build=build/release
# The package installs under /usr; the tree goes back to the default prefix
# afterwards (the Python package's folder is chosen by the prefix).
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
restore() { cmake --preset release -DCMAKE_INSTALL_PREFIX="${prefix:-/usr/local}" >/dev/null; }
trap restore EXIT
cmake --preset release -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >/dev/null
targets=(chorus chorus_shared)
help=$(cmake --build --preset release --target help)
for t in chorus_python chorus_torch chorus_nccl; do
  grep -q "^$t:" <<<"$help" && targets+=("$t")
done
cmake --build --preset release --target "${targets[@]}"
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls -t "$build"/chorus_*.deb | head -1)
echo "deb_check: built $deb ($(du -h "$deb" | cut -f1))"
dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Depends\):/  \1:/p'

if dpkg-query -W -f='${Status}' chorus 2>/dev/null | grep -q "ok installed"; then
  "${root[@]}" dpkg -r chorus >/dev/null
fi
"${root[@]}" dpkg -i "$deb" >/dev/null
mapfile -t files < <(dpkg -L chorus | while read -r f; do [[ -f $f || -L $f ]] && echo "$f"; done)
echo "deb_check: installed ${#files[@]} files"
work=$(mktemp -d /tmp/chorus-deb.XXXXXX)
trap 'rm -rf "$work"; restore' EXIT
tests/install/use_installed.sh /usr "$work"

"${root[@]}" dpkg -r chorus >/dev/null
left=()
for f in "${files[@]}"; do [[ -e $f || -L $f ]] && left+=("$f"); done
((${#left[@]} == 0)) || fail "left after dpkg -r: ${left[*]}"
dpkg-query -W -f='${Status}' chorus 2>/dev/null | grep -q "ok installed" && fail "chorus is still installed"
echo "deb_check: installed, used and removed cleanly"
