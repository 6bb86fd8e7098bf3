// The durableclaims nine-step claim as a LangGraph.js StateGraph with the
// PostgreSQL checkpointer: one "peer" of testbed/peers (see ../README.md for the
// contract: environment, control API, steps, kill points).
//
// Built the way LangGraph's documentation teaches it:
//   - Graph API, state and nodes:  https://docs.langchain.com/oss/javascript/langgraph/graph-api
//                                  (define state with StateSchema + zod: .../langgraph/use-graph-api)
//   - Persistence / checkpointers: https://docs.langchain.com/oss/javascript/langgraph/persistence
//                                  (PostgresSaver, "call .setup() the first time":
//                                  https://www.npmjs.com/package/@langchain/langgraph-checkpoint-postgres)
//   - Durable execution:           https://docs.langchain.com/oss/javascript/langgraph/durable-execution
//                                  (durability "sync"; "Recovering from failures ... executing the
//                                  workflow with the same thread identifier ... providing it with a
//                                  `null` as the input value"; a StateGraph resumes at "the beginning
//                                  of the node where execution stopped")
//   - Interrupts:                  https://docs.langchain.com/oss/javascript/langgraph/interrupts
//                                  (interrupt() in the node, graph.invoke(new Command({ resume }),
//                                  { configurable: { thread_id } }); the node restarts from its top)
//   - Retries:                     https://docs.langchain.com/oss/javascript/langgraph/timeout-and-error-handling
//                                  (retryPolicy on addNode; node timeouts are Python-only)
//
// What LangGraph does not do, this program does (the application owns it):
//   - resume threads after a crash: on start it looks up its claims that are neither finished nor
//     waiting (its own peer_claims table, then graph.getState(config).tasks) and runs them again with
//     graph.invoke(null, config); /healthz answers 200 once they have been handed to the graph;
//   - the approval timeout: there is no durable timer; a timer here finds threads waiting longer
//     than APPROVAL_TIMEOUT and resumes them with Command({ resume: { expired: true } });
//   - one run per thread at a time: LangGraph does not lock a thread, so every resume goes
//     through an atomic status change in peer_claims (waiting -> running) first.

import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import * as z from "zod";
import { Command, END, START, StateGraph, StateSchema, interrupt } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";

// ---------------------------------------------------------------- configuration

const env = (name, def = "") => process.env[name] || def;
const PEER_ADDR = env("PEER_ADDR", "127.0.0.1:8090");
const PG_URL = env("PG_URL");
const MODEL_BASE_URL = env("MODEL_BASE_URL", "http://127.0.0.1:12112/v1").replace(/\/+$/, "");
const MODEL_API_KEY = env("MODEL_API_KEY", "sim");
const STRIPE_API_BASE = env("STRIPE_API_BASE", "http://127.0.0.1:12111").replace(/\/+$/, "");
const STRIPE_SECRET_KEY = env("STRIPE_SECRET_KEY", "sk_test_local");
const MAIL_SPOOL = env("MAIL_SPOOL", path.join(os.tmpdir(), "langgraph-peer-mail"));
const AUTO_APPROVE_LIMIT_MINOR = Number(env("AUTO_APPROVE_LIMIT_MINOR", "100000"));
const APPROVAL_TIMEOUT_MS = parseDuration(env("APPROVAL_TIMEOUT", "24h"));
const PEER_CRASH = env("PEER_CRASH");
const PEER_CRASH_STATE = env("PEER_CRASH_STATE", path.join(os.tmpdir(), "langgraph-peer-crash-state"));
const PEER_CRASH_BATCH = Number(env("PEER_CRASH_BATCH", "1")); // claims one kill interrupts
const PEER_CRASH_WAIT_MS = parseDuration(env("PEER_CRASH_WAIT", "2s")); // a batch not full is killed after
const CONCURRENCY = Number(env("PEER_CONCURRENCY", "16")); // graph runs at once

