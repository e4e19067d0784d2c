#!/bin/bash
# check.sh [--quick]: apply+checkpatch, the test kernel, then the guest tests in the
# background while the host builds: bisect (objects), other configurations, s390, lint (W=1,
# sparse, kernel-doc, coccinelle, documents); the guest's results last.
# One TAP-like line per result; the last line is "N passed, N failed, N skipped".
# --quick skips bisect and s390. STAGES="apply builds guest" / KERNELS="test" pick a subset;
# make bisect runs STAGES="apply bisect variants" BISECT=full (scripts/bisect.sh).
set -eu
quick=${1:-}
stages=" ${STAGES:-apply builds bisect s390 lint guest} "
on() { case $stages in *" $1 "*) return 0;; *) return 1;; esac; }
src=build/src logs=build/logs/check
mkdir -p $logs; rm -f $logs/*.log
times=$logs/stage-times; : > $times	# "SECONDS NAME" of every step, for the summary
export PATH=/usr/bin:$PATH   # Debian's python3 (with ply, git: checkpatch's spdxcheck)
export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ksm-series-ccache}" CCACHE_BASEDIR="$PWD"
n=0 pass=0 fail=0 skip=0
result() { # ok|fail|skip NAME [DETAIL]
	n=$((n + 1))
	case $1 in
	ok) pass=$((pass + 1)); echo "ok $n - $2";;
	skip) skip=$((skip + 1)); echo "ok $n - $2 # SKIP${3:+ $3}";;
	*) fail=$((fail + 1)); echo "not ok $n - $2${3:+ # $3}";;
	esac
}
progress() { # PID SECONDS CMD...: while PID runs, every SECONDS print "#   ... Ns: " + CMD's output
	local pid=$1 every=$2 t=$SECONDS next=$((SECONDS + $2)); shift 2
	while kill -0 $pid 2>/dev/null; do
		sleep 1
		[ $SECONDS -ge $next ] || continue
		next=$((next + every))
		echo "#   ... $((SECONDS - t))s: $("$@")"
	done
}
step_status() { # LOG: build-kernel.sh's latest progress line in LOG, or "still running"
	local p; p=$(grep '^build-kernel.sh: building .*objects built' "$1" | tail -n 1 || true)
	echo "${p:-still running}" | sed 's/^build-kernel.sh: //'
}
step() { # NAME LOGNAME CMD...: run CMD, output to the log, one result
	local name=$1 log=$logs/$2.log t=$SECONDS pid rc=0; shift 2
	# (CMD in an if, as before it ran in the background: set -e stays off in its functions)
	{ if "$@"; then exit 0; else exit $?; fi; } > "$log" 2>&1 & pid=$!
	# A step that runs for minutes (a kernel build) says so every 15 s.
	progress $pid 15 step_status "$log"
	wait $pid || rc=$?
	if [ $rc = 0 ]; then result ok "$name"
	else	# the lines that the checkers print for what they object to
		bad=$(grep -E '^(NEW|CHANGED|UNDOCUMENTED|NOT ALLOWED): ' "$log" || true)
		result fail "$name" "${bad:+$(printf '%s\n' "$bad" | head -n 1); }see $log"
		[ -z "$bad" ] || printf '%s\n' "$bad" | head -n 10 | sed 's/^/#   /'
	fi
	echo "#   ($((SECONDS - t))s)"
	echo "$((SECONDS - t)) $name" >> $times
}
# The five longest steps first, so that a step that grows past the time budget shows the day
# it does (README, "Measured times"); then the summary line, last.
summary() {
	[ ! -s $times ] || echo "# the five longest steps: $(sort -rn $times | head -n 5 |
		awk '{ t = $1; $1 = ""; printf "%s%s: %ss", n++ ? "; " : "", substr($0, 2, 70), t }')"
	echo "$pass passed, $fail failed, $skip skipped"; [ $fail = 0 ]
}

# (a) apply + checkpatch
if on apply; then
step "apply: patches/series on base" apply sh scripts/src.sh
[ $fail = 0 ] || { summary; exit 1; }
# The workflow's promise: `make export` of an unchanged tree gives patches/ byte for byte.
reexport() {
	local d; d=$(mktemp -d)
	sh scripts/export.sh $src "$d" && diff -r -x checkpatch-allow patches "$d"; local rc=$?
	rm -rf "$d"; return $rc
}
step "export: the applied tree re-exports patches/ byte for byte" reexport reexport
checkpatch() { # PATCH: errors fail; warnings and CHECKs fail unless allowed, with a reason, in patches/checkpatch-allow
	local out; out=$(cd $src && scripts/checkpatch.pl --strict --terse --show-types --no-summary "$OLDPWD/patches/$1" || true)
	printf '%s\n' "$out"
	printf '%s\n' "$out" | awk -v p="$1" 'BEGIN { while ((getline l < "patches/checkpatch-allow") > 0) { split(l, f, " "); ok[f[1] " " f[2]] = 1 } }
		/: (ERROR|WARNING|CHECK):/ { t = $0; sub(/.*: (ERROR|WARNING|CHECK):/, "", t); sub(/:.*/, "", t)
			if ($0 !~ /: ERROR:/ && ok[p " " t]) next; bad++; print "NOT ALLOWED: " $0 } END { exit bad > 0 }'
}
for p in $(grep -v -e '^#' -e '^0000-cover-letter' patches/series); do
	step "checkpatch --strict $p" "checkpatch-${p%.patch}" checkpatch "$p"
