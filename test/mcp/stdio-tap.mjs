// stdio-tap.mjs: a stdio MCP server wrapper for Airlock's connector tests.
//
//   node stdio-tap.mjs SCRIPT [ARGS...]
//
// runs `node SCRIPT ARGS...` (a stdio MCP server) and relays its stdin and
// stdout unchanged, line by line, recording every tools/call request that
// passes on the way in. It answers one request itself, never passing it on:
// "tap/calls" -> {"calls": [{"name": ..., "arguments": {...}}, ...]}, the
// tools/call requests the server was sent so far. A test asks it through
// the proxy to show which calls reached the server and which did not.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const [script, ...args] = process.argv.slice(2);
if (!script) {
  console.error("usage: node stdio-tap.mjs SCRIPT [ARGS...]");
  process.exit(2);
}
const child = spawn(process.execPath, [script, ...args], { stdio: ["pipe", "pipe", "inherit"] });
const calls = [];

function record(msg) {
  if (msg && typeof msg === "object" && msg.method === "tools/call") {
    calls.push({ name: msg.params?.name ?? null, arguments: msg.params?.arguments ?? {} });
  }
}

createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on("line", (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
      msg = undefined;
    }
    if (msg && !Array.isArray(msg) && msg.method === "tap/calls" && msg.id !== undefined) {
      process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: { calls } }) + "\n");
      return;
    }
    for (const m of Array.isArray(msg) ? msg : [msg]) record(m);
    child.stdin.write(line + "\n");
  })
  .on("close", () => child.stdin.end());

child.stdout.pipe(process.stdout);
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