if (!PG_URL) {
  console.error("langgraph peer: PG_URL is required");
  process.exit(2);
}
if (!["", "after-pay", "in-notify"].includes(PEER_CRASH)) {
  console.error(`langgraph peer: PEER_CRASH=${PEER_CRASH}: want empty, after-pay or in-notify`);
  process.exit(2);
}
if (!Number.isInteger(PEER_CRASH_BATCH) || PEER_CRASH_BATCH < 1 || !(PEER_CRASH_WAIT_MS > 0)) {
  console.error("langgraph peer: PEER_CRASH_BATCH wants a whole number >= 1, PEER_CRASH_WAIT a positive duration");
  process.exit(2);
}

// parseDuration reads a Go duration ("24h", "90s", "1h30m", "250ms").
function parseDuration(s) {
  const units = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1e3, m: 6e4, h: 36e5 };
  let ms = 0;
  const rest = s.trim().replace(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g, (_, n, u) => {
    ms += Number(n) * units[u];
    return "";
  });
  if (rest !== "" || s.trim() === "") throw new Error(`${JSON.stringify(s)}: not a duration like 24h or 90s`);
  return ms;
}

const log = (msg, fields = {}) => console.log(JSON.stringify({ t: new Date().toISOString(), msg, ...fields }));

// ---------------------------------------------------------------- outside world

class HttpError extends Error {
  constructor(what, status, body) {
    super(`${what}: HTTP ${status}: ${body.slice(0, 300)}`);
    this.status = status; // LangGraph's default retryOn skips 400-409, retries 429 and 5xx
  }
}

// chat is one OpenAI-compatible chat completion with a JSON answer.
async function chat(schemaName, system, user) {
  const res = await fetch(`${MODEL_BASE_URL}/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${MODEL_API_KEY}` },
    body: JSON.stringify({
      model: "sim",
      messages: [
        { role: "system", content: system },
        { role: "user", content: user },
      ],
      response_format: { type: "json_schema", json_schema: { name: schemaName, schema: { type: "object" } } },
    }),
    signal: AbortSignal.timeout(120_000),
  });
  const text = await res.text();
  if (!res.ok) throw new HttpError(`model ${schemaName}`, res.status, text);
  return JSON.parse(JSON.parse(text).choices[0].message.content);
}

// claimJSON is the CLAIM the two model calls carry.
const claimJSON = (c) =>
  JSON.stringify({
    claim_id: c.claim_id,
    policy_id: c.policy_id,
    claimant: c.claimant.name,
    amount_minor: c.amount_minor,
    currency: c.currency,
    description: c.description ?? "",
    documents: [],
  });

// killPoint is the contract's kill point, once per claim: the claim is held
// there until PEER_CRASH_BATCH claims are (or PEER_CRASH_WAIT has passed
// since the first was), then the held claims are appended to PEER_CRASH_STATE
// as one line and synced, and the process SIGKILLs itself.
let held = []; // {id, release} of the claims held at the point
let heldTimer = null;
async function killPoint(point, claimId) {
  if (PEER_CRASH !== point) return;
  let fired = "";
  try {
    fired = fs.readFileSync(PEER_CRASH_STATE, "utf8");
  } catch {}
  if (fired.split(/\s+/).includes(claimId)) return;
  return new Promise((release) => {
    // Reached again while held: it waits for the same kill.
    if (!held.some((h) => h.id === claimId)) held.push({ id: claimId, release });
    if (held.length >= PEER_CRASH_BATCH) fireKill(point);
    else if (held.length === 1) heldTimer = setTimeout(() => fireKill(point), PEER_CRASH_WAIT_MS);
  });
}

