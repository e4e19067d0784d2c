#!/bin/bash
# bisect.sh (make bisect): the whole kernel (vmlinux, config/core.config + KSM) of every
# commit of the series and the noksm and noprocfs kernels, which make check builds only as
# objects; on success bisect/results.tap, with the hash of the commits' trees that make
# check compares with the series it checks.
set -eu -o pipefail
mkdir -p build/logs bisect
log=build/logs/bisect.tap
rc=0
STAGES="apply bisect variants" BISECT=full bash scripts/check.sh | tee $log || rc=$?
if [ $rc != 0 ]; then
	echo "bisect.sh: failed; bisect/results.tap not written (see $log and build/logs/check/)" >&2
	exit $rc
fi
{
	echo "# make bisect: $(date -u '+%Y-%m-%d %H:%M UTC'), repo $(git rev-parse --short HEAD)$(git diff --quiet -- patches || echo -dirty), $(grep -vc -e '^#' -e cover-letter patches/series) patches"
	echo "# trees: $(sh scripts/series-trees.sh)"
	grep -E '^(not )?ok |^[0-9]+ passed' $log
} > bisect/results.tap
echo "bisect.sh: wrote bisect/results.tap: commit it with patches/"
