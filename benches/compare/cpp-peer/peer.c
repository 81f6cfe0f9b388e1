/*
 * peer.c - benchmark peer that drives the official Apache Pulsar C++ client
 * (libpulsar, as shipped in the PyPI `pulsar-client` wheel) through its C API.
 *
 * No headers ship with the wheel, so the handful of opaque types, enums and
 * prototypes used here are declared below. They mirror
 * apache/pulsar-client-cpp include/pulsar/c/ headers (3.x); every function used is
 * exported by the wheel's libpulsar-<hash>.so (checked with nm -D).
 *
 *   peer produce --url URL --topic T --count N --size BYTES [--batch]
 *                [--batch-max-messages M] [--batch-max-delay-ms D]
 *                [--max-pending P] [--sync]
 *   peer consume --url URL --topic T --subscription S --count N
 *                [--type shared|exclusive|failover|key_shared] [--receiver-queue Q]
 *
 * Common options: --timeout SECS (operation / send / receive timeout, default 30),
 * --log-level debug|info|warn|error|off (client log to stderr, default warn).
 *   peer latency --url URL --topic T --subscription S [--rate R] [--size BYTES]
 *                [--duration SECS] [--warmup SECS] [--batch] [--batch-max-delay-ms D]
 *                [--receiver-queue Q]
 *
 * latency: a producer sends R messages/s (default 10000) of BYTES bytes
 * (default 1024) on a schedule fixed at the start (message n's slot is
 * start + n / R; the main thread sleeps until the next slot, and a late send
 * does not move later slots), while a consumer thread in the same process
 * (Shared subscription, from the end of the topic) receives and acks each
 * message. A message's latency is its receive instant minus its slot (the
 * payload's first 8 bytes carry its sequence number), so it includes the time
 * the sender fell behind. The first --warmup seconds (default 2) are sent and
 * received but not counted; then --duration seconds (default 20) are.
 *
 * consume only: --check-drained MS (after the measured loop, wait MS ms and fail
 * if any further message arrives; default 0 = no check), --verify (fail unless
 * the N payloads carry N distinct producer sequence numbers 0..N-1, i.e. no
 * duplicates and no foreign messages; needs a topic written by ONE produce run
 * with --size >= 8).
 *
 * Payload: BYTES bytes of fixed filler; produce stores the message's sequence
 * number (0..N-1, little-endian u64) in its first min(8, BYTES) bytes.
 *
 * Prints exactly one JSON line on stdout on success; exits non-zero with a
 * message on stderr on any error.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

/* ---------------------------------------------------------------------------
 * C API declarations (subset of pulsar-client-cpp include/pulsar/c/ headers, 3.x)
 * ------------------------------------------------------------------------- */
typedef struct _pulsar_client pulsar_client_t;
typedef struct _pulsar_client_configuration pulsar_client_configuration_t;
typedef struct _pulsar_producer pulsar_producer_t;
typedef struct _pulsar_producer_configuration pulsar_producer_configuration_t;
typedef struct _pulsar_consumer pulsar_consumer_t;
typedef struct _pulsar_consumer_configuration pulsar_consumer_configuration_t;
typedef struct _pulsar_message pulsar_message_t;
typedef struct _pulsar_message_id pulsar_message_id_t;

/* result.h: only the values we name; the rest go through pulsar_result_str(). */
typedef enum {
    pulsar_result_Ok = 0,
    pulsar_result_Timeout = 3,
} pulsar_result;

/* client_configuration.h */
typedef enum { pulsar_DEBUG = 0, pulsar_INFO = 1, pulsar_WARN = 2, pulsar_ERROR = 3 } pulsar_logger_level_t;
typedef void (*pulsar_logger)(pulsar_logger_level_t level, const char *file, int line,
                              const char *message, void *ctx);
typedef struct pulsar_logger_t {
    void *ctx;
    bool (*is_enabled)(pulsar_logger_level_t level, void *ctx);
    pulsar_logger log;
} pulsar_logger_t;

/* consumer_configuration.h */
typedef enum {
    pulsar_ConsumerExclusive,
    pulsar_ConsumerShared,
    pulsar_ConsumerFailover,
    pulsar_ConsumerKeyShared
} pulsar_consumer_type;
typedef enum { initial_position_latest, initial_position_earliest } initial_position;

/* producer.h / consumer.h callbacks */
typedef void (*pulsar_send_callback)(pulsar_result, pulsar_message_id_t *msgId, void *ctx);
typedef void (*pulsar_result_callback)(pulsar_result, void *ctx);

const char *pulsar_result_str(pulsar_result result);

