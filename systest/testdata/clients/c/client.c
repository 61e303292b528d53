/*
 * memoryd frontend client, written from docs/protocol.md (and the permission
 * blocks of docs/operations.md) alone, with the C client libnats (nats.c).
 *
 * Build: gcc client.c $(pkg-config --cflags --libs libnats) -o client
 *
 * Environment: NATS_URL, NATS_USER, NATS_PASS (optional), MEMORYD_PREFIX
 * (default "memory"), MEMORYD_USER (default "alice"), NATS_INBOX_PREFIX
 * (default "_INBOX_<NATS_USER>", the docs' per-frontend inbox convention),
 * RUN_ID (optional; default from the time and pid).
 *
 * Prints "ok <step>" per step; on failure "FAIL <step>: <reason>" on stderr
 * and exit 1. Every wait is bounded (request timeouts and a 90 s alarm).
 *
 * JSON is checked with small string helpers (no JSON library, to keep the
 * build to libnats alone); the strings this client looks for carry no
 * characters JSON would escape.
 */
#include <nats/nats.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REQ_TIMEOUT 5000

static const char *step = "connect";
static char        prefix[128], user[300], token[80], inbox[200], run[64];
/* Permission violations reported to on_error, guarded by perm_mu. */
static int             perm_violations = 0;
static pthread_mutex_t perm_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  perm_cv = PTHREAD_COND_INITIALIZER;

static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL %s: ", step);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

static void on_alarm(int sig)
{
    (void) sig;
    static const char m[] = "FAIL timeout: client did not finish within 90s\n";
    if (write(2, m, sizeof(m) - 1) < 0) { /* nothing */ }
    _exit(1);
}

static const char *envor(const char *k, const char *d)
{
    const char *v = getenv(k);
    return (v && *v) ? v : d;
}

/* ---- SHA-256 (FIPS 180-4), for the user token of non-simple ids ---- */
static const uint32_t K256[64] = {
    0x428a2f98,0x71374491,0xb5c0fbcf,0xe9b5dba5,0x3956c25b,0x59f111f1,0x923f82a4,0xab1c5ed5,
    0xd807aa98,0x12835b01,0x243185be,0x550c7dc3,0x72be5d74,0x80deb1fe,0x9bdc06a7,0xc19bf174,
    0xe49b69c1,0xefbe4786,0x0fc19dc6,0x240ca1cc,0x2de92c6f,0x4a7484aa,0x5cb0a9dc,0x76f988da,
    0x983e5152,0xa831c66d,0xb00327c8,0xbf597fc7,0xc6e00bf3,0xd5a79147,0x06ca6351,0x14292967,
    0x27b70a85,0x2e1b2138,0x4d2c6dfc,0x53380d13,0x650a7354,0x766a0abb,0x81c2c92e,0x92722c85,
    0xa2bfe8a1,0xa81a664b,0xc24b8b70,0xc76c51a3,0xd192e819,0xd6990624,0xf40e3585,0x106aa070,
    0x19a4c116,0x1e376c08,0x2748774c,0x34b0bcb5,0x391c0cb3,0x4ed8aa4a,0x5b9cca4f,0x682e6ff3,
    0x748f82ee,0x78a5636f,0x84c87814,0x8cc70208,0x90befffa,0xa4506ceb,0xbef9a3f7,0xc67178f2};
#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, hh, t1, t2;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = (uint32_t) p[4*i] << 24 | (uint32_t) p[4*i+1] << 16 | (uint32_t) p[4*i+2] << 8 | p[4*i+3];
    for (; i < 64; i++)
        w[i] = w[i-16] + (ROR(w[i-15], 7) ^ ROR(w[i-15], 18) ^ (w[i-15] >> 3)) + w[i-7]
             + (ROR(w[i-2], 17) ^ ROR(w[i-2], 19) ^ (w[i-2] >> 10));
    a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
    for (i = 0; i < 64; i++) {
        t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}
