/* The overhead floor of `make compare-meters`: a bare timer loop, as wattio's pacing benchmark
 * defines it (crates/meter/benches/pacing.rs, bare_timerfd_loop): a CLOCK_MONOTONIC timerfd armed
 * once with absolute deadlines, and a read of the monotonic clock at each wake-up; no counter
 * read, no writer. What any sampler at this rate pays before it reads anything.
 *
 * usage: compare-meters-floor HZ SECONDS   (prints the number of wake-ups) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s HZ SECONDS\n", argv[0]);
        return 2;
    }
    double hz = atof(argv[1]), secs = atof(argv[2]);
    if (!(hz > 0 && hz <= 100000 && secs > 0)) {
        fprintf(stderr, "compare-meters-floor: HZ must be in (0, 100000] and SECONDS positive\n");
        return 2;
    }
    int64_t period_ns = (int64_t)(1e9 / hz);
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (fd < 0) {
        perror("compare-meters-floor: timerfd_create");
        return 1;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct itimerspec spec = {
        .it_interval = {.tv_sec = period_ns / 1000000000, .tv_nsec = period_ns % 1000000000},
        .it_value = now,
    };
    spec.it_value.tv_nsec += period_ns % 1000000000;
    spec.it_value.tv_sec += period_ns / 1000000000 + spec.it_value.tv_nsec / 1000000000;
    spec.it_value.tv_nsec %= 1000000000;
    if (timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL) != 0) {
        perror("compare-meters-floor: timerfd_settime");
        return 1;
    }
    uint64_t n = (uint64_t)(hz * secs), woken = 0, expirations;
    volatile int64_t last_ns = 0;
    while (woken < n) {
        if (read(fd, &expirations, sizeof expirations) != sizeof expirations) {
            perror("compare-meters-floor: read");
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        last_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
        woken += expirations;
    }
    (void)last_ns;
    printf("%llu\n", (unsigned long long)woken);
    return 0;
}
