// Package connectors holds Airlock's connector tests: real MCP software that
// no one here wrote — the official TypeScript SDK's client and
// @modelcontextprotocol/server-everything, installed from test/mcp's
// package-lock.json — driven through the MCP gateway (/mcp/{name}) and the
// stdio proxy (airlock mcp proxy) of a real server on the loopback.
//
// The tests need node and test/mcp/node_modules (make test runs npm ci
// first; by hand: npm ci --prefix test/mcp). Without them they fail, like
// every other test missing a tool it needs.
package connectors