pulsar_client_configuration_t *pulsar_client_configuration_create(void);
void pulsar_client_configuration_free(pulsar_client_configuration_t *conf);
void pulsar_client_configuration_set_operation_timeout_seconds(pulsar_client_configuration_t *conf, int timeout);
void pulsar_client_configuration_set_logger_t(pulsar_client_configuration_t *conf, pulsar_logger_t logger);
void pulsar_client_configuration_set_stats_interval_in_seconds(pulsar_client_configuration_t *conf,
                                                               const unsigned int interval);

pulsar_client_t *pulsar_client_create(const char *serviceUrl, const pulsar_client_configuration_t *conf);
pulsar_result pulsar_client_create_producer(pulsar_client_t *client, const char *topic,
                                            const pulsar_producer_configuration_t *conf,
                                            pulsar_producer_t **producer);
pulsar_result pulsar_client_subscribe(pulsar_client_t *client, const char *topic, const char *subscriptionName,
                                      const pulsar_consumer_configuration_t *conf, pulsar_consumer_t **consumer);
pulsar_result pulsar_client_close(pulsar_client_t *client);
void pulsar_client_free(pulsar_client_t *client);

pulsar_producer_configuration_t *pulsar_producer_configuration_create(void);
void pulsar_producer_configuration_free(pulsar_producer_configuration_t *conf);
void pulsar_producer_configuration_set_send_timeout(pulsar_producer_configuration_t *conf, int sendTimeoutMs);
void pulsar_producer_configuration_set_max_pending_messages(pulsar_producer_configuration_t *conf, int n);
void pulsar_producer_configuration_set_block_if_queue_full(pulsar_producer_configuration_t *conf, int block);
void pulsar_producer_configuration_set_batching_enabled(pulsar_producer_configuration_t *conf, int enabled);
void pulsar_producer_configuration_set_batching_max_messages(pulsar_producer_configuration_t *conf,
                                                             unsigned int n);
void pulsar_producer_configuration_set_batching_max_publish_delay_ms(pulsar_producer_configuration_t *conf,
                                                                     unsigned long ms);

pulsar_result pulsar_producer_send(pulsar_producer_t *producer, pulsar_message_t *msg);
void pulsar_producer_send_async(pulsar_producer_t *producer, pulsar_message_t *msg,
                                pulsar_send_callback callback, void *ctx);
pulsar_result pulsar_producer_flush(pulsar_producer_t *producer);
pulsar_result pulsar_producer_close(pulsar_producer_t *producer);
void pulsar_producer_free(pulsar_producer_t *producer);

pulsar_consumer_configuration_t *pulsar_consumer_configuration_create(void);
void pulsar_consumer_configuration_free(pulsar_consumer_configuration_t *conf);
void pulsar_consumer_configuration_set_consumer_type(pulsar_consumer_configuration_t *conf,
                                                     pulsar_consumer_type type);
void pulsar_consumer_configuration_set_receiver_queue_size(pulsar_consumer_configuration_t *conf, int size);
void pulsar_consumer_set_subscription_initial_position(pulsar_consumer_configuration_t *conf,
                                                       initial_position pos);

pulsar_result pulsar_consumer_receive_with_timeout(pulsar_consumer_t *consumer, pulsar_message_t **msg,
                                                   int timeoutMs);
void pulsar_consumer_acknowledge_async(pulsar_consumer_t *consumer, pulsar_message_t *message,
                                       pulsar_result_callback callback, void *ctx);
pulsar_result pulsar_consumer_close(pulsar_consumer_t *consumer);
void pulsar_consumer_free(pulsar_consumer_t *consumer);

pulsar_message_t *pulsar_message_create(void);
const void *pulsar_message_get_data(pulsar_message_t *message);
void pulsar_message_free(pulsar_message_t *message);
void pulsar_message_set_content(pulsar_message_t *message, const void *data, size_t size);
uint32_t pulsar_message_get_length(pulsar_message_t *message);

void pulsar_message_id_free(pulsar_message_id_t *messageId);

/* ---------------------------------------------------------------------------
 * helpers
 * ------------------------------------------------------------------------- */
static _Noreturn void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("peer: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static _Noreturn void usage(void) {
    fputs("usage:\n"
          "  peer produce --url URL --topic T --count N --size BYTES [--batch]\n"
          "               [--batch-max-messages M] [--batch-max-delay-ms D]\n"
          "               [--max-pending P] [--sync] [--timeout SECS] [--log-level L]\n"
          "  peer consume --url URL --topic T --subscription S --count N\n"
          "               [--type shared|exclusive|failover|key_shared] [--receiver-queue Q]\n"
          "               [--check-drained MS] [--verify] [--timeout SECS] [--log-level L]\n"
          "  peer latency --url URL --topic T --subscription S [--rate R] [--size BYTES]\n"
          "               [--duration SECS] [--warmup SECS] [--batch] [--batch-max-delay-ms D]\n"
          "               [--receiver-queue Q] [--timeout SECS] [--log-level L]\n",
          stderr);
    exit(2);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct {
    double user, sys;
} cpu_t;

static cpu_t cpu_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    cpu_t c = {(double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6,
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6};
    return c;
}

static long long parse_ll(const char *opt, const char *s, long long min) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !end || *end || v < min) die("invalid value for %s: '%s'", opt, s);
    return v;
}

