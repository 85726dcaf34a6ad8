# mediajobs: the two commands the README opens with are `make run` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
LOCAL_DIR ?= .local

.PHONY: help deps need-kubectl media-tools test-tools bench-tools run run-cluster test typecheck lint unit test-unit test-report bench chaos clean chart-check need-helm

help:
	@echo "make run    - run the service locally (local cluster; see README)"
	@echo "make test   - typecheck, lint and run every test (FILES=\"a.test.ts b.test.ts\": only those)"
	@echo "make test-unit   - the tests that need no service (about 35 s)"
	@echo "make test-report - run the tests (or FILES) and write the time report to test-report.json"
	@echo "make bench  - run the benchmarks and print their figures"
	@echo "make chaos  - run the fault suite at full size and print its figures"
	@echo "make soak   - bursts of load and idle gaps on compressed timers: memory, LISTs per kind while idle, warning lines"
	@echo "make soak-idle - local mode idle for 45 minutes on real timers, then 20 jobs: LISTs and warnings while idle"
	@echo "make chart-check - helm lint + helm template, compared with deploy/base and dry-run applied (needs helm)"

# Install npm packages when the lock file changed since the last install;
# flock keeps two concurrent makes from installing over each other.
node_modules/.installed: package-lock.json package.json
	flock .npm-install.lock npm ci --no-audit --no-fund
	@touch $@

deps: node_modules/.installed

# Only the tests drive the real kubectl; `make run` works without it.
need-kubectl:
	@command -v kubectl >/dev/null || { echo "kubectl is required (see README)"; exit 1; }

# yt-dlp and ffmpeg come from Debian's packages (root, or sudo, needed once); so does
# openssl, with which the local cluster makes its TLS certificate on first start.
media-tools:
	@if ! command -v yt-dlp >/dev/null || ! command -v ffmpeg >/dev/null || ! command -v openssl >/dev/null; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq yt-dlp ffmpeg openssl; \
	fi

