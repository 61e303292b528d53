// The real openai npm client against memoryd proxy: one call per run,
// printing one JSON line (proxy.TestOpenAINodeClient reads it).
// Usage: node client.mjs stream|chat|models|badkey MESSAGE
// Environment: PROXY_URL (the proxy's /v1 base URL), PROXY_KEY.
import OpenAI from "openai";

const [mode, message] = process.argv.slice(2);
const client = new OpenAI({
  baseURL: process.env.PROXY_URL,
  apiKey: mode === "badkey" ? "mk-not-a-key" : process.env.PROXY_KEY,
  maxRetries: 0,
});
const messages = [{ role: "user", content: message ?? "hi" }];

try {
  if (mode === "stream") {
    const stream = await client.chat.completions.create({ model: "fake-model", messages, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    console.log(JSON.stringify({ text }));
  } else if (mode === "chat" || mode === "badkey") {
    const r = await client.chat.completions.create({ model: "fake-model", messages });
    console.log(JSON.stringify({ text: r.choices[0].message.content, total_tokens: r.usage.total_tokens }));
  } else if (mode === "models") {
    const page = await client.models.list();
    console.log(JSON.stringify({ models: page.data.map((m) => m.id) }));
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
} catch (err) {
  console.log(JSON.stringify({ status: err.status ?? 0, error: String(err.message) }));
}
