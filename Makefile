# SPDX-License-Identifier: MIT
# rlshim - one non-recursive Makefile; everything is built in build/.
#
#   make                    the library, the shim, the programs
#   make test               every test, ending with "N passed, N failed"
#   make SANITIZE=address,undefined test   unit tests under ASan/UBSan only
#   make bench              benchmarks (docs/BENCHMARKS.md)
#   make clean
#   V=1                     show the commands

.DELETE_ON_ERROR:
.SUFFIXES:
.DEFAULT_GOAL := all

ifeq ($(V),1)
Q :=
else
Q := @
endif

B := build
ifneq ($(SANITIZE),)
B := build/san
SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

CC := gcc
PKGS := cmocka inih

WARN := -std=gnu11 -Wall -Wextra -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wwrite-strings -Wformat=2 -Werror
# The shim is linked with link-time optimisation: its read path spans
# io_*.c, http*.c, policy.c and the core, one job per file, and LTO inlines
# across them as if they were one (half the instructions per request, see
# docs/BENCHMARKS.md). The objects are fat, so the archives link as usual
# everywhere else (tests, agent, rlshimctl, embedders): every other link
# says -fno-lto (LDFLAGS), the shim's link -flto instead (gcc takes any
# -fno-lto on a link for the whole link).
ifeq ($(SANITIZE),)
LTO := -flto=auto -ffat-lto-objects
endif
# The release: the one place it is written (rlshimctl --version, rlshimd
# --version, rlcore.pc).
RLSHIM_VERSION := 0.6
BASE_CFLAGS := $(WARN) -O2 -g -fPIC -fvisibility=hidden -D_GNU_SOURCE $(LTO) \
	-ftls-model=initial-exec -DRLSHIM_VERSION=\"$(RLSHIM_VERSION)\" \
	-Iinclude -iquote src/core -iquote src/shim -iquote src/agent -MMD -MP $(SAN_FLAGS)
# User CFLAGS/LDFLAGS add to the defaults, never replace them.
override CFLAGS := $(BASE_CFLAGS) $(CFLAGS)
override LDFLAGS := $(SAN_FLAGS) $(if $(LTO),-fno-lto) $(LDFLAGS)

# Dependencies are found through pkg-config once tools/deps.sh has run.
DEPS_STAMP := build/.deps-ok
CMOCKA_CFLAGS = $(shell pkg-config --cflags cmocka 2>/dev/null)
CMOCKA_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null)
# inih goes in statically: the shim must link nothing but libc.
INIH_CFLAGS = $(shell pkg-config --cflags inih 2>/dev/null)
INIH_LIBS = -l:libinih.a

