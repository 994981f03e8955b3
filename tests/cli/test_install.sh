#!/bin/sh
# test_install.sh BUILD_DIR SOURCE_DIR C_COMPILER - installs libair from
# BUILD_DIR into a temporary prefix, then builds examples/c against it three
# ways (find_package with libair.so, with libair.a, and pkg-config) and runs
# each; also runs the installed `air` binary.
set -eu
build=$1
src=$2
cc=$3
tmp=$(mktemp -d /tmp/air-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
for f in include/air/air.h bin/air; do
	test -e "$prefix/$f" || { echo "not installed: $f"; exit 1; }
done
libdir=$(dirname "$(find "$prefix" -name libair.pc)")/..
for f in libair.a libair.so pkgconfig/libair.pc cmake/air/airConfig.cmake cmake/air/airTargets.cmake; do
	test -e "$libdir/$f" || { echo "not installed: lib/$f"; exit 1; }
done
"$prefix/bin/air" version >/dev/null

expected="1.5 0 10
0 0 0"
check() {
	got=$("$@")
	if [ "$got" != "$expected" ]; then
		echo "$*: got"; echo "$got"; echo "expected"; echo "$expected"; exit 1
	fi
}

for static in OFF ON; do
	cmake -S "$src/examples/c" -B "$tmp/ex-$static" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
		-DAIR_EXAMPLE_STATIC=$static >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
	cmake --build "$tmp/ex-$static" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
	check "$tmp/ex-$static/air_example"
done
# the shared build really uses libair.so
if command -v ldd >/dev/null; then
	ldd "$tmp/ex-OFF/air_example" | grep -q "libair.so" || { echo "air_example (shared) does not load libair.so"; exit 1; }
fi

# pkg-config, from the moved-anywhere .pc file
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
"$cc" -o "$tmp/ex-pc" "$src/examples/c/main.c" $(pkg-config --cflags --libs libair) \
	-Wl,-rpath,"$(pkg-config --variable=libdir libair)"
check "$tmp/ex-pc"
echo "install test: ok ($prefix)"
