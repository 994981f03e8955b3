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

# make a file with one build, run it with every build: x = ones(1, 4) ->
# relu(x W^T + b) = [1.5, 0, 4]
expected="output 0 f32 [1, 3]: 1.5 0 4"
check() {
	"$1" make "$tmp/tiny.air" || { echo "$1 make failed"; exit 1; }
	got=$("$1" "$tmp/tiny.air")
	if [ "$got" != "$expected" ]; then
		echo "$1: got"; echo "$got"; echo "expected"; echo "$expected"; exit 1
	fi
	rm -f "$tmp/tiny.air"
}

for static in OFF ON; do
	cmake -S "$src/examples/c" -B "$tmp/ex-$static" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
		-DAIR_EXAMPLE_STATIC=$static >"$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
	cmake --build "$tmp/ex-$static" >"$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
	check "$tmp/ex-$static/air_example"
done
# the installed air binary reads what the example saved
"$tmp/ex-OFF/air_example" make "$tmp/tiny.air"
"$prefix/bin/air" info "$tmp/tiny.air" | grep -qF "f32[batch, 4]" || { echo "installed air info failed"; exit 1; }
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
