# The verbs a user types. `make demo` and `make test` are the README's two set-up commands.
SHELL := /bin/bash
.DEFAULT_GOAL := help

CARGO   ?= cargo
MODULES := target/modules
# Test fixtures (misbehaving modules) are built apart from the shipped modules.
FIXTURES := target/fixtures
# Every rule set is a crate of its own in rules/<name>/ (dir name = crate name = module name);
# `make new-rules` scaffolds one, `make rules NAME=` builds one, `make guest` builds them all.
RULE_SETS := $(patsubst rules/%/Cargo.toml,%,$(wildcard rules/*/Cargo.toml))
# The fixtures crate's builds, one Cargo feature each (guest/fixtures/Cargo.toml).
FIXTURE_BUILDS := hostile huge-name escape-name never-kiyoshi after-kiyoshi flaky burn
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

# componentize CORE OUTPUT (shell): wrap a built core module into a component, check its size.
componentize = mkdir -p $$(dirname $(2)) && $(COMPONENTIZE) $(1) $(2) \
	&& size=$$(stat -c %s $(2)) && { [ $$size -le $(GUEST_MAX_BYTES) ] \
	|| { echo "$(2) is $$size bytes, over the $(GUEST_MAX_BYTES)-byte budget" >&2; exit 1; }; }

.PHONY: guest
guest: setup $(COMPONENTIZE) ## Build every rule set in rules/ into target/modules/<name>.wasm.
	$(call wasm-build,$(foreach r,$(RULE_SETS),-p $(r)))
	@set -e; for r in $(RULE_SETS); do $(call componentize,$(GUEST_OUT_DIR)/$${r//-/_}.wasm,$(MODULES)/$$r.wasm); done

.PHONY: rules
rules: setup $(COMPONENTIZE) ## Build one rule set, rules/NAME/, into target/modules/NAME.wasm (NAME=).
	@test -n "$(NAME)" || { echo "usage: make rules NAME=<a directory in rules/>" >&2; exit 1; }
	@test -f rules/$(NAME)/Cargo.toml || { echo "no rule set rules/$(NAME)/ (make new-rules NAME=$(NAME) creates one)" >&2; exit 1; }
	$(call wasm-build,-p $(NAME))
	@$(call componentize,$(GUEST_OUT_DIR)/$(subst -,_,$(NAME)).wasm,$(MODULES)/$(NAME).wasm)

.PHONY: new-rules
new-rules: ## Scaffold a new rule set crate in rules/NAME/ with native tests (NAME=my-rules).
	@scripts/new-rules.sh "$(NAME)"

.PHONY: fixtures
fixtures: setup $(COMPONENTIZE) ## Build the test fixtures (misbehaving modules) into target/fixtures/.
	@set -e; for f in $(FIXTURE_BUILDS); do \
	  $(call wasm-build,-q -p zundoko-fixtures --features $$f); \
	  $(call componentize,$(GUEST_OUT_DIR)/zundoko_fixtures.wasm,$(FIXTURES)/zundoko-$$f.wasm); done

.PHONY: build
build: guest ## Build the guest components and the operator.
	$(CARGO) build -p zundoko-operator

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

.PHONY: check-module
check-module: guest ## Validate a module and print its metadata (MODULE=).
	$(CARGO) run -q -p zundoko-operator -- check --module $(or $(MODULE),$(MODULES)/zundoko-classic.wasm)

.PHONY: demo
demo: guest ## The main job, no cluster needed: local API server + operator + the sample Hikawa, sung word by word.
	$(CARGO) build -p zundoko-operator -p zundoko-apiserver
	MODULE=$(or $(MODULE),$(MODULES)/zundoko-classic.wasm) HIKAWA=$(HIKAWA) scripts/demo.sh

# Tests that need promtool and prometheus (Debian's `prometheus` package) are #[ignore]d with
# that reason: `make test` runs them when both are installed, and always in CI (CI=true), where
# a missing one fails them. Elsewhere cargo lists them as ignored and the last line says so.
OPTIONAL_TOOLS := promtool prometheus
HAVE_OPTIONAL_TOOLS := $(shell for t in $(OPTIONAL_TOOLS); do command -v $$t > /dev/null || exit 0; done; echo yes)
RUN_IGNORED := $(or $(filter true 1,$(CI)),$(HAVE_OPTIONAL_TOOLS))

.PHONY: test
test: guest fixtures ## Run the whole test suite (native rules, sandbox with the built components, API server).
	$(CARGO) test --workspace --no-fail-fast $(if $(RUN_IGNORED),-- --include-ignored)
	@$(if $(RUN_IGNORED),,echo "make test: the monitoring tests that need $(OPTIONAL_TOOLS) were ignored (not installed: apt-get install prometheus)")

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
