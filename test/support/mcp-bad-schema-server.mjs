// A stdio MCP server for tests whose tool list has one tool with an input schema that is not valid JSON Schema
// (`bad`) besides a good one (`good`), built with the SDK's low-level server.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const server = new Server({ name: "bad-schema", version: "1.0.0" }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, () => ({
  tools: [
    { name: "bad", description: "A broken schema.", inputSchema: { type: "object", properties: { a: { type: "nonsense" } } } },
    { name: "good", description: "Fine.", inputSchema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] } },
  ],
}));
server.setRequestHandler(CallToolRequestSchema, (request) => ({ content: [{ type: "text", text: `good: ${JSON.stringify(request.params.arguments)}` }] }));
await server.connect(new StdioServerTransport());
