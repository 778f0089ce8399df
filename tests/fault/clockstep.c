/* LD_PRELOAD shim for the clock fault tests (tests/fault/clock.py): steps the wall clock of
 * one process, as NTP stepping a machine's clock would, and nothing else. clock_gettime on
 * CLOCK_REALTIME (and its coarse/TAI variants), gettimeofday and time() return the real time
 * plus the seconds written in the file $RIVERLOG_FAULT_CLOCK_FILE (re-read every half second,
 * by the real monotonic clock); monotonic and boot-time clocks, sleeps and timers are left
 * alone. Being below libc's callers, it moves Python's time.time and gRPC core's deadlines
 * alike, so the process sees one consistent (wrong) wall clock.
 *
 * Why not libfaketime: Debian's 0.9.10 fails every monotonic sleep with EINVAL once told not
 * to fake the monotonic clock, and faking it too would move it backwards for a -10 min step.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static volatile long long offset_ns;
static volatile long long next_read_ns;

static long long mono_ns(void) {
    struct timespec ts;
    real_clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long current_offset(void) {
    const char *path = getenv("RIVERLOG_FAULT_CLOCK_FILE");
    if (path == NULL) return 0;
    long long now = mono_ns();
    if (now >= next_read_ns) {
        next_read_ns = now + 500000000LL;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char buf[64];
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n > 0) {
                buf[n] = 0;
                offset_ns = (long long)(strtod(buf, NULL) * 1e9);
            }
        }
    }
    return offset_ns;
}

static void resolve(void) {
    if (real_clock_gettime == NULL)
        real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    resolve();
    int rc = real_clock_gettime(clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE ||
                    clock == CLOCK_TAI)) {
        long long t = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + current_offset();
        ts->tv_sec = (time_t)(t / 1000000000LL);
        ts->tv_nsec = (long)(t % 1000000000LL);
    }
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    (void)tz;
    int rc = clock_gettime(CLOCK_REALTIME, &ts);
    if (rc == 0 && tv != NULL) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL) *out = ts.tv_sec;
    return ts.tv_sec;
}
