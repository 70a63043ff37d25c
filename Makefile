# The verbs a user types. `make demo` and `make test` are the README's two set-up commands.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO   ?= cargo
MODULES := target/modules
# Test fixtures (misbehaving modules) are built apart from the shipped modules.
FIXTURES := target/fixtures
# Every rule set is a directory of its own in rules/<name>/ (dir name = module name): a Rust crate
# (Cargo.toml), a Python project (pyproject.toml) or a JavaScript package (package.json).
# `make new-rules` scaffolds one, `make rules NAME=` builds one, `make guest` builds every Rust
# one (RULE_SETS), `make guest-langs` every Python and JavaScript one.
RULE_SETS := $(patsubst rules/%/Cargo.toml,%,$(wildcard rules/*/Cargo.toml))
PY_RULE_SETS := $(patsubst rules/%/pyproject.toml,%,$(wildcard rules/*/pyproject.toml))
JS_RULE_SETS := $(patsubst rules/%/package.json,%,$(wildcard rules/*/package.json))
# The fixtures crate's builds, one Cargo feature each (guest/fixtures/Cargo.toml).
FIXTURE_BUILDS := hostile huge-name escape-name never-kiyoshi after-kiyoshi flaky burn no-callback wasi-hoard wasi-hoard-load fresh-bytes
# The guest is built for wasm32-unknown-unknown (no WASI at all) and wrapped into a component.
GUEST_TARGET := wasm32-unknown-unknown
# Cargo's build output (CARGO_TARGET_DIR when set); the components go to target/ whatever it is.
CARGO_OUT := $(or $(CARGO_TARGET_DIR),target)
GUEST_OUT_DIR := $(CARGO_OUT)/$(GUEST_TARGET)/guest
COMPONENTIZE := $(CARGO_OUT)/debug/componentize
# A component must stay well under a ConfigMap's 1 MiB; the product's budget is 64 KiB.
GUEST_MAX_BYTES := 65536
# A 64 KiB shadow stack instead of rustc's 1 MiB: every call gets a fresh instance, and a
# smaller initial memory is less to map per instance. Deeper recursion traps, as it should.
# A 256 KiB initial memory: the guest's bump allocator uses it before growing, and it holds a
# call at 1,000 children, so a typical call never runs memory.grow (each grow cost the host
# two mprotects, one to grow and one to reset the pool slot; 5 children: 23 us -> 14 us).
GUEST_RUSTFLAGS := -C link-arg=-zstack-size=65536 -C link-arg=--initial-memory=262144
HIKAWA ?= deploy/samples/hikawa-sample.yaml
SEED   ?=
SEEDS  ?=
NAME   ?=
PORT   ?= 0
KUBECONFIG_OUT ?=

.PHONY: help
help: ## List the verbs.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

.PHONY: setup
setup: ## Install the wasm targets the guest needs (rustup).
	@rustup target list --installed | grep -qx $(GUEST_TARGET) || rustup target add $(GUEST_TARGET)

$(COMPONENTIZE): tools/componentize/src/main.rs tools/componentize/Cargo.toml
	$(CARGO) build -p componentize

# wasm-build CARGO-ARGS: build crates for wasm32 with the guest profile (small, panic=abort).
wasm-build = CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$(GUEST_RUSTFLAGS)" \
	$(CARGO) build $(1) --target $(GUEST_TARGET) --profile guest

# size-check FILE MAX (shell): fail when a built component is over its language's budget.
size-check = size=$$(stat -c %s $(1)) && { [ $$size -le $(2) ] \
	|| { echo "$(1) is $$size bytes, over the $(2)-byte budget" >&2; exit 1; }; }

# componentize CORE OUTPUT (shell): wrap a built core module into a component, check its size.
componentize = mkdir -p $$(dirname $(2)) && $(COMPONENTIZE) $(1) $(2) \
	&& $(call size-check,$(2),$(GUEST_MAX_BYTES))

.PHONY: guest
guest: setup $(COMPONENTIZE) ## Build every Rust rule set in rules/ into target/modules/<name>.wasm (make guest-langs: Python and JavaScript).
	$(call wasm-build,$(foreach r,$(RULE_SETS),-p $(r)))
	@set -e; for r in $(RULE_SETS); do $(call componentize,$(GUEST_OUT_DIR)/$${r//-/_}.wasm,$(MODULES)/$$r.wasm); done

# A rule set's language, from its directory: Cargo.toml (rust), pyproject.toml or app.py
# (python), package.json (js); empty when rules/NAME/ is none of them.
rules-lang = $(if $(wildcard rules/$(1)/Cargo.toml),rust,$(if $(wildcard rules/$(1)/pyproject.toml rules/$(1)/app.py),python,$(if $(wildcard rules/$(1)/package.json),js)))
NAME_LANG := $(if $(NAME),$(call rules-lang,$(NAME)))

.PHONY: rules rules-none rules-rust rules-python rules-js
rules: rules-$(or $(NAME_LANG),none) ## Build one rule set, rules/NAME/ (Rust, Python or JavaScript), into target/modules/NAME.wasm (NAME=).

rules-none:
	@test -n "$(NAME)" || { echo "usage: make rules NAME=<a directory in rules/>" >&2; exit 1; }
	@echo "no rule set rules/$(NAME)/ (make new-rules NAME=$(NAME) [LANG=python|js] creates one)" >&2; exit 1

rules-rust: setup $(COMPONENTIZE)
	$(call wasm-build,-p $(NAME))
	@$(call componentize,$(GUEST_OUT_DIR)/$(subst -,_,$(NAME)).wasm,$(MODULES)/$(NAME).wasm)

rules-python: kit-python
	@mkdir -p $(MODULES)
	@$(call py-build,rules/$(NAME),$(MODULES)/$(NAME).wasm)
	@$(PYTHON) sdk/budget.py rules/$(NAME) $(MODULES)/$(NAME).wasm
	@$(call size-check,$(MODULES)/$(NAME).wasm,$(PY_MAX_BYTES)) && echo "$(MODULES)/$(NAME).wasm: $$size bytes"

rules-js: kit-js
	$(NODE) sdk/js/build.mjs rules/$(NAME) $(MODULES)/$(NAME).wasm
	@$(PYTHON) sdk/budget.py rules/$(NAME) $(MODULES)/$(NAME).wasm
	@$(call size-check,$(MODULES)/$(NAME).wasm,$(JS_MAX_BYTES))

.PHONY: test-rules
test-rules: ## Run one rule set's native tests in its language: cargo test, pytest or node --test (NAME=).
	@test -n "$(NAME_LANG)" || { echo "usage: make test-rules NAME=<a rule set in rules/>" >&2; exit 1; }
	@$(MAKE) --no-print-directory test-rules-$(NAME_LANG) NAME=$(NAME)

.PHONY: test-rules-rust test-rules-python test-rules-js
test-rules-rust:
	$(CARGO) test -p $(NAME)
test-rules-python: kit-python
	cd rules/$(NAME) && $(abspath $(PY_VENV))/bin/python -m pytest -q -p no:cacheprovider
test-rules-js: kit-js
	@mkdir -p rules/$(NAME)/node_modules && ln -sfn ../../../sdk/js/zundoko-kit rules/$(NAME)/node_modules/zundoko-kit
	cd rules/$(NAME) && $(NODE) --test

# `make new-rules LANG=python`: LANG is also the locale's variable, so only a LANG given on
# make's command line picks the language (RULES_LANG= works too); otherwise Rust.
NEW_RULES_LANG := $(or $(RULES_LANG),$(if $(filter command line,$(origin LANG)),$(LANG)),rust)

.PHONY: new-rules
new-rules: ## Scaffold a new rule set in rules/NAME/ with native tests (NAME=my-rules, LANG=rust|python|js).
	@env -u LANG scripts/new-rules.sh "$(NAME)" "$(NEW_RULES_LANG)"

.PHONY: remove-rules
remove-rules: ## Remove a rule set: rules/NAME/, its module, and a Rust one from the workspace (NAME=).
	@scripts/remove-rules.sh "$(NAME)"

# Rules in Python and JavaScript (sdk/): their toolchains are pinned in files the project
# owns and installed into the project, never system-wide: a virtualenv in target/kits/python
# (sdk/python/requirements.txt) and node_modules in sdk/js (package-lock.json).
# Each is installed once; afterwards the targets only check a stamp.
PYTHON ?= python3
NODE ?= node
NPM ?= npm
PY_VENV := target/kits/python
COMPONENTIZE_PY := $(PY_VENV)/bin/componentize-py
PY_KIT_STAMP := $(PY_VENV)/.installed
JS_KIT_STAMP := sdk/js/node_modules/.installed
# Size budgets. A Python component carries CPython and its standard library (the classic rules:
# about 18.9 MB); a JavaScript one carries SpiderMonkey (about 12.1 MB). Both are far over a
# ConfigMap's 1 MiB: serve them from a file, a volume or a registry.
PY_MAX_BYTES := 25165824
# A Python build runs the rule set's code: its imports, and its `reconcile` on the kit's warm-up
# calls (sdk/python/zundoko_kit/warm_up.py). One that never returns would keep the build from
# ending; it takes about 12 s on this project's 2-core machines.
PY_BUILD_TIMEOUT_SECS ?= 600
# py-build DIR OUTPUT (shell): build the Python rule set in DIR (its app.py) into a component.
py-build = echo "componentize-py: $(1) -> $(2)" && timeout $(PY_BUILD_TIMEOUT_SECS) $(COMPONENTIZE_PY) -d wit -w zundoko-rules componentize -p $(1) -p sdk/python app -o $(2) \
	|| { rc=$$?; rm -f $(2); [ $$rc -ne 124 ] || echo "$(1): the build ran over $(PY_BUILD_TIMEOUT_SECS) s (PY_BUILD_TIMEOUT_SECS) and was stopped: does the rule set's code run forever when imported, or its reconcile on a warm-up call (sdk/python/zundoko_kit/warm_up.py)?" >&2; exit $$rc; }
JS_MAX_BYTES := 16777216
PY_FIXTURES := hostile no-callback fresh held-random allocating imports from-docs fresh-bytes
JS_FIXTURES := hostile fresh math-random

$(PY_KIT_STAMP): sdk/python/requirements.txt
	@command -v $(PYTHON) > /dev/null || { echo "the Python rules kit needs python3 (3.11 or later) with venv (apt-get install python3-venv)" >&2; exit 1; }
	@test -x $(PY_VENV)/bin/pip || $(PYTHON) -m venv $(PY_VENV) \
	  || { rm -rf $(PY_VENV); echo "python3 -m venv failed: apt-get install python3-venv" >&2; exit 1; }
	$(PY_VENV)/bin/pip install -q --disable-pip-version-check -r sdk/python/requirements.txt
	@touch $@

$(JS_KIT_STAMP): sdk/js/package.json sdk/js/package-lock.json
	@command -v $(NODE) > /dev/null && command -v $(NPM) > /dev/null \
	  || { echo "the JavaScript rules kit needs node (20 or later) and npm (apt-get install nodejs npm)" >&2; exit 1; }
	cd sdk/js && $(NPM) ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: kits kit-python kit-js
kit-python: $(PY_KIT_STAMP)
kit-js: $(JS_KIT_STAMP)
kits: kit-python kit-js ## Install the pinned Python and JavaScript rules toolchains into the project (once).

# The Python and JavaScript components are files made from their sources (a build takes ~12 s):
# rebuilt only when the rule set, the kit, the WIT or the toolchain changed.
PY_KIT_SOURCES := $(wildcard sdk/python/zundoko_kit/*.py) wit/zundoko-rules.wit $(PY_KIT_STAMP) sdk/budget.py
JS_KIT_SOURCES := $(wildcard sdk/js/zundoko-kit/*.js sdk/js/zundoko-kit/package.json) \
	sdk/js/build.mjs sdk/js/bindings-rewrite.mjs wit/zundoko-rules.wit $(JS_KIT_STAMP) sdk/budget.py
PY_MODULES := $(PY_RULE_SETS:%=$(MODULES)/%.wasm)
JS_MODULES := $(JS_RULE_SETS:%=$(MODULES)/%.wasm)
PY_FIXTURE_FILES := $(PY_FIXTURES:%=$(FIXTURES)/zundoko-py-%.wasm)
JS_FIXTURE_FILES := $(JS_FIXTURES:%=$(FIXTURES)/zundoko-js-%.wasm)

.SECONDEXPANSION:
# A component that failed its size check is not left behind as up to date.
.DELETE_ON_ERROR:
$(PY_MODULES): $(MODULES)/%.wasm: $$(wildcard rules/%/*.py rules/%/pyproject.toml) $(PY_KIT_SOURCES)
	@$(MAKE) --no-print-directory rules-python NAME=$*
$(JS_MODULES): $(MODULES)/%.wasm: $$(wildcard rules/%/*.js rules/%/package.json) $(JS_KIT_SOURCES)
	@$(MAKE) --no-print-directory rules-js NAME=$*
$(PY_FIXTURE_FILES): $(FIXTURES)/zundoko-py-%.wasm: $$(wildcard guest/fixtures-py/%/*) $(PY_KIT_SOURCES)
	@mkdir -p $(FIXTURES)
	@$(call py-build,guest/fixtures-py/$*,$@)
	@$(PYTHON) sdk/budget.py guest/fixtures-py/$* $@
$(JS_FIXTURE_FILES): $(FIXTURES)/zundoko-js-%.wasm: $$(wildcard guest/fixtures-js/%/*) $(JS_KIT_SOURCES)
	$(NODE) sdk/js/build.mjs guest/fixtures-js/$* $@
	@$(PYTHON) sdk/budget.py guest/fixtures-js/$* $@

.PHONY: guest-langs
guest-langs: kit-python kit-js $(PY_MODULES) $(JS_MODULES) ## Build every Python and JavaScript rule set in rules/ into target/modules/ (not part of make guest).

.PHONY: fixtures-langs
fixtures-langs: kit-python kit-js $(PY_FIXTURE_FILES) $(JS_FIXTURE_FILES) ## Build the Python and JavaScript test fixtures into target/fixtures/ (zundoko-py-hostile.wasm, zundoko-js-hostile.wasm, ...).

.PHONY: test-langs
test-langs: kit-python kit-js ## Run the native tests of every Python and JavaScript rule set (pytest, node --test), and the kits' own (sdk/tests, sdk/js/test).
	$(abspath $(PY_VENV))/bin/python -m pytest -q -p no:cacheprovider sdk/tests
	$(NODE) --test sdk/js/test/
	@set -e; for r in $(PY_RULE_SETS); do $(MAKE) --no-print-directory test-rules-python NAME=$$r; done; \
	  for r in $(JS_RULE_SETS); do $(MAKE) --no-print-directory test-rules-js NAME=$$r; done

.PHONY: fixtures
fixtures: setup $(COMPONENTIZE) ## Build the test fixtures (misbehaving modules) into target/fixtures/.
	@set -e; for f in $(FIXTURE_BUILDS); do \
	  $(call wasm-build,-q -p zundoko-fixtures --features $$f); \
	  $(call componentize,$(GUEST_OUT_DIR)/zundoko_fixtures.wasm,$(FIXTURES)/zundoko-$$f.wasm); done

.PHONY: build
build: guest ## Build the guest components and the operator.
	$(CARGO) build -p zundoko-operator

PLUGIN_DIR ?= $(HOME)/.local/bin

.PHONY: kubectl-plugin
kubectl-plugin: ## Install `kubectl zundoko explain` (the plugin script and the operator binary) into PLUGIN_DIR (default ~/.local/bin; on PATH for kubectl to find it).
	$(CARGO) build --release -p zundoko-operator
	install -d $(PLUGIN_DIR)
	install -m 0755 deploy/kubectl-plugin/kubectl-zundoko target/release/zundoko-operator $(PLUGIN_DIR)/
	@echo "installed: kubectl zundoko explain NAMESPACE/HIKAWA [--word N | --song] (from $(PLUGIN_DIR))"

.PHONY: demo-rollout
demo-rollout: guest fixtures ## Rule sets, no cluster needed: two ZundokoRules at once, and a staged rollout that rolls back on its own.
	$(CARGO) build -p zundoko-operator -p zundoko-apiserver
	scripts/demo-rollout.sh

.PHONY: simulate
simulate: guest ## Sing the sample Hikawa locally on a virtual clock (MODULE=, HIKAWA=, SEED=).
	$(CARGO) run -q -p zundoko-operator -- simulate \
	  --module $(or $(MODULE),$(MODULES)/zundoko-classic.wasm) --hikawa $(HIKAWA) $(if $(SEED),--seed $(SEED))

.PHONY: test-module
test-module: guest ## Run the conformance suite on a module (MODULE=, SEEDS=).
	$(CARGO) run -q -p zundoko-operator -- test --module $(or $(MODULE),$(MODULES)/zundoko-classic.wasm) $(if $(SEEDS),--seeds $(SEEDS))

.PHONY: push
push: ## Publish a module to an OCI registry, checked first (MODULE=, REF=REGISTRY/REPO:TAG, SIGN=key file, INSECURE=HOST:PORT for plain HTTP).
	@test -n "$(REF)" || { echo "usage: make push MODULE=target/modules/NAME.wasm REF=REGISTRY/REPOSITORY:TAG [SIGN=team.key] [INSECURE=HOST:PORT]" >&2; exit 1; }
	$(CARGO) run -q -p zundoko-operator -- push --module $(or $(MODULE),$(MODULES)/zundoko-classic.wasm) $(REF) \
	  $(if $(SIGN),--sign $(SIGN)) $(if $(INSECURE),--insecure-registry $(INSECURE))

.PHONY: sign
sign: ## Sign a module file for --require-signatures: writes MODULE.sig, prints the ConfigMap annotation (MODULE=, SIGN=key file).
	@test -n "$(SIGN)" || { echo "usage: make sign MODULE=target/modules/NAME.wasm SIGN=team.key" >&2; exit 1; }
	$(CARGO) run -q -p zundoko-operator -- sign --key $(SIGN) $(or $(MODULE),$(MODULES)/zundoko-classic.wasm)

.PHONY: check-module
check-module: guest ## Validate a module and print its metadata (MODULE=).
	$(CARGO) run -q -p zundoko-operator -- check --module $(or $(MODULE),$(MODULES)/zundoko-classic.wasm)

.PHONY: demo
demo: guest $(if $(filter python py js javascript,$(RULES)),guest-langs) ## The main job, no cluster needed: local API server + operator + the sample Hikawa, sung word by word (RULES=python|js: by Python or JavaScript rules, swapped to Rust mid-song).
	$(CARGO) build -p zundoko-operator -p zundoko-apiserver
	$(if $(RULES),RULES=$(RULES),MODULE=$(or $(MODULE),$(MODULES)/zundoko-classic.wasm)) HIKAWA=$(HIKAWA) scripts/demo.sh

# Tests that need promtool and prometheus (Debian's `prometheus` package) are #[ignore]d with
# that reason: `make test` runs them when both are installed, and always in CI (CI=true), where
# a missing one fails them. Elsewhere cargo lists them as ignored and the last line says so.
OPTIONAL_TOOLS := promtool prometheus
HAVE_OPTIONAL_TOOLS := $(shell for t in $(OPTIONAL_TOOLS); do command -v $$t > /dev/null || exit 0; done; echo yes)
RUN_IGNORED := $(or $(filter true 1,$(CI)),$(HAVE_OPTIONAL_TOOLS))
# Likewise the Python and JavaScript rules (pytest, node --test, and their components in the
# host's tests, host/tests/languages.rs): run when python3 and node are installed, always in CI.
LANG_TOOLS := $(PYTHON) $(NODE) $(NPM)
HAVE_LANG_TOOLS := $(shell for t in $(LANG_TOOLS); do command -v $$t > /dev/null || exit 0; done; \
	$(PYTHON) -c 'import venv, ensurepip' 2> /dev/null && echo yes)
RUN_LANGS := $(or $(filter true 1,$(CI)),$(HAVE_LANG_TOOLS))

.PHONY: test
# cargo-nextest runs every test as a process of its own, tests of different binaries side by side
# (.config/nextest.toml: most of a test's time is waiting on songs, Leases and retries); where it
# is not installed (`cargo install cargo-nextest --locked`), cargo test runs the binaries one after
# another. The crates have no doc tests.
HAVE_NEXTEST := $(shell $(CARGO) nextest --version > /dev/null 2>&1 && echo yes)
NEXTEST ?= $(HAVE_NEXTEST)
test: guest fixtures $(if $(RUN_LANGS),guest-langs fixtures-langs test-langs) ## Run the whole test suite (native rules in every language, sandbox with the built components, API server).
	$(if $(filter yes,$(NEXTEST)),$(CARGO) nextest run --workspace --no-fail-fast $(if $(RUN_IGNORED),--run-ignored all),$(CARGO) test --workspace --no-fail-fast $(if $(RUN_IGNORED),-- --include-ignored))
	@$(if $(RUN_IGNORED),,echo "make test: the monitoring tests that need $(OPTIONAL_TOOLS) were ignored (not installed: apt-get install prometheus)")
	@$(if $(RUN_LANGS),,echo "make test: the Python and JavaScript rules were not tested (needs $(LANG_TOOLS): apt-get install python3-venv nodejs npm)")

# The cargo-fuzz targets (fuzz/README.md): the boundaries whose property tests `make test`
# runs (host/tests/fuzzed_boundaries/), searched far longer; scripts/fuzz.sh says how.
FUZZ_SECS ?= 60
FUZZ_TARGETS ?=

.PHONY: fuzz
fuzz: guest ## Run each cargo-fuzz target (fuzz/) for FUZZ_SECS seconds (default 60; FUZZ_TARGETS= picks some): plans, guest values, budgets, OCI answers, decisions, cache entries.
	CARGO=$(CARGO) FUZZ_SECS=$(FUZZ_SECS) $(if $(FUZZ_TARGETS),FUZZ_TARGETS="$(FUZZ_TARGETS)") scripts/fuzz.sh

# The patched wasmtime's own unit tests that cover the patch (vendor/README.md), run standalone:
# vendor/ is outside the workspace, so `make test` never builds them. The crate's published
# Cargo.lock, kept as is (--locked), and a target of its own: its dev-dependencies are not the
# workspace's (about 12 minutes the first time on 2 loaded cores, about 1 minute after a change).
# VENDOR_TEST_SKIP: five of upstream's PAGEMAP_SCAN binding tests that assume a page never
# touched is not WRITTEN; kernels that report such holes as WRITTEN (6.18 here) fail them, the
# published crate as well. `VENDOR_TEST_SKIP=` runs them.
VENDOR_TARGET ?= $(CARGO_OUT)/vendor-test
VENDOR_TEST_SKIP ?= basic_page_flags no_pages_returned only_written_pages page_limit_with_hole region_limit

.PHONY: vendor-test
vendor-test: ## Run vendor/wasmtime's unit tests of the patch (function_range's table, the pagemap reset, the pool) in the crate alone (not in make test).
	cd vendor/wasmtime && CARGO_TARGET_DIR=$(abspath $(VENDOR_TARGET)) $(CARGO) test --locked --lib -- defined_func_locs pagemap pooling $(foreach t,$(VENDOR_TEST_SKIP),--skip pagemap::tests::$(t))

.PHONY: bench
bench: guest ## Print sandbox cost per reconcile against native rules, at 5 and 1,000 children (release).
	$(CARGO) bench -p zundoko-operator --bench sandbox

.PHONY: bench-swap
bench-swap: guest ## Print hot-swap latency (file ..data swap and API ConfigMap, median and worst of 20) and failed reconciles (release).
	$(CARGO) bench -p zundoko-operator --bench swap

.PHONY: bench-scale
bench-scale: guest fixtures ## Print operator RSS and words/s at 1,000 and 10,000 Hikawas beside the API server's own ceiling, wasm and native; then words/s, RSS and shard handover with 1, 2 and 3 replicas (release; ZUNDOKO_BENCH_SIZES=1000 for a quick run).
	$(CARGO) bench -p zundoko-operator --bench scale
	$(CARGO) bench -p zundoko-operator --bench replica_scale

.PHONY: bench-real
bench-real: guest ## Print bench-scale's bare client and operator against the API server KUBECONFIG names, each run in a fresh namespace of its own deleted after it, with the server's request duration per write from its /metrics (issue 55's check; release; KUBECONFIG=FILE, ZUNDOKO_BENCH_SIZES, ZUNDOKO_BENCH_RUNS).
	@test -n "$(KUBECONFIG)" || { echo "usage: make bench-real KUBECONFIG=FILE (the API server to run against; see docs/benchmarks.md)" >&2; exit 1; }
	ZUNDOKO_BENCH_KUBECONFIG=$(abspath $(KUBECONFIG)) $(CARGO) bench -p zundoko-operator --bench scale

.PHONY: bench-languages
bench-languages: guest guest-langs ## Print the classic rules in Rust, Python and JavaScript side by side: size, budget, cold compile (here and in the compiler process, with its peak RSS), warm start, and per call at 5 and 100 children time, fuel and memory (release).
	$(CARGO) bench -p zundoko-operator --bench languages

.PHONY: bench-oci
bench-oci: guest fixtures ## Print pull + verify + compile to serving from a registry (36 KB, largest shipped, 16 MiB; cold and warm cache) and start to serving with the registry down (release; needs docker-registry).
	$(CARGO) bench -p zundoko-operator --bench oci

.PHONY: crds
crds: ## Regenerate deploy/crds/ from the Rust types.
	@mkdir -p deploy/crds
	$(CARGO) run -q -p zundoko-operator -- crd > deploy/crds/zundokokiyoshi.yaml

.PHONY: crds-check
crds-check: ## Fail when deploy/crds/ differs from the Rust types.
	@$(CARGO) run -q -p zundoko-operator -- crd | diff -u deploy/crds/zundokokiyoshi.yaml - \
	  || { echo "deploy/crds/ is stale: run 'make crds'" >&2; exit 1; }

# The PrometheusRule is rules.yaml's groups under a header: one source, never edited by hand
# (host/tests/monitoring.rs fails when they differ). Top-level comments are rules.yaml's own.
MONITORING := deploy/monitoring

.PHONY: monitoring
monitoring: ## Regenerate deploy/monitoring/prometheusrule.yaml from deploy/monitoring/rules.yaml.
	@{ printf '%s\n' '# Generated from rules.yaml by `make monitoring`: edit rules.yaml, not this file.' \
	  'apiVersion: monitoring.coreos.com/v1' 'kind: PrometheusRule' 'metadata:' '  name: zundoko-operator' \
	  '  namespace: zundoko-system' '  labels:' '    app.kubernetes.io/name: zundoko-operator' 'spec:'; \
	  sed -e '/^#/d' -e 's/^\(.\)/  \1/' $(MONITORING)/rules.yaml; } > $(MONITORING)/prometheusrule.yaml
	@echo "$(MONITORING)/prometheusrule.yaml <- $(MONITORING)/rules.yaml"

.PHONY: dev-apiserver
dev-apiserver: ## Run the local API server in the foreground (PORT=, KUBECONFIG_OUT=).
	$(CARGO) run -q -p zundoko-apiserver -- --port $(PORT) $(if $(KUBECONFIG_OUT),--kubeconfig-out $(KUBECONFIG_OUT))

.PHONY: clean
clean: ## Remove build output.
	$(CARGO) clean

# Running in a cluster (deploy/). kubectl talks to its current context, chosen as usual
# (KUBECONFIG, `kubectl config use-context`); KUBECTL="kubectl --context NAME" also works.
KUBECTL ?= kubectl
# The image `make deploy` runs; empty keeps deploy/kustomization.yaml's.
IMG ?=
# The rule set `make deploy` installs (default classic) and `make swap` switches to.
RULES ?=
DEPLOY_MODULE := deploy/module/rules.wasm
# One field manager for every server-side apply from here, so deploy and swap never conflict.
FIELD_MANAGER := zundoko-deploy

.PHONY: image
image: ## Build the operator image with docker (IMG=registry/name:tag).
	@test -n "$(IMG)" || { echo "usage: make image IMG=registry/name:tag" >&2; exit 1; }
	docker build -t $(IMG) .

# kube-apiserver refuses a ConfigMap whose data and binaryData values hold more than
# corev1.MaxSecretSize, 1 MiB, counted decoded (the module's base64 in transit does not count):
# `ConfigMap "zundoko-rules" is invalid: []: Too long: may not be more than 1048576 bytes`.
# The module is the ConfigMap's only value, so it may be 1 MiB and no more; a bigger one (a
# Python or JavaScript component) is refused here, before kubectl, and goes by registry or file.
CONFIGMAP_MAX_BYTES := 1048576

# RULES= names a rule set in rules/ (my-rules, zundoko-strict-ja) or a shipped one by its
# short name (classic, strict-ja).
.PHONY: deploy-module
deploy-module: guest ## Copy a rules component to deploy/module/ for kustomize, refused over a ConfigMap's 1 MiB (RULES=classic|strict-ja|<name in rules/>).
	@r=$(or $(RULES),classic); for f in $(MODULES)/$$r.wasm $(MODULES)/zundoko-$$r.wasm; do \
	  if [ -f $$f ]; then size=$$(stat -c %s $$f); if [ $$size -gt $(CONFIGMAP_MAX_BYTES) ]; then \
	    echo "$$f is $$size bytes, over the $(CONFIGMAP_MAX_BYTES) bytes (1 MiB) a ConfigMap may hold: the API server would refuse it" \
	      "(ConfigMap \"zundoko-rules\" is invalid: []: Too long: may not be more than $(CONFIGMAP_MAX_BYTES) bytes)." >&2; \
	    echo "Serve it from a registry instead (make push MODULE=$$f REF=REGISTRY/REPOSITORY:TAG, then a ZundokoRules" \
	      "with spec.source.oci.reference, or the operator's --module-oci), or as a file on a volume the pod mounts (--module FILE)." >&2; \
	    exit 1; fi; \
	  cp $$f $(DEPLOY_MODULE); echo "$(DEPLOY_MODULE) <- $$f"; exit 0; fi; done; \
	  echo "no rules '$$r' in $(MODULES)/: RULES=classic, strict-ja or a rule set in rules/ ($(RULE_SETS))" >&2; exit 1

$(DEPLOY_MODULE):
	$(MAKE) --no-print-directory deploy-module

# Rendered, then applied server-side: the module's binaryData stays clear of client-side
# apply's 256 KiB annotation limit. IMG= replaces the one `image:` line of the render
# (kubectl kustomize cannot edit; host/tests/deploy.rs checks there is exactly one).
.PHONY: deploy
deploy: deploy-module ## Install CRDs, RBAC, the module ConfigMap and the operator in kubectl's cluster (IMG=, RULES=).
	set -o pipefail; $(KUBECTL) kustomize deploy/ \
	  $(if $(IMG),| sed -E 's#^( *(- )?image:) .*#\1 $(IMG)#') \
	  | $(KUBECTL) apply --server-side --field-manager=$(FIELD_MANAGER) -f -

.PHONY: undeploy
undeploy: $(DEPLOY_MODULE) ## Remove what `make deploy` installed, CRDs included (so every Hikawa goes too).
	$(KUBECTL) delete -k deploy/ --ignore-not-found

# Only the ConfigMap changes: no rollout, the running operator hot-swaps the module.
# --force-conflicts: a swap is an explicit request, it wins over any other writer.
.PHONY: swap
swap: ## Switch the cluster's rules: rebuild, replace the module ConfigMap server-side (RULES=classic|strict-ja|<name in rules/>).
	@test -n "$(RULES)" || { echo "usage: make swap RULES=classic|strict-ja|<a rule set in rules/>" >&2; exit 1; }
	$(MAKE) --no-print-directory deploy-module RULES=$(RULES)
	$(KUBECTL) apply --server-side --field-manager=$(FIELD_MANAGER) --force-conflicts -k deploy/module/

.PHONY: deploy-check
deploy-check: guest ## Render deploy/ offline and check it: RBAC, pod security, module ConfigMap, CRDs.
	$(CARGO) test -p zundoko-operator --test deploy
