# capmox-rs developer entry points. `make test` is what CI runs.
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build test demo crds manifests crds-check lint fmt clean

all: build

## build: compile every workspace crate (debug)
build:
	$(CARGO) build --workspace --all-targets

## test: run every unit and integration test in the workspace
test:
	$(CARGO) test --workspace --all-targets --no-fail-fast

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