static void sha256(const unsigned char *msg, size_t len, unsigned char out[32])
{
    uint32_t h[8] = {0x6a09e667,0xbb67ae85,0x3c6ef372,0xa54ff53a,0x510e527f,0x9b05688c,0x1f83d9ab,0x5be0cd19};
    unsigned char blk[64];
    size_t i, r;
    uint64_t bits = (uint64_t) len * 8;
    for (i = 0; i + 64 <= len; i += 64) sha256_block(h, msg + i);
    r = len - i;
    memset(blk, 0, 64);
    memcpy(blk, msg + i, r);
    blk[r] = 0x80;
    if (r >= 56) { sha256_block(h, blk); memset(blk, 0, 64); }
    for (i = 0; i < 8; i++) blk[63 - i] = (unsigned char) (bits >> (8 * i));
    sha256_block(h, blk);
    for (i = 0; i < 8; i++) {
        out[4*i] = h[i] >> 24; out[4*i+1] = h[i] >> 16; out[4*i+2] = h[i] >> 8; out[4*i+3] = h[i];
    }
}

/* protocol.md "The user token", verbatim (TestProtocolDocCTokenIsTheClients) */
/* id's subject token into out (65 bytes hold any: a plain id is up to 64 characters, a hashed one 53) */
static void user_token(const char *id, char *out, size_t outsz)
{
    static const char ALPHA[] = "abcdefghijklmnopqrstuvwxyz234567";
    size_t n = strlen(id), i;
    int simple = n >= 1 && n <= 64;
    for (i = 0; simple && i < n; i++) {
        char c = id[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            simple = 0;
    }
    if (simple) { snprintf(out, outsz, "%s", id); return; }
    unsigned char d[32];
    sha256((const unsigned char *) id, n, d);
    unsigned int value = 0; int bits = 0; size_t o = 0;
    out[o++] = '~';
    for (i = 0; i < 32; i++) {
        value = (value << 8) | d[i]; bits += 8;
        while (bits >= 5) { out[o++] = ALPHA[(value >> (bits - 5)) & 31]; bits -= 5; }
    }
    if (bits > 0) out[o++] = ALPHA[(value << (5 - bits)) & 31];
    out[o] = 0;
}

static void subject(char *out, size_t sz, const char *endpoint, const char *tok)
{
    snprintf(out, sz, "%s.%s.%s", prefix, endpoint, tok);
}

/* Async errors (permission violations arrive here, not at the request). */
static void on_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure)
{
    (void) nc; (void) sub; (void) closure;
    if (err == NATS_NOT_PERMITTED) {
        pthread_mutex_lock(&perm_mu);
        perm_violations++;
        pthread_cond_broadcast(&perm_cv);
        pthread_mutex_unlock(&perm_mu);
    }
    const char *last = NULL;
    natsConnection_GetLastError(nc, &last);
    fprintf(stderr, "  (async error: %s: %s)\n", natsStatus_GetText(err), last ? last : "");
}

/* wait_violations waits up to ms for at least n permission violations in
 * all, and returns how many there are. */
static int wait_violations(int n, int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long) (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&perm_mu);
    while (perm_violations < n) {
        if (pthread_cond_timedwait(&perm_cv, &perm_mu, &until) != 0) break;
    }
    int got = perm_violations;
    pthread_mutex_unlock(&perm_mu);
    return got;
}

/* ---- tiny JSON helpers ---- */
/* Number value of "key": in json, or def when absent. */
static double jnum(const char *json, const char *key, double def)
{
    char pat[128];
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p) return def;
    p += strlen(pat);
    while (*p == ' ') p++;
    char *end;
    double v = strtod(p, &end);
    return end == p ? def : v;
}
static int jhas(const char *json, const char *needle) { return strstr(json, needle) != NULL; }

/* ---- requests ---- */
typedef struct {
    int   code;          /* 0: success; else Nats-Service-Error-Code */
    char  desc[512];     /* Nats-Service-Error */
    int   bodylen;
    char *body;          /* NUL-terminated copy (success) */
    natsStatus st;       /* transport status (timeout, no responders, ...) */
} reply_t;

