/**
 * The Restate side of the user-level bench, the service's process (the Restate server is another, started by
 * restate.ts): `@restatedev/restate-sdk` serving one service, `bench`, over HTTP/2 on a free port. Its handler
 * `chat` makes one chat-completions call through the `openai` SDK (one client for the process, keep-alive) to
 * `BENCH_MODEL_URL` inside `ctx.run`, so the answer is journaled in the server; `steps` makes `BENCH_STEPS` such
 * calls one after the other, each its own `ctx.run`. Prints `listening <port>` once it accepts connections.
 */

// SDK 1.17 calls Promise.withResolvers (Node 22), which Node 20 lacks: the same, by hand, before the SDK loads.
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}
const restate = await import("@restatedev/restate-sdk");
const { default: OpenAI } = await import("openai");

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const steps = Number(env("BENCH_STEPS"));
const openai = new OpenAI({ baseURL: env("BENCH_MODEL_URL"), apiKey: "bench", maxRetries: 0 });

const call = async (prompt) => {
  const completion = await openai.chat.completions.create({ model: "bench-model", messages: [{ role: "user", content: prompt }] });
  return completion.choices[0]?.message.content ?? "";
};

const bench = restate.service({
  name: "bench",
  handlers: {
    chat: async (ctx, prompt) => ctx.run("model", () => call(prompt)),
    steps: async (ctx, prompt) => {
      let answer = "";
      for (let i = 0; i < steps; i++) answer = await ctx.run(`model-${i + 1}`, () => call(`Step ${i + 1}: ${prompt}`));
      return answer;
    },
  },
});

const port = await restate.serve({ services: [bench], port: 0 });
process.stdout.write(`listening ${port}\n`);

const stop = () => process.exit(0);
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
