# capmox-rs developer entry points. `make test` is what CI runs.
CARGO ?= cargo
KUBECTL ?= kubectl
DOCKER ?= docker
export CARGO_TERM_COLOR ?= never

# The real kube-apiserver + etcd (envtest layout) for `make test-real`.
ENVTEST_SETUP ?= ../shared/tools/envtest/setup.sh
# The Proxmox VE release pve-sim plays in `make test-real` (`make test` plays its default, 8.4).
REAL_PVE_VERSION ?= 9.1
# How the tests run: cargo-nextest (one process per test, tests of all binaries side by side; the
# profile is .config/nextest.toml) where it is installed, else cargo's own runner (one binary at a time).
# Most tests wait on pve-sim's task timings and controllers rather than compute, so running them side by
# side is what keeps `make test` short on two cores.
NEXTEST := $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo yes)
ifeq ($(NEXTEST),yes)
TEST_RUN = $(CARGO) nextest run --workspace --all-targets --no-fail-fast
else
TEST_RUN = $(CARGO) test --workspace --all-targets --no-fail-fast
endif
# The real Cluster API core managers (v1.13.4, v1.10.2) for `make e2e`.
CAPI_SETUP ?= ../shared/tools/capi/setup.sh

# Release: the version (its series must be in metadata.yaml) and the image the components run.
RELEASE_VERSION ?= v0.11.0-dev
IMG ?= ghcr.io/capmox-rs/capmox-rs:$(RELEASE_VERSION)
OUT ?= out

.PHONY: all build test test-real e2e fuzz demo demo-vm bench chaos crds manifests crds-check lint fmt clean release release-binary release-binary-test docker-build docker-push chart docs docs-serve

all: build

## build: compile every workspace crate (debug)
build:
	$(CARGO) build --workspace --all-targets

## test: run every unit and integration test in the workspace (in-tree API server, Proxmox VE 8.4)
test:
	env -u KUBEBUILDER_ASSETS -u TEST_ASSET_KUBE_APISERVER -u TEST_ASSET_ETCD -u PVE_SIM_VERSION \
	  $(TEST_RUN)

## test-real: every test again, against a real kube-apiserver v1.32 + etcd instead of the in-tree server,
## with pve-sim playing Proxmox VE 9.1 (PVE_SIM_VERSION) wherever a test does not pin a release
test-real:
	@if [ ! -x "$(ENVTEST_SETUP)" ]; then \
	  echo "test-real: skipped: $(ENVTEST_SETUP) not found (the real kube-apiserver assets from ../shared/tools/envtest)"; \
	else \
	  assets=$$($(ENVTEST_SETUP)) && echo "test-real: KUBEBUILDER_ASSETS=$$assets" && \
	  KUBEBUILDER_ASSETS=$$assets PVE_SIM_VERSION=$(REAL_PVE_VERSION) $(TEST_RUN); \
	fi

## e2e: end to end with the real CAPI core managers v1.13.4 and v1.10.2, the real kube-apiserver,
## pve-sim and the capmox binary, and CozyStack's Kamaji tenant node group on v1.10.2
## (tests/e2e_capi.rs; about three minutes once built)
e2e:
	@missing=""; \
	[ -x "$(ENVTEST_SETUP)" ] || missing="$(ENVTEST_SETUP)"; \
	[ -x "$(CAPI_SETUP)" ] || missing="$$missing $(CAPI_SETUP)"; \
	if [ -n "$$missing" ]; then \
	  echo "e2e: skipped: $$missing not found (the real kube-apiserver and CAPI core managers of ../shared/tools)"; \
	else \
	  assets=$$($(ENVTEST_SETUP)) && echo "e2e: KUBEBUILDER_ASSETS=$$assets" && \
	  KUBEBUILDER_ASSETS=$$assets $(CARGO) test -p capmox --test e2e_capi -- --ignored --nocapture --test-threads=1; \
	fi

## fuzz: the property tests over outside input (Proxmox answers, property strings, UPIDs, webhook
## reviews, conversion data, bootstrap values, pve-sim's parsers) with FUZZ_CASES cases each
## (`make test` runs them with a few hundred)
FUZZ_CASES ?= 10000
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test -p capmox --test fuzz_proxmox --test fuzz_bootstrap --test fuzz_webhooks
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test -p pve-sim --test fuzz_parsers

## demo: pve-sim + in-tree control plane + manager: a 1+2 machine cluster comes up and is torn down
demo:
	$(CARGO) run -q -p capmox-demo

