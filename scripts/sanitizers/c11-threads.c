// Preloaded under ThreadSanitizer: glibc's C11 thread calls (thrd_*, mtx_*, cnd_*,
// call_once), which librdkafka uses, forwarded to the pthread calls ThreadSanitizer
// intercepts. Without it a librdkafka thread is unknown to ThreadSanitizer (glibc starts
// it without passing through the pthread_create interceptor) and its first malloc crashes
// the process; and librdkafka's locks, which order our callbacks on its threads, would be
// invisible. glibc lays out mtx_t, cnd_t and once_flag as the pthread types.
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

struct start { thrd_start_t func; void *arg; };

static void *trampoline(void *opaque) {
    struct start start = *(struct start *)opaque;
    free(opaque);
    return (void *)(intptr_t)start.func(start.arg);
}

static int answer(int error) { return error == 0 ? thrd_success : error == ETIMEDOUT ? thrd_timedout : thrd_error; }

int thrd_create(thrd_t *thread, thrd_start_t func, void *arg) {
    struct start *start = malloc(sizeof *start);
    if (!start) return thrd_nomem;
    start->func = func;
    start->arg = arg;
    int error = pthread_create((pthread_t *)thread, NULL, trampoline, start);
    if (error) free(start);
    return error == EAGAIN ? thrd_nomem : answer(error);
}

int thrd_join(thrd_t thread, int *result) {
    void *value;
    int error = pthread_join((pthread_t)thread, &value);
    if (!error && result) *result = (int)(intptr_t)value;
    return answer(error);
}

int thrd_detach(thrd_t thread) { return answer(pthread_detach((pthread_t)thread)); }

int mtx_init(mtx_t *mutex, int type) {
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    if (type & mtx_recursive) pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
    int error = pthread_mutex_init((pthread_mutex_t *)mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return answer(error);
}

int mtx_lock(mtx_t *mutex) { return answer(pthread_mutex_lock((pthread_mutex_t *)mutex)); }
int mtx_trylock(mtx_t *mutex) {
    int error = pthread_mutex_trylock((pthread_mutex_t *)mutex);
    return error == EBUSY ? thrd_busy : answer(error);
}
int mtx_timedlock(mtx_t *mutex, const struct timespec *until) {
    return answer(pthread_mutex_timedlock((pthread_mutex_t *)mutex, until));
}
int mtx_unlock(mtx_t *mutex) { return answer(pthread_mutex_unlock((pthread_mutex_t *)mutex)); }
void mtx_destroy(mtx_t *mutex) { pthread_mutex_destroy((pthread_mutex_t *)mutex); }

int cnd_init(cnd_t *condition) { return answer(pthread_cond_init((pthread_cond_t *)condition, NULL)); }
int cnd_signal(cnd_t *condition) { return answer(pthread_cond_signal((pthread_cond_t *)condition)); }
int cnd_broadcast(cnd_t *condition) { return answer(pthread_cond_broadcast((pthread_cond_t *)condition)); }
int cnd_wait(cnd_t *condition, mtx_t *mutex) {
    return answer(pthread_cond_wait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex));
}
int cnd_timedwait(cnd_t *condition, mtx_t *mutex, const struct timespec *until) {
    return answer(pthread_cond_timedwait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex, until));
}
void cnd_destroy(cnd_t *condition) { pthread_cond_destroy((pthread_cond_t *)condition); }

void call_once(once_flag *flag, void (*func)(void)) { pthread_once((pthread_once_t *)flag, func); }
