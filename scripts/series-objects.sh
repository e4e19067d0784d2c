#!/bin/sh
# series-objects.sh: the objects of the .c files that the series (base..HEAD of build/src)
# changes and that the test kernel builds (build/out/test), one per line; an s390 file is no
# x86 object. Used by the lint stage (build-warnings.sh) and the CONFIG_SYSFS=n build.
set -eu
git -C build/src diff --name-only base..HEAD -- '*.c' | grep -v -e '^tools/' -e '^Documentation/' |
	sed 's/\.c$/.o/' | while read -r o; do [ ! -f build/out/test/$o ] || echo $o; done
