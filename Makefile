# Airlock — see README.md.
GO       ?= go
PKGS     := ./...
BENCHTIME ?= 10s
AUDIT_EVENTS ?= 5000000
NPM      ?= npm
# npm ci writes this file last; older than the lockfile = reinstall.
MCP_NODE_MODULES := test/mcp/node_modules/.package-lock.json

.PHONY: run build test bench lint generate check-generated

## run: start the server on its embedded default (private Postgres under ./.airlock)
run:
	$(GO) run ./cmd/server

## build: build the server, the airlock CLI and auditctl into bin/
build:
	$(GO) build -o bin/airlock-server ./cmd/server
	$(GO) build -o bin/airlock ./cmd/airlock
	$(GO) build -o bin/auditctl ./cmd/auditctl

## test: every test, race detector on, against real Postgres
##       (first installs test/mcp's npm packages from its lockfile when missing or stale)
test: $(MCP_NODE_MODULES)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## the official MCP TypeScript SDK and server-everything, which test/connectors drives
$(MCP_NODE_MODULES): test/mcp/package-lock.json test/mcp/package.json
	$(NPM) ci --prefix test/mcp --no-audit --no-fund
	@touch $@

## bench: the submit-path benchmark (prints throughput, p50/p99 and the ratio to the database floor),
##        the audit benchmark (seeds $(AUDIT_EVENTS) events: queries, verification, sealing on vs off),
##        the console fan-out benchmark (1,000 websocket reviewers on two instances)
##        the sandbox overhead (worker path vs bare bwrap)
##        and the MCP connectors' overhead (gateway and proxy vs the same upstream called directly)
bench:
	$(GO) run ./cmd/bench -duration $(BENCHTIME)
	$(GO) run ./cmd/bench -audit -events $(AUDIT_EVENTS) -duration $(BENCHTIME)
	$(GO) run ./cmd/fanoutbench -duration $(BENCHTIME)
	$(GO) run ./cmd/sandboxbench -n 200
	$(GO) run ./cmd/mcpbench -duration $(BENCHTIME)

## lint: go vet, staticcheck and gofmt
lint:
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## check-generated: fail when the committed generated code (templ) is stale
check-generated:
	@$(GO) tool templ generate >/dev/null 2>&1 || $(GO) tool templ generate
	@out=$$(git status --porcelain -- web); if [ -n "$$out" ]; then echo "generated code is stale (run make generate and commit):"; echo "$$out"; exit 1; fi

## generate: regenerate generated code
generate:
	$(GO) generate $(PKGS)
