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
##       (first installs test/mcp's npm packages from its lockfile when missing or stale).
##       internal/httpapi runs in ~6 min alone, ~11 min beside internal/web's browser tests,
##       and took 19.5 min on a machine busy with other test runs: the timeout stops a hang,
##       not a slow machine.
test: $(MCP_NODE_MODULES)
	$(GO) test -race -count=1 -timeout 25m $(PKGS)

## the official MCP TypeScript SDK and server-everything, which test/connectors drives
$(MCP_NODE_MODULES): test/mcp/package-lock.json test/mcp/package.json
	$(NPM) ci --prefix test/mcp --no-audit --no-fund
	@touch $@

## bench: every benchmark once, then issue 14's performance table (cmd/benchreport): each row with its
##        target and PASS/FAIL. The benchmarks append their rows to $(BENCH_RESULTS); a benchmark that
##        fails leaves its rows MISSING, and make bench fails when any benchmark or any row failed.
##        - the submit path (throughput, p50/p99, the ratio to the database floor and to the bare floor)
##        - the wake-up of 200 long-polling agents and the console fan-out to 1,000 and 5,000 websocket
##          reviewers, on two instances
##        - the sandbox overhead (worker path vs bare bwrap)
##        - the MCP connectors' overhead (gateway and proxy vs the same upstream called directly)
##        - and, last, the audit benchmark (seeds $(AUDIT_EVENTS) events: queries, verification, sealing
##          on vs off; the table's correlation-ID row is stated at 20 M: AUDIT_EVENTS=20000000 make bench):
##          it writes and deletes up to 17 GB, and the machine is slower for minutes after
BENCH_RESULTS ?= bin/bench-results.jsonl
bench:
	@mkdir -p $(dir $(BENCH_RESULTS)); rm -f $(BENCH_RESULTS); failed=""; \
	$(GO) run ./cmd/bench -duration $(BENCHTIME) -results $(BENCH_RESULTS) || failed="$$failed bench"; \
	$(GO) run ./cmd/fanoutbench -reviewers 1000 -waiters 200 -duration $(BENCHTIME) -results $(BENCH_RESULTS) || failed="$$failed fanoutbench-1000"; \
	$(GO) run ./cmd/fanoutbench -reviewers 5000 -waiters 0 -duration $(BENCHTIME) -results $(BENCH_RESULTS) || failed="$$failed fanoutbench-5000"; \
	$(GO) run ./cmd/sandboxbench -n 200 -results $(BENCH_RESULTS) || failed="$$failed sandboxbench"; \
	$(GO) run ./cmd/mcpbench -duration $(BENCHTIME) || failed="$$failed mcpbench"; \
	$(GO) run ./cmd/bench -audit -events $(AUDIT_EVENTS) -duration $(BENCHTIME) -results $(BENCH_RESULTS) || failed="$$failed bench-audit"; \
	echo; $(GO) run ./cmd/benchreport $(BENCH_RESULTS) || failed="$$failed table"; \
	if [ -n "$$failed" ]; then echo "make bench: failed:$$failed"; exit 1; fi

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
