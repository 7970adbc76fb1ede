// A cpex external plugin server on the official MCP TypeScript SDK
// (McpServer + StreamableHTTPServerTransport, stateful sessions; or the
// legacy SSEServerTransport; or StdioServerTransport), written
// for mcp-extproc's tests the way the SDK's own examples build a server, so
// that the client meets Node.js's real HTTP habits: an empty chunked 202 to
// notifications, SSE answers with Content-Length, idle connections closed
// after the keep-alive timeout (Node's default 5 s).
//
// Environment:
//   PORT          port on 127.0.0.1 (0: any; the chosen one is printed)
//   KEEPALIVE_MS  server.keepAliveTimeout (default: Node's, 5000)
//   POLICY        JSON {"plugins":[{name, deny:[regex], redact:[{pattern,
//                 replacement}], hooks, mode, priority}]}
//
//   TRANSPORT     "stdio": serve one MCP session on stdin/stdout
//                 (StdioServerTransport, the sidecar's mcp.proto STDIO)
//                 instead of HTTP; the process exits when stdin ends.
//                 "sse": serve the legacy HTTP+SSE transport (MCP
//                 2024-11-05, SSEServerTransport, the sidecar's mcp.proto
//                 SSE) instead of Streamable HTTP: a GET /sse opens a
//                 session's event stream, which names the endpoint its
//                 messages are POSTed to (/messages?sessionId=ID; an
//                 unknown ID is answered 404, as the SDK's example does).
//                 Anything else: Streamable HTTP on /mcp.
//
// Over HTTP it prints one line "listening PORT" once it serves, answers
// GET /stats with {initializes, invokes, connections, sessions}, and GET
// /traces with the trace context each invoke_hook carried, oldest first (the
// last 1024): [{plugin_name, hook_type, meta: {traceparent, tracestate},
// header: {traceparent, tracestate}}], meta from the request's
// params._meta (SEP-414), header from its HTTP headers ("" when absent).
import { randomUUID } from "node:crypto";
import express from "express";
import { z } from "zod";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";

const policy = JSON.parse(process.env.POLICY ?? '{"plugins":[{"name":"TSGuard"}]}');
const plugins = new Map(policy.plugins.map((p) => [p.name, compile(p)]));
const stats = { initializes: 0, invokes: 0, connections: 0 };
const traces = [];
const maxTraces = 1024;

// recordTrace remembers the trace context one invoke_hook carried: in its
// _meta and in the HTTP request's headers (Node lower-cases their names).
function recordTrace(plugin_name, hook_type, extra) {
  const meta = extra?._meta ?? {};
  const headers = extra?.requestInfo?.headers ?? {};
  const str = (v) => (Array.isArray(v) ? v[0] : v) ?? "";
  if (traces.length === maxTraces) traces.shift();
  traces.push({
    plugin_name,
    hook_type,
    meta: { traceparent: str(meta.traceparent), tracestate: str(meta.tracestate) },
    header: { traceparent: str(headers.traceparent), tracestate: str(headers.tracestate) },
  });
}

function compile(p) {
  return {
    config: {
      name: p.name,
      kind: "external",
      description: p.description ?? "TypeScript SDK test plugin",
      hooks: p.hooks ?? [
        "tool_pre_invoke", "tool_post_invoke", "prompt_pre_fetch",
        "prompt_post_fetch", "resource_pre_fetch", "resource_post_fetch",
      ],
      mode: p.mode ?? "sequential",
      priority: p.priority ?? 50,
    },
    http: p.http ?? {},
    deny: (p.deny ?? []).map((s) => regex(s, "")),
    redact: (p.redact ?? []).map((r) => ({ re: regex(r.pattern, "g"), with: r.replacement })),
  };
}

// regex compiles a pattern written for Go's RE2 (the Go plugin's policy
// files), whose leading (?i) JavaScript spells as the flag i.
function regex(pattern, flags) {
  if (pattern.startsWith("(?i)")) return new RegExp(pattern.slice(4), flags + "i");
  return new RegExp(pattern, flags);
}

// strings yields every string in v that a policy reads (a tool's name is
// not one of them).
function* strings(v, key) {
  if (typeof v === "string") {
    if (key !== "name") yield v;
  } else if (Array.isArray(v)) {
    for (const x of v) yield* strings(x);
  } else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) yield* strings(x, k);
  }
}

