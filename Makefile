# heaptrail — plain GNU Make. `make` builds into build/ without installing;
# build/heaptrail finds build/libheaptrail.so beside itself.

PREFIX   ?= /usr/local
CC       ?= cc
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes -Wno-format-truncation
B        := build
CPPFLAGS += -Iinclude -Isrc -I$(B)/gen -D_GNU_SOURCE

# The agent runs inside other programs: position independent, hidden by
# default (only the allocator entry points and the public API are
# exported), initial-exec TLS so a thread-local access never allocates.
# Link-time optimisation: an allocation's path crosses hooks.c, table.c
# and unwind.c (3% fewer instructions per malloc/free pair on churn);
# fat objects, because the unit tests link some of them without it.
# One partition: the agent's entry points written in top-level asm (exit,
# _exit, the stack switch) must land in the same unit as their callers,
# which the automatic partitioning did not always do ("hidden symbol
# agent_switch_stack isn't defined").
# Bound at load (-z now): a lazy PLT binding runs the loader on whatever
# stack the call is made from (a leak check delivered to a 16 KiB thread
# overflowed it in _dl_runtime_resolve's register save area) and takes
# the loader's lock inside signal handlers.
AGENT_SRC  := $(wildcard src/agent/*.c) src/format/names.c src/format/options.c src/format/fnspec.c \
	src/format/elfsyms.c
AGENT_OBJ  := $(AGENT_SRC:%.c=$(B)/agent-obj/%.o)
AGENT_CFLAGS := -fPIC -fvisibility=hidden -ftls-model=initial-exec \
	-fomit-frame-pointer -fno-stack-protector -fno-builtin -DHEAPTRAIL_AGENT \
	-flto=auto -flto-partition=one -ffat-lto-objects
# libc alone (libdl and libpthread are in it since glibc 2.34): an attach
# loads the agent into a container whose image may hold nothing more;
# -z defs below makes a symbol of any other library (libm's log) a link
# error rather than a dlopen that fails in the container
AGENT_LIBS := -ldl -lpthread

# pprof's message (proto/profile.proto), compiled by protoc-c into
# build/gen at build time; the generated code is never committed.
PROTO_GEN := $(B)/gen/profile.pb-c.c $(B)/gen/profile.pb-c.h
PROTO_OBJ := $(B)/obj/gen/profile.pb-c.o

CLI_SRC  := $(wildcard src/cli/*.c src/control/*.c src/format/*.c src/symbolize/*.c \
	src/analyze/*.c src/render/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(B)/obj/%.o) $(PROTO_OBJ)
CLI_LIBS := $(shell pkg-config --libs libdw 2>/dev/null || echo -ldw -lelf) \
	$(shell pkg-config --libs libprotobuf-c zlib 2>/dev/null || echo -lprotobuf-c -lz) \
	-liberty -lm

LIB_SRC  := $(filter-out src/cli/%,$(CLI_SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/obj/%.o) $(PROTO_OBJ)

# Unit tests of CLI-side code link against src/ minus the CLI; unit tests
# of agent code (their first line says "// build: agent") link the agent's
# objects instead.
UNIT_AGENT_SRC := $(shell grep -l '^// build: agent' tests/unit/test_*.c 2>/dev/null)
# the agent pieces those tests exercise without the hooks around them
# (an archive: each test links only the objects it calls into)
AGENT_UNIT_OBJ := $(B)/agent-obj/src/agent/unwind.o $(B)/agent-obj/src/agent/rulecache.o \
	$(B)/agent-obj/src/agent/cfi.o \
	$(B)/agent-obj/src/agent/os.o \
	$(B)/agent-obj/src/agent/table.o $(B)/agent-obj/src/agent/pool.o \
	$(B)/agent-obj/src/agent/config.o $(B)/agent-obj/src/agent/counters.o \
	$(B)/agent-obj/src/agent/sample.o $(B)/agent-obj/src/agent/quarantine.o \
	$(B)/agent-obj/src/format/options.o \
	$(B)/agent-obj/src/format/names.o $(B)/agent-obj/src/format/fnspec.o
AGENT_UNIT_LIB := $(B)/agent-unit.a
# libunwind: the reference the unwinder is compared with (not the agent's)
AGENT_UNIT_LIBS := $(AGENT_LIBS) -lunwind -lm
UNIT_SRC := $(filter-out $(UNIT_AGENT_SRC),$(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%) \
	$(UNIT_AGENT_SRC:tests/unit/%.c=$(B)/tests/%)

EXAMPLES := $(B)/examples/leaky

.PHONY: all clean test install demo unit fuzz check-layers
all: $(B)/heaptrail $(B)/libheaptrail.so $(EXAMPLES)

$(B)/agent-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(AGENT_CFLAGS) -MMD -c $< -o $@

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -MMD -c $< -o $@

$(PROTO_GEN) &: proto/profile.proto
	@mkdir -p $(B)/gen
	protoc-c --proto_path=proto --c_out=$(B)/gen $<

# generated code: compiled without our warnings
$(PROTO_OBJ): $(PROTO_GEN)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -c $< -o $@

$(B)/obj/src/render/pprof.o: $(B)/gen/profile.pb-c.h

# The flame graph's script: a real .js file (node --check parses it in
# the tests), embedded as bytes (flame_js, flame_js_len).
$(B)/gen/flame_js.h: src/render/flame.js
	@mkdir -p $(B)/gen
	xxd -i -n flame_js $< | sed "s/^unsigned/static const unsigned/" > $@.tmp && mv $@.tmp $@

$(B)/obj/src/render/flame.o: $(B)/gen/flame_js.h

# The HTML page's script and style (src/render/html/): the scripts in
# this order (each defines what the next uses), then the style, embedded
# the same way (html_app_js, html_style_css).
HTML_JS := src/render/html/charts.js src/render/html/flame.js src/render/html/app.js
$(B)/gen/html_assets.h: $(HTML_JS) src/render/html/style.css
	@mkdir -p $(B)/gen
	cat $(HTML_JS) > $(B)/gen/html_app_js
	cp src/render/html/style.css $(B)/gen/html_style_css
	cd $(B)/gen && { xxd -i html_app_js; xxd -i html_style_css; } | \
		sed "s/^unsigned/static const unsigned/" > html_assets.h.tmp && mv html_assets.h.tmp html_assets.h

$(B)/obj/src/render/html.o: $(B)/gen/html_assets.h

$(B)/libheaptrail.so: $(AGENT_OBJ) src/agent/exports.map
	$(CC) -shared -Wl,-soname,libheaptrail.so -Wl,-z,nodelete -Wl,-z,now -Wl,-z,defs \
		-Wl,--version-script=src/agent/exports.map $(CFLAGS) $(AGENT_CFLAGS) -o $@ $(AGENT_OBJ) $(AGENT_LIBS)

$(B)/heaptrail: $(CLI_OBJ)
	$(CC) -o $@ $^ $(CLI_LIBS)

$(B)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	$(CC) -g -O0 -o $@ $<

# (and the Makefile: an object added to the list is older than the archive)
$(AGENT_UNIT_LIB): $(AGENT_UNIT_OBJ) Makefile
	rm -f $@
	$(AR) rcs $@ $(AGENT_UNIT_OBJ)

$(UNIT_AGENT_SRC:tests/unit/%.c=$(B)/tests/%): $(B)/tests/%: tests/unit/%.c tests/unit/check.h $(AGENT_UNIT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $< $(AGENT_UNIT_LIB) $(AGENT_UNIT_LIBS)

$(UNIT_SRC:tests/unit/%.c=$(B)/tests/%): $(B)/tests/%: tests/unit/%.c tests/unit/check.h $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $< $(LIB_OBJ) $(CLI_LIBS)

unit: $(UNIT_BIN)

# Fuzz targets (tests/fuzz/fuzz_*.c): libFuzzer with ASan and UBSan, built
# by clang into their own directory; the readers they drive are compiled
# with coverage instrumentation but without libFuzzer's main.
FUZZ_CC    ?= clang
FB         := $(B)/fuzz
FUZZ_SAN   := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS := -g -O1 -fno-omit-frame-pointer $(FUZZ_SAN)
FUZZ_WARN  := $(filter-out -Wno-format-truncation,$(WARN))
FUZZ_LIB_SRC := src/format/heapdump.c src/format/leakfile.c src/format/names.c src/format/input.c \
	src/analyze/profile.c src/analyze/load.c src/analyze/unbias.c src/analyze/aggregate.c \
	src/symbolize/symbolize.c src/symbolize/demangle.c src/agent/cfi.c
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FB)/obj/%.o)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(FB)/%,$(wildcard tests/fuzz/fuzz_*.c))

$(FB)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_WARN) -MMD -c $< -o $@

$(FB)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_WARN) -o $@ $< $(FUZZ_LIB_OBJ) $(CLI_LIBS)

fuzz: $(FUZZ_BIN)

# The main job of the README: run the bundled leaky example.
# (a run directory belongs to one run: the demo's is made anew each time)
demo: all
	rm -rf $(B)/demo
	$(B)/heaptrail run -o $(B)/demo -- $(B)/examples/leaky

# The agent's include graph follows its layers (the table in
# src/agent/agent.h): no file includes a header above its own layer; and
# the files the comments name exist.
check-layers:
	python3 scripts/check-layers src
	python3 scripts/check-comments .

test: all $(UNIT_BIN) check-layers
	python3 tests/run_tests.py --build $(B)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/heaptrail \
		$(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig \
		$(DESTDIR)$(PREFIX)/include/heaptrail/compat/valgrind
	install -m 755 $(B)/heaptrail $(DESTDIR)$(PREFIX)/bin/heaptrail
	install -m 755 $(B)/libheaptrail.so $(DESTDIR)$(PREFIX)/lib/heaptrail/libheaptrail.so
	install -m 644 include/heaptrail.h $(DESTDIR)$(PREFIX)/include/heaptrail.h
	install -m 644 include/heaptrail/valgrind.h $(DESTDIR)$(PREFIX)/include/heaptrail/valgrind.h
	install -m 644 include/heaptrail/compat/valgrind/valgrind.h \
		include/heaptrail/compat/valgrind/memcheck.h \
		$(DESTDIR)$(PREFIX)/include/heaptrail/compat/valgrind/
	sed -e 's|@PREFIX@|$(PREFIX)|g' heaptrail.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/heaptrail.pc

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
