/** A chat message as the model saw it, comparable between a node record's conversation and a request the mock received. */

/** The message as JSON text: role, text, tool calls (id, name, arguments) and the call a tool message answers. */
export function seenMessage(m: Record<string, unknown>): string {
  const calls = Array.isArray(m["tool_calls"])
    ? (m["tool_calls"] as Array<{ id: string; function: { name: string; arguments: string } }>).map((c) => [
        c.id,
        c.function.name,
        c.function.arguments,
      ])
    : [];
  return JSON.stringify({
    role: m["role"],
    content: typeof m["content"] === "string" ? m["content"] : "",
    calls,
    answers: m["tool_call_id"] ?? null,
  });
}
