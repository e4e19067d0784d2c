#!/bin/sh
# tree.sh [TREE] [PATCHES]: create TREE, a git repo whose first commit is the
# pristine Debian linux-source-6.1 base, then `git am` every patch of PATCHES/series.
# TREE_RESET=1: reuse an existing TREE made by tree.sh (reset to base, re-apply).
set -eu
tree=${1:-build/linux}; patches=$(cd "${2:-patches}" && pwd)
tarball=/usr/src/linux-source-6.1.tar.xz
base=build/base.git
# Constant identity and date: the base commit hash is reproducible (0b72217f0 for 6.1.192).
fixed_date="1796282882 +0000"
export GIT_AUTHOR_NAME="Seed 5b1ee907 maintainers"
export GIT_AUTHOR_EMAIL="maintainers@users.noreply.a-seed-5b1ee907.example"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"

if [ -e "$tree" ] && [ "${TREE_RESET:-}" ] && git -C "$tree" rev-parse -q --verify base >/dev/null; then
	echo "tree.sh: resetting $tree to base (TREE_RESET=1)"
	git -C "$tree" am --abort 2>/dev/null || true
	git -C "$tree" checkout -q -f main && git -C "$tree" reset -q --hard base
elif [ -e "$tree" ]; then
	echo "tree.sh: $tree already exists; refusing to overwrite it (it may hold edits)." >&2
	echo "tree.sh: remove it yourself (after 'make export'), or use 'make tree TREE=build/other'." >&2
	exit 1
fi
[ -r "$tarball" ] || { echo "tree.sh: $tarball missing: run 'make deps'" >&2; exit 1; }

start=$(date +%s)
if [ ! -d "$base" ]; then
	tmp=build/base.tmp
	rm -rf "$tmp"; mkdir -p "$tmp"
	echo "tree.sh: unpacking $tarball into $base (one time only)"
	tar -xJf "$tarball" -C "$tmp" --strip-components=1
	v=$(sed -n 's/^VERSION = //p; s/^PATCHLEVEL = //p; s/^SUBLEVEL = //p' "$tmp/Makefile" | paste -sd.)
	git -C "$tmp" init -q -b main
	git -C "$tmp" add -f -A
	GIT_AUTHOR_DATE="$fixed_date" GIT_COMMITTER_DATE="$fixed_date" \
		git -C "$tmp" commit -q -m "Linux $v (Debian linux-source-6.1)"
	git -C "$tmp" tag base
	git clone -q --bare "$tmp" "$base"
	# The unpacked tree is the first TREE: a clone would check the 75k files out again.
	if [ -e "$tree" ]; then rm -rf "$tmp"; else mkdir -p "$(dirname "$tree")" && mv "$tmp" "$tree"; fi
	echo "tree.sh: $base made in $(( $(date +%s) - start ))s"
fi

[ -e "$tree" ] || { git clone -q "$base" "$tree" && git -C "$tree" tag -f base HEAD >/dev/null; }
git -C "$tree" config user.name >/dev/null || git -C "$tree" config user.name "$GIT_AUTHOR_NAME"
git -C "$tree" config user.email >/dev/null || git -C "$tree" config user.email "$GIT_AUTHOR_EMAIL"
# git am's automatic gc in the foreground: detached, it repacked build/bench/src while
# bench-src.sh cloned it ("failed to copy file ... No such file or directory").
git -C "$tree" config gc.autoDetach false
echo "tree.sh: base $(git -C "$tree" log -1 --format='%h %s' base) in $tree"

cover="$patches/0000-cover-letter.patch"
if [ -f "$cover" ]; then   # cover letter -> branch description, for export.sh
	desc=$(awk '/^Subject: /{s=$0; sub(/^Subject: (\[[^]]*\] )?/,"",s); insub=1; next}
		insub && /^ /{s=s $0; next} insub && /^$/{insub=0; body=1; print s; print ""; next}
		body && /^[^ ].* \([0-9]+\):$/{exit} body{print}' "$cover")
	git -C "$tree" config branch.main.description "$desc"
fi

n=0
for p in $(grep -v '^#' "$patches/series" 2>/dev/null || true); do
	case $p in 0000-cover-letter*) continue;; esac
	if ! git -C "$tree" am -q --committer-date-is-author-date "$patches/$p" >/dev/null 2>build/am.err; then
		echo "tree.sh: patch $p does not apply:" >&2
		grep -E '^error|^Patch failed|does not apply' build/am.err >&2 || cat build/am.err >&2
		echo "tree.sh: fix it in $tree (see: git -C $tree am --show-current-patch=diff)," >&2
		echo "tree.sh: then 'git -C $tree am --continue' and 'make export TREE=$tree'." >&2
		exit 1
	fi
	n=$((n + 1))
done
echo "tree.sh: applied $n patches from $patches/series ($(( $(date +%s) - start ))s in all)"