// redact returns v with every redaction applied to its strings.
function redact(v, rules, key) {
  if (typeof v === "string") {
    return key === "name" ? v : rules.reduce((s, r) => s.replace(r.re, r.with), v);
  }
  if (Array.isArray(v)) return v.map((x) => redact(x, rules));
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redact(x, rules, k)]));
  }
  return v;
}

// httpHook answers cpex's HTTP, auth and identity hooks as plugin.http
// says: {tokens: {TOKEN: EMAIL}, add_headers, block_header, allow: {EMAIL:
// [permission]}, delegate_prefix, post_headers}. It returns undefined for
// other hooks.
function httpHook(plugin, hookType, payload) {
  const h = plugin.http;
  const ok = (modified) => ({ continue_processing: true, modified_payload: modified ?? null, metadata: {} });
  const block = (status, reason, headers) => ({
    continue_processing: false,
    violation: { reason, description: reason, code: "DENIED", details: {}, http_status_code: status, http_headers: headers ?? {} },
    metadata: {},
  });
  switch (hookType) {
    case "http_pre_request":
      if (h.block_header && h.block_header in payload.headers) return block(403, `${h.block_header} present`);
      return ok({ ...payload.headers, ...(h.add_headers ?? {}) });
    case "http_auth_resolve_user": {
      if (!payload.credentials) return ok(null);
      const email = (h.tokens ?? {})[payload.credentials.credentials];
      if (payload.credentials.scheme !== "Bearer" || !email) {
        return block(401, "Invalid token", { "WWW-Authenticate": "Bearer" });
      }
      return ok({ email, full_name: email.split("@")[0], is_admin: false, is_active: true });
    }
    case "http_auth_check_permission": {
      const granted = ((h.allow ?? {})[payload.user_email] ?? []).includes(payload.permission);
      return ok({ granted, reason: `${payload.user_email || "anonymous"} ${granted ? "may" : "may not"} ${payload.permission}` });
    }
    case "token_delegate": {
      const token = (h.delegate_prefix ?? "delegated-") + payload.target_name;
      return ok({ delegated_token: token, forwarded_headers: { authorization: `Bearer ${token}` } });
    }
    case "http_post_request":
      return ok(h.post_headers ?? {});
  }
  return undefined;
}

// listHook answers the list hooks (tools_post_list, prompts_post_list,
// resources_post_list): the items any of the plugin's deny patterns
// matches (in a description or another string, never the name) are
// dropped from the list.
function listHook(plugin, payload) {
  const key = ["tools", "prompts", "resources", "resourceTemplates"].find((k) => Array.isArray(payload[k]));
  if (!key) return { continue_processing: true, modified_payload: null, metadata: {} };
  const kept = payload[key].filter((item) => ![...strings(item)].some((s) => plugin.deny.some((re) => re.test(s))));
  if (kept.length === payload[key].length) return { continue_processing: true, modified_payload: null, metadata: {} };
  return { continue_processing: true, modified_payload: { ...payload, [key]: kept }, metadata: {} };
}

function runHook(plugin, hookType, payload) {
  const answer = httpHook(plugin, hookType, payload);
  if (answer) return answer;
  if (hookType.endsWith("_post_list")) return listHook(plugin, payload);
  for (const s of strings(payload)) {
    const hit = plugin.deny.find((re) => re.test(s));
    if (hit) {
      return {
        continue_processing: false,
        violation: {
          reason: "Denied by policy",
          description: `matched ${hit.source} in ${hookType}`,
          code: "DENIED",
          details: { pattern: hit.source },
        },
        metadata: {},
      };
    }
  }
  const out = redact(payload, plugin.redact);
  const changed = JSON.stringify(out) !== JSON.stringify(payload);
  return { continue_processing: true, modified_payload: changed ? out : null, metadata: {} };
}

function text(obj) {
  return { content: [{ type: "text", text: JSON.stringify(obj, null, 2) }] };
}

function newServer() {
  const server = new McpServer({ name: "tsplugin", version: "1.0.0" });
  server.registerTool(
    "get_plugin_config",
    { description: "The config of one plugin", inputSchema: { name: z.string() } },
    async ({ name }) => text(plugins.get(name)?.config ?? {}),
  );
  server.registerTool("get_plugin_configs", { description: "Every plugin's config" }, async () =>
    text([...plugins.values()].map((p) => p.config)),
  );
  server.registerTool(
    "invoke_hook",
    {
      description: "Run one hook of one plugin",
      inputSchema: {
        hook_type: z.string(),
        plugin_name: z.string(),
        payload: z.any(),
        context: z.any().optional(),
      },
    },
    async ({ hook_type, plugin_name, payload }, extra) => {
      stats.invokes++;
      recordTrace(plugin_name, hook_type, extra);
      const plugin = plugins.get(plugin_name);
      if (!plugin) {
        return text({
          plugin_name,
          error: { message: `unknown plugin ${plugin_name}`, plugin_name, code: "", details: {}, mcp_error_code: -32603 },
        });
      }
      return text({ plugin_name, result: runHook(plugin, hook_type, payload) });
    },
  );
  return server;
}