static double parse_secs(const char *opt, const char *s) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !end || *end || !(v >= 0.0) || v > 86400.0) die("invalid value for %s: '%s'", opt, s);
    return v;
}

/* ---- logging: route the C++ client's log to stderr, filtered by level ---- */
static int g_min_log_level = pulsar_WARN; /* 4 = off */

static bool log_is_enabled(pulsar_logger_level_t level, void *ctx) {
    (void)ctx;
    return (int)level >= g_min_log_level;
}

static void log_to_stderr(pulsar_logger_level_t level, const char *file, int line, const char *message,
                          void *ctx) {
    (void)ctx;
    static const char *names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    const char *n = ((unsigned)level < 4) ? names[level] : "?";
    fprintf(stderr, "pulsar-cpp %s %s:%d %s\n", n, file ? file : "", line, message ? message : "");
}

/* ---- options ---- */
typedef struct {
    const char *op, *url, *topic, *subscription;
    long long count, size, batch_max_messages, batch_max_delay_ms, max_pending, receiver_queue;
    long long timeout_s, check_drained_ms, rate;
    double duration_s, warmup_s;
    bool batch, sync, verify;
    pulsar_consumer_type type;
} opts_t;

static void parse_args(int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    o->count = -1;
    o->size = -1;
    o->batch_max_messages = 1000; /* C++ client defaults */
    o->batch_max_delay_ms = 10;
    o->max_pending = 1000;
    o->receiver_queue = 1000;
    o->timeout_s = 30;
    o->type = pulsar_ConsumerShared;
    o->rate = 10000;
    o->duration_s = 20.0;
    o->warmup_s = 2.0;
    if (argc < 2) usage();
    o->op = argv[1];
    if (strcmp(o->op, "produce") && strcmp(o->op, "consume") && strcmp(o->op, "latency")) usage();
    bool latency = !strcmp(o->op, "latency");
    if (latency) o->size = 1024;
    /* latency takes the producer's and the consumer's options */
    bool produce = !strcmp(o->op, "produce") || latency;
    bool consume = !strcmp(o->op, "consume") || latency;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
#define VAL() (i + 1 < argc ? argv[++i] : (die("%s needs a value", a), (char *)NULL))
        if (!strcmp(a, "--url")) o->url = VAL();
        else if (!strcmp(a, "--topic")) o->topic = VAL();
        else if (!strcmp(a, "--count")) o->count = parse_ll(a, VAL(), 1);
        else if (!strcmp(a, "--timeout")) o->timeout_s = parse_ll(a, VAL(), 1);
        else if (!strcmp(a, "--log-level")) {
            const char *l = VAL();
            if (!strcmp(l, "debug")) g_min_log_level = pulsar_DEBUG;
            else if (!strcmp(l, "info")) g_min_log_level = pulsar_INFO;
            else if (!strcmp(l, "warn")) g_min_log_level = pulsar_WARN;
            else if (!strcmp(l, "error")) g_min_log_level = pulsar_ERROR;
            else if (!strcmp(l, "off")) g_min_log_level = 4;
            else die("invalid --log-level '%s'", l);
        } else if (produce && !strcmp(a, "--size")) o->size = parse_ll(a, VAL(), 0);
        else if (produce && !strcmp(a, "--batch")) o->batch = true;
        else if (produce && !strcmp(a, "--batch-max-messages")) o->batch_max_messages = parse_ll(a, VAL(), 1);
        else if (produce && !strcmp(a, "--batch-max-delay-ms")) o->batch_max_delay_ms = parse_ll(a, VAL(), 0);
        else if (produce && !strcmp(a, "--max-pending")) o->max_pending = parse_ll(a, VAL(), 1);
        else if (!latency && produce && !strcmp(a, "--sync")) o->sync = true;
        else if (consume && !strcmp(a, "--subscription")) o->subscription = VAL();
        else if (consume && !strcmp(a, "--receiver-queue")) o->receiver_queue = parse_ll(a, VAL(), 0);
        else if (!latency && consume && !strcmp(a, "--check-drained")) o->check_drained_ms = parse_ll(a, VAL(), 0);
        else if (!latency && consume && !strcmp(a, "--verify")) o->verify = true;
        else if (latency && !strcmp(a, "--rate")) o->rate = parse_ll(a, VAL(), 1);
        else if (latency && !strcmp(a, "--duration")) o->duration_s = parse_secs(a, VAL());
        else if (latency && !strcmp(a, "--warmup")) o->warmup_s = parse_secs(a, VAL());
        else if (!latency && consume && !strcmp(a, "--type")) {
            const char *t = VAL();
            if (!strcmp(t, "shared")) o->type = pulsar_ConsumerShared;
            else if (!strcmp(t, "exclusive")) o->type = pulsar_ConsumerExclusive;
            else if (!strcmp(t, "failover")) o->type = pulsar_ConsumerFailover;
            else if (!strcmp(t, "key_shared")) o->type = pulsar_ConsumerKeyShared;
            else die("invalid --type '%s'", t);
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage();
        else die("unknown option '%s' for %s", a, o->op);
#undef VAL
    }
    if (!o->url) die("--url is required");
    if (!o->topic) die("--topic is required");
    if (!latency && o->count < 1) die("--count is required");
    if (produce && o->size < 0) die("--size is required");
    if (consume && !o->subscription) die("--subscription is required");
    if (latency && o->size < 8) die("--size must be at least 8 (the sequence number)");
    if (latency && (o->rate > 10000000 || (long long)(o->duration_s * (double)o->rate + 0.5) < 1))
        die("--rate %lld for --duration %g measures no message (or the rate is over 10M/s)", o->rate,
            o->duration_s);
    if (o->max_pending > INT32_MAX || o->receiver_queue > INT32_MAX || o->timeout_s > 1000000 ||
        o->batch_max_messages > UINT32_MAX || o->check_drained_ms > INT32_MAX)
        die("option value out of range");
}

