#!/bin/sh
# export.sh [TREE] [PATCHES]: regenerate PATCHES/ (format-patch + cover letter + series) from TREE.
# Deterministic: an unchanged TREE re-exports byte-identical files (core.abbrev pinned:
# git's default length of the "index" hashes grows with the number of objects in TREE).
set -eu
tree=${1:-build/linux}; patches=${2:-patches}
# The base: tag "base" (made by tree.sh), else the root commit.
base=$(git -C "$tree" rev-parse -q --verify base || git -C "$tree" rev-list --max-parents=0 HEAD) ||
	{ echo "export.sh: $tree is not a git tree: make it with 'make tree'" >&2; exit 1; }
[ -z "$(git -C "$tree" status --porcelain -uno 2>/dev/null)" ] ||
	echo "export.sh: warning: $tree has uncommitted changes; they are NOT exported" >&2
mkdir -p "$patches"; out=$(cd "$patches" && pwd)
rm -f "$out"/[0-9][0-9][0-9][0-9]-*.patch
n=$(git -C "$tree" rev-list --count "$base"..HEAD)
if [ "$n" = 0 ]; then
	: > "$out/series"; echo "export.sh: no commits after base in $tree; empty series"; exit 0
fi
branch=$(git -C "$tree" symbolic-ref --short HEAD)
git -C "$tree" config "branch.$branch.description" >/dev/null ||
	echo "export.sh: warning: no cover text; set it with: git -C $tree branch --edit-description" >&2
# Cover letter author/date: those of the last commit, not whoever runs the export.
export GIT_COMMITTER_NAME="$(git -C "$tree" log -1 --format=%an)"
export GIT_COMMITTER_EMAIL="$(git -C "$tree" log -1 --format=%ae)"
git -C "$tree" -c diff.suppressBlankEmpty=true -c core.abbrev=9 format-patch -q -n --cover-letter --cover-from-description=subject \
	--base="$base" --zero-commit --no-signature -o "$out" "$base"..HEAD
date=$(git -C "$tree" log -1 --date=rfc2822 --format=%ad)
sed -i "0,/^Date: /s/^Date: .*/Date: $date/" "$out/0000-cover-letter.patch"
(cd "$out" && ls [0-9][0-9][0-9][0-9]-*.patch) > "$out/series"
echo "export.sh: wrote $n patches + cover letter to $patches (series updated)"
