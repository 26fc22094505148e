/* The floor of libcurl's cost for APNs-shaped requests: the multi interface
 * driven the way Pushfan's sender drives it (HTTP/2 multiplexing, PIPEWAIT,
 * reused easy handles, per-request header list and apns-id, a provider token
 * header), with nothing else. scripts/bench-sender compares `pushfan bench apns`
 * against it.
 *
 * usage: libcurl_apns URL TOKEN_HEX COUNT CONNECTIONS STREAMS CA_FILE|- AUTHORIZATION|- [PAYLOAD]
 * prints: {"sent":N,"accepted":A,"seconds":S,"sent_per_s":R,"cpu_us_per_notification":C}
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static const char *default_payload =
    "{\"aps\":{\"alert\":{\"title\":\"Pushfan benchmark\",\"body\":\"A notification of the size campaigns send: "
    "a title and a body line. Thanks!\"},\"sound\":\"default\"}}";

struct slot {
    CURL *easy;
    struct curl_slist *headers;
};

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

static size_t discard(char *data, size_t size, size_t count, void *context) {
    (void)data; (void)context;
    return size * count;
}

static void start(CURLM *multi, struct slot *slot, const char *url, const char *authorization,
                  const char *payload, long sequence) {
    char line[1024];
    struct curl_slist *list = NULL;
    list = curl_slist_append(list, "apns-topic: com.example.pushfan");
    list = curl_slist_append(list, "apns-push-type: alert");
    list = curl_slist_append(list, "apns-priority: 10");
    snprintf(line, sizeof line, "apns-id: %08lx-0000-4000-8000-%012lx", (unsigned long)rand(), (unsigned long)sequence);
    list = curl_slist_append(list, line);
    if (authorization) {
        snprintf(line, sizeof line, "authorization: bearer %s", authorization);
        list = curl_slist_append(list, line);
    }
    list = curl_slist_append(list, "content-type: application/json");
    list = curl_slist_append(list, "accept:");
    slot->headers = list;
    curl_easy_setopt(slot->easy, CURLOPT_URL, url);
    curl_easy_setopt(slot->easy, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(slot->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
    curl_easy_setopt(slot->easy, CURLOPT_POSTFIELDS, payload);
    curl_multi_add_handle(multi, slot->easy);
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: %s URL TOKEN_HEX COUNT CONNECTIONS STREAMS CA_FILE|- AUTHORIZATION|- [PAYLOAD]\n", argv[0]);
        return 2;
    }
    const char *base = argv[1], *token = argv[2], *ca_file = argv[6], *authorization = argv[7];
    long count = atol(argv[3]), connections = atol(argv[4]), streams = atol(argv[5]);
    const char *payload = argc > 8 ? argv[8] : default_payload;
    if (strcmp(ca_file, "-") == 0) ca_file = NULL;
    if (strcmp(authorization, "-") == 0) authorization = NULL;
    char url[512];
    snprintf(url, sizeof url, "%s/3/device/%s", base, token);

    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, connections);
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, connections);
    curl_multi_setopt(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, streams);

    long in_flight_max = connections * streams;
    struct slot *slots = calloc(in_flight_max, sizeof *slots);
    for (long i = 0; i < in_flight_max; i++) {
        CURL *easy = curl_easy_init();
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS);
        curl_easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
        curl_easy_setopt(easy, CURLOPT_POST, 1L);
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, &slots[i]);
        if (ca_file) curl_easy_setopt(easy, CURLOPT_CAINFO, ca_file);
        slots[i].easy = easy;
    }

    /* Warm-up request, as pushfan bench apns does: the connection is open before the clock starts. */
    start(multi, &slots[0], url, authorization, payload, 0);
    int running = 1;
    while (running) {
        curl_multi_perform(multi, &running);
        if (running) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    int queued;
    CURLMsg *message;
    while ((message = curl_multi_info_read(multi, &queued))) {}
    curl_multi_remove_handle(multi, slots[0].easy);
    curl_slist_free_all(slots[0].headers);

    struct slot **free_slots = malloc(in_flight_max * sizeof *free_slots);
    long free_count = 0;
    for (long i = 0; i < in_flight_max; i++) free_slots[free_count++] = &slots[i];

    long started = 0, done = 0, accepted = 0;
    double cpu_start = cpu_seconds(), wall_start = now_seconds();
    while (done < count) {
        while (started < count && free_count > 0) start(multi, free_slots[--free_count], url, authorization, payload, ++started);
        curl_multi_perform(multi, &running);
        while ((message = curl_multi_info_read(multi, &queued))) {
            if (message->msg != CURLMSG_DONE) continue;
            struct slot *slot;
            curl_easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, (char **)&slot);
            long status = 0;
            curl_easy_getinfo(message->easy_handle, CURLINFO_RESPONSE_CODE, &status);
            struct curl_header *header;
            if (message->data.result == CURLE_OK && status == 200 &&
                curl_easy_header(message->easy_handle, "apns-id", 0, CURLH_HEADER, -1, &header) == CURLHE_OK)
                accepted++;
            curl_multi_remove_handle(multi, slot->easy);
            curl_slist_free_all(slot->headers);
            free_slots[free_count++] = slot;
            done++;
        }
        if (done < count) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    double seconds = now_seconds() - wall_start, cpu = cpu_seconds() - cpu_start;
    printf("{\"sent\":%ld,\"accepted\":%ld,\"seconds\":%.3f,\"sent_per_s\":%.0f,\"cpu_us_per_notification\":%.1f}\n",
           count, accepted, seconds, count / seconds, cpu / count * 1e6);
    return accepted == count ? 0 : 1;
}