# The rate limit's tests start their own redis-server (Debian's package) on a free loopback port;
# the local cluster is also tested with the official Python client (Debian's python3-kubernetes);
# the web console's tests and benchmark drive Debian's Chromium (test/support/browser.ts).
test-tools: media-tools
	@if ! command -v redis-server >/dev/null; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server; \
	fi
	@if ! /usr/bin/python3 -c 'import kubernetes' 2>/dev/null; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3-kubernetes; \
	fi
	@if [ ! -x /usr/bin/chromium ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	fi

# rclone (Debian's package) is the yardstick of the storage upload benchmark only; the tests never need it.
bench-tools:
	@if ! command -v rclone >/dev/null; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq rclone; \
	fi

# The whole service locally: local cluster, embedded Postgres (unless DATABASE_URL), operator, gateway.
run: deps media-tools
	npx tsx scripts/local-mode.ts

# Only the local cluster, in the foreground.
run-cluster: deps
	mkdir -p $(LOCAL_DIR)
	npx tsx local-cluster/src/cli.ts --kubeconfig $(LOCAL_DIR)/kubeconfig --state $(LOCAL_DIR)/cluster-state --work-dir $(LOCAL_DIR)/cluster-work --port $${LOCAL_CLUSTER_PORT:-6443}

# In make test both run beside the tests (below), niced: they fill the CPU the tests leave while they wait.
NICE ?=
typecheck: deps
	$(NICE) npx tsc -p tsconfig.json --noEmit

lint: deps
	$(NICE) npx eslint .

# The tests: every one, or only FILES="a.test.ts b.test.ts" (.mocharc.cjs; `npx mocha FILE` does the same).
# Every one: in mocha's parallel mode, a worker per core (TEST_JOBS=n to change it); FILES: one after another.
# TEST_SET=all: a TEST_SET=unit left in the environment does not shrink make test.
FILES ?=
unit: deps need-kubectl test-tools
	TEST_SET=all npx mocha $(FILES)

# The type check and lint run at the same time as the tests, niced (they print nothing when they pass, so the
# tests' closing count line stays the last line); a failure of any of the three fails make test once all are done.
# docs/test-speed.md has the figures.
test: need-kubectl
	@$(MAKE) --no-print-directory -j3 NICE="nice -n 10" typecheck lint unit

# The tests that need no service (the UNIT list of .mocharc.cjs): no PostgreSQL, local cluster, yt-dlp or
# ffmpeg, storage emulator or Redis, so nothing to install but the npm packages. About 35 s on 2 cores.
test-unit: deps
	TEST_SET=unit npx mocha

# The tests (every one, or FILES) with the time report also written as JSON to test-report.json (no typecheck, lint).
test-report: deps need-kubectl test-tools
	TEST_SET=all TEST_REPORT_JSON=test-report.json npx mocha $(FILES)

# Each benchmark prints the figures its issue names; run them one at a time on a quiet machine.
bench: deps bench-tools test-tools
	npx tsx local-cluster/bench/create-watch.ts
	npx tsx local-cluster/bench/apply.ts
	npx tsx local-cluster/bench/cel-cost.ts
	npx tsx api-gateway/bench/post-jobs.ts
	npx tsx api-gateway/bench/idempotency.ts
	npx tsx api-gateway/bench/rate-limit.ts
	npx tsx api-gateway/bench/metrics.ts
	npx tsx api-gateway/bench/batches.ts
	npx tsx api-gateway/bench/usage.ts
	npx tsx api-gateway/bench/console.ts
	npx tsx operator/bench/submit-to-job.ts
	npx tsx operator/bench/cancel.ts
	npx tsx operator/bench/api-writes.ts
	npx tsx operator/bench/claims-check.ts
	npx tsx operator/bench/capacity.ts
	npx tsx runner-image/bench/runner-vs-bare.ts
	npx tsx runner-image/bench/sizing.ts
	npx tsx runner-image/bench/clip-bytes.ts
	npx tsx runner-image/bench/proxy-chain.ts
	npx tsx lib/bench/upload-vs-rclone.ts
	npx tsx lib/bench/webhook-signing.ts

# Issues 16 and 34: bursts of load and idle gaps for SOAK_SECONDS (default 1800) with the operator's timers compressed;
# prints each process's memory, the LISTs per kind while idle and the warning lines (test/soak/soak.ts). A reduced run
# of about two minutes is in make test (test/soak/idle-soak.test.ts).
.PHONY: soak soak-idle
soak: deps
	npx tsx test/soak/soak.ts

# Issue 34: local mode left idle for IDLE_SECONDS (default 2700) on real timers, then given 20 jobs; prints the LISTs per
# kind and the warning lines while idle, and how the jobs ended (test/soak/idle-local-mode.ts).
soak-idle: deps media-tools
	npx tsx test/soak/idle-local-mode.ts

# The fault suite at full size (issue 16): operator SIGKILLs, runner kills, an API server restart; a reduced
# version of each runs in make test (test/chaos/*.test.ts). Sizes: CHAOS_* variables, test/chaos/run.ts.
chaos: deps need-kubectl media-tools
	npx tsx test/chaos/run.ts

# The Helm chart on a machine that has helm (the project's machines cannot install it; docs/adr/0019):
# helm lint, then helm template compared field by field with deploy/base and applied with
# kubectl apply --dry-run=server to a local cluster (scripts/chart-check.ts). Not part of `make test`.
need-helm:
	@command -v helm >/dev/null || { echo "make chart-check needs helm 3 on PATH (https://helm.sh/docs/intro/install/); it is not installed here, and make test checks deploy/ without it"; exit 1; }

chart-check: need-helm deps need-kubectl
	helm lint charts/mediajobs --namespace mediajobs --set secrets.existingSecret=mediajobs-secrets
	npx tsx scripts/chart-check.ts

# As root with a private checkout the database lives outside (README, ADR 0008), linked from $(LOCAL_DIR)/postgres.
# .cache holds the test fixtures made once per checkout (test/support/fixture-cache.ts).
clean:
	@if [ -L $(LOCAL_DIR)/postgres ]; then \
	  case "$$(readlink $(LOCAL_DIR)/postgres)" in /var/lib/mediajobs/state/*) rm -rf "$$(dirname "$$(readlink $(LOCAL_DIR)/postgres)")";; esac; \
	fi
	rm -rf $(LOCAL_DIR) node_modules .cache
