#!/bin/sh
# upstream-selftests.sh: build upstream's KSM selftests (ksm_functional_tests, ksm_tests)
# from Debian's linux-source-6.12 into build/upstream, against 6.12's uapi headers.
# Nothing of it goes into patches/: it is the peer's test suite, run against our kernel.
set -eu
tarball=/usr/src/linux-source-6.12.tar.xz
out=build/upstream top=build/upstream/linux-source-6.12
mm=$top/tools/testing/selftests/mm
[ -f $tarball ] || { echo "upstream-selftests.sh: no $tarball: run 'make deps'" >&2; exit 1; }
mkdir -p $out
# Unpack only what headers_install and the tests need, once per version of the package.
stamp=$(stat -c '%s %Y' $tarball)
if [ "$(cat $out/.stamp 2>/dev/null)" != "$stamp" ]; then
	rm -rf $top $out/usr $out/.stamp
	tar -xJf $tarball -C $out --wildcards 'linux-source-6.12/Makefile' 'linux-source-6.12/Kbuild' \
		'linux-source-6.12/Kconfig' 'linux-source-6.12/arch/Kconfig' 'linux-source-6.12/scripts/*' \
		'linux-source-6.12/include/*' 'linux-source-6.12/arch/x86/*' 'linux-source-6.12/tools/include/*' \
		'linux-source-6.12/tools/testing/selftests/kselftest*' \
		'linux-source-6.12/tools/testing/selftests/mm/*'
	make -s -C $top O="$PWD/$out" headers_install
	# Known defect of the 6.12 test (fixed upstream in 6.18): the fork+exec test hands
	# execv() an argv array without its terminating NULL. Mend exactly that line.
	f=$mm/ksm_functional_tests.c
	old='char \*argv_for_program\[\] = { prg_name, FORK_EXEC_CHILD_PRG_NAME };'
	[ "$(grep -c "$old" $f)" = 1 ] || { echo "upstream-selftests.sh: the execv() argv line of $f is not there once; check the fix" >&2; exit 1; }
	sed -i "s/$old/char *argv_for_program[] = { prg_name, FORK_EXEC_CHILD_PRG_NAME, NULL }; \/* harness: argv needs its NULL *\//" $f
	echo "$stamp" > $out/.stamp
fi
for t in ksm_functional_tests ksm_tests; do
	gcc -Wall -O2 -I$top -I$top/tools/include -isystem $out/usr/include -o $out/$t \
		$mm/$t.c $mm/vm_util.c $mm/thp_settings.c -lrt -lpthread -lm -lnuma
done
echo "upstream-selftests.sh: built $out/ksm_functional_tests and $out/ksm_tests from $(basename $tarball) ($(dpkg-query -W -f '${Version}' linux-source-6.12))"