// fireKill records the held claims and SIGKILLs the process; when the record
// cannot be written it kills nobody and lets the held claims go on.
function fireKill(point) {
  clearTimeout(heldTimer);
  const batch = held;
  held = [];
  if (batch.length === 0) return;
  try {
    const fd = fs.openSync(PEER_CRASH_STATE, "a");
    try {
      fs.writeSync(fd, batch.map((h) => h.id).join(" ") + "\n");
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch (err) {
    log("kill point: cannot record the kill, not killing", { point, error: String(err) });
    for (const h of batch) h.release();
    return;
  }
  log("kill point", { point, claims: batch.map((h) => h.id).join(" ") });
  process.kill(process.pid, "SIGKILL");
}

// ---------------------------------------------------------------- the graph

// The thread's state. Every field is a LastValue channel: a node's update replaces it.
const ClaimState = new StateSchema({
  claim: z.any(), // the POST /claims body; intake validates it
  status: z.string().optional(), // the outcome once decided: paid, rejected, expired, failed
  reason: z.string().optional(),
  triage_answer: z.any().optional(), // (a field may not share a node's name)
  coverage_result: z.any().optional(),
  assessment: z.any().optional(),
  payout_minor: z.number().optional(),
  decision: z.any().optional(),
  transfer_id: z.string().optional(),
  payment_replayed: z.boolean().optional(),
  notice: z.string().optional(),
  closed_at: z.string().optional(),
});

// 1. intake: validate.
function intake({ claim: c }) {
  const bad = [];
  if (typeof c?.claim_id !== "string" || !/^[A-Za-z0-9._:-]{1,200}$/.test(c.claim_id)) bad.push("claim_id");
  if (typeof c?.policy_id !== "string" || c.policy_id === "") bad.push("policy_id");
  if (typeof c?.claimant?.name !== "string" || c.claimant.name === "") bad.push("claimant.name");
  if (typeof c?.claimant?.email !== "string" || !c.claimant.email.includes("@")) bad.push("claimant.email");
  if (!/^acct_[A-Za-z0-9]+$/.test(c?.claimant?.stripe_account ?? "")) bad.push("claimant.stripe_account");
  if (!Number.isSafeInteger(c?.amount_minor) || c.amount_minor <= 0) bad.push("amount_minor");
  if (typeof c?.currency !== "string" || !/^[a-z]{3}$/.test(c.currency)) bad.push("currency");
  if (bad.length) return { status: "failed", reason: `invalid claim: ${bad.join(", ")}`, payout_minor: 0 };
  return {};
}

// 2. triage: one model call.
async function triage({ claim: c }) {
  const t = await chat("triage", "You triage insurance claims.", "Claim:\n" + claimJSON(c));
  if (typeof t?.category !== "string") throw new Error("triage answer without a category");
  return { triage_answer: t };
}

// 3. coverage: policy pol-1001 pays in usd up to 10,000.00, no deductible.
function coverage({ claim: c }) {
  const limit = 1_000_000;
  const known = c.policy_id === "pol-1001";
  const covered = known && c.currency === "usd";
  const cov = {
    policy_id: c.policy_id,
    covered,
    reason: covered ? "covered in full" : known ? "currency not covered" : "unknown policy",
    currency: c.currency,
    claimed_minor: c.amount_minor,
    deductible_minor: 0,
    limit_minor: limit,
    covered_minor: covered ? Math.min(c.amount_minor, limit) : 0,
  };
  if (!covered) return { coverage_result: cov, status: "rejected", reason: cov.reason, payout_minor: 0 };
  return { coverage_result: cov };
}

// 4. assess: one model call; payout = min(max(recommended, 0), covered).
async function assess({ claim: c, triage_answer: t, coverage_result: cov }) {
  const a = await chat(
    "assessment",
    "You assess insurance claims.",
    "Claim:\n" + claimJSON(c) + "\nTriage and coverage:\n" + JSON.stringify({ triage: t, coverage: cov }),
  );
  if (!Number.isFinite(a?.recommended_minor)) throw new Error("assessment answer without recommended_minor");
  const payout = Math.min(Math.max(Math.trunc(a.recommended_minor), 0), cov.covered_minor);
  if (payout === 0) return { assessment: a, payout_minor: 0, status: "rejected", reason: "nothing to pay" };
  return { assessment: a, payout_minor: payout };
}

// 5. approval: above the limit or flagged for review, a human decides. interrupt()
// saves the thread and ends the run; POST /claims/{id}/approve (or the expiry timer)
// resumes it with Command({ resume }), and the node runs again from the top, this
// time getting the decision back from interrupt().
function approval({ claim: c, payout_minor: payout, assessment: a }) {
  const reasons = [];
  if (payout > AUTO_APPROVE_LIMIT_MINOR) reasons.push(`payout ${payout} above ${AUTO_APPROVE_LIMIT_MINOR}`);
  if (a?.needs_review) reasons.push("the assessment asks for review");
  if (reasons.length === 0) return { decision: { by: "rules" } };
  const decision = interrupt({ claim_id: c.claim_id, payout_minor: payout, reasons });
  if (decision?.expired) {
    return { decision, status: "expired", reason: "no decision before the approval timeout", payout_minor: 0 };
  }
  return { decision: { by: "approver", approver: decision?.approver ?? "" } };
}

// 6. pay: one transfer at stripesim, keyed by the step. If the process dies after
// the answer and before the node returns, LangGraph has recorded nothing for this
// node: on resume the whole node runs again, and the Idempotency-Key makes the
// second POST replay the first transfer instead of making another.
async function pay({ claim: c, payout_minor: payout }) {
  const res = await fetch(`${STRIPE_API_BASE}/v1/transfers`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${STRIPE_SECRET_KEY}`,
      "Idempotency-Key": `${c.claim_id}:step6`,
      "Content-Type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({
      amount: String(payout),
      currency: c.currency,
      destination: c.claimant.stripe_account,
      transfer_group: c.claim_id,
      "metadata[step]": "6",
    }),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  if (!res.ok) throw new HttpError("stripe transfer", res.status, text);
  const transfer = JSON.parse(text);
  const replayed = res.headers.get("Idempotent-Replayed") === "true";
  log("paid", { claim_id: c.claim_id, transfer_id: transfer.id, replayed });
  await killPoint("after-pay", c.claim_id);
  return { transfer_id: transfer.id, payment_replayed: replayed, status: "paid" };
}

// 7. notify: write the claimant's e-mail to the spool; a repeat is <claim>.<n>.eml.
async function notify({ claim: c, status, reason, payout_minor: payout, transfer_id }) {
  await killPoint("in-notify", c.claim_id);
  const body = [
    `To: ${c.claimant.name} <${c.claimant.email}>`,
    `Subject: Your claim ${c.claim_id}: ${status}`,
    "Content-Type: text/plain; charset=utf-8",
    "",
    status === "paid"
      ? `We paid ${payout} ${c.currency} (minor units) on your claim ${c.claim_id}, transfer ${transfer_id}.`
      : `Your claim ${c.claim_id} is ${status}: ${reason ?? ""}.`,
    "",
  ].join("\r\n");
  fs.mkdirSync(MAIL_SPOOL, { recursive: true });
  for (let n = 1; ; n++) {
    const name = n === 1 ? `${c.claim_id}.eml` : `${c.claim_id}.${n}.eml`;
    try {
      fs.writeFileSync(path.join(MAIL_SPOOL, name), body, { flag: "wx" });
      return { notice: name };
    } catch (err) {
      if (err.code !== "EEXIST") throw err;
    }
  }
}

// 8. close: upsert the claim's row in the peer's own table (what GET /claims/{id} reads).
async function close({ claim: c, status, payout_minor: payout, transfer_id }) {
  const { rows } = await pool.query(
    `INSERT INTO peer_claims (claim_id, status, payout_minor, transfer_id, closed_at, updated_at)
     VALUES ($1, $2, $3, $4, now(), now())
     ON CONFLICT (claim_id) DO UPDATE SET status = EXCLUDED.status, payout_minor = EXCLUDED.payout_minor,
       transfer_id = EXCLUDED.transfer_id, closed_at = COALESCE(peer_claims.closed_at, EXCLUDED.closed_at),
       updated_at = now()
     RETURNING closed_at`,
    [c.claim_id, status, payout ?? 0, transfer_id ?? null],
  );
  return { closed_at: rows[0].closed_at.toISOString() };
}

// 9. audit: the claim's audit row. A re-run after a crash finds it there (ON CONFLICT DO NOTHING).
async function audit(s) {
  await pool.query(
    `INSERT INTO peer_audit (claim_id, outcome, reason, payout_minor, currency, transfer_id, payment_replayed,
       triage, coverage, assessment, approval, notice, closed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     ON CONFLICT (claim_id) DO NOTHING`,
    [
      s.claim.claim_id, s.status, s.reason ?? null, s.payout_minor ?? 0, s.claim.currency ?? null,
      s.transfer_id ?? null, s.payment_replayed ?? false, JSON.stringify(s.triage_answer ?? null),
      JSON.stringify(s.coverage_result ?? null), JSON.stringify(s.assessment ?? null),
      JSON.stringify(s.decision ?? null), s.notice ?? null, s.closed_at ?? null,
    ],
  );
  return {};
}

const retry = { retryPolicy: { maxAttempts: 5, initialInterval: 500, backoffFactor: 2, maxInterval: 10_000 } };
const ended = (s) => s.status === "rejected" || s.status === "expired";

const builder = new StateGraph(ClaimState)
  .addNode("intake", intake)
  .addNode("triage", triage, retry)
  .addNode("coverage", coverage)
  .addNode("assess", assess, retry)
  .addNode("approval", approval)
  .addNode("pay", pay, retry)
  .addNode("notify", notify)
  .addNode("close", close, retry)
  .addNode("audit", audit, retry)
  .addEdge(START, "intake")
  .addConditionalEdges("intake", (s) => (s.status === "failed" ? "close" : "triage"), ["close", "triage"])
  .addEdge("triage", "coverage")
  .addConditionalEdges("coverage", (s) => (ended(s) ? "notify" : "assess"), ["notify", "assess"])
  .addConditionalEdges("assess", (s) => (ended(s) ? "notify" : "approval"), ["notify", "approval"])
  .addConditionalEdges("approval", (s) => (ended(s) ? "notify" : "pay"), ["notify", "pay"])
  .addEdge("pay", "notify")
  .addEdge("notify", "close")
  .addEdge("close", "audit")
  .addEdge("audit", END);

const pool = new pg.Pool({ connectionString: PG_URL, max: CONCURRENCY + 4 });
const checkpointer = new PostgresSaver(pool);
const graph = builder.compile({ checkpointer });

// ---------------------------------------------------------------- running threads

// A small semaphore: at most CONCURRENCY graph runs at once, the rest queue.
let running = 0;
const queue = [];
async function slot(fn) {
  if (running >= CONCURRENCY) await new Promise((resolve) => queue.push(resolve));
  running++;
  try {
    return await fn();
  } finally {
    running--;
    queue.shift()?.();
  }
}

const threadConfig = (claimId) => ({ configurable: { thread_id: claimId }, durability: "sync" });

// drive runs the claim's thread with input: the claim (a new thread), null (resume
// from the last checkpoint after a crash) or a Command({ resume }) (the decision).
// It returns at once; the run goes on in the background.
function drive(claimId, input, why) {
  slot(async () => {
    const t0 = Date.now();
    log("run", { claim_id: claimId, why });
    const out = await graph.invoke(input, threadConfig(claimId));
    if (out.__interrupt__?.length) {
      await markWaiting(claimId);
      log("waiting", { claim_id: claimId, ms: Date.now() - t0 });
    } else {
      log("done", { claim_id: claimId, status: out.status, ms: Date.now() - t0 });
    }
  }).catch(async (err) => {
    log("run failed", { claim_id: claimId, error: String(err?.stack ?? err) });
    await pool
      .query(`UPDATE peer_claims SET status = 'failed', updated_at = now() WHERE claim_id = $1 AND status = 'running'`, [claimId])
      .catch(() => {});
  });
}

// markWaiting records that the thread waits at its interrupt, since when (the
// interrupted checkpoint's time) and the payout it asks about.
async function markWaiting(claimId) {
  const snap = await graph.getState(threadConfig(claimId));
  await pool.query(
    `UPDATE peer_claims SET status = 'waiting', waiting_since = $2, payout_minor = $3, decision = NULL, updated_at = now()
     WHERE claim_id = $1 AND status = 'running'`,
    [claimId, snap.createdAt ?? new Date().toISOString(), snap.values?.payout_minor ?? null],
  );
}

// decide hands a decision to a waiting thread: the atomic waiting -> running change
// (with the decision kept, so a crash before the graph has it loses nothing) makes
// sure only one of approve and the expiry timer resumes it.
async function decide(claimId, decision) {
  const { rowCount } = await pool.query(
    `UPDATE peer_claims SET status = 'running', decision = $2, updated_at = now() WHERE claim_id = $1 AND status = 'waiting'`,
    [claimId, JSON.stringify(decision)],
  );
  if (rowCount === 1) drive(claimId, new Command({ resume: decision }), decision.expired ? "expired" : "approved");
  return rowCount === 1;
}

// recover is the pass after a restart: every claim this program had running is
// looked at in its checkpoint and taken up again the documented way.
async function recover() {
  const { rows } = await pool.query(`SELECT claim_id, input, decision FROM peer_claims WHERE status = 'running' ORDER BY created_at`);
  const counts = { started: 0, resumed: 0, decided: 0, waiting: 0, finished: 0 };
  const takeUp = async ({ claim_id: id, input, decision }) => {
    const snap = await graph.getState(threadConfig(id));
    if (!snap.createdAt) {
      counts.started++; // accepted, but no checkpoint yet: start it
      drive(id, { claim: input }, "recover: start");
    } else if (snap.tasks.some((t) => t.interrupts?.length)) {
      if (decision) {
        counts.decided++; // decided, but the graph may not have it: deliver it again
        drive(id, new Command({ resume: decision }), "recover: decision");
      } else {
        counts.waiting++;
        await markWaiting(id);
      }
    } else if (snap.tasks.length) {
      // The documented recovery: same thread_id, null input. Check tasks, not next:
      // next leaves out tasks whose writes were saved (the node finished, the step's
      // checkpoint did not follow), so a thread killed there shows next: [] although
      // it has work left; invoke(null) applies those writes and goes on.
      counts.resumed++;
      drive(id, null, `recover: resume at ${snap.tasks.map((t) => t.name).join(",")}`);
    } else {
      counts.finished++; // reached END (close has written the row): nothing to do
    }
  };
  for (let i = 0; i < rows.length; i += CONCURRENCY) await Promise.all(rows.slice(i, i + CONCURRENCY).map(takeUp));
  log("recovery pass", counts);
}

// The expiry timer: LangGraph has no durable timer, so the application checks how
// long its threads have waited and resumes the overdue ones with an expired decision.
async function expireOverdue() {
  const { rows } = await pool.query(
    `SELECT claim_id FROM peer_claims WHERE status = 'waiting' AND waiting_since <= now() - ($1 * interval '1 millisecond')`,
    [APPROVAL_TIMEOUT_MS],
  );
  for (const { claim_id } of rows) {
    if (await decide(claim_id, { expired: true })) log("approval expired", { claim_id });
  }
}

// ---------------------------------------------------------------- control API

let ready = false;

function send(res, code, body) {
  res.writeHead(code, { "Content-Type": "application/json" });
  res.end(body === undefined ? "" : JSON.stringify(body));
}

async function readJSON(req) {
  let text = "";
  for await (const chunk of req) {
    text += chunk;
    if (text.length > 1 << 20) throw new Error("body too large");
  }
  return JSON.parse(text || "{}");
}

async function handle(req, res) {
  const url = new URL(req.url, "http://peer");
  if (req.method === "GET" && url.pathname === "/healthz") return send(res, ready ? 200 : 503, { ready });
  if (!ready) return send(res, 503, { error: "recovering" });

  if (req.method === "POST" && url.pathname === "/claims") {
    let claim;
    try {
      claim = await readJSON(req);
    } catch (err) {
      return send(res, 400, { error: `bad JSON: ${err.message}` });
    }
    if (typeof claim.claim_id !== "string" || claim.claim_id === "") return send(res, 400, { error: "claim_id is required" });
    const { rowCount } = await pool.query(
      `INSERT INTO peer_claims (claim_id, status, input) VALUES ($1, 'running', $2) ON CONFLICT (claim_id) DO NOTHING`,
      [claim.claim_id, JSON.stringify(claim)],
    );
    if (rowCount === 1) drive(claim.claim_id, { claim }, "start");
    return send(res, 202, { claim_id: claim.claim_id, started: rowCount === 1 });
  }

  let m = url.pathname.match(/^\/claims\/([^/]+)\/approve$/);
  if (req.method === "POST" && m) {
    const id = decodeURIComponent(m[1]);
    let body;
    try {
      body = await readJSON(req);
    } catch (err) {
      return send(res, 400, { error: `bad JSON: ${err.message}` });
    }
    if (await decide(id, { approver: String(body.approver ?? "") })) return send(res, 202, { claim_id: id });
    const { rows } = await pool.query(`SELECT status FROM peer_claims WHERE claim_id = $1`, [id]);
    if (!rows.length) return send(res, 404, { error: "unknown claim" });
    return send(res, 409, { error: `claim is ${rows[0].status}, not waiting` });
  }

  m = url.pathname.match(/^\/claims\/([^/]+)$/);
  if (req.method === "GET" && m) {
    const id = decodeURIComponent(m[1]);
    const { rows } = await pool.query(`SELECT status, payout_minor, transfer_id FROM peer_claims WHERE claim_id = $1`, [id]);
    if (!rows.length) return send(res, 404, { error: "unknown claim" });
    const r = rows[0];
    return send(res, 200, {
      claim_id: id,
      status: r.status,
      payout_minor: r.payout_minor === null ? null : Number(r.payout_minor),
      transfer_id: r.transfer_id,
    });
  }
  return send(res, 404, { error: "not found" });
}

// ---------------------------------------------------------------- main

async function main() {
  await checkpointer.setup(); // creates the checkpointer's tables (idempotent)
  await pool.query(`
    CREATE TABLE IF NOT EXISTS peer_claims (
      claim_id      text PRIMARY KEY,
      status        text NOT NULL,
      input         jsonb,
      payout_minor  bigint,
      transfer_id   text,
      decision      jsonb,
      waiting_since timestamptz,
      closed_at     timestamptz,
      created_at    timestamptz NOT NULL DEFAULT now(),
      updated_at    timestamptz NOT NULL DEFAULT now());
    CREATE INDEX IF NOT EXISTS peer_claims_status ON peer_claims (status);
    CREATE TABLE IF NOT EXISTS peer_audit (
      claim_id         text PRIMARY KEY,
      outcome          text NOT NULL,
      reason           text,
      payout_minor     bigint NOT NULL,
      currency         text,
      transfer_id      text,
      payment_replayed boolean NOT NULL,
      triage           jsonb,
      coverage         jsonb,
      assessment       jsonb,
      approval         jsonb,
      notice           text,
      closed_at        timestamptz,
      recorded_at      timestamptz NOT NULL DEFAULT now());`);

  const [host, port] = [PEER_ADDR.slice(0, PEER_ADDR.lastIndexOf(":")), Number(PEER_ADDR.slice(PEER_ADDR.lastIndexOf(":") + 1))];
  const server = http.createServer((req, res) =>
    handle(req, res).catch((err) => {
      log("request failed", { url: req.url, error: String(err) });
      if (!res.headersSent) send(res, 500, { error: String(err.message ?? err) });
    }),
  );
  await new Promise((resolve) => server.listen(port, host, resolve));
  log("listening", { addr: PEER_ADDR, crash: PEER_CRASH || "none", approval_timeout_ms: APPROVAL_TIMEOUT_MS });

  await recover();
  ready = true;

  const every = Math.min(Math.max(APPROVAL_TIMEOUT_MS / 4, 200), 30_000);
  setInterval(() => expireOverdue().catch((err) => log("expiry check failed", { error: String(err) })), every).unref();

  // SIGTERM/SIGINT: stop taking requests, let the runs in flight finish (up to 10s),
  // then close the pool. A run cut short is taken up by the next start's recovery.
  const stop = async () => {
    log("stopping", { running, queued: queue.length });
    ready = false;
    server.close();
    for (const deadline = Date.now() + 10_000; running > 0 && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await pool.end().catch(() => {});
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main().catch((err) => {
  console.error("langgraph peer:", err);
  process.exit(1);
});
