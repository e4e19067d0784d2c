#!/bin/sh
# src.sh: bring build/src (the tree check/run build) up to date with patches/:
# re-applied on base only when patches/ changed, so unchanged files keep their mtimes.
set -eu
src=build/src; stamp=build/src.sum
sum=$(cd patches && cat series $(grep -v '^#' series) | sha256sum)
if [ -d "$src" ] && [ "$(cat $stamp 2>/dev/null)" = "$sum" ] &&
	[ -z "$(git -C $src status --porcelain -uno)" ] && [ "$(git -C $src rev-parse --abbrev-ref HEAD)" = main ]; then
	echo "src.sh: $src is up to date with patches/ ($(git -C $src rev-list --count base..HEAD) patches)"
	exit 0
fi
rm -f $stamp
TREE_RESET=1 sh scripts/tree.sh $src patches
echo "$sum" > $stamp