# ---- the core: build/librlcore.a ------------------------------------------
# src/core only: the archive make install ships as the embeddable core.
CORE_SRCS := $(wildcard src/core/*.c)
CORE_OBJS := $(CORE_SRCS:%.c=$(B)/%.o)

# ---- the shim's modules: build/librlshim-int.a (never installed) -----------
# Everything of the shim but the hook file: each policy is testable without
# LD_PRELOAD. Linked before librlcore.a, which it calls.
SHIM_INT_SRCS := $(filter-out src/shim/hooks.c,$(wildcard src/shim/*.c))
SHIM_INT_OBJS := $(SHIM_INT_SRCS:%.c=$(B)/%.o)
SHIM_INT := $(B)/librlshim-int.a

# ---- programs --------------------------------------------------------------
PROGS := $(B)/legacy_server $(B)/rlshimd $(B)/rlshimctl
SHIM := $(B)/librlshim.so
AGENT_SRCS := $(wildcard src/agent/*.c)
AGENT_OBJS := $(AGENT_SRCS:%.c=$(B)/%.o)
HIREDIS_LIBS = -l:libhiredis.a

# ---- unit tests: one cmocka binary per module -------------------------------
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(B)/tests/%)

# ---- stress tests: concurrency, crash safety, flood -------------------------
STRESS_SRCS := $(wildcard tests/stress/*.c)
STRESS_BINS := $(STRESS_SRCS:tests/stress/%.c=$(B)/tests/%)

# ---- fuzz targets (clang's libFuzzer, with ASan/UBSan) -----------------------
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build/fuzz/%)
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -D_GNU_SOURCE -Iinclude -iquote src/core \
	-iquote src/shim
FUZZ_DEPS := $(wildcard src/shim/http*.c) src/shim/proxy.c src/core/addr.c \
	src/core/path.c
FUZZ_SECONDS ?= 12
# fuzz_answers drives io_answers.c through the shim's read and write paths:
# every module of the shim and the core, built by clang with the fuzzer's
# sanitizers into an archive of its own (objects in build/fuzz/obj).
FUZZ_OBJ_CFLAGS := -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
	-fno-sanitize-recover=all -D_GNU_SOURCE -Iinclude -iquote src/core \
	-iquote src/shim -MMD -MP
FUZZ_LIB_OBJS := $(SHIM_INT_SRCS:%.c=build/fuzz/obj/%.o) \
	$(CORE_SRCS:%.c=build/fuzz/obj/%.o)
FUZZ_LIB := build/fuzz/librlfuzz.a

# ---- benchmarks --------------------------------------------------------------
# tools/bench/*.bpf.c are BPF programs the benchmarks embed, not benchmarks.
BENCH_SRCS := $(filter-out %.bpf.c,$(wildcard tools/bench/*.c))
BENCH_BINS := $(BENCH_SRCS:tools/bench/%.c=$(B)/bench/%)

# ---- the XDP program: build/rlshim.bpf.o and its skeleton --------------------
# Built with the uapi headers, not vmlinux.h, so the object does not depend
# on the building kernel's BTF. The object is the same with or without
# SANITIZE, so both trees share the one in build/.
BPFTOOL := $(shell command -v bpftool 2>/dev/null || echo /usr/sbin/bpftool)
BPF_CLANG := clang
BPF_ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' \
	-e 's/ppc64le/powerpc/' -e 's/riscv64/riscv/' -e 's/s390x/s390/')
# <asm/types.h>, which <linux/types.h> needs, is under the multiarch path.
TRIPLET := $(shell $(CC) -dumpmachine)
BPF_CLANG_FLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -Wall -Werror \
	-I/usr/include/$(TRIPLET) -MMD -MP
BPF_OBJ := build/rlshim.bpf.o
BPF_SKEL := build/rlshim.skel.h
# For what includes the skeleton or the maps: "rlshim.skel.h", "xdp_maps.h"
# and libbpf. libbpf goes in statically where the archive exists, so no
# libbpf1 is needed at run time.
BPF_CFLAGS := -iquote build -iquote bpf $(shell pkg-config --cflags libbpf 2>/dev/null)
BPF_LIBS := $(if $(wildcard /usr/lib/$(TRIPLET)/libbpf.a),\
	-l:libbpf.a -lelf -lz,-lbpf)

ALL := $(B)/librlcore.a $(PROGS) $(BPF_OBJ)
ifeq ($(SANITIZE),)
ALL += $(SHIM)
endif

.PHONY: all test unit bench clean deps demo
all: $(ALL) $(UNIT_BINS) $(STRESS_BINS) $(BENCH_BINS)

deps: $(DEPS_STAMP)
$(DEPS_STAMP): tools/deps.sh
	$(Q)mkdir -p $(@D)
	$(Q)tools/deps.sh
	$(Q)touch $@

# Objects are rebuilt when the flags change, not only the sources.
$(B)/.cflags: FORCE
	@mkdir -p $(@D)
	@echo '$(CFLAGS) $(INIH_CFLAGS)' | cmp -s - $@ || echo '$(CFLAGS) $(INIH_CFLAGS)' > $@
.PHONY: FORCE
FORCE:

$(B)/%.o: %.c $(B)/.cflags | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) $(INIH_CFLAGS) -c -o $@ $<

$(B)/librlcore.a: $(CORE_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(SHIM_INT): $(SHIM_INT_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# The shim: hooks.c plus what it needs of its modules and the core, inih linked in and
# hidden; only the hooks are exported, only libc is NEEDED.
# Its own code never calls what it exports (that would be its own hook):
# tools/check-selfcalls.sh fails the build, naming the symbol, if it does.
# Nothing links against it, but it carries a SONAME as a library in a
# library directory must (Debian's lintian refuses one without).
$(SHIM): $(B)/src/shim/hooks.o $(SHIM_INT) $(B)/librlcore.a \
		src/shim/librlshim.map tools/check-selfcalls.sh
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -o $@ $(B)/src/shim/hooks.o $(SHIM_INT) $(B)/librlcore.a \
		$(INIH_LIBS) -Wl,--version-script=src/shim/librlshim.map \
		-Wl,-soname,librlshim.so -Wl,-z,defs -Wl,--as-needed -static-libgcc \
		$(filter-out -fno-lto,$(LDFLAGS)) -O2 -flto=auto
	$(Q)tools/check-selfcalls.sh $@

# The agent: src/agent and the core; hiredis and libbpf stay out of the
# shim. The loader includes the skeleton: it is built after it. The loader
# and rlshimctl's XDP command include the maps and libbpf.
$(B)/src/agent/xdp_loader.o: $(BPF_SKEL)
$(B)/src/agent/xdp_loader.o $(B)/tools/ctl/cmd_xdp.o: INIH_CFLAGS += $(BPF_CFLAGS)

$(B)/rlshimd: $(AGENT_OBJS) $(B)/librlcore.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(AGENT_OBJS) $(B)/librlcore.a $(INIH_LIBS) \
		$(HIREDIS_LIBS) $(BPF_LIBS) -lpthread $(LDFLAGS)

# rlshimctl status asks the shim's rl_agent_alive() (spawn.c) of the heartbeat;
# reset names keys in Redis and talks to it as the agent does (reset.c, store.c).
CTL_AGENT_OBJS := $(B)/src/agent/reset.o $(B)/src/agent/store.o \
		  $(B)/src/agent/cluster.o
$(B)/rlshimctl: $(patsubst %.c,$(B)/%.o,$(wildcard tools/ctl/*.c)) $(CTL_AGENT_OBJS) \
		$(SHIM_INT) $(B)/librlcore.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(filter %.o,$^) $(SHIM_INT) $(B)/librlcore.a $(INIH_LIBS) \
		$(HIREDIS_LIBS) $(BPF_LIBS) $(LDFLAGS)

$(B)/legacy_server: tools/legacy_server.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS)

$(BPF_OBJ): bpf/rlshim.bpf.c bpf/xdp_maps.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CLANG   $@")
	$(Q)$(BPF_CLANG) $(BPF_CLANG_FLAGS) -c -o $@ $<

$(BPF_SKEL): $(BPF_OBJ)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)$(BPFTOOL) gen skeleton $< name rlshim > $@

# test_xdp loads the program from its skeleton and runs it on frames.
$(B)/tests/test_xdp: tests/unit/test_xdp.c $(BPF_SKEL) $(B)/.cflags
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(BPF_CFLAGS) $(CMOCKA_CFLAGS) -o $@ $< \
		$(CMOCKA_LIBS) $(BPF_LIBS) $(LDFLAGS)

# test_cluster tests the agent's slot logic, which needs no connection:
# cluster.o and the core (its hash), and hiredis's reader for the replies a
# real cluster sent.
$(B)/tests/test_cluster: tests/unit/test_cluster.c $(B)/src/agent/cluster.o \
		$(B)/librlcore.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(CMOCKA_CFLAGS) -o $@ $< $(B)/src/agent/cluster.o \
		$(B)/librlcore.a $(CMOCKA_LIBS) $(HIREDIS_LIBS) $(LDFLAGS)

# test_repush tests which quiet keys a sync round pushes: repush.o alone.
$(B)/tests/test_repush: tests/unit/test_repush.c $(B)/src/agent/repush.o
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(CMOCKA_CFLAGS) -iquote src/agent -o $@ $< \
		$(B)/src/agent/repush.o $(CMOCKA_LIBS) $(LDFLAGS)

# test_store_clock tests the store's clock against this host's:
# store_clock.o alone.
$(B)/tests/test_store_clock: tests/unit/test_store_clock.c \
		$(B)/src/agent/store_clock.o
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(CMOCKA_CFLAGS) -iquote src/agent -o $@ $< \
		$(B)/src/agent/store_clock.o $(CMOCKA_LIBS) $(LDFLAGS)

# test_store parses the agent's store URLs: store.c (and the cluster logic
# it routes by), with hiredis.
$(B)/tests/test_store: tests/unit/test_store.c $(B)/src/agent/store.o \
		$(B)/src/agent/cluster.o $(SHIM_INT) $(B)/librlcore.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(CMOCKA_CFLAGS) -iquote src/agent -o $@ $< \
		$(B)/src/agent/store.o $(B)/src/agent/cluster.o $(SHIM_INT) $(B)/librlcore.a $(INIH_LIBS) \
		$(HIREDIS_LIBS) $(CMOCKA_LIBS) $(LDFLAGS)

$(B)/tests/%: tests/unit/%.c $(SHIM_INT) $(B)/librlcore.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(CMOCKA_CFLAGS) -o $@ $< $(SHIM_INT) $(B)/librlcore.a \
		$(INIH_LIBS) $(CMOCKA_LIBS) $(LDFLAGS)

$(B)/tests/%: tests/stress/%.c $(SHIM_INT) $(B)/librlcore.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  TEST    $@")
	$(Q)$(CC) $(CFLAGS) $(CMOCKA_CFLAGS) -o $@ $< $(SHIM_INT) $(B)/librlcore.a \
		$(INIH_LIBS) $(CMOCKA_LIBS) $(LDFLAGS)

build/fuzz/%: tests/fuzz/%.c tests/framer.h $(FUZZ_DEPS) src/shim/http.h src/shim/http_int.h \
		src/shim/proxy.h src/core/path.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_DEPS)

build/fuzz/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CLANG   $<")
	$(Q)clang $(FUZZ_OBJ_CFLAGS) $(INIH_CFLAGS) -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# fuzz_url is the store URL's parser alone.
build/fuzz/fuzz_url: tests/fuzz/fuzz_url.c src/core/url.c src/core/url.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_CFLAGS) -o $@ $< src/core/url.c

# fuzz_cookie and fuzz_jwt: the key readers of issue 17, alone.
build/fuzz/fuzz_cookie: tests/fuzz/fuzz_cookie.c src/core/cookie.c src/core/cookie.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_CFLAGS) -o $@ $< src/core/cookie.c

# SHA-256 is checked against its test vectors (and under ASan/UBSan by
# build/san/tests/test_sha256), not fuzzed: fuzz_jwt hashes each token nine
# times, and the fuzzer's coverage and ASan's checks in its rounds were
# nine tenths of the time. Built plainly, the target runs many more inputs.
build/fuzz/nocov/sha256.o: src/core/sha256.c src/core/sha256.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CLANG   $<")
	$(Q)clang -g -O2 -D_GNU_SOURCE -iquote src/core -c -o $@ $<

build/fuzz/fuzz_jwt: tests/fuzz/fuzz_jwt.c src/core/jwt.c src/core/jwt.h \
		build/fuzz/nocov/sha256.o src/core/ascii.h src/core/hash.c \
		src/core/hash.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_CFLAGS) -o $@ $< src/core/jwt.c src/core/hash.c \
		build/fuzz/nocov/sha256.o

build/fuzz/fuzz_answers: tests/fuzz/fuzz_answers.c $(FUZZ_LIB)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_CFLAGS) $(INIH_CFLAGS) -MMD -MP -o $@ $< $(FUZZ_LIB) \
		$(INIH_LIBS) -lpthread -Wl,--wrap=rl_time_now_ns

.PHONY: fuzz
fuzz: $(FUZZ_BINS) $(SHIM) $(PROGS)
	$(Q)tests/fuzz/run.sh 600 $(FUZZ_BINS)
	$(Q)RL_DIFF_STREAMS=5000 RL_DIFF_SEED=random python3 tests/integration/test_diff.py

$(B)/bench/%: tools/bench/%.c $(SHIM_INT) $(B)/librlcore.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  BENCH   $@")
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(SHIM_INT) $(B)/librlcore.a $(INIH_LIBS) $(HIREDIS_LIBS) -lpthread $(LDFLAGS)

# bench_xdp runs rl_xdp next to a program that only passes, both embedded.
build/bench/xdp_pass.bpf.o: tools/bench/xdp_pass.bpf.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CLANG   $@")
	$(Q)$(BPF_CLANG) $(BPF_CLANG_FLAGS) -c -o $@ $<

build/bench/xdp_pass.skel.h: build/bench/xdp_pass.bpf.o
	@$(if $(Q),echo "  GEN     $@")
	$(Q)$(BPFTOOL) gen skeleton $< name xdp_pass > $@

$(B)/bench/bench_xdp: tools/bench/bench_xdp.c $(BPF_SKEL) build/bench/xdp_pass.skel.h $(B)/.cflags
	@mkdir -p $(@D)
	@$(if $(Q),echo "  BENCH   $@")
	$(Q)$(CC) $(CFLAGS) $(BPF_CFLAGS) -iquote build/bench -o $@ $< \
		$(BPF_LIBS) $(LDFLAGS)

# ---- make test ---------------------------------------------------------------
# Unit tests run twice: as built, and under ASan/UBSan (a separate tree in
# build/san). With SANITIZE set, only the sanitized unit tests run.
SAN_DEFAULT := address,undefined
SERVERS := legacy python nginx lighttpd busybox apache apache-prefork
# issue 26 (servers2): webfs, h2o (HTTP/1.1; its h2c refused), nginx and
# apache as reverse proxies in front of a backend without the shim
SERVERS += webfs h2o nginx-proxy apache-proxy
# issue 26: PHP's built-in server and gunicorn
SERVERS += php php-router gunicorn gunicorn-gthread
INTEGRATION := $(foreach k,$(SERVERS),"python3 tests/integration/test_servers.py $(k)") \
	"python3 tests/integration/test_features.py" \
	"python3 tests/integration/test_scripts.py" \
	"python3 tests/integration/test_tls.py" \
	"python3 tests/integration/test_edges.py" \
	"python3 tests/integration/test_edges.py --tls" \
	"python3 tests/integration/test_answers.py" \
	"python3 tests/integration/test_diff.py" \
	"python3 tests/integration/test_diff.py --tls" \
	"python3 tests/integration/test_redis.py" \
	"python3 tests/integration/test_sentinel.py" \
	"python3 tests/integration/test_cluster.py" \
	"python3 tests/integration/test_agentlog.py" \
	"python3 tests/integration/test_proxied.py" \
	"python3 tests/integration/test_users.py" \
	"python3 tests/integration/test_agentexit.py" \
	"python3 tests/integration/test_bans.py" \
	"python3 tests/integration/test_ctl.py" \
	"python3 tests/integration/test_completion.py" \
	"python3 tests/integration/test_examples.py" \
	"python3 tests/integration/test_reload.py" \
	"python3 tests/integration/test_xdp.py" \
	"python3 tests/integration/test_install.py" \
	"python3 tests/integration/test_deb.py" \
	"python3 tests/integration/test_firstrun.py"
ifeq ($(SANITIZE),)
test: all $(FUZZ_BINS)
	$(Q)$(MAKE) --no-print-directory SANITIZE=$(SAN_DEFAULT) unit-build
	$(Q)tests/run.sh $(UNIT_BINS) \
		$(patsubst build/%,build/san/%,$(UNIT_BINS)) \
		$(STRESS_BINS) \
		"tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)" \
		$(INTEGRATION)
else
test: unit-build
	$(Q)tests/run.sh $(UNIT_BINS)
endif

.PHONY: unit-build
unit-build: $(UNIT_BINS)

# ---- make demo ----------------------------------------------------------------
.PHONY: demo
demo: $(SHIM) $(B)/legacy_server
	$(Q)tools/demo.sh $(B)

# ---- make install --------------------------------------------------------------
# make install PREFIX=/usr/local DESTDIR=   (make uninstall takes the same and
# removes exactly those files, then the rlshim directories left empty, and,
# without DESTDIR, the directories make install created: it records them in
# PREFIX/share/rlshim/installed-dirs, tools/installdirs.sh).
# Nothing goes into /etc or a live systemd directory: the unit and the
# drop-in are examples, under share/doc/rlshim/systemd.
#
# The text files (documents, man pages, examples, the unit and the drop-in)
# name installed files as under the default prefix, /usr/local: INST_TEXT
# puts PREFIX in their place. Only paths of files make install writes are
# changed; the shim's own fallback for rlshimd (/usr/local/sbin/rlshimd,
# built into it) and the statement of the default stay as they are.
PREFIX ?= /usr/local
DESTDIR ?=
INST := $(DESTDIR)$(PREFIX)
INST_EXAMPLES := $(notdir $(wildcard examples/*.conf))
# The monitoring examples (README, "Monitoring"), copied as they are.
INST_MONITORING := prometheus/rlshim-alerts.yml prometheus/rlshim-alerts.test.yml \
	grafana/rlshim-dashboard.json
INST_SYSTEMD := rlshimd.service rlshim-preload.conf
INST_MAN := man5/rlshim.conf.5 man7/librlshim.7 man8/rlshimd.8 man8/rlshimctl.8
INST_DOCS := README.md docs/REFERENCE.md docs/BENCHMARKS.md
INST_TEXT = sed -E -e 's\#/usr/local/(lib|bin|share|libexec|include)/\#$(PREFIX)/\1/\#g' \
	-e 's\#/usr/local/sbin/rlshimd --foreground\#$(PREFIX)/sbin/rlshimd --foreground\#g'
INST_FILES := lib/librlshim.so lib/librlcore.a include/rlshim.h \
	lib/pkgconfig/rlcore.pc bin/rlshimctl sbin/rlshimd lib/rlshim/rlshim.bpf.o \
	libexec/rlshim/legacy_server share/rlshim/demo.sh \
	$(INST_EXAMPLES:%=share/doc/rlshim/examples/%) \
	$(INST_MONITORING:%=share/doc/rlshim/examples/%) \
	$(INST_SYSTEMD:%=share/doc/rlshim/systemd/%) \
	$(INST_MAN:%=share/man/%) \
	$(addprefix share/doc/rlshim/,$(notdir $(INST_DOCS))) \
	share/bash-completion/completions/rlshimctl
# Deepest first, so that each is empty when its turn comes. Not
# share/bash-completion/completions: bash-completion's, shared.
INST_DIRS := lib/rlshim libexec/rlshim share/rlshim \
	share/doc/rlshim/examples/prometheus share/doc/rlshim/examples/grafana \
	share/doc/rlshim/examples \
	share/doc/rlshim/systemd share/doc/rlshim

.PHONY: install uninstall
install: $(SHIM) $(B)/librlcore.a $(PROGS) $(BPF_OBJ) docs/rlcore.pc.in \
		tools/demo.sh $(addprefix docs/,$(notdir $(INST_MAN))) \
		$(INST_SYSTEMD:%=examples/systemd/%) $(INST_DOCS) \
		tools/ctl/rlshimctl.bash-completion $(INST_MONITORING:%=examples/%) \
		tools/installdirs.sh
	@$(if $(Q),echo "  INSTALL $(INST)")
	$(Q)$(if $(DESTDIR),:,tools/installdirs.sh missing $(INST) $(INST_FILES) \
		> $(B)/installed-dirs)
	$(Q)install -D -m 0755 $(SHIM) $(INST)/lib/librlshim.so
	$(Q)install -D -m 0644 $(B)/librlcore.a $(INST)/lib/librlcore.a
	$(Q)install -D -m 0644 include/rlshim.h $(INST)/include/rlshim.h
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(RLSHIM_VERSION)|' \
		docs/rlcore.pc.in > $(B)/rlcore.pc
	$(Q)install -D -m 0644 $(B)/rlcore.pc $(INST)/lib/pkgconfig/rlcore.pc
	$(Q)install -D -m 0755 $(B)/rlshimctl $(INST)/bin/rlshimctl
	$(Q)install -D -m 0755 $(B)/rlshimd $(INST)/sbin/rlshimd
	$(Q)install -D -m 0644 $(BPF_OBJ) $(INST)/lib/rlshim/rlshim.bpf.o
	$(Q)install -D -m 0755 $(B)/legacy_server $(INST)/libexec/rlshim/legacy_server
	$(Q)install -D -m 0644 tools/ctl/rlshimctl.bash-completion \
		$(INST)/share/bash-completion/completions/rlshimctl
	$(Q)for f in $(INST_MONITORING); do \
		install -D -m 0644 examples/$$f $(INST)/share/doc/rlshim/examples/$$f || exit 1; \
	done
	$(Q)sed -e 's|^: # @RLSHIM_INSTALLED_PATHS@$$|: "$${RLSHIM_LIB:=$(PREFIX)/lib/librlshim.so}" "$${RLSHIM_LEGACY:=$(PREFIX)/libexec/rlshim/legacy_server}" "$${RLSHIM_EXAMPLES:=$(PREFIX)/share/doc/rlshim/examples}"|' \
		tools/demo.sh > $(B)/demo.sh
	$(Q)grep -q 'RLSHIM_LIB:=' $(B)/demo.sh
	$(Q)install -D -m 0755 $(B)/demo.sh $(INST)/share/rlshim/demo.sh
	$(Q)inst_text() { mkdir -p "$$(dirname "$$2")" && $(INST_TEXT) "$$1" > "$$2.tmp" && \
		chmod 0644 "$$2.tmp" && mv -f "$$2.tmp" "$$2"; }; \
	for f in $(INST_EXAMPLES); do \
		inst_text examples/$$f $(INST)/share/doc/rlshim/examples/$$f || exit 1; \
	done; \
	for f in $(INST_SYSTEMD); do \
		inst_text examples/systemd/$$f $(INST)/share/doc/rlshim/systemd/$$f || exit 1; \
	done; \
	for m in $(INST_MAN); do \
		inst_text docs/$${m#*/} $(INST)/share/man/$$m || exit 1; \
	done; \
	for f in $(INST_DOCS); do \
		inst_text $$f $(INST)/share/doc/rlshim/$${f##*/} || exit 1; \
	done
	$(Q)$(if $(DESTDIR),:,tools/installdirs.sh record $(INST) $(B)/installed-dirs)

uninstall:
	@$(if $(Q),echo "  UNINSTALL $(INST)")
	$(Q)made=$$(cat $(INST)/share/rlshim/installed-dirs 2>/dev/null || :); \
	rm -f $(INST)/share/rlshim/installed-dirs; \
	for f in $(INST_FILES); do rm -f $(INST)/$$f; done; \
	for d in $(INST_DIRS); do \
		[ ! -d $(INST)/$$d ] || rmdir --ignore-fail-on-non-empty $(INST)/$$d; \
	done; \
	tools/installdirs.sh remove $(INST) "$$made"

# ---- make bench --------------------------------------------------------------
bench: $(BENCH_BINS)
	$(Q)tools/bench/run.sh $(B)

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
