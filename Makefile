# Gaffer's everyday commands. The README's quick start needs none of them.
GO ?= go

.PHONY: build test race vet fmt ci dev bench chaos claim-model openapi migration clean

build:            ## build bin/gaffer
	$(GO) build -o bin/gaffer ./cmd/gaffer

test:             ## the test suite (starts its own PostgreSQL)
	$(GO) test ./...

race:             ## the test suite under the race detector
	$(GO) test -race ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

ci:               ## what CI runs
	./.ci/run

dev:              ## a local cluster with a throwaway database
	$(GO) run ./cmd/gaffer dev

openapi:          ## regenerate api/openapi.json from the Go routes and types
	$(GO) generate ./api

migration:        ## write the routine migration from store/schema: NAME=snake_name [EXPAND=1]
	$(GO) run ./store/internal/migrategen -name "$(NAME)" $(if $(EXPAND),-expand)

chaos:            ## the 30-minute chaos profile (CHAOS_SEED=n replays a schedule), then the claim model's long budget
	CHAOS_PROFILE=long CHAOS_REPORT=chaos-report.json $(GO) test -run 'TestChaos$$' -v -timeout 60m ./chaos
	$(MAKE) claim-model

claim-model:      ## the claim's model test on its long budget (CLAIM_MODEL_SEED=n replays a seed)
	CLAIM_MODEL_STEPS=20000 CLAIM_MODEL_SEEDS=4 $(GO) test -run 'TestClaimModel' -v -timeout 4h ./store

bench:            ## work off a 100,000-job backlog (throwaway database)
	$(GO) run ./cmd/gaffer bench backlog --jobs 100000

clean:
	rm -rf bin
