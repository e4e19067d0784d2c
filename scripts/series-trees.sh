#!/bin/sh
# series-trees.sh: one hash of the trees of the series' commits in build/src (base..main), in
# order: what make bisect built, whatever the commit messages say. bisect/results.tap records
# it; make check compares.
set -eu
git -C build/src rev-list --reverse base..main | while read -r c; do
	git -C build/src rev-parse "$c^{tree}"
done | sha256sum | cut -c1-16
