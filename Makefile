# The test command CI runs (see README): formatting, vet (and unreachable code),
# and every test with the race detector.
GO ?= go

.PHONY: test build fmt-check vet
test: fmt-check vet
	$(GO) test -race -count=1 -timeout 20m ./...

build:
	$(GO) build -o bin/strata ./cmd/strata

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# vet also fails on code that no program or test reaches (golang.org/x/tools'
# deadcode, pinned in go.mod's tool directive).
vet:
	$(GO) vet ./...
	@out=$$($(GO) tool deadcode -test ./...); \
	if [ -n "$$out" ]; then echo "unreachable code (remove it or use it):"; echo "$$out"; exit 1; fi

# Strata vs Apache Kafka 4.x on this machine (minutes; needs java and mvn). Not part
# of test: see bench/run.sh and docs/benchmarks.md.
.PHONY: bench-kafka
bench-kafka:
	bash bench/run.sh $(BENCH_ARGS)

# Strata over PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL: produce, consume and
# connection setup rates (about 4 minutes; needs openssl). See bench/tls.sh and
# docs/benchmarks.md.
.PHONY: bench-tls
bench-tls:
	bash bench/tls.sh

# The long fault-injection campaign (not in CI): CHAOS_RUNS multi-process runs and
# CHAOS_MEM_RUNS in-process runs from CHAOS_SEED on; rewrites the results in docs/reliability.md.
.PHONY: chaos
chaos:
	CHAOS_CAMPAIGN=1 CHAOS_REPORT=$(CURDIR)/docs/reliability.md $(GO) test -count=1 -timeout 4h -run '^TestCampaign$$' -v ./internal/chaos/
