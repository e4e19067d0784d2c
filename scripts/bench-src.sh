#!/bin/sh
# bench-src.sh: the two trees `make bench` compares, its own, so that `make check` or
# `make src` running at the same time cannot change them under a benchmark:
#   build/bench/src      = base + patches/ (tree.sh; re-applied only when patches/ changed)
#   build/bench/base-src = the pristine base (tag "base" of build/base.git), no patches.
#   build/bench/nodom-src = the series without its merge-domain extension (the parent of
#     the first patch that adds merge_scope to mm/ksm.c): what merge domains cost with
#     merge_scope=global is patched against this kernel.
# Same depth and names as build/src and build/out/*: compiler cache hits across both.
set -eu
d=build/bench; mkdir -p $d
sum=$(cd patches && cat series $(grep -v '^#' series) | sha256sum)
if [ -d $d/src ] && [ "$(cat $d/src.sum 2>/dev/null)" = "$sum" ] &&
	[ -z "$(git -C $d/src status --porcelain -uno)" ]; then
	echo "bench-src.sh: $d/src is up to date with patches/"
else
	rm -f $d/src.sum
	TREE_RESET=1 sh scripts/tree.sh $d/src patches
	echo "$sum" > $d/src.sum
fi
# nodom-src: a clone of src at the patch before merge domains, re-made when src moved
first=$(git -C $d/src log --reverse --format=%H -S merge_scope base..HEAD -- mm/ksm.c | head -n 1)
[ -n "$first" ] || { echo "bench-src.sh: no patch in $d/src adds merge_scope to mm/ksm.c" >&2; exit 1; }
want=$(git -C $d/src rev-parse "$first^")
if [ -d $d/nodom-src ] && [ "$(git -C $d/nodom-src rev-parse HEAD)" = "$want" ] &&
	[ -z "$(git -C $d/nodom-src status --porcelain -uno)" ]; then
	echo "bench-src.sh: $d/nodom-src is the series up to $(git -C $d/nodom-src log -1 --format='%h %s')"
else
	rm -rf $d/nodom-src
	git clone -q --no-checkout $d/src $d/nodom-src
	git -C $d/nodom-src checkout -q --detach "$want"
	echo "bench-src.sh: cloned $d/nodom-src: the series up to $(git -C $d/nodom-src log -1 --format='%h %s')"
fi
want=$(git -C build/base.git rev-parse base)
if [ -d $d/base-src ] && [ "$(git -C $d/base-src rev-parse HEAD)" = "$want" ] &&
	[ -z "$(git -C $d/base-src status --porcelain -uno)" ]; then
	echo "bench-src.sh: $d/base-src is the base ($(git -C $d/base-src log -1 --format='%h %s'))"
	exit 0
fi
[ ! -e $d/base-src ] || { echo "bench-src.sh: $d/base-src is not the clean base; rm -rf $d/base-src and rerun" >&2; exit 1; }
git clone -q build/base.git $d/base-src
git -C $d/base-src checkout -q --detach base
echo "bench-src.sh: cloned the base into $d/base-src ($(git -C $d/base-src log -1 --format='%h %s'))"