if (process.env.TRANSPORT === "stdio") {
  const transport = new StdioServerTransport();
  transport.onclose = () => process.exit(0);
  process.stdin.on("end", () => process.exit(0));
  await newServer().connect(transport);
  console.error(`serving on stdio, pid ${process.pid}`);
} else {
  serveHTTP();
}

// serveHTTP serves the SDK's own stateful example's session handling, on
// Streamable HTTP or (TRANSPORT=sse) the legacy HTTP+SSE transport.
function serveHTTP() {

  const transports = {};
  const app = express();
  app.use(express.json({ limit: "4mb" }));

  app.get("/stats", (req, res) => {
    if (!req.socket.statsOnly) {
      req.socket.statsOnly = true; // not one of the connections under test
      stats.connections--;
    }
    res.json({ ...stats, sessions: Object.keys(transports).length });
  });

  app.get("/traces", (req, res) => {
    if (!req.socket.statsOnly) {
      req.socket.statsOnly = true;
      stats.connections--;
    }
    res.json(traces);
  });

  if (process.env.TRANSPORT === "sse") serveSSE(app, transports);
  else serveStreamable(app, transports);

  const httpServer = app.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
    console.log(`listening ${httpServer.address().port}`);
  });
  if (process.env.KEEPALIVE_MS) httpServer.keepAliveTimeout = Number(process.env.KEEPALIVE_MS);
  httpServer.on("connection", () => stats.connections++);
  httpServer.on("error", (err) => {
    console.error(`listen: ${err.message}`);
    process.exit(3);
  });
  for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
}

// serveStreamable serves Streamable HTTP on app's /mcp: one McpServer and
// StreamableHTTPServerTransport per initialize, kept in transports by
// session id until it closes.
function serveStreamable(app, transports) {
  app.post("/mcp", async (req, res) => {
    const sid = req.headers["mcp-session-id"];
    let transport = sid ? transports[sid] : undefined;
    if (!transport) {
      if (sid || !isInitializeRequest(req.body)) {
        res.status(400).json({
          jsonrpc: "2.0",
          error: { code: -32000, message: "Bad Request: No valid session ID provided" },
          id: null,
        });
        return;
      }
      stats.initializes++;
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports[id] = transport;
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) delete transports[transport.sessionId];
      };
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, req.body);
  });

  async function sessionRequest(req, res) {
    const sid = req.headers["mcp-session-id"];
    const transport = sid ? transports[sid] : undefined;
    if (!transport) {
      res.status(400).send("Invalid or missing session ID");
      return;
    }
    await transport.handleRequest(req, res);
  }
  app.get("/mcp", sessionRequest);
  app.delete("/mcp", sessionRequest);
}

// serveSSE serves the legacy HTTP+SSE transport on app: one McpServer and
// SSEServerTransport per GET /sse, kept in transports by session id until
// its stream closes.
function serveSSE(app, transports) {
  app.get("/sse", async (req, res) => {
    const transport = new SSEServerTransport("/messages", res);
    const id = transport.sessionId;
    transports[id] = transport;
    transport.onclose = () => delete transports[id];
    try {
      await newServer().connect(transport);
    } catch (err) {
      delete transports[id];
      console.error(`sse connect: ${err.message}`);
      if (!res.headersSent) res.status(500).send("cannot open the event stream");
    }
  });

  app.post("/messages", async (req, res) => {
    const id = req.query.sessionId;
    if (!id) {
      res.status(400).send("Missing sessionId parameter");
      return;
    }
    const transport = transports[id];
    if (!transport) {
      res.status(404).send("Session not found");
      return;
    }
    if (isInitializeRequest(req.body)) stats.initializes++;
    try {
      await transport.handlePostMessage(req, res, req.body);
    } catch (err) {
      console.error(`sse message: ${err.message}`);
      if (!res.headersSent) res.status(500).send("cannot handle the message");
    }
  });
}