static pulsar_client_t *make_client(const opts_t *o) {
    pulsar_client_configuration_t *conf = pulsar_client_configuration_create();
    if (!conf) die("pulsar_client_configuration_create failed");
    pulsar_logger_t logger = {.ctx = NULL, .is_enabled = log_is_enabled, .log = log_to_stderr};
    pulsar_client_configuration_set_logger_t(conf, logger);
    pulsar_client_configuration_set_operation_timeout_seconds(conf, (int)o->timeout_s);
    pulsar_client_configuration_set_stats_interval_in_seconds(conf, 0);
    pulsar_client_t *client = pulsar_client_create(o->url, conf);
    pulsar_client_configuration_free(conf);
    if (!client) die("pulsar_client_create(%s) failed", o->url);
    return client;
}

static void emit_json(const char *op, long long count, unsigned long long bytes, double secs, cpu_t c0,
                      cpu_t c1, const char *extra) {
    printf("{\"client\":\"cpp\",\"op\":\"%s\",\"count\":%lld,\"bytes\":%llu,\"seconds\":%.6f,"
           "\"msgs_per_sec\":%.1f,\"cpu_user_s\":%.6f,\"cpu_sys_s\":%.6f%s}\n",
           op, count, bytes, secs, secs > 0 ? (double)count / secs : 0.0, c1.user - c0.user, c1.sys - c0.sys,
           extra ? extra : "");
    fflush(stdout);
}

/* ---------------------------------------------------------------------------
 * produce
 * ------------------------------------------------------------------------- */
typedef struct {
    atomic_llong done;
    atomic_int first_error; /* pulsar_result of the first failed receipt, 0 = none */
    long long target;       /* number of receipts expected */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} receipts_t;

