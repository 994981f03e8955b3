#!/bin/sh
# test_cli.sh AIR MAKE_AIR_FILES - drives the `air` binary on .air files
# saved from C graphs (make_air_files): every command, outputs compared byte
# for byte with an in-process run, and every bad-argument path with its exit
# code (0 ok, 1 error, 2 usage) and a message naming what is wrong.
set -u
air=$1
make=$2
tmp=$(mktemp -d /tmp/air-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failures=0
checks=0

"$make" "$tmp" || { echo "make_air_files failed"; exit 1; }

# expect CODE PATTERN CMD...: runs CMD, checks its exit code and that its
# stdout+stderr contain PATTERN (a fixed string; "" for any)
expect() {
	code=$1
	pattern=$2
	shift 2
	checks=$((checks + 1))
	"$@" >"$tmp/out.txt" 2>&1
	got=$?
	if [ "$got" != "$code" ]; then
		echo "FAIL: $* -> exit $got, expected $code"; sed 's/^/    /' "$tmp/out.txt"
		failures=$((failures + 1))
		return
	fi
	if [ -n "$pattern" ] && ! grep -qF -- "$pattern" "$tmp/out.txt"; then
		echo "FAIL: $* -> output lacks '$pattern'"; sed 's/^/    /' "$tmp/out.txt"
		failures=$((failures + 1))
	fi
}

# same FILE_A FILE_B: byte-equal files
same() {
	checks=$((checks + 1))
	if ! cmp -s "$1" "$2"; then
		echo "FAIL: $1 differs from $2"
		failures=$((failures + 1))
	fi
}

t=$tmp
# ---- dispatch
expect 2 "usage: air COMMAND" "$air"
expect 2 "unknown command 'frobnicate'" "$air" frobnicate
expect 0 "air run FILE" "$air" --help
expect 0 "usage: air run" "$air" run --help
expect 0 "libair" "$air" version
expect 2 "unexpected argument" "$air" version extra
expect 0 "linear" "$air" ops
expect 2 "unexpected argument" "$air" ops extra

# ---- info
expect 0 "f32[batch, 4]" "$air" info "$t/mlp.air"
expect 0 "'x'" "$air" info "$t/mlp.air"
expect 0 "'y2'" "$air" info "$t/mlp.air"
expect 0 "torchair_version: 0.1.0" "$air" info "$t/mlp.air"
expect 0 "linear" "$air" info "$t/mlp.air"
expect 0 "weights: 60 bytes in 2 constants" "$air" info "$t/mlp.air"
expect 0 "bf16[2, 3]" "$air" info "$t/bf16.air"
expect 0 "f32[n, 3]" "$air" info "$t/two.air"
expect 2 "missing FILE" "$air" info
expect 2 "unexpected argument" "$air" info "$t/mlp.air" "$t/two.air"
expect 1 "no_such.air" "$air" info "$t/no_such.air"
head -c 100 /dev/urandom >"$t/junk.air"
expect 1 "junk.air" "$air" info "$t/junk.air"
head -c 40 "$t/mlp.air" >"$t/short.air"
expect 1 "short.air" "$air" info "$t/short.air"
expect 1 "" "$air" info "$t"
expect 1 "1 external constant (not stored in the file)" "$air" info "$t/ext.air"
expect 1 "1 external constant (not stored in the file)" "$air" run "$t/ext.air" --input "$t/mlp_x1.npy" --output-dir "$t/e"

# ---- run: results equal an in-process run, byte for byte
for rows in 1 5; do
	expect 0 "" "$air" run "$t/mlp.air" --input "$t/mlp_x$rows.npy" --output-dir "$t/o$rows"
	same "$t/o$rows/out0.npy" "$t/mlp_x${rows}_out0.npy"
	same "$t/o$rows/out1.npy" "$t/mlp_x${rows}_out1.npy"
done
expect 0 "" "$air" run "$t/two.air" --input "$t/two_a.npy" --input "$t/two_b.npy" --output-dir "$t/o2" --threads 1
same "$t/o2/out0.npy" "$t/two_out0.npy"
expect 0 "" "$air" run "$t/bf16.air" --input "$t/bf16_h.npy" --output-dir "$t/ob"
same "$t/ob/out0.npy" "$t/bf16_out0.npy"
expect 0 "" "$air" run "$t/int.air" --input "$t/int_k.npy" --output-dir "$t/oi"
same "$t/oi/out0.npy" "$t/int_out0.npy"

# wrong count, dtype, rank, dims: each names the input
expect 1 "takes 1 input ('x'), 0 given" "$air" run "$t/mlp.air" --output-dir "$t/e"
expect 1 "takes 1 input ('x'), 2 given" "$air" run "$t/mlp.air" --input "$t/mlp_x1.npy" --input "$t/mlp_x1.npy" --output-dir "$t/e"
expect 1 "takes 2 inputs ('a', 'b'), 1 given" "$air" run "$t/two.air" --input "$t/two_a.npy" --output-dir "$t/e"
expect 1 "input 'x': dtype i32 given" "$air" run "$t/mlp.air" --input "$t/int_k.npy" --output-dir "$t/e"
expect 1 "input 'x': rank 1 given, the model takes f32[batch, 4]" "$air" run "$t/mlp.air" --input "$t/f32_r1.npy" --output-dir "$t/e"
expect 1 "input 'x': dim 1 is 3, the model takes f32[batch, 4]" "$air" run "$t/mlp.air" --input "$t/two_a.npy" --output-dir "$t/e"
expect 1 "input 'k': dtype f32 given, the model takes i32[5]" "$air" run "$t/int.air" --input "$t/two_a.npy" --output-dir "$t/e"
expect 1 "input 'b': dim 0 (n) is 3, but 'a' set n = 2" "$air" run "$t/two.air" --input "$t/two_a.npy" --input "$t/two_b3.npy" --output-dir "$t/e"
expect 1 "input 'h': dtype i32 given, the model takes bf16[2, 3] (give bf16 inputs as float32)" "$air" run "$t/bf16.air" --input "$t/int_k.npy" --output-dir "$t/e"
expect 1 "input 'x': $t/none.npy" "$air" run "$t/mlp.air" --input "$t/none.npy" --output-dir "$t/e"
expect 1 "input 'x': $t/junk.air: not a .npy file" "$air" run "$t/mlp.air" --input "$t/junk.air" --output-dir "$t/e"
expect 1 "no/such/dir: No such file or directory" "$air" run "$t/mlp.air" --input "$t/mlp_x1.npy" --output-dir "$t/no/such/dir"
expect 1 "mlp_x1.npy: Not a directory" "$air" run "$t/mlp.air" --input "$t/mlp_x1.npy" --output-dir "$t/mlp_x1.npy"
expect 1 "junk.air" "$air" run "$t/junk.air" --input "$t/mlp_x1.npy" --output-dir "$t/e"
# usage errors
expect 2 "missing FILE" "$air" run --input "$t/mlp_x1.npy" --output-dir "$t/e"
expect 2 "missing --output-dir" "$air" run "$t/mlp.air" --input "$t/mlp_x1.npy"
expect 2 "--input needs a value" "$air" run "$t/mlp.air" --output-dir "$t/e" --input
expect 2 "--output-dir needs a value" "$air" run "$t/mlp.air" --output-dir
expect 2 "--output-dir given twice" "$air" run "$t/mlp.air" --output-dir a --output-dir b
expect 2 "unknown option '--bogus'" "$air" run "$t/mlp.air" --bogus
expect 2 "unexpected argument" "$air" run "$t/mlp.air" "$t/two.air" --output-dir "$t/e"
expect 2 "--threads takes" "$air" run "$t/mlp.air" --threads 0 --output-dir "$t/e"
expect 2 "--threads takes" "$air" run "$t/mlp.air" --threads x --output-dir "$t/e"

# ---- bench
expect 0 "median" "$air" bench "$t/mlp.air" --dim batch=3 --iters 5 --warmup 1
expect 0 "5 runs" "$air" bench "$t/mlp.air" --input "$t/mlp_x5.npy" --iters 5 --threads 1
expect 0 "median" "$air" bench "$t/bf16.air" --iters 3
expect 0 "median" "$air" bench "$t/int.air" --iters 3 --warmup 0
expect 1 "--dim batch=VALUE" "$air" bench "$t/mlp.air" --iters 2
expect 1 "--dim nope: the model's inputs have no such symbolic dim" "$air" bench "$t/mlp.air" --dim batch=2 --dim nope=3 --iters 2
expect 1 "input 'b': dim 0 (n) is 3" "$air" bench "$t/two.air" --input "$t/two_a.npy" --input "$t/two_b3.npy" --iters 2
expect 1 "takes 2 inputs, 1 given" "$air" bench "$t/two.air" --input "$t/two_a.npy"
expect 1 "no_such.air" "$air" bench "$t/no_such.air"
expect 2 "missing FILE" "$air" bench --iters 3
expect 2 "--iters takes" "$air" bench "$t/mlp.air" --iters 0
expect 2 "--iters takes" "$air" bench "$t/mlp.air" --iters -3
expect 2 "--iters takes" "$air" bench "$t/mlp.air" --iters 99999999999999999999
expect 2 "--iters needs a value" "$air" bench "$t/mlp.air" --iters
expect 2 "--warmup takes" "$air" bench "$t/mlp.air" --warmup x
expect 2 "--threads takes" "$air" bench "$t/mlp.air" --threads 0
expect 2 "--dim takes NAME=VALUE" "$air" bench "$t/mlp.air" --dim batch
expect 2 "--dim takes NAME=VALUE" "$air" bench "$t/mlp.air" --dim =3
expect 2 "--dim takes NAME=VALUE" "$air" bench "$t/mlp.air" --dim batch=-1
expect 2 "--dim is for random inputs" "$air" bench "$t/mlp.air" --dim batch=2 --input "$t/mlp_x1.npy"
expect 2 "unknown option" "$air" bench "$t/mlp.air" --fast
expect 2 "unexpected argument" "$air" bench "$t/mlp.air" extra

# ---- dump
expect 0 "graph after the passes" "$air" dump "$t/mlp.air"
expect 0 "graph before the passes" "$air" dump "$t/mlp.air"
expect 0 "{linear epilogue: + bias -> relu}" "$air" dump "$t/mlp.air" --after
expect 0 "[linear" "$air" dump "$t/mlp.air" --after
expect 2 "not both" "$air" dump "$t/mlp.air" --dot --before --after
expect 0 "= linear(" "$air" dump "$t/mlp.air" --before
expect 0 "input 0 'x' : f32[batch, 4]" "$air" dump "$t/mlp.air" --before
expect 0 "digraph \"air after passes\"" "$air" dump "$t/mlp.air" --dot
expect 0 "digraph \"air after passes\"" "$air" dump "$t/mlp.air" --dot --after
expect 0 "digraph \"air before passes\"" "$air" dump --dot --before "$t/mlp.air"
expect 2 "missing FILE" "$air" dump --dot
expect 2 "unknown option" "$air" dump "$t/mlp.air" --svg
expect 2 "unexpected argument" "$air" dump "$t/mlp.air" "$t/two.air"
expect 1 "junk.air" "$air" dump "$t/junk.air"

echo "test_cli: $checks checks, $failures failed"
[ "$failures" = 0 ]
