# Entry points of the per-process KSM series harness. See README.md.
TREE    ?= build/linux
PATCHES ?= patches
SRC     ?= build/src
CONFIG  ?= test
OUT     ?= build/out/$(if $(filter build/src,$(SRC)),,$(notdir $(SRC))-)$(CONFIG)
KERNEL  ?= build/out/test/arch/x86/boot/bzImage

frags_test     := base guest ksm debian-mm debug
frags_run      := base ksm run
frags_noksm    := core noksm
frags_noprocfs := core ksm noprocfs
frags_bisect   := core ksm
frags_nosysfs  := base guest ksm debian-mm nosysfs

.PHONY: deps deps-run deps-check deps-bench deps-deb deps-system deb system tree export src kernel vm run check check-quick bisect stress \
	stress-progs clean distclean bench

# What every purpose needs (scripts/deps.sh): `make deps` installs all of it.
deps:
	@sh scripts/deps.sh all
deps-run deps-check deps-bench deps-deb deps-system:
	@sh scripts/deps.sh $(@:deps-%=%)

tree: deps-run
	sh scripts/tree.sh $(TREE) $(PATCHES)

export:
	sh scripts/export.sh $(TREE) $(PATCHES)

src: deps-run
	sh scripts/src.sh

kernel: deps-run
	@test -n "$(frags_$(CONFIG))" || { echo "unknown CONFIG=$(CONFIG): use test, run, noksm, noprocfs, nosysfs or bisect"; exit 1; }
	@test -d $(SRC) || { echo "no tree $(SRC): run 'make src' (series) or 'make tree'"; exit 1; }
	sh scripts/build-kernel.sh $(SRC) $(OUT) $(foreach f,$(frags_$(CONFIG)),config/$(f).config)

# tools/vm/ksmctl of the series, built by the tools/vm Makefile of build/src
build/ksmctl: $(SRC)/tools/vm/ksmctl.c
	$(MAKE) -s -C $(SRC)/tools/vm ksmctl
	cp $(SRC)/tools/vm/ksmctl $@

vm: deps-run
	KERNEL=$(KERNEL) sh scripts/vm.sh "$$CMD" $(FILES)

run: deps-run
	sh scripts/src.sh
	$(MAKE) --no-print-directory kernel CONFIG=run SRC=build/src
	$(MAKE) --no-print-directory build/ksmctl
	KERNEL=build/out/run/arch/x86/boot/bzImage sh scripts/vm.sh 'sh scripts/demo.sh' build/ksmctl

# Stress suite (stress/*.c): `make stress DURATION=seconds ITERATIONS=n`, see README.
DURATION   ?= 600
ITERATIONS ?=
# Every program links the series' helper unit of the tree SRC, tools/testing/selftests/vm/
# ksm_util.[ch] (as bench/ksmbench.c and system/*.c do), and stress/stress_util.c, no program:
# what only the stress suite needs on top of it.
KSM_UNIT := $(SRC)/tools/testing/selftests/vm/ksm_util
stress_progs := $(patsubst stress/%.c,build/stress/%,$(filter-out stress/stress_util.c,$(wildcard stress/*.c)))

stress: deps-check
	sh scripts/stress.sh $(DURATION) $(ITERATIONS)

stress-progs: $(stress_progs)

build/out/test/usr/include/linux/prctl.h: $(SRC)/include/uapi/linux/prctl.h
	$(MAKE) -s -C $(SRC) O=$(CURDIR)/build/out/test headers_install

build/stress/%: stress/%.c stress/stress_util.c stress/stress_util.h $(KSM_UNIT).c $(KSM_UNIT).h \
		$(SRC)/tools/testing/selftests/kselftest.h build/out/test/usr/include/linux/prctl.h
	@mkdir -p build/stress
	gcc -O2 -g -Wall -Wextra -Werror -pthread -isystem build/out/test/usr/include \
		-I$(SRC)/tools/testing/selftests -I$(SRC)/tools/testing/selftests/vm \
		-o $@ $< stress/stress_util.c $(KSM_UNIT).c

check: deps-check
	bash scripts/check.sh

check-quick: deps-check
	bash scripts/check.sh --quick

# The whole kernel of every commit of the series and the noksm and noprocfs kernels, as the
# robots build a series (make check builds their objects): run it when patches/ changes; it
# writes bisect/results.tap, which make check compares with patches/. See README.
bisect: deps-check
	bash scripts/bisect.sh

# base (no series) and patched kernels, same config; bench/results.md + bench/results.png
bench: deps-bench
	sh scripts/bench.sh

# Debian packages with Debian's own config (FLAVOUR=cloud-amd64 or amd64) in build/deb/; see README.
# DEBUG_INFO=0: without debug info, BTF and the -dbg package (Debian's config otherwise).
FLAVOUR ?= cloud-amd64
DEBUG_INFO ?= 1
deb: deps-deb
	DEBUG_INFO=$(DEBUG_INFO) sh scripts/deb.sh $(FLAVOUR)

# A Debian 12 machine (debootstrap) with the linux-image package of make deb (or KERNEL_DEB=),
# booted under QEMU with systemd and AppArmor; the checks of system/ as a service. See README.
KERNEL_DEB ?=
system: deps-system
	sh scripts/system.sh $(KERNEL_DEB)

clean:
	rm -rf build/out build/src build/src.sum build/selftests build/stress build/bench build/logs build/vm build/ksmctl build/am.err build/deb build/system

# Also drops the compiler cache and the unpacked base; build/linux (your edits) is kept.
distclean: clean
	rm -rf "$${XDG_CACHE_HOME:-$$HOME/.cache}/ksm-series-ccache" build/base.git build/base.tmp