static void on_send(pulsar_result res, pulsar_message_id_t *msg_id, void *ctx) {
    receipts_t *r = ctx;
    /* The 3.x C API allocates a fresh message id per successful receipt and
       hands ownership to the callback. */
    if (msg_id) pulsar_message_id_free(msg_id);
    if (res != pulsar_result_Ok) {
        int expected = 0;
        atomic_compare_exchange_strong(&r->first_error, &expected, (int)res);
    }
    long long n = atomic_fetch_add(&r->done, 1) + 1;
    if (res != pulsar_result_Ok || n == r->target) {
        pthread_mutex_lock(&r->mu);
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
}

static void put_seq(char *payload, size_t size, uint64_t seq) {
    for (size_t i = 0; i < size && i < 8; i++) payload[i] = (char)(seq >> (8 * i));
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double pct_us(const uint64_t *sorted, long long n, double p) {
    /* nearest-rank percentile */
    long long rank = (long long)((p / 100.0) * (double)n + 0.999999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return (double)sorted[rank - 1] / 1000.0;
}

static pulsar_producer_t *create_producer(pulsar_client_t *client, const opts_t *o) {
    pulsar_producer_configuration_t *pc = pulsar_producer_configuration_create();
    pulsar_producer_configuration_set_send_timeout(pc, (int)(o->timeout_s * 1000));
    pulsar_producer_configuration_set_max_pending_messages(pc, (int)o->max_pending);
    pulsar_producer_configuration_set_block_if_queue_full(pc, 1);
    /* The C++ client enables batching by default; make it explicit either way. */
    pulsar_producer_configuration_set_batching_enabled(pc, o->batch ? 1 : 0);
    if (o->batch) {
        pulsar_producer_configuration_set_batching_max_messages(pc, (unsigned int)o->batch_max_messages);
        pulsar_producer_configuration_set_batching_max_publish_delay_ms(pc,
                                                                        (unsigned long)o->batch_max_delay_ms);
    }
    pulsar_producer_t *producer = NULL;
    pulsar_result r = pulsar_client_create_producer(client, o->topic, pc, &producer);
    pulsar_producer_configuration_free(pc);
    if (r != pulsar_result_Ok) die("create producer on %s via %s: %s", o->topic, o->url, pulsar_result_str(r));
    return producer;
}

static int run_produce(const opts_t *o) {
    pulsar_client_t *client = make_client(o);

    pulsar_producer_t *producer = create_producer(client, o);
    pulsar_result r;

    size_t size = (size_t)o->size;
    char *payload = malloc(size ? size : 1);
    if (!payload) die("out of memory");
    for (size_t i = 0; i < size; i++) payload[i] = (char)('a' + (i % 26));

    const long long n = o->count;
    uint64_t *lat = NULL;
    char extra[128] = "";
    double t0, t1;
    cpu_t c0, c1;

    if (o->sync) {
        lat = malloc(sizeof(uint64_t) * (size_t)n);
        if (!lat) die("out of memory");
        c0 = cpu_now();
        t0 = now_s();
        for (long long i = 0; i < n; i++) {
            put_seq(payload, size, (uint64_t)i);
            pulsar_message_t *m = pulsar_message_create();
            pulsar_message_set_content(m, payload, size);
            uint64_t s = now_ns();
            r = pulsar_producer_send(producer, m);
            lat[i] = now_ns() - s;
            pulsar_message_free(m);
            if (r != pulsar_result_Ok) die("send #%lld failed: %s", i, pulsar_result_str(r));
        }
        t1 = now_s();
        c1 = cpu_now();
        qsort(lat, (size_t)n, sizeof(uint64_t), cmp_u64);
        snprintf(extra, sizeof extra, ",\"lat_p50_us\":%.1f,\"lat_p99_us\":%.1f", pct_us(lat, n, 50.0),
                 pct_us(lat, n, 99.0));
    } else {
        receipts_t rc;
        atomic_init(&rc.done, 0);
        atomic_init(&rc.first_error, 0);
        rc.target = n;
        pthread_mutex_init(&rc.mu, NULL);
        pthread_cond_init(&rc.cv, NULL);

        c0 = cpu_now();
        t0 = now_s();
        for (long long i = 0; i < n; i++) {
            if (atomic_load_explicit(&rc.first_error, memory_order_relaxed)) break;
            put_seq(payload, size, (uint64_t)i);
            pulsar_message_t *m = pulsar_message_create();
            pulsar_message_set_content(m, payload, size);
            /* blocks while max_pending messages are outstanding (block_if_queue_full) */
            pulsar_producer_send_async(producer, m, on_send, &rc);
            pulsar_message_free(m); /* the C++ Message was copied into the send op */
        }
        int e = atomic_load(&rc.first_error);
        if (!e) {
            r = pulsar_producer_flush(producer);
            if (r != pulsar_result_Ok) die("flush failed: %s", pulsar_result_str(r));
        }
        /* flush returns once everything is persisted; the receipts themselves
           may still be running on the IO thread, so wait for all of them. */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += o->timeout_s;
        pthread_mutex_lock(&rc.mu);
        while (atomic_load(&rc.done) < n && !atomic_load(&rc.first_error)) {
            if (pthread_cond_timedwait(&rc.cv, &rc.mu, &dl) == ETIMEDOUT) break;
        }
        pthread_mutex_unlock(&rc.mu);
        t1 = now_s();
        c1 = cpu_now();
        e = atomic_load(&rc.first_error);
        if (e) die("async send failed: %s", pulsar_result_str((pulsar_result)e));
        long long done = atomic_load(&rc.done);
        if (done != n) die("timeout: only %lld of %lld receipts after %llds", done, n, o->timeout_s);
    }

    r = pulsar_producer_close(producer);
    if (r != pulsar_result_Ok) die("producer close: %s", pulsar_result_str(r));
    pulsar_producer_free(producer);
    pulsar_client_close(client);
    pulsar_client_free(client);
    free(payload);
    free(lat);

    emit_json("produce", n, (unsigned long long)n * (unsigned long long)size, t1 - t0, c0, c1, extra);
    return 0;
}

/* ---------------------------------------------------------------------------
 * consume
 * ------------------------------------------------------------------------- */
static pulsar_consumer_t *subscribe(pulsar_client_t *client, const opts_t *o, pulsar_consumer_type type,
                                    initial_position position) {
    pulsar_consumer_configuration_t *cc = pulsar_consumer_configuration_create();
    pulsar_consumer_configuration_set_consumer_type(cc, type);
    pulsar_consumer_configuration_set_receiver_queue_size(cc, (int)o->receiver_queue);
    pulsar_consumer_set_subscription_initial_position(cc, position);
    pulsar_consumer_t *consumer = NULL;
    pulsar_result r = pulsar_client_subscribe(client, o->topic, o->subscription, cc, &consumer);
    pulsar_consumer_configuration_free(cc);
    if (r != pulsar_result_Ok)
        die("subscribe %s/%s via %s: %s", o->topic, o->subscription, o->url, pulsar_result_str(r));
    return consumer;
}
typedef struct {
    atomic_llong done;
    atomic_int first_error;
} acks_t;

static void on_ack(pulsar_result res, void *ctx) {
    acks_t *a = ctx;
    if (res != pulsar_result_Ok) {
        int expected = 0;
        atomic_compare_exchange_strong(&a->first_error, &expected, (int)res);
    }
    atomic_fetch_add(&a->done, 1);
}

static int run_consume(const opts_t *o) {
    pulsar_client_t *client = make_client(o);

    pulsar_consumer_t *consumer = subscribe(client, o, o->type, initial_position_earliest);
    pulsar_result r;

    acks_t ac;
    atomic_init(&ac.done, 0);
    atomic_init(&ac.first_error, 0);
    const long long n = o->count;
    const int tmo_ms = (int)(o->timeout_s * 1000);
    unsigned long long bytes = 0;
    unsigned char *seen = NULL; /* --verify: one bit per expected sequence number */
    long long dups = 0, foreign = 0;
    if (o->verify && !(seen = calloc((size_t)(n + 7) / 8, 1))) die("out of memory");

    cpu_t c0 = cpu_now();
    double t0 = now_s();
    for (long long i = 0; i < n; i++) {
        pulsar_message_t *m = NULL;
        r = pulsar_consumer_receive_with_timeout(consumer, &m, tmo_ms);
        if (r != pulsar_result_Ok)
            die("receive #%lld of %lld failed: %s", i + 1, n, pulsar_result_str(r));
        uint32_t len = pulsar_message_get_length(m);
        bytes += len;
        if (seen) {
            const unsigned char *d = pulsar_message_get_data(m);
            uint64_t seq = 0;
            for (int k = 0; k < 8 && (uint32_t)k < len; k++) seq |= (uint64_t)d[k] << (8 * k);
            if (len < 8 || seq >= (uint64_t)n) foreign++;
            else if (seen[seq / 8] & (1u << (seq % 8))) dups++;
            else seen[seq / 8] |= (unsigned char)(1u << (seq % 8));
        }
        pulsar_consumer_acknowledge_async(consumer, m, on_ack, &ac);
        pulsar_message_free(m);
        if (atomic_load_explicit(&ac.first_error, memory_order_relaxed)) break;
    }
    /* with ack grouping (the default) the callbacks complete on enqueue;
       wait for all of them anyway */
    double dl = now_s() + (double)o->timeout_s;
    while (atomic_load(&ac.done) < n && !atomic_load(&ac.first_error) && now_s() < dl) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    double t1 = now_s();
    cpu_t c1 = cpu_now();
    int e = atomic_load(&ac.first_error);
    if (e) die("acknowledge failed: %s", pulsar_result_str((pulsar_result)e));
    if (atomic_load(&ac.done) < n) die("timeout waiting for ack callbacks");
    if (seen && (dups || foreign))
        die("verify failed on %s: %lld duplicate and %lld unexpected payloads among %lld received", o->topic,
            dups, foreign, n);
    free(seen);

    if (o->check_drained_ms > 0) {
        pulsar_message_t *m = NULL;
        r = pulsar_consumer_receive_with_timeout(consumer, &m, (int)o->check_drained_ms);
        if (r == pulsar_result_Ok) {
            pulsar_message_free(m);
            die("more than %lld messages on %s (an extra one arrived)", n, o->topic);
        }
        if (r != pulsar_result_Timeout) die("drain check receive failed: %s", pulsar_result_str(r));
    }

    r = pulsar_consumer_close(consumer);
    if (r != pulsar_result_Ok) die("consumer close: %s", pulsar_result_str(r));
    pulsar_consumer_free(consumer);
    pulsar_client_close(client);
    pulsar_client_free(client);

    emit_json("consume", n, bytes, t1 - t0, c0, c1, o->verify ? ",\"verified\":true" : NULL);
    return 0;
}

/* ---------------------------------------------------------------------------
 * latency
 * ------------------------------------------------------------------------- */
typedef struct {
    pulsar_consumer_t *consumer;
    uint64_t origin_ns, interval_ns;
    long long warm, total;
    uint64_t *lat; /* measured latencies, ns */
    long long nlat;
    unsigned char *seen; /* one bit per sequence number */
    long long distinct, dups, foreign;
    atomic_llong sent_total; /* -1 until the sender is done */
    atomic_int stop, finished;
    int error; /* pulsar_result of a failed receive, 0 = none */
    acks_t acks;
} lat_t;

static void *lat_receive(void *arg) {
    lat_t *L = arg;
    for (;;) {
        long long target = atomic_load(&L->sent_total);
        if ((target >= 0 && L->distinct >= target) || atomic_load(&L->stop)) break;
        pulsar_message_t *m = NULL;
        pulsar_result r = pulsar_consumer_receive_with_timeout(L->consumer, &m, 100);
        if (r == pulsar_result_Timeout) continue;
        if (r != pulsar_result_Ok) {
            L->error = (int)r;
            break;
        }
        uint64_t now = now_ns();
        uint32_t len = pulsar_message_get_length(m);
        const unsigned char *d = pulsar_message_get_data(m);
        uint64_t seq = 0;
        for (int k = 0; k < 8 && (uint32_t)k < len; k++) seq |= (uint64_t)d[k] << (8 * k);
        if (len < 8 || seq >= (uint64_t)L->total) L->foreign++;
        else if (L->seen[seq / 8] & (1u << (seq % 8))) L->dups++;
        else {
            L->seen[seq / 8] |= (unsigned char)(1u << (seq % 8));
            L->distinct++;
            if ((long long)seq >= L->warm) {
                uint64_t slot = L->origin_ns + seq * L->interval_ns;
                L->lat[L->nlat++] = now > slot ? now - slot : 0;
            }
        }
        pulsar_consumer_acknowledge_async(L->consumer, m, on_ack, &L->acks);
        pulsar_message_free(m);
    }
    atomic_store(&L->finished, 1);
    return NULL;
}

static int run_latency(const opts_t *o) {
    pulsar_client_t *client = make_client(o);

    /* Shared: pulsar-lite dispatches some entries twice on Exclusive */
    pulsar_consumer_t *consumer = subscribe(client, o, pulsar_ConsumerShared, initial_position_latest);
    pulsar_producer_t *producer = create_producer(client, o);
    pulsar_result r;

    lat_t L;
    memset(&L, 0, sizeof L);
    L.consumer = consumer;
    L.interval_ns = 1000000000ull / (uint64_t)o->rate;
    L.warm = (long long)(o->warmup_s * (double)o->rate + 0.5);
    L.total = L.warm + (long long)(o->duration_s * (double)o->rate + 0.5);
    L.lat = malloc(sizeof(uint64_t) * (size_t)(L.total - L.warm));
    L.seen = calloc((size_t)(L.total + 7) / 8, 1);
    if (!L.lat || !L.seen) die("out of memory");
    atomic_init(&L.sent_total, -1);
    atomic_init(&L.stop, 0);
    atomic_init(&L.finished, 0);
    atomic_init(&L.acks.done, 0);
    atomic_init(&L.acks.first_error, 0);

    receipts_t rc;
    atomic_init(&rc.done, 0);
    atomic_init(&rc.first_error, 0);
    rc.target = L.total;
    pthread_mutex_init(&rc.mu, NULL);
    pthread_cond_init(&rc.cv, NULL);

    size_t size = (size_t)o->size;
    char *payload = malloc(size);
    if (!payload) die("out of memory");
    memset(payload, 'x', size);

    /* wake within a microsecond of each slot, not within the default 50 us slack */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    /* the first slot leaves the threads a moment to start */
    L.origin_ns = now_ns() + 20000000ull;
    pthread_t receiver;
    if (pthread_create(&receiver, NULL, lat_receive, &L)) die("pthread_create failed");

    cpu_t c0 = cpu_now();
    long long sent = 0, late = 0;
    uint64_t behind_max = 0, last_measured = 0;
    for (long long seq = 0; seq < L.total; seq++) {
        if (atomic_load_explicit(&rc.first_error, memory_order_relaxed)) break;
        uint64_t slot = L.origin_ns + (uint64_t)seq * L.interval_ns;
        if (slot > now_ns()) {
            struct timespec ts = {(time_t)(slot / 1000000000ull), (long)(slot % 1000000000ull)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
            }
        }
        uint64_t started = now_ns();
        if (seq >= L.warm) {
            uint64_t behind = started > slot ? started - slot : 0;
            if (behind > behind_max) behind_max = behind;
            if (behind > 1000000ull) late++;
            last_measured = started;
        }
        put_seq(payload, size, (uint64_t)seq);
        pulsar_message_t *m = pulsar_message_create();
        pulsar_message_set_content(m, payload, size);
        pulsar_producer_send_async(producer, m, on_send, &rc);
        pulsar_message_free(m);
        sent++;
    }
    rc.target = sent;
    if (!atomic_load(&rc.first_error)) {
        r = pulsar_producer_flush(producer);
        if (r != pulsar_result_Ok) die("flush failed: %s", pulsar_result_str(r));
    }
    double dl = now_s() + (double)o->timeout_s;
    while (atomic_load(&rc.done) < sent && !atomic_load(&rc.first_error) && now_s() < dl) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    int e = atomic_load(&rc.first_error);
    if (e) die("async send failed: %s", pulsar_result_str((pulsar_result)e));
    if (atomic_load(&rc.done) < sent) die("timeout: only %lld of %lld receipts", atomic_load(&rc.done), sent);

    atomic_store(&L.sent_total, sent);
    dl = now_s() + (double)o->timeout_s;
    while (!atomic_load(&L.finished) && now_s() < dl) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&L.stop, 1);
    pthread_join(receiver, NULL);
    if (L.error) die("receive failed: %s", pulsar_result_str((pulsar_result)L.error));
    if (L.distinct < sent)
        die("only %lld of %lld messages arrived within %llds of the last send", L.distinct, sent, o->timeout_s);
    if (L.dups || L.foreign)
        die("%lld duplicate and %lld foreign messages among %lld received on %s", L.dups, L.foreign, L.distinct,
            o->topic);
    long long acked = L.distinct;
    while (atomic_load(&L.acks.done) < acked && !atomic_load(&L.acks.first_error) && now_s() < dl) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    cpu_t c1 = cpu_now();
    e = atomic_load(&L.acks.first_error);
    if (e) die("acknowledge failed: %s", pulsar_result_str((pulsar_result)e));

    long long n = L.nlat;
    qsort(L.lat, (size_t)n, sizeof(uint64_t), cmp_u64);
    long long measured_sent = sent > L.warm ? sent - L.warm : 0;
    /* from the first measured slot (its send may be late) to the last measured send */
    uint64_t first_slot = L.origin_ns + (uint64_t)L.warm * L.interval_ns;
    double secs = last_measured > first_slot ? (double)(last_measured - first_slot) * 1e-9 : 0.0;
    double achieved = secs > 0 ? (double)(measured_sent - 1) / secs : 0.0;
    double cpu = (c1.user - c0.user) + (c1.sys - c0.sys);
    printf("{\"client\":\"cpp\",\"op\":\"latency\",\"size\":%lld,\"batched\":%s,\"rate_target\":%lld,"
           "\"warmup_s\":%g,\"sent\":%lld,\"received\":%lld,\"count\":%lld,\"seconds\":%.6f,"
           "\"msgs_per_sec\":%.1f,\"latency\":\"scheduled_send_to_receive\",\"lat_p50_us\":%.3f,"
           "\"lat_p99_us\":%.3f,\"lat_p999_us\":%.3f,\"lat_max_us\":%.3f,\"late_sends\":%lld,"
           "\"behind_max_us\":%.3f,\"cpu_user_s\":%.6f,\"cpu_sys_s\":%.6f,\"cpu_us_per_msg\":%.3f}\n",
           o->size, o->batch ? "true" : "false", o->rate, o->warmup_s, sent, L.distinct, n, secs, achieved,
           n ? pct_us(L.lat, n, 50.0) : 0.0, n ? pct_us(L.lat, n, 99.0) : 0.0, n ? pct_us(L.lat, n, 99.9) : 0.0,
           n ? (double)L.lat[n - 1] / 1000.0 : 0.0, late, (double)behind_max / 1000.0, c1.user - c0.user,
           c1.sys - c0.sys, sent ? cpu / (double)sent * 1e6 : 0.0);
    fflush(stdout);

    r = pulsar_producer_close(producer);
    if (r != pulsar_result_Ok) die("producer close: %s", pulsar_result_str(r));
    pulsar_producer_free(producer);
    r = pulsar_consumer_close(consumer);
    if (r != pulsar_result_Ok) die("consumer close: %s", pulsar_result_str(r));
    pulsar_consumer_free(consumer);
    pulsar_client_close(client);
    pulsar_client_free(client);
    free(payload);
    free(L.lat);
    free(L.seen);
    return 0;
}

int main(int argc, char **argv) {
    opts_t o;
    parse_args(argc, argv, &o);
    if (!strcmp(o.op, "latency")) return run_latency(&o);
    return !strcmp(o.op, "produce") ? run_produce(&o) : run_consume(&o);
}