done
step "man pages: groff -ww and man --warnings" man sh scripts/check-man.sh
step "config: config/debian-mm.config is what linux-config-6.1 has for mm" debian-mm \
	sh -c "sh scripts/debian-mm-config.sh $src | diff -u config/debian-mm.config -"
fi

# (b) the test kernel first: the guest stage boots it, and the bisect and the other
# configurations start from its objects (below).
test_kernel() { step "build: test kernel" build-test make -s kernel CONFIG=test SRC=$src; }
case " ${KERNELS:-test noksm noprocfs} " in *" test "*) want_test=1;; *) want_test=;; esac
if on builds && [ "$want_test" ]; then test_kernel
elif { on guest || { on bisect && [ "${BISECT:-}" != full ]; }; } && [ ! -f build/out/test/vmlinux ]; then
	test_kernel
fi

# (e1) The guest stage runs in the background from here while the host builds: it is the
# longest stage (18-27 min) and its QEMU uses about one of the two cores (93-153% of one,
# measured). The builds run at nice 19 so that they take only what the guest leaves.
# Results come at the end.
selftests() {
	rm -rf build/selftests
	sh scripts/build-selftests.sh $src build/selftests && make -s build/ksmctl stress-progs
}
con=$logs/guest-console.log guest_pid=
if on guest; then
	step "guest: build selftests ($(ls $src/tools/testing/selftests/vm/ksm_*.c | xargs -n1 basename | paste -sd' ')), ksmctl, stress/*.c" selftests selftests
	step "guest: build upstream 6.12 KSM selftests (ksm_functional_tests, ksm_tests)" upstream-selftests \
		sh scripts/upstream-selftests.sh
	guest_t=$SECONDS
	# kmemleak on for the leak check that ends the list. The guest takes 18-27 min, more
	# when the host is busier: time out at 45.
	VM_QUIET=1 VM_LOG=$con KERNEL=build/out/test/arch/x86/boot/bzImage VM_TIMEOUT=2700 \
		VM_APPEND=kmemleak=on sh scripts/vm.sh 'sh scripts/guest-tests.sh' > $logs/guest.log 2>&1 &
	guest_pid=$!
	# should this script end before it collects the guest (an error, ^C), the guest ends too
	trap '[ -z "$guest_pid" ] || { pkill -P $guest_pid; kill $guest_pid; } 2>/dev/null || true' EXIT
	renice -n 19 $$ > /dev/null
	echo "# guest: started in the background (pid $guest_pid); the builds run beside it at nice 19"
fi

