#!/bin/sh
# build-warnings.sh REV DIR: build the objects that the series touches from REV of build/src
# with W=1 (gcc's extra warnings, kernel-doc) and C=1 (sparse), as the kernel test robot does,
# in build/out/lint with the test kernel's config. Writes DIR/w1.txt and DIR/sparse.txt, one
# warning per line ("OBJECT: file:line..."), paths relative to the tree. The lists are
# cached per tree and config.
set -eu
[ $# = 2 ] || { echo "usage: build-warnings.sh REV DIR" >&2; exit 2; }
src=build/src out=$PWD/build/out/lint rev=$1 dir=$2
[ -f $out/.config ] || { echo "build-warnings.sh: no $out/.config: run 'BUILD_TARGET=prepare make kernel CONFIG=test OUT=build/out/lint'" >&2; exit 1; }
# The touched .c files that the test kernel builds (an s390 file is no x86 object).
objs=$(sh scripts/series-objects.sh)
[ -n "$objs" ] || { echo "build-warnings.sh: no object of the series in build/out/test: run 'make kernel CONFIG=test'" >&2; exit 1; }
key=$( { git -C $src rev-parse "$rev^{tree}"; cat $out/.config "$0"; gcc --version; sparse --version; echo $objs; } | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/ksm-series-lint/build-$key
mkdir -p "$dir"
if [ -f "$cache/sparse.txt" ]; then
	cp "$cache/w1.txt" "$cache/sparse.txt" "$dir/"
	echo "build-warnings.sh: $rev: cached lists of $(echo $objs | wc -w) objects ($cache)"
	exit 0
fi
head=$(git -C $src symbolic-ref -q --short HEAD || git -C $src rev-parse HEAD)
git -C $src checkout -q "$rev"
trap 'git -C $src checkout -q "$head"' EXIT
# One make for all objects (a make costs ~5 s before it compiles anything), serial and not
# silent (MAKEFLAGS= drops make check's -s): each object's output follows its "  CC  OBJECT"
# line. Each warning becomes "OBJECT: file:line[:col]: warning: ...": lists compare per object.
for o in $objs; do rm -f "$out/$o"; done
echo "build-warnings.sh: $rev: W=1 C=1" $objs
MAKEFLAGS= make -C $src O="$out" CC="ccache gcc" W=1 C=1 $objs > "$dir/raw.txt" 2>&1 ||
	{ cat "$dir/raw.txt"; echo "build-warnings.sh: the objects of $rev do not build" >&2; exit 1; }
# Paths are absolute, or relative to $out where ccache (CCACHE_BASEDIR) made them so.
sed -e "s@^$PWD/$src/@@" -e "s@^$(realpath --relative-to="$out" $src)/@@" "$dir/raw.txt" |
	awk '/^  CC +[^ ]+\.o$/ { o = $2 } /^[^ :]+:[0-9]+(:[0-9]+)?: (warning|error):/ { print (o ? o : "make") ": " $0 }' \
	> "$dir/all.txt"
# gcc says which -W option warned; sparse does not; kernel-doc (W=1) gives no column.
grep -E '\[-W|^[^ ]+ [^ :]+:[0-9]+: ' "$dir/all.txt" > "$dir/w1.txt" || true
grep -v -E '\[-W|^[^ ]+ [^ :]+:[0-9]+: ' "$dir/all.txt" > "$dir/sparse.txt" || true
mkdir -p "$cache" && cp "$dir/w1.txt" "$dir/sparse.txt" "$cache/"
echo "build-warnings.sh: $rev: $(echo $objs | wc -w) objects, $(wc -l < "$dir/w1.txt") W=1 and $(wc -l < "$dir/sparse.txt") sparse warnings"