## demo-vm: one standalone VM (ProxmoxVirtualMachine, no Cluster API): created, paused, resumed,
## resized, snapshotted, changed, restored, cloned; an image the demo serves on loopback imported as a
## template (ProxmoxVMImage) and a VM run from it; everything deleted
demo-vm:
	$(CARGO) run -q -p capmox-demo --bin capmox-demo-vm

## bench: provision, rest, restart and delete 1, 10, 100 (realistic) and 1000 (instant) machines on
## pve-sim with the release manager binary and print what it cost (BENCH_ARGS to change the runs,
## e.g. BENCH_ARGS='--machines 100 --json'; KUBEBUILDER_ASSETS=... uses a real kube-apiserver)
BENCH_ARGS ?=
bench:
	$(CARGO) build --release -q -p capmox --bin capmox -p capmox-bench --bin capmox-bench
	target/release/capmox-bench $(BENCH_ARGS)

## chaos: soak of 200 machines in 4 waves under 10 % Proxmox faults with 3 SIGKILLs of the manager
## (CHAOS_ARGS, e.g. CHAOS_ARGS="--machines 50 --kills 5 --seed 9"); make test runs a small one
CHAOS_ARGS ?=
chaos:
	$(CARGO) build --release -q -p capmox --bin capmox -p capmox-bench --bin capmox-chaos
	target/release/capmox-chaos $(CHAOS_ARGS)

## crds: regenerate config/crd/bases/ from the Rust API types
crds:
	$(CARGO) run -q -p capmox-api --bin crdgen -- config/crd/bases

## manifests: regenerate the CRDs and the webhook manifests (config/webhook/, config/crd/patches/)
manifests: crds
	$(CARGO) run -q -p capmox-api --bin manifestgen -- config

## chart: regenerate the Helm chart's templates (charts/capmox-rs/templates) from config/ (needs
## kubectl; tests/helm_chart.rs checks they are current and judges the chart with the real helm)
chart:
	$(CARGO) run -q --bin capmox-chart -- --chart charts/capmox-rs --kubectl $(KUBECTL)

## docs: the book (docs/ → docs/book/index.html): regenerates the Reference from the code, builds
## it with mdbook (installed from crates.io on first use, offline after that) and checks it
## (tests/docs_book.rs: drift, links of the sources and of the HTML, one page in headless chromium)
MDBOOK_VERSION ?= 0.5.4
MDBOOK ?= $${CARGO_HOME:-$$HOME/.cargo}/bin/mdbook
docs:
	@if ! "$(MDBOOK)" --version 2>/dev/null | grep -q "v$(MDBOOK_VERSION)"; then \
	  echo "docs: installing mdbook $(MDBOOK_VERSION) from crates.io"; \
	  $(CARGO) install mdbook --locked --version $(MDBOOK_VERSION) --no-default-features --features search; \
	fi
	$(CARGO) run -q --bin capmox-docs
	"$(MDBOOK)" build docs
	$(CARGO) test -q -p capmox --test docs_book

## lint: formatting and clippy, warnings are errors
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## fmt: format the workspace
fmt:
	$(CARGO) fmt --all

## release: $(OUT)/ with infrastructure-components.yaml (image $(IMG)), metadata.yaml, the cluster
## templates and ClusterClasses (converted to CAPI v1beta1 / Proxmox v1alpha1 when the version's
## series declares contract v1beta1) and the compressed Cluster API Operator ConfigMap (needs kubectl)
release:
	$(CARGO) run -q --bin capmox-release -- --release-version $(RELEASE_VERSION) --image $(IMG) --out $(OUT) --kubectl $(KUBECTL)

## release-binary: the manager as the image ships it (LTO, stripped): target/release/capmox
release-binary:
	$(CARGO) build --release --locked --bin capmox
	@ls -l target/release/capmox | awk '{printf "release binary target/release/capmox: %d bytes (%.1f MiB)\n", $$5, $$5/1048576}'
	@./target/release/capmox --version

## release-binary-test: builds the release binary and checks it starts (slow; not in `make test`)
release-binary-test:
	$(CARGO) test -p capmox --test release_binary -- --ignored --nocapture

## docker-build: the manager image $(IMG) (needs a Docker engine)
docker-build:
	$(DOCKER) build --build-arg VERSION=$(RELEASE_VERSION) --build-arg REVISION=$$(git rev-parse HEAD 2>/dev/null || echo unknown) -t $(IMG) .

## docker-push: push $(IMG)
docker-push:
	$(DOCKER) push $(IMG)

clean:
	$(CARGO) clean
