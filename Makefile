# capmox-rs developer entry points. `make test` is what CI runs.
CARGO ?= cargo
export CARGO_TERM_COLOR ?= never

.PHONY: all build test demo bench chaos crds crds-check lint fmt clean

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

## lint: formatting and clippy, warnings are errors
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## fmt: format the workspace
fmt:
	$(CARGO) fmt --all

clean:
	$(CARGO) clean
