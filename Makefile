# capmox-rs developer entry points. `make test` is what CI runs.
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build test test-real demo crds manifests crds-check lint fmt clean

# The real kube-apiserver + etcd (envtest layout) for `make test-real`.
ENVTEST_SETUP ?= ../shared/tools/envtest/setup.sh

all: build

## build: compile every workspace crate (debug)
build:
	$(CARGO) build --workspace --all-targets

## test: run every unit and integration test in the workspace (in-tree API server)
test:
	env -u KUBEBUILDER_ASSETS -u TEST_ASSET_KUBE_APISERVER -u TEST_ASSET_ETCD \
	  $(CARGO) test --workspace --all-targets --no-fail-fast

## test-real: every test again, against a real kube-apiserver v1.32 + etcd instead of the in-tree server
test-real:
	@if [ ! -x "$(ENVTEST_SETUP)" ]; then \
	  echo "test-real: skipped: $(ENVTEST_SETUP) not found (the real kube-apiserver assets from ../shared/tools/envtest)"; \
	else \
	  assets=$$($(ENVTEST_SETUP)) && echo "test-real: KUBEBUILDER_ASSETS=$$assets" && \
	  KUBEBUILDER_ASSETS=$$assets $(CARGO) test --workspace --all-targets --no-fail-fast; \
	fi

## demo: pve-sim + in-tree control plane + manager: a 1+2 machine cluster comes up and is torn down
demo:
	$(CARGO) run -q -p capmox-demo

## crds: regenerate config/crd/bases/ from the Rust API types
crds:
	$(CARGO) run -q -p capmox-api --bin crdgen -- config/crd/bases

## manifests: regenerate the CRDs and the webhook manifests (config/webhook/, config/crd/patches/)
manifests: crds
	$(CARGO) run -q -p capmox-api --bin manifestgen -- config

## lint: formatting and clippy, warnings are errors
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## fmt: format the workspace
fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
