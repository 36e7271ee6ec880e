// client.mjs: the official MCP TypeScript SDK's Client, driven by Airlock's
// Go connector tests (test/connectors).
//
//   node client.mjs '<config JSON>'
//
// config:
//   {"transport": "http", "url": "http://127.0.0.1:N/mcp/NAME", "token": "..."}
//   {"transport": "stdio", "command": "airlock", "args": [...], "env": {...}, "cwd": "..."}
//   optional "calls": [step, ...]: run these steps one after the other, then
//   exit; without it the steps are read from stdin, one JSON object a line,
//   until stdin closes, each started as soon as it is read (a call held by
//   Airlock does not hold the next step), each reply carrying its step's id.
//
// step: {"id": any, "method": "tools/list"}
//       {"id": any, "method": "tools/call", "name": "echo", "arguments": {...}, "timeout_ms": 60000}
//       {"id": any, "method": "ping"}
//       {"id": any, "method": "request", "request": {"method": "...", "params": {...}}}
//         (any other request, its result returned as the server sent it)
//
// Every line printed on stdout is one JSON object:
//   {"event": "connected", "server": {name, version}, "protocol": "..."}
//   {"event": "connect_error", "error": {"message": "...", "code": N}}  (then exit code 1)
//   {"id": ..., "result": <the SDK's result>}
//   {"id": ..., "error": {"message": "...", "code": N}}  (a JSON-RPC or transport error)
//   {"event": "closed"}                                  (the transport closed)
// Diagnostics go to stderr.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResultSchema } from "@modelcontextprotocol/sdk/types.js";

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function errorOf(err) {
  const out = { message: String(err && err.message ? err.message : err) };
  if (err && typeof err.code === "number") out.code = err.code;
  return out;
}

function transportOf(cfg) {
  switch (cfg.transport) {
    case "http": {
      const headers = {};
      if (cfg.token) headers.Authorization = `Bearer ${cfg.token}`;
      return new StreamableHTTPClientTransport(new URL(cfg.url), {
        requestInit: { headers },
        // The tests stop servers on purpose: report, do not reconnect.
        reconnectionOptions: {
          maxRetries: 0,
          initialReconnectionDelay: 100,
          maxReconnectionDelay: 100,
          reconnectionDelayGrowFactor: 1,
        },
      });
    }
    case "stdio":
      return new StdioClientTransport({
        command: cfg.command,
        args: cfg.args ?? [],
        env: cfg.env ?? {},
        cwd: cfg.cwd,
        stderr: "inherit",
      });
    default:
      throw new Error(`unknown transport ${JSON.stringify(cfg.transport)}`);
  }
}

async function run(client, step) {
  const opts = { timeout: step.timeout_ms ?? 60000 };
  switch (step.method) {
    case "tools/list":
      return client.listTools(step.params, opts);
    case "tools/call":
      return client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, opts);
    case "ping":
      return client.ping(opts);
    case "request":
      return client.request(step.request, ResultSchema, opts);
    default:
      throw new Error(`unknown method ${JSON.stringify(step.method)}`);
  }
}

async function main() {
  const cfg = JSON.parse(process.argv[2] ?? "{}");
  const client = new Client({ name: "airlock-connector-test", version: "1.0.0" }, { capabilities: {} });
  const transport = transportOf(cfg);
  transport.onclose = () => emit({ event: "closed" });
  try {
    await client.connect(transport);
  } catch (err) {
    emit({ event: "connect_error", error: errorOf(err) });
    process.exitCode = 1;
    await client.close().catch(() => {});
    return;
  }
  emit({ event: "connected", server: client.getServerVersion(), protocol: transport.protocolVersion ?? null });

  const step = async (s) => {
    try {
      emit({ id: s.id ?? null, result: await run(client, s) });
    } catch (err) {
      emit({ id: s.id ?? null, error: errorOf(err) });
    }
  };
  if (Array.isArray(cfg.calls)) {
    for (const s of cfg.calls) await step(s);
  } else {
    // Each line starts a step at once; a held call does not hold the next
    // one. Replies come as steps finish, each with its step's id.
    const running = [];
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of lines) {
      if (line.trim() === "") continue;
      let s;
      try {
        s = JSON.parse(line);
      } catch (err) {
        emit({ id: null, error: { message: `bad step: ${err.message}` } });
        continue;
      }
      running.push(step(s));
    }
    await Promise.all(running);
  }
  await client.close().catch((err) => console.error("close:", err));
}

main().catch((err) => {
  console.error(err);
  process.exit(2);
});
