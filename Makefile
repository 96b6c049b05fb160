# The test command CI runs (see README): formatting, vet, and every test with the race detector.
GO ?= go

.PHONY: test build fmt-check vet
test: fmt-check vet
	$(GO) test -race -count=1 -timeout 20m ./...

build:
	$(GO) build -o bin/strata ./cmd/strata

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Strata vs Apache Kafka 4.x on this machine (minutes; needs java and mvn). Not part
# of test: see bench/run.sh and docs/benchmarks.md.
.PHONY: bench-kafka
bench-kafka:
	bash bench/run.sh