# (b) builds. The bisect builds, at every commit of the series, the objects of the .c files
# the series changes (those the test kernel builds), in build/out/bisect-objects, a copy of
# the test kernel's objects, so that a patch that changes a header most files include
# rebuilds those objects only; the whole kernel of every commit is `make bisect`'s
# (BISECT=full: vmlinux with config/core.config, build/out/bisect).
commits=$(git -C $src rev-list --reverse base..HEAD)
var=build/out/bisect-objects
copy_test_objects() { # the test kernel's objects, afresh
	[ -f build/out/test/vmlinux ] || { echo "no build/out/test/vmlinux: run 'make kernel CONFIG=test'"; return 1; }
	rm -rf $var && cp -a build/out/test $var
}
if ! on bisect; then :
elif [ "$quick" ]; then result skip "bisect" "check-quick"
elif [ -z "$commits" ]; then result skip "bisect" "empty series"
else
	# (setup, not a result of its own: a failed copy fails the bisect)
	todo=$commits
	if [ "${BISECT:-}" != full ] && ! copy_test_objects > $logs/bisect-copy.log 2>&1; then
		result fail "bisect: copy the test kernel's objects to $var" "see $logs/bisect-copy.log"
		todo=
	fi
	# A patch that changes only Documentation/ and tools/ cannot change the kernel build:
	# build the user-space programs it changes instead, with this patch's uapi headers.
	bisect_tools() { # FILE.c...
		make -s -C $src O="$PWD/build/out/bisect-headers" headers_install || return 1
		for f in "$@"; do
			gcc -Wall -Werror -O2 -I$src -isystem build/out/bisect-headers/usr/include \
				-I$src/tools/testing/selftests -c -o /dev/null "$src/$f" || return 1
		done
	}
	# The objects: the series' (as the test kernel of HEAD has them) and this commit's,
	# of the .c files that exist at this commit.
	series_objs=$(sh scripts/series-objects.sh)
	bisect_objects() { # COMMIT
		local o objs=
		for o in $series_objs $(git -C $src diff --name-only "$1^" "$1" -- '*.c' | sed 's/\.c$/.o/'); do
			[ -f "$src/${o%.o}.c" ] && [ -f build/out/test/$o ] || continue
			case " $objs " in *" $o "*) ;; *) objs="$objs $o";; esac
		done
		echo "objects:$objs"
		BUILD_TARGET="${objs# }" make -s kernel CONFIG=test OUT=$var SRC=$src
	}
	for c in $todo; do
		git -C $src checkout -q "$c"
		name="bisect: build after $(git -C $src log -1 --format=%s "$c")"
		if git -C $src diff --name-only "$c^" "$c" | grep -qv -e '^Documentation/' -e '^tools/'; then
			if [ "${BISECT:-}" = full ]; then
				# vmlinux, the link that proves the patch builds
				step "$name" "bisect-$c" env BUILD_TARGET=vmlinux make -s kernel CONFIG=bisect SRC=$src
			else
				step "$name (the series' objects)" "bisect-$c" bisect_objects "$c"
			fi
		elif tools=$(git -C $src diff --name-only "$c^" "$c" -- 'tools/*.c') && [ -n "$tools" ]; then
			step "$name (the tools/ programs it changes)" "bisect-$c" bisect_tools $tools
		else
			# Documentation/ only: build its documents (Sphinx) and validate the ABI
			step "$name (the documents it changes: Sphinx, get_abi.pl)" "bisect-$c" \
				sh scripts/check-docs.sh "$c^..$c"
		fi
	done
	git -C $src checkout -q main
fi

# What make bisect builds whole (the kernel of every commit, noksm, noprocfs), make check
# builds as objects; it checks that make bisect passed on these very trees: the hash of the
# commits' trees (not their messages) in bisect/results.tap.
bisect_passed() {
	local want got
	want=$(sh scripts/series-trees.sh)
	got=$(sed -n 's/^# trees: //p' bisect/results.tap 2>/dev/null)
	[ "$got" = "$want" ] || { echo "NOT ALLOWED: bisect/results.tap is of trees ${got:-(none)}, the series is $want: run 'make bisect' and commit bisect/results.tap"; return 1; }
	tail -n 1 bisect/results.tap | grep -q '^[0-9]* passed, 0 failed' ||
		{ echo "NOT ALLOWED: bisect/results.tap: $(tail -n 1 bisect/results.tap)"; return 1; }
	echo "bisect/results.tap: $(sed -n 's/^# make bisect: //p' bisect/results.tap), $(tail -n 1 bisect/results.tap)"
}
if on bisect && [ "${BISECT:-}" != full ] && [ -n "$commits" ] && [ -z "$quick" ]; then
	step "bisect: make bisect passed on this series (whole kernels; bisect/results.tap)" bisect-passed bisect_passed
fi

# make bisect: the noksm and noprocfs kernels, whole (the link proves that no hook calls
# what the option leaves out)
if on variants; then
	for c in ${KERNELS:-noksm noprocfs}; do
		step "build: $c kernel" "build-$c" make -s kernel CONFIG=$c SRC=$src
	done
fi

if on builds; then
	# The objects of the .c files the series changes that the test kernel builds (as the
	# lint stage; mm/ksm.o at least) with CONFIG_KSM=n, CONFIG_PROC_FS=n (make bisect
	# links these two kernels) and CONFIG_SYSFS=n with warnings as errors (KSM's knobs
	# live under it: what only they use must not warn as unused without it). Not the
	# files that these options leave out.
	objs=$(sh scripts/series-objects.sh | paste -sd' ')
	objs=${objs:-mm/ksm.o}
	for v in noksm:mm/ksm.o noprocfs:fs/proc/ nosysfs:; do
		c=${v%%:*} leave=${v#*:} out=
		for o in $objs; do
			[ -n "$leave" ] && case $o in "$leave"*) continue;; esac
			out="$out $o"
		done
		step "build: the $(echo $out | wc -w) objects the series changes with the $c config" \
			build-$c env BUILD_TARGET="${out# }" make -s kernel CONFIG=$c SRC=$src
	done
	# Debian's own configuration, what `make deb` packages (the whole kernel is make deb's):
	# the .config differs from Debian's only where a custom build must, and the same
	# objects build with it, by Debian's compiler (with deb.sh's prefix map: the objects
	# carry debug info, and another clone hits the compiler cache)
	step "config: Debian's cloud-amd64 config on the series differs only by LOCALVERSION and the build keys" \
		debian-config sh scripts/debian-config.sh $src build/out/debian
	step "build: the $(echo $objs | wc -w) objects the series changes with Debian's cloud-amd64 config (gcc-12)" \
		build-debian env CCACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/ksm-series-ccache" CCACHE_BASEDIR="$PWD" \
		KCFLAGS="-fdebug-prefix-map=$PWD/=" make -s -C $src O="$PWD/build/out/debian" CC="ccache gcc-12" -j2 $objs