static reply_t request_raw(natsConnection *nc, const char *endpoint, const char *tok, const char *body)
{
    reply_t r; memset(&r, 0, sizeof(r));
    char subj[512];
    natsMsg *reply = NULL;
    subject(subj, sizeof(subj), endpoint, tok);
    r.st = natsConnection_Request(&reply, nc, subj, body, (int) strlen(body), REQ_TIMEOUT);
    if (r.st != NATS_OK) return r;
    const char *v = NULL;
    r.bodylen = natsMsg_GetDataLength(reply);
    if (natsMsgHeader_Get(reply, "Nats-Service-Error-Code", &v) == NATS_OK && v && *v) {
        r.code = atoi(v);
        const char *d = NULL;
        if (natsMsgHeader_Get(reply, "Nats-Service-Error", &d) == NATS_OK && d)
            snprintf(r.desc, sizeof(r.desc), "%s", d);
    } else {
        r.body = malloc(r.bodylen + 1);
        memcpy(r.body, natsMsg_GetData(reply), r.bodylen);
        r.body[r.bodylen] = 0;
    }
    natsMsg_Destroy(reply);
    return r;
}

static char *must_request(natsConnection *nc, const char *endpoint, const char *body)
{
    reply_t r = request_raw(nc, endpoint, token, body);
    if (r.st != NATS_OK) fail("%s request: %s", endpoint, natsStatus_GetText(r.st));
    if (r.code) fail("%s: error reply %d %s", endpoint, r.code, r.desc);
    if (!r.body || r.body[0] != '{') fail("%s: reply is not a JSON object: %s", endpoint, r.body ? r.body : "");
    return r.body;
}

static void now_rfc3339(char *out, size_t sz)
{
    time_t t = time(NULL);
    struct tm tmv;
    gmtime_r(&t, &tmv);
    strftime(out, sz, "%Y-%m-%dT%H:%M:%SZ", &tmv);
}

/* JetStream publish of one turn; returns status, fills ack. */
static natsStatus publish_turn(jsCtx *js, const char *tok, const char *uid, const char *id,
                               const char *msgtext, const char *resp, jsPubAck **pa, jsErrCode *jerr)
{
    char subj[512], body[4096], ts[40], msgid[256];
    natsMsg *m = NULL;
    natsStatus s;
    jsPubOptions po;

    now_rfc3339(ts, sizeof(ts));
    subject(subj, sizeof(subj), "turns", tok);
    snprintf(body, sizeof(body),
             "{\"id\":\"%s\",\"user_id\":\"%s\",\"conversation_id\":\"probe-%s\",\"user_message\":\"%s\","
             "\"assistant_response\":\"%s\",\"timestamp\":\"%s\",\"metadata\":{\"client\":\"c-probe\"}}",
             id, uid, run, msgtext, resp, ts);
    snprintf(msgid, sizeof(msgid), "%s:%s", tok, id); /* Nats-Msg-Id: <user-token>:<event id> */
    s = natsMsg_Create(&m, subj, NULL, body, (int) strlen(body));
    if (s != NATS_OK) return s;
    jsPubOptions_Init(&po);
    po.MsgId = msgid;
    po.MaxWait = REQ_TIMEOUT;
    s = js_PublishMsg(pa, js, m, &po, jerr);
    natsMsg_Destroy(m);
    return s;
}

