# wattio — build, demo, test, bench.
CARGO ?= cargo
# Where cargo puts the binary, CARGO_TARGET_DIR included.
WATTIO := $(or $(CARGO_TARGET_DIR),target)/release/wattio

HW_BUNDLE := hw-bundle

.PHONY: gate-calibration generated deb install test-deploy hw-bundle hw-check test-hw test-vm all build demo demo-iobench test test-rust test-java unused-deps deps lint lint-test compare-builds bench fmt clean test-report test-transfer test-testbed bench-transfer bench-serve bench-top compare-meters compare-vm-meters fuzz soak bench-small-files bench-bulk bench-scale bench-agent bench-gate

all: build

## The eBPF mechanism (`--source ebpf`) needs clang and libelf to build (`make deps` installs them):
## `make build` turns its Cargo feature on when they are here and says so when they are not.
EBPF := $(shell command -v clang >/dev/null 2>&1 && pkg-config --exists libelf 2>/dev/null && echo yes)

build:
	$(if $(EBPF),,@echo "make build: clang or libelf-dev missing, building without --source ebpf (make deps installs them)")
	$(CARGO) build --release --bin wattio $(if $(EBPF),--features wattio/ebpf)

deps:
	./scripts/install-deps.sh

## What a package installs beside the binary, generated from its command-line definition.
GENERATED := $(dir $(WATTIO))
generated: build
	rm -rf $(GENERATED)man
	$(WATTIO) man-pages $(GENERATED)man >/dev/null
	gzip -9n $(GENERATED)man/*.1
	mkdir -p $(GENERATED)completions
	$(WATTIO) completions bash > $(GENERATED)completions/wattio.bash
	$(WATTIO) completions zsh > $(GENERATED)completions/_wattio
	$(WATTIO) completions fish > $(GENERATED)completions/wattio.fish

## make deb: the Debian package (cargo-deb; make deps installs it) in target/debian/.
deb: generated
	$(CARGO) deb -p wattio --no-build --strip

## make install [PREFIX=/usr/local] [DESTDIR=]: the binary, man pages, completions and the
## systemd units (their ExecStart names $(PREFIX)/bin/wattio).
PREFIX ?= /usr/local
install: generated
	install -D -m 755 $(WATTIO) $(DESTDIR)$(PREFIX)/bin/wattio
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(GENERATED)man/*.1.gz $(DESTDIR)$(PREFIX)/share/man/man1/
	install -D -m 644 $(GENERATED)completions/wattio.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/wattio
	install -D -m 644 $(GENERATED)completions/_wattio $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_wattio
	install -D -m 644 $(GENERATED)completions/wattio.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/wattio.fish
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system
	for u in deploy/systemd/*.service; do \
	  sed 's#/usr/bin/wattio#$(PREFIX)/bin/wattio#' $$u > $(DESTDIR)$(PREFIX)/lib/systemd/system/$$(basename $$u); \
	done

## The CI energy gate's false-positive rate and power (docs/ci.md): about 20 minutes.
gate-calibration: build
	WATTIO=$(WATTIO) python3 scripts/gate-calibration.py

## The deployment files checked offline: the units (systemd-analyze verify), the package
## (lintian), the Kubernetes manifests (kubernetes-validate, checkov).
test-deploy: deb
	./scripts/check-deploy.sh

## make demo: build, probe the machine, measure a built-in file I/O workload (no hardware counters needed).
demo: build
	$(WATTIO) probe
	$(WATTIO) measure -- $(WATTIO) workload file-io --mib 256
	$(MAKE) --no-print-directory demo-iobench

## make test: install what the tests need, then run every test suite once.
## WATTIO_REQUIRE_NGINX makes the nginx interoperability tests fail instead of skipping.
## WATTIO_DEFAULT_MODEL=ccf-linear: the suites that check estimated labels on this machine see the same
## model whatever its CPU (the model tests clear it to test the default itself).
## WATTIO_NVML_LIB points at no library, so that on a machine with an NVIDIA driver the CPU tests
## see no GPU rows; the GPU tests load the stand-in library (crates/nvidia-stub) themselves.
## The eBPF mechanism is always built here (deps installed its toolchain) and WATTIO_REQUIRE_EBPF
## makes its tests, which load the BPF program into this kernel, fail instead of skipping without BPF.
## WATTIO_REQUIRE_VM likewise for the real-guest tests (tests/vm_e2e.rs, tests/vm_kernel_io.rs, tests/vm_ipmi.rs, tests/vm_devices.rs: QEMU, a kernel, busybox).
## WATTIO_REQUIRE_SUSHY likewise for the Redfish tests (tests/redfish.rs: sushy-static, which deps installs in target/redfish-venv).
test: deps lint-test test-java test-rust unused-deps test-deploy

test-rust:
	WATTIO_REQUIRE_NGINX=1 WATTIO_REQUIRE_SUSHY=1 WATTIO_NVML_LIB=/nonexistent/libnvidia-ml.so.1 WATTIO_DEFAULT_MODEL=ccf-linear \
	  WATTIO_REQUIRE_EBPF=1 WATTIO_REQUIRE_VM=1 $(CARGO) test --workspace --release --features wattio-energy/ebpf
	$(CARGO) test --release -p wattio-report --test browser -- --ignored

## No manifest declares a dependency its crate does not use (cargo-machete; the exceptions,
## crates used under another name or only by a build script, are listed with why in
## [package.metadata.cargo-machete]).
unused-deps:
	$(CARGO) machete

## Java I/O study: the Maven module's equivalence and harness tests.
test-java:
	cd iobench && mvn -B -q test
	cd clients/java && mvn -B -q package

## Quick Java I/O energy study (tiny and small files, 3 runs; about 1-2 minutes): prints the ranking.
demo-iobench: build
	$(WATTIO) iobench --sizes tiny,small --ops read,write,writesync --runs 3 \
	  --methods channel,omchannel,iostream,filereader,biostream,niof,guava,apache,scanner \
	  -o results/demo-iobench

## Hardware check (docs/results/gpu.md, docs/meter.md "Checking real hardware"): every hardware-facing
## claim of the meter verified on this machine in one call, written to docs/results/hardware/.
hw-check: build
	python3 scripts/hw-check.py --wattio $(WATTIO)

## The carried form of it, for a machine without Rust or a registry (the lent GPU machine): a
## stripped wattio, the shared libraries it needs beyond libc, the script and the commit, in one
## git-ignored folder well under 64 MiB. There: python3 hw-bundle/hw-check.py --out DIR
hw-bundle: build
	rm -rf $(HW_BUNDLE) && mkdir -p $(HW_BUNDLE)/lib
	strip -o $(HW_BUNDLE)/wattio $(WATTIO)
	cp scripts/hw-check.py scripts/hw_storage.py $(HW_BUNDLE)/
	ldd $(WATTIO) | awk '$$3 ~ /^\// && $$1 !~ /^(libc|libm|libgcc_s|ld-linux)/ {print $$3}' | xargs -r cp -L -t $(HW_BUNDLE)/lib
	echo "$$(git rev-parse --short HEAD)$$(git diff --quiet HEAD || echo -dirty)" > $(HW_BUNDLE)/COMMIT
	@size=$$(du -sm $(HW_BUNDLE) | cut -f1); echo "hw-bundle: $(HW_BUNDLE)/ is $$size MiB ($$(ls $(HW_BUNDLE) $(HW_BUNDLE)/lib | tr '\n' ' '))"; \
	  [ $$size -lt 64 ] || { echo "hw-bundle: over 64 MiB"; exit 1; }

## A real guest (QEMU, TCG, Debian's kernel, an initramfs with busybox and wattio) measuring with
## the energy its host attributed to it (`vm publish` on a fake RAPL at known power, shared over
## 9p), and a guest with a pure cgroup v2 hierarchy where a writer's cgroup is charged the
## kernel's I/O work by the BPF program and by io.stat (prints both), and two guests whose wattio
## asks a BMC in-band through /dev/ipmi0: QEMU's simulated one (no DCMI) and a stand-in that
## answers DCMI (prints what each answered); about 100 s, also part of make test
## (WATTIO_REQUIRE_VM: fails instead of skipping).
test-vm:
	WATTIO_REQUIRE_VM=1 $(CARGO) test --release -p wattio --test vm_e2e --test vm_kernel_io --test vm_ipmi --test vm_devices -- --nocapture

## hw-check end to end without hardware (also part of make test, through cargo test): a fixture
## ticking at a known power, the stand-in NVML and CUDA, a stand-in nvidia-smi.
test-hw:
	$(CARGO) test --release -p wattio --test hw_check

## Focused runs of one part (all of them are already in `make test`):
## statistics, report and overhead tests, plus the headless-Chromium rendering test of a report.
test-report:
	$(CARGO) test --release -p wattio-stats -p wattio-report
	$(CARGO) test --release -p wattio-report --test browser -- --ignored

## Transfer: wattio serve/transfer protocol tests (also against nginx), SIGKILL/restart, resume,
## tuners on the simulated channel, CPU actuator fixtures (about 1 minute after the build).
test-transfer:
	WATTIO_REQUIRE_NGINX=1 $(CARGO) test --release -p wattio-http -p wattio-tuner -p wattio-transfer
	WATTIO_REQUIRE_NGINX=1 $(CARGO) test --release -p wattio --test transfer_cli
	$(CARGO) test --release -p wattio --test transfer_disks

## Testbed: namespaces + TUN delay line up, RTT checked, down, nothing left (root; seconds after the build).
test-testbed:
	$(CARGO) test --release -p wattio-testbed
	$(CARGO) test --release -p wattio --test testbed_e2e

## Fuzzing of every parser of peer bytes (request and response heads, Range, Content-Range,
## chunked bodies, listings, directory indexes, URL lists, checksum files, HTTP dates, .done
## logs): proptest on stable Rust, FUZZ_CASES inputs per target (make test runs 5000). About
## 4 minutes on 2 vCPUs at the default. Results: docs/results/hardening.md.
FUZZ_CASES ?= 5000000
fuzz:
	WATTIO_FUZZ_CASES=$(FUZZ_CASES) $(CARGO) test --release -p wattio-http -p wattio-transfer --lib fuzz -- --nocapture --test-threads=2

## wattio serve under well-behaved load (h2load) beside slowloris clients, slow readers and
## silent TLS connects, 10 minutes after a 1-minute clean run (NOT part of make test; about
## 12 minutes). Results: docs/results/hardening.md.
soak: build
	./scripts/soak.py

## Transfer tools side by side on the emulated WAN (root; NOT part of make test). SCALE=0.05 (as in
## docs/results/transfer.md) took 18 min on 2 vCPUs, the default SCALE=0.02 12 min (incl. nghttp at 64 KiB windows).
bench-transfer:
	./scripts/bench-transfer.sh

## wattio serve beside nginx on the same files, HTTP and HTTPS, 16 KiB and 1 GiB files, interleaved
## rounds (NOT part of make test; installs h2load and nginx when missing). About 5 minutes.
## Results: docs/results/serve.md.
bench-serve: build
	./scripts/bench-serve.py

## Many small files from nginx's autoindex on loopback: wattio beside wget2, rclone and aria2, each
## into an ext4 image of its own, fresh and just-deleted, interleaved rounds (root; NOT part of make
## test; about 6 minutes at the default 20,000 files). Results: docs/results/scale.md, goal 2.
bench-small-files: build
	./scripts/install-deps.sh
	./scripts/bench-small-files.py

## One 4 GiB file from nginx on loopback, HTTP and HTTPS: wattio beside curl, aria2, wget2 and rclone,
## CPU-s per GB (root; NOT part of make test; about 6 minutes). Results: docs/results/scale.md, goal 5.
bench-bulk: build
	./scripts/install-deps.sh
	FILES=1 DIRS=1 SIZE=4294967296 MODES=fresh TOOLS="wattio curl aria2 wget2 rclone" ./scripts/bench-small-files.py
	FILES=1 DIRS=1 SIZE=4294967296 MODES=fresh TOOLS="wattio curl aria2 wget2 rclone" TLS=1 ./scripts/bench-small-files.py

## Every scale benchmark of docs/results/scale.md (issue 33): the soak (goal 1), the small files
## (goal 2) and the bulk bytes (goal 5).
bench-scale: soak bench-small-files bench-bulk bench-agent

## The node agent's cost at 1,000 / 5,000 / 10,000 live processes: top and export through the BPF
## task iterator and through /proc, against procps top (issue 33, goal 4); with PARTS=scaph and
## SCAPHANDRE_BIN, against Scaphandre's Prometheus exporter on one fake RAPL.
bench-agent: build
	./scripts/bench-agent.py

## The outputs a refactor must leave as they were (record CSV, measure --json, the exporter's
## body, the report page), compared between this build and OLD=path/to/an/older/wattio on the
## static intel-server fixture, clock-dependent fields masked.
compare-builds: build
	python3 scripts/compare-builds.py $(OLD) $(WATTIO)

## make test fails on a lint too: rustfmt, and clippy -D warnings on every target with the eBPF
## feature on (the superset of the code), then without it on wattio-energy alone: its
## #[cfg(not(feature = "ebpf"))] blocks are the only code the first pass skips (the other crates
## use only what it builds either way), and rechecking that crate (with wattio-fixture, which
## its tests use) after the first pass takes seconds. `make lint` checks the whole workspace both
## ways.
lint-test:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --features wattio-energy/ebpf -- -D warnings
	$(CARGO) clippy -p wattio-energy --all-targets -- -D warnings

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --workspace --all-targets --features wattio-energy/ebpf -- -D warnings

fmt:
	$(CARGO) fmt --all

## wattio beside Scaphandre, CodeCarbon, pyJoules, perf and turbostat on the same live, wrapping fake RAPL
## counters (root; NOT part of make test: the peers are installed once into /var/cache/wattio-peers, or
## WATTIO_PEERS_CACHE). About 5 minutes once they are. Results: docs/results/meters.md.
compare-meters: build
	./scripts/compare-meters.py

## make compare-vm-meters: what two real guests (QEMU, TCG) see from wattio's vm publish and from
## Scaphandre's qemu exporter on the same fake host counter, against the known truth (root; NOT
## part of make test; needs make deps' QEMU and kernel). About 3 minutes once Scaphandre is
## installed. Results: a section of docs/results/meters.md.
compare-vm-meters: build
	./scripts/compare-vm-meters.py

## make bench: benchmarks whose results go to docs/benchmarks/.
bench: build
	$(CARGO) bench -p wattio-meter $(if $(EBPF),--features wattio-energy/ebpf)

## The meter's pacing gate: OLD's pacing bench beside the work tree's, alternating, ROUNDS rounds
## (root, an idle machine; about 5 minutes a round). Results: docs/benchmarks/meter.md.
ROUNDS ?= 3
bench-gate:
	$(if $(OLD),,$(error give the build to compare with: make bench-gate OLD=<git revision>))
	python3 scripts/bench-gate.py $(OLD) $(ROUNDS)

## What `wattio top` costs (500 extra processes, vs procps top -b) and what attribution misses; about 6 minutes.
## Results: docs/benchmarks/attribution.md.
bench-top: build
	./scripts/bench-top.sh

clean:
	$(CARGO) clean