fi

# (c) s390 cross build of mm/ksm.o and the arch/s390 files the series touches
s390() {
	local files o=$PWD/build/out/s390
	files=$(git -C $src diff --name-only base..HEAD -- arch/s390 | sed -n 's/\.c$/.o/p')
	mks() { make -C $src O="$o" ARCH=s390 CROSS_COMPILE=s390x-linux-gnu- CC="ccache s390x-linux-gnu-gcc" -j2 "$@"; }
	[ -f "$o/.config" ] || mks defconfig || return 1
	mks mm/ksm.o ${files:-arch/s390/mm/gmap.o}
}
if ! on s390; then :
elif [ "$quick" ]; then result skip "s390" "check-quick"; else step "s390: mm/ksm.o + touched arch/s390 files" s390 s390; fi

# (d) lint: what the kernel test robot and maintainers run before reading a series. W=1 and
# sparse on the objects it touches, base and series built alike (build/out/lint, the test
# kernel's config): a warning the base has is not the series'. Lists cached per tree.
lint_builds() {
	BUILD_TARGET=prepare make -s kernel CONFIG=test OUT=build/out/lint SRC=$src &&
		sh scripts/build-warnings.sh base build/lint/base &&
		sh scripts/build-warnings.sh HEAD build/lint/series &&
		sh scripts/new-warnings.sh build/lint/base/w1.txt build/lint/series/w1.txt
}
if on lint; then
	step "lint: W=1 build of the objects the series touches: no new warning" lint-w1 lint_builds
	step "lint: sparse (C=1) on them: no new warning" lint-sparse \
		sh scripts/new-warnings.sh build/lint/base/sparse.txt build/lint/series/sparse.txt
	step "lint: kernel-doc -Wall on the files it changes: no warning on its comments" lint-kernel-doc \
		sh scripts/kernel-doc-series.sh
	step "lint: coccicheck MODE=report on the files it changes: no report on its lines" lint-coccinelle \
		sh scripts/coccicheck-series.sh
	step "lint: the documents it changes: Sphinx (htmldocs) and get_abi.pl without warnings" lint-docs \
		sh scripts/check-docs.sh
fi

# (e2) the guest's results
if [ -z "$guest_pid" ]; then summary; exit; fi
guest_status() { echo "$(grep -c '^RESULT: ' $con 2>/dev/null) guest results," \
	"running: $(grep '^### ' $con 2>/dev/null | tail -n 1 | cut -c5-80)"; }
echo "# guest: waiting for it ($((SECONDS - guest_t))s so far, $(guest_status))"
progress $guest_pid 30 guest_status
wait $guest_pid || true
guest_pid= t=$guest_t
if grep -q '^VM-EXIT-STATUS: 0' $con 2>/dev/null; then result ok "guest: boot and run guest-tests.sh"
else result fail "guest: boot and run guest-tests.sh" "see $logs/guest.log"; fi
while read -r _ r rest; do
	case $r in ok) result ok "guest: $rest";; skip) result skip "guest: $rest";;
		*) rest=${rest#ok } why=
		   case $rest in *" # why: "*) why=${rest#* # why: } rest=${rest%% # why: *};; esac
		   result fail "guest: $rest" "$why";; esac
done < <(tr -d '\r' < $con 2>/dev/null | grep '^RESULT: ' || true)
if m=$(sh scripts/check-splat.sh $con 2>&1); then result ok "guest: no kernel splat"
else result fail "guest: no kernel splat" "$m"; fi
echo "$((SECONDS - t)) guest: boot and run guest-tests.sh (beside the builds)" >> $times
echo "#   ($((SECONDS - t))s; the longest: $(tr -d '\r' < $con 2>/dev/null | sed -n 's/^#### \(.*\): \([0-9]*\)s$/\2 \1/p' |
	sort -rn | head -n 6 | awk '{ printf "%s%s %ss", n++ ? ", " : "", $2, $1 }'))"
summary
