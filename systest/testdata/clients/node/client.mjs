// memoryd frontend client, written from docs/protocol.md (and the permission
// blocks of docs/operations.md) alone, with the npm package `nats` (nats.js v2).
//
// Environment: NATS_URL, NATS_USER, NATS_PASS (optional), MEMORYD_PREFIX
// (default "memory"), MEMORYD_USER (default "alice"), NATS_INBOX_PREFIX
// (default "_INBOX_<NATS_USER>", the docs' per-frontend inbox convention),
// RUN_ID (optional; default derived from the time and pid).
//
// Prints "ok <step>" per step; on failure "FAIL <step>: <reason>" on stderr
// and exit 1. Every wait is bounded.

import { connect, headers as natsHeaders, StringCodec, Events } from "nats";
import { createHash } from "node:crypto";

const sc = StringCodec();
const env = process.env;
const NATS_URL = env.NATS_URL || "nats://127.0.0.1:4222";
const NATS_USER = env.NATS_USER || "";
const NATS_PASS = env.NATS_PASS || "";
const PREFIX = env.MEMORYD_PREFIX || "memory";
const USER = env.MEMORYD_USER || "alice";
const INBOX = env.NATS_INBOX_PREFIX || (NATS_USER ? `_INBOX_${NATS_USER}` : "");
const RUN = env.RUN_ID || `${Date.now().toString(36)}${process.pid.toString(36)}`;
const REQ_TIMEOUT = 5000;

// Whole-run watchdog: never hang.
const watchdog = setTimeout(() => fail("timeout", "client did not finish within 90s"), 90000);
watchdog.unref();

let step = "connect";
function fail(s, reason) {
  process.stderr.write(`FAIL ${s}: ${reason}\n`);
  process.exit(1);
}
function ok(s) { console.log(`ok ${s}`); }

// protocol.md "The user token" (copied from the TypeScript given there).
const ALPHA = "abcdefghijklmnopqrstuvwxyz234567";
function userToken(id) {
  if (/^[A-Za-z0-9_-]{1,64}$/.test(id)) return id;
  const bytes = createHash("sha256").update(id, "utf8").digest();
  let bits = 0, value = 0, out = "~";
  for (const b of bytes) {
    value = (value << 8) | b; bits += 8;
    while (bits >= 5) { out += ALPHA[(value >>> (bits - 5)) & 31]; bits -= 5; }
  }
  if (bits > 0) out += ALPHA[(value << (5 - bits)) & 31];
  return out;
}

const TOKEN = userToken(USER);
const subj = (endpoint, token = TOKEN) => `${PREFIX}.${endpoint}.${token}`;

// Permission errors arrive asynchronously on the connection's status stream
// (nats.js also rejects the refused request itself): remember them, and
// wake whoever waits for them.
const permErrors = [];
const permWaiters = new Set();
function waitPermErrors(pred, ms) {
  if (pred()) return Promise.resolve(true);
  return new Promise((resolve) => {
    const w = () => { if (pred()) { permWaiters.delete(w); clearTimeout(timer); resolve(true); } };
    const timer = setTimeout(() => { permWaiters.delete(w); resolve(false); }, ms);
    permWaiters.add(w);
  });
}

// One request. Returns {error: {code, description}} for an error reply
// (protocol.md "Requests, replies and errors": empty body, headers
// Nats-Service-Error-Code and Nats-Service-Error), else {body}.
async function request(nc, endpoint, body, token = TOKEN) {
  const m = await nc.request(subj(endpoint, token), sc.encode(JSON.stringify(body)), { timeout: REQ_TIMEOUT });
  const code = m.headers?.get("Nats-Service-Error-Code") || "";
  if (code !== "") {
    return { error: { code: Number(code), description: m.headers.get("Nats-Service-Error") || "", bodyLen: m.data.length } };
  }
  let parsed;
  try { parsed = JSON.parse(sc.decode(m.data)); } catch (e) { throw new Error(`reply is not JSON: ${e.message}`); }
  return { body: parsed };
}

async function mustRequest(nc, endpoint, body) {
  const r = await request(nc, endpoint, body);
  if (r.error) throw new Error(`${endpoint}: error reply ${r.error.code} ${r.error.description}`);
  return r.body;
}

function turnEvent(id, msg, resp, user = USER) {
  return {
    id, user_id: user, conversation_id: `probe-${RUN}`,
    user_message: msg, assistant_response: resp,
    timestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    metadata: { client: "node-probe" },
  };
}