int main(void)
{
    natsConnection *nc = NULL;
    natsOptions *opts = NULL;
    jsCtx *js = NULL;
    jsOptions jo;
    natsStatus s;
    char id1[128], id2[128], boat[96], harbour[96], m1[512], r1[512], m2[512], r2[512];
    char subj[512], body[1024];

    signal(SIGALRM, on_alarm);
    alarm(90);
    setvbuf(stdout, NULL, _IOLBF, 0);

    const char *url = envor("NATS_URL", "nats://127.0.0.1:4222");
    const char *nuser = envor("NATS_USER", "");
    const char *npass = envor("NATS_PASS", "");
    snprintf(prefix, sizeof(prefix), "%s", envor("MEMORYD_PREFIX", "memory"));
    snprintf(user, sizeof(user), "%s", envor("MEMORYD_USER", "alice"));
    if (getenv("NATS_INBOX_PREFIX") && *getenv("NATS_INBOX_PREFIX"))
        snprintf(inbox, sizeof(inbox), "%s", getenv("NATS_INBOX_PREFIX"));
    else if (*nuser)
        snprintf(inbox, sizeof(inbox), "_INBOX_%s", nuser);
    if (getenv("RUN_ID") && *getenv("RUN_ID")) snprintf(run, sizeof(run), "%s", getenv("RUN_ID"));
    else snprintf(run, sizeof(run), "%lxx%x", (unsigned long) time(NULL), (unsigned) getpid());
    {   /* the example in protocol.md "The user token" */
        char t[80];
        user_token("alice@example.com", t, sizeof(t));
        if (strcmp(t, "~76gzqgp4byjl6djerexelgd6esncrxhig2ufzlla4khkvkgg3f3a") != 0) fail("user token of alice@example.com is %s", t);
        user_token("\xe7\x94\xb0\xe4\xb8\xad@example.jp", t, sizeof(t)); /* 田中@example.jp */
        if (strcmp(t, "~u2ztravtxb57q6yhmbrd4skr6fsnscpg5lhpwwtrcwkn3e6u5m5a") != 0) fail("user token of the non-ASCII example is %s", t);
    }
    user_token(user, token, sizeof(token));

    s = natsOptions_Create(&opts);
    if (s == NATS_OK) s = natsOptions_SetServers(opts, (const char *[]){url}, 1);
    if (s == NATS_OK && *nuser) s = natsOptions_SetUserInfo(opts, nuser, npass);
    if (s == NATS_OK && *inbox) s = natsOptions_SetCustomInboxPrefix(opts, inbox);
    if (s == NATS_OK) s = natsOptions_SetTimeout(opts, 5000);
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, 2);
    if (s == NATS_OK) s = natsOptions_SetErrorHandler(opts, on_error, NULL);
    if (s == NATS_OK) s = natsOptions_SetName(opts, "memoryd-c-probe");
    if (s == NATS_OK) s = natsConnection_Connect(&nc, opts);
    if (s != NATS_OK) fail("%s (%s)", natsStatus_GetText(s), nats_GetLastError(NULL) ? nats_GetLastError(NULL) : "");
    jsOptions_Init(&jo);
    jo.Wait = REQ_TIMEOUT;
    s = natsConnection_JetStream(&js, nc, &jo);
    if (s != NATS_OK) fail("jetstream context: %s", natsStatus_GetText(s));

    snprintf(id1, sizeof(id1), "c-%s-1", run);
    snprintf(id2, sizeof(id2), "c-%s-2", run);
    snprintf(boat, sizeof(boat), "Albatross%s", run);
    snprintf(harbour, sizeof(harbour), "Cascais%s", run);
    snprintf(m1, sizeof(m1), "My sailboat is named %s.", boat);
    snprintf(r1, sizeof(r1), "%s is a lovely name for a sailboat.", boat);
    snprintf(m2, sizeof(m2), "I keep the sailboat moored in the marina of %s.", harbour);
    snprintf(r2, sizeof(r2), "The marina of %s is a good mooring.", harbour);

    /* Follow the user's memory changes (protocol.md "Memory changes") to learn
     * when the turns were extracted: the docs give no other signal. */
    natsSubscription *changes = NULL;
    subject(subj, sizeof(subj), "changes", token);
    s = natsConnection_SubscribeSync(&changes, nc, subj);
    if (s == NATS_OK) s = natsConnection_FlushTimeout(nc, REQ_TIMEOUT);
    if (s != NATS_OK) fail("subscribe %s: %s", subj, natsStatus_GetText(s));

    /* 1. publish */
    step = "publish";
    {
        jsPubAck *pa = NULL; jsErrCode jerr = 0;
        const char *ids[2] = {id1, id2}, *ms[2] = {m1, m2}, *rs[2] = {r1, r2};
        for (int i = 0; i < 2; i++) {
            s = publish_turn(js, token, user, ids[i], ms[i], rs[i], &pa, &jerr);
            if (s != NATS_OK) fail("%s: %s (js error %d, %s)", ids[i], natsStatus_GetText(s), (int) jerr, nats_GetLastError(NULL));
            if (!pa || !pa->Stream || pa->Sequence == 0) fail("%s: empty ack", ids[i]);
            if (pa->Duplicate) fail("%s: ack says duplicate", ids[i]);
            jsPubAck_Destroy(pa); pa = NULL;
        }
        s = publish_turn(js, token, user, id1, m1, r1, &pa, &jerr);
        if (s != NATS_OK) fail("re-publish: %s", natsStatus_GetText(s));
        if (!pa->Duplicate) fail("re-publish of %s not reported duplicate", id1);
        jsPubAck_Destroy(pa);
    }
    printf("ok %s\n", step);

    /* 2. enrich */
    step = "enrich";
    {
        int seen1 = 0, seen2 = 0;
        int64_t deadline = nats_Now() + 20000;
        while (!(seen1 && seen2) && nats_Now() < deadline) {
            natsMsg *cm = NULL;
            if (natsSubscription_NextMsg(&cm, changes, 200) != NATS_OK) continue;
            char *c = strndup(natsMsg_GetData(cm), natsMsg_GetDataLength(cm));
            char want[300];
            if (jhas(c, "\"type\":\"context.stored\"")) {
                snprintf(want, sizeof(want), "\"event_id\":\"%s\"", id1); if (jhas(c, want)) seen1 = 1;
                snprintf(want, sizeof(want), "\"event_id\":\"%s\"", id2); if (jhas(c, want)) seen2 = 1;
            }
            free(c); natsMsg_Destroy(cm);
        }
        snprintf(body, sizeof(body),
                 "{\"user_id\":\"%s\",\"message\":\"What is my sailboat called, and where is it moored?\","
                 "\"max_results\":5,\"threshold\":0.05}", user);
        /* The context.stored change of each turn is published once its
         * memory is committed: enrich finds it from then on, no retry. */
        if (!(seen1 && seen2)) fail("no context.stored change for both turns within 20s (seen %d %d)", seen1, seen2);
        char *rep = must_request(nc, "enrich", body);
        if (jhas(rep, "\"degraded\":true") || !jhas(rep, boat) || !jhas(rep, harbour)) {
            fprintf(stderr, "  (reply: %s)\n", rep);
            free(rep);
            rep = NULL;
        }
        if (!rep) fail("enrich after both context.stored changes lacks a turn or is degraded");
        /* the injection must hold them: look in the "injection" value */
        const char *inj = strstr(rep, "\"injection\":\"");
        if (!inj || !strstr(inj, boat) || !strstr(inj, harbour)) fail("injection lacks the turns: %s", rep);
        if (!jhas(rep, "\"facts\":[") || !jhas(rep, "\"context\":[") || !jhas(rep, "\"keywords\":[")) fail("reply shape: %s", rep);
        free(rep);
    }
    printf("ok %s\n", step);

    /* 3a. search, stats */
    step = "search";
    {
        snprintf(body, sizeof(body), "{\"user_id\":\"%s\",\"query\":\"%s\",\"max_results\":5}", user, boat);
        char *rep = must_request(nc, "search", body);
        char want[300];
        snprintf(want, sizeof(want), "\"event_id\":\"%s\"", id1);
        if (!jhas(rep, "\"results\":[") || !jhas(rep, want)) fail("search did not find %s: %s", id1, rep);
        free(rep);
    }
    printf("ok %s\n", step);
    step = "stats";
    {
        snprintf(body, sizeof(body), "{\"user_id\":\"%s\"}", user);
        char *rep = must_request(nc, "stats", body);
        if (jnum(rep, "turns_received", -1) < 2 || jnum(rep, "context_items", -1) < 2 || jnum(rep, "turns_pending", -1) < 0)
            fail("stats: %s", rep);
        free(rep);
    }
    printf("ok %s\n", step);

    /* 3b. forget */
    step = "forget";
    {
        snprintf(body, sizeof(body), "{\"user_id\":\"%s\"}", user);
        char *rep = must_request(nc, "forget", body);
        const char *keys[] = {"facts", "fact_history", "context", "turns", "jobs", "stream_events", "dead_letters", "documents"};
        for (int i = 0; i < 8; i++)
            if (jnum(rep, keys[i], -1) < 0) fail("forget reply lacks %s: %s", keys[i], rep);
        if (jnum(rep, "context", 0) < 2 || jnum(rep, "turns", 0) < 2 || jnum(rep, "stream_events", 0) < 2)
            fail("forget deleted too little: %s", rep);
        free(rep);
        snprintf(body, sizeof(body),
                 "{\"user_id\":\"%s\",\"message\":\"What is my sailboat called, and where is it moored?\","
                 "\"max_results\":5,\"threshold\":0.05}", user);
        rep = must_request(nc, "enrich", body);
        if (jhas(rep, "\"degraded\":true")) fail("enrich after forget degraded: %s", rep);
        if (jhas(rep, run) || !jhas(rep, "\"context\":[]")) fail("enrich still returns forgotten data: %s", rep);
        free(rep);
        snprintf(body, sizeof(body), "{\"user_id\":\"%s\"}", user);
        rep = must_request(nc, "stats", body);
        if (jnum(rep, "turns_received", -1) != 0 || jnum(rep, "context_items", -1) != 0) fail("stats after forget: %s", rep);
        free(rep);
    }
    printf("ok %s\n", step);

    /* 4. error replies */
    step = "errors";
    {
        const char *other = strcmp(user, "bob") ? "bob" : "carol";
        char b2[256], b3[512];
        snprintf(b2, sizeof(b2), "{\"user_id\":\"%s\",\"message\":\"hello\"}", other);
        snprintf(b3, sizeof(b3), "{\"user_id\":\"%s\",\"message\":\"hello\",\"max_results\":\"3\"}", user);
        const char *names[] = {"missing user_id", "user_id of another token", "wrong type", "malformed JSON"};
        const char *bodies[] = {"{\"message\":\"hello\"}", b2, b3, "{not json"};
        for (int i = 0; i < 4; i++) {
            reply_t r = request_raw(nc, "enrich", token, bodies[i]);
            if (r.st != NATS_OK) fail("%s: %s", names[i], natsStatus_GetText(r.st));
            if (r.code != 400) fail("%s: expected code 400, got %d (body %s)", names[i], r.code, r.body ? r.body : "");
            if (!r.desc[0]) fail("%s: empty Nats-Service-Error", names[i]);
            if (r.bodylen != 0) fail("%s: error reply body not empty", names[i]);
        }
    }
    printf("ok %s\n", step);

    /* 5. isolation: the same credential for another user must get nothing */
    step = "isolation";
    {
        const char *other = strcmp(user, "bob") ? "bob" : "carol";
        char otok[80], oid[128];
        user_token(other, otok, sizeof(otok));
        snprintf(oid, sizeof(oid), "c-%s-x", run);
        int before = wait_violations(0, 0);
        jsPubAck *pa = NULL; jsErrCode jerr = 0;
        s = publish_turn(js, otok, other, oid, "I live in Atlantis", "ok", &pa, &jerr);
        if (s == NATS_OK) fail("publish for %s was acknowledged (seq %llu)", other, (unsigned long long) pa->Sequence);
        fprintf(stderr, "  (publish %s.turns.%s: %s)\n", prefix, otok, natsStatus_GetText(s));
        snprintf(body, sizeof(body), "{\"user_id\":\"%s\",\"message\":\"where do I live?\"}", other);
        reply_t r = request_raw(nc, "enrich", otok, body);
        if (r.st == NATS_OK) fail("enrich for %s answered (code %d): %s", other, r.code, r.body ? r.body : r.desc);
        fprintf(stderr, "  (request %s.enrich.%s: %s)\n", prefix, otok, natsStatus_GetText(r.st));
        /* protocol.md: a refused publish or request is reported to the
         * connection's error handler; that is how "not allowed" differs
         * from "memoryd is down". */
        int got = wait_violations(before + 2, 10000) - before;
        if (got < 2) fail("%d permission violations reported for the 2 refused operations, want 2", got);
    }
    printf("ok %s\n", step);

    natsSubscription_Destroy(changes);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    natsOptions_Destroy(opts);
    nats_Close();
    return 0;
}