async function publishTurn(js, ev, token = TOKEN) {
  const h = natsHeaders();
  // protocol.md: Nats-Msg-Id is "<user-token>:<event id>"; msgID sets that header.
  const ack = await js.publish(subj("turns", token), sc.encode(JSON.stringify(ev)), {
    msgID: `${token}:${ev.id}`, headers: h, timeout: REQ_TIMEOUT,
  });
  return ack;
}

async function main() {
  let nc;
  try {
    const opts = { servers: NATS_URL.split(","), timeout: 5000, maxReconnectAttempts: 2, name: "memoryd-node-probe" };
    if (NATS_USER) opts.user = NATS_USER;
    if (NATS_PASS) opts.pass = NATS_PASS;
    if (INBOX) opts.inboxPrefix = INBOX;
    nc = await connect(opts);
  } catch (e) { fail("connect", e.message); }
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === Events.Error && s.permissionContext) {
        permErrors.push(s.permissionContext);
        for (const w of [...permWaiters]) w();
      }
    }
  })().catch(() => {});
  const js = nc.jetstream();

  const id1 = `node-${RUN}-1`, id2 = `node-${RUN}-2`;
  const boat = `Albatross${RUN}`, harbour = `Cascais${RUN}`;
  const t1 = turnEvent(id1, `My sailboat is named ${boat}.`, `${boat} is a lovely name for a sailboat.`);
  const t2 = turnEvent(id2, `I keep the sailboat moored in the marina of ${harbour}.`, `The marina of ${harbour} is a good mooring.`);

  // Follow alice's memory changes (protocol.md "Memory changes") to know when
  // the turns were ingested and extracted: the docs give no other signal.
  const stored = new Set();
  let bothStored;
  const storedPromise = new Promise((resolve) => { bothStored = resolve; });
  const changes = nc.subscribe(subj("changes"));
  (async () => {
    for await (const m of changes) {
      try {
        const c = JSON.parse(sc.decode(m.data));
        if (c.type === "context.stored" && (c.event_id === id1 || c.event_id === id2)) stored.add(c.event_id);
        if (stored.size === 2) bothStored();
      } catch { /* ignore */ }
    }
  })().catch(() => {});
  await nc.flush();

  // 1. publish
  step = "publish";
  try {
    for (const t of [t1, t2]) {
      const ack = await publishTurn(js, t);
      if (!ack || !ack.stream || !(ack.seq > 0)) throw new Error(`bad ack for ${t.id}: ${JSON.stringify(ack)}`);
      if (ack.duplicate) throw new Error(`ack for ${t.id} says duplicate`);
    }
    // A retry with the same Nats-Msg-Id inside the duplicate window is dropped by JetStream.
    const again = await publishTurn(js, t1);
    if (!again.duplicate) throw new Error(`re-publish of ${id1} was not reported duplicate: ${JSON.stringify(again)}`);
  } catch (e) { fail(step, e.message); }
  ok(step);

  // 2. enrich
  step = "enrich";
  try {
    // The context.stored change of each turn is published once its memory
    // is committed: enrich finds it from then on, with no retry.
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no context.stored change for both turns within 30s (seen ${[...stored]})`)), 30000);
    });
    await Promise.race([storedPromise, timeout]);
    clearTimeout(timer);
    const reply = await mustRequest(nc, "enrich", {
      user_id: USER, message: "What is my sailboat called, and where is it moored?",
      max_results: 5, threshold: 0.05,
    });
    if (reply.degraded) throw new Error(`degraded reply: ${reply.reason}`);
    const ctx = reply.context || [];
    if (!ctx.some((c) => c.event_id === id1) || !ctx.some((c) => c.event_id === id2))
      throw new Error(`enrich after both context.stored changes lacks a turn: ${JSON.stringify(ctx)}`);
    for (const w of [boat, harbour]) {
      if (!reply.injection.includes(w)) throw new Error(`injection lacks ${w}: ${JSON.stringify(reply)}`);
      if (!reply.context.some((c) => (c.question + " " + c.answer).includes(w))) throw new Error(`context lacks ${w}`);
    }
    if (!Array.isArray(reply.facts) || !Array.isArray(reply.keywords) || typeof reply.tokens !== "number")
      throw new Error(`reply shape: ${JSON.stringify(reply)}`);
  } catch (e) { fail(step, e.message); }
  ok(step);

  // 3a. search and stats
  step = "search";
  try {
    const r = await mustRequest(nc, "search", { user_id: USER, query: boat, max_results: 5 });
    if (!Array.isArray(r.results) || !r.results.some((i) => i.event_id === id1))
      throw new Error(`search did not find ${id1}: ${JSON.stringify(r)}`);
  } catch (e) { fail(step, e.message); }
  ok(step);

  step = "stats";
  try {
    const r = await mustRequest(nc, "stats", { user_id: USER });
    if (!(r.turns_received >= 2) || !(r.context_items >= 2) || typeof r.turns_pending !== "number")
      throw new Error(`stats: ${JSON.stringify(r)}`);
  } catch (e) { fail(step, e.message); }
  ok(step);

  // 3b. forget, then enrich no longer returns the data
  step = "forget";
  try {
    const r = await mustRequest(nc, "forget", { user_id: USER });
    for (const k of ["facts", "fact_history", "context", "turns", "jobs", "stream_events", "dead_letters", "documents"])
      if (typeof r[k] !== "number") throw new Error(`forget reply lacks ${k}: ${JSON.stringify(r)}`);
    if (r.context < 2 || r.turns < 2 || r.stream_events < 2) throw new Error(`forget deleted too little: ${JSON.stringify(r)}`);
    const e = await mustRequest(nc, "enrich", {
      user_id: USER, message: "What is my sailboat called, and where is it moored?", max_results: 5, threshold: 0.05,
    });
    if (e.degraded) throw new Error(`enrich after forget degraded: ${e.reason}`);
    if (e.injection.includes(RUN) || e.context.length > 0 || e.facts.some((f) => f.value.includes(RUN)))
      throw new Error(`enrich still returns forgotten data: ${JSON.stringify(e)}`);
    const s = await mustRequest(nc, "stats", { user_id: USER });
    if (s.turns_received !== 0 || s.context_items !== 0) throw new Error(`stats after forget: ${JSON.stringify(s)}`);
  } catch (e) { fail(step, e.message); }
  ok(step);

  // 4. error replies
  step = "errors";
  try {
    const cases = [
      ["missing user_id", { message: "hello" }],
      ["user_id of another token", { user_id: USER === "bob" ? "carol" : "bob", message: "hello" }],
      ["wrong type", { user_id: USER, message: "hello", max_results: "3" }],
    ];
    for (const [name, body] of cases) {
      const r = await request(nc, "enrich", body);
      if (!r.error) throw new Error(`${name}: no error reply: ${JSON.stringify(r.body)}`);
      if (r.error.code !== 400) throw new Error(`${name}: code ${r.error.code}`);
      if (!r.error.description) throw new Error(`${name}: empty Nats-Service-Error`);
      if (r.error.bodyLen !== 0) throw new Error(`${name}: error body not empty`);
    }
    // malformed JSON
    const m = await nc.request(subj("enrich"), sc.encode("{not json"), { timeout: REQ_TIMEOUT });
    if (m.headers?.get("Nats-Service-Error-Code") !== "400") throw new Error("malformed JSON not a 400");
  } catch (e) { fail(step, e.message); }
  ok(step);

  // 5. isolation: the same credential for another user must get nothing.
  step = "isolation";
  try {
    const other = USER === "bob" ? "carol" : "bob";
    const ot = userToken(other);
    const notes = [];
    try {
      const ack = await publishTurn(js, turnEvent(`node-${RUN}-x`, "I live in Atlantis", "ok", other), ot);
      throw new Error(`publish for ${other} was acknowledged: ${JSON.stringify(ack)}`);
    } catch (e) {
      if (e.message.startsWith("publish for")) throw e;
      notes.push(`publish ${subj("turns", ot)}: ${e.code || e.message}`);
    }
    try {
      const r = await request(nc, "enrich", { user_id: other, message: "where do I live?" }, ot);
      throw new Error(`enrich for ${other} answered: ${JSON.stringify(r)}`);
    } catch (e) {
      if (e.message.startsWith("enrich for")) throw e;
      notes.push(`request ${subj("enrich", ot)}: ${e.code || e.message}`);
    }
    // protocol.md: a refused publish or request is reported on the
    // connection; that is how "not allowed" differs from "memoryd is down".
    const refused = [subj("turns", ot), subj("enrich", ot)];
    const reported = () => refused.every((r) => permErrors.some((p) => p.operation === "publish" && p.subject === r));
    if (!(await waitPermErrors(reported, 10000)))
      throw new Error(`permission violations reported: ${JSON.stringify(permErrors)}, want publish to ${refused.join(" and ")}`);
    notes.push(`permission violations reported for ${refused.join(", ")}`);
    console.error("  (" + notes.join("; ") + ")");
  } catch (e) { fail(step, e.message); }
  ok(step);

  changes.unsubscribe();
  await nc.drain().catch(() => {});
  process.exit(0);
}

main().catch((e) => fail(step, e && e.message ? e.message : String(e)));
