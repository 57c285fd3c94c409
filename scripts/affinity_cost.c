// What the system calls of the KVM harness's user-space PLE policies cost on this host
// (crates/vcpulab-kvm/src/harness.rs, `Ple::on_spin`): each exit of `boost` sets another
// vCPU thread's nice (sched_setattr), each exit of `migrate` its affinity to the caller's
// CPU (sched_setaffinity), and both put the last candidate back. The target here is a
// thread spinning on CPU 1, called from CPU 0; the affinity moves it onto CPU 0 and back,
// each direction timed apart. Onto the caller's CPU is what `migrate` does with a running
// candidate, and the caller then waits for the stopper and, back on its CPU, behind the
// thread it moved there.
//
//   cc -O2 -pthread scripts/affinity_cost.c -o /tmp/affinity_cost && /tmp/affinity_cost
//
// Needs two CPUs. On 2 x Intel Xeon, 6.18.44-fc-v1252 (kvm_pvm), 2026-12-05 15:12 UTC, two
// runs: sched_setaffinity moving a running thread onto the caller's CPU 154-158 us, moving
// it back 1.7 us, to both CPUs without a move 0.24 us; sched_setattr (nice toggle, running
// target) 0.48 us; sched_getattr 0.10 us, sched_getaffinity 0.11 us, sched_yield alone
// 0.15-0.16 us, getpid 0.06 us. (Four runs of a first version, 14:1x-14:27 UTC, toggled
// the affinity and timed both directions together: 78-90 us a call, their mean.)
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// The kernel's struct sched_attr (include/uapi/linux/sched/types.h), without the header,
// whose struct sched_param clashes with glibc's.
struct sched_attr {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
    uint32_t util_min, util_max;
};

static volatile int target_tid, stop;

static void *spin(void *arg) {
    (void)arg;
    target_tid = (int)syscall(SYS_gettid);
    while (!stop)
        __builtin_ia32_pause();
    return NULL;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    pthread_t th;
    pthread_create(&th, NULL, spin, NULL);
    while (!target_tid)
        ;
    cpu_set_t cpu0, cpu1;
    CPU_ZERO(&cpu0);
    CPU_SET(0, &cpu0);
    CPU_ZERO(&cpu1);
    CPU_SET(1, &cpu1);
    if (sched_setaffinity(0, sizeof cpu0, &cpu0) || sched_setaffinity(target_tid, sizeof cpu1, &cpu1)) {
        perror("sched_setaffinity (needs CPUs 0 and 1)");
        return 1;
    }
    usleep(10000);
    const int n = 20000, moves = 2000;
    struct sched_attr a = {.size = sizeof a};
    double t0 = now_ns();
    for (int i = 0; i < n; i++)
        syscall(SYS_sched_getattr, target_tid, &a, sizeof a, 0);
    printf("sched_getattr %.2f us\n", (now_ns() - t0) / n / 1e3);
    t0 = now_ns();
    for (int i = 0; i < n; i++) {
        a.sched_policy = 0;
        a.sched_nice = (i & 1) ? 0 : -20;
        syscall(SYS_sched_setattr, target_tid, &a, 0);
    }
    printf("sched_setattr, nice toggle of a running thread %.2f us\n", (now_ns() - t0) / n / 1e3);
    t0 = now_ns();
    for (int i = 0; i < n; i++) {
        cpu_set_t s;
        sched_getaffinity(target_tid, sizeof s, &s);
    }
    printf("sched_getaffinity %.2f us\n", (now_ns() - t0) / n / 1e3);
    // Each direction timed apart: onto the caller's CPU (what `migrate` does: the candidate
    // goes to the spinner's CPU, where the caller then shares its CPU with it) and away.
    double onto = 0, away = 0;
    for (int i = 0; i < moves; i++) {
        double t = now_ns();
        sched_setaffinity(target_tid, sizeof cpu0, &cpu0);
        onto += now_ns() - t;
        t = now_ns();
        sched_setaffinity(target_tid, sizeof cpu1, &cpu1);
        away += now_ns() - t;
    }
    printf("sched_setaffinity, moving a running thread onto the caller's CPU %.2f us\n", onto / moves / 1e3);
    printf("sched_setaffinity, moving it back to the other CPU %.2f us\n", away / moves / 1e3);
    cpu_set_t both = cpu0;
    CPU_SET(1, &both);
    t0 = now_ns();
    for (int i = 0; i < n; i++)
        sched_setaffinity(target_tid, sizeof both, &both);
    printf("sched_setaffinity to both CPUs, no move (a restore) %.2f us\n", (now_ns() - t0) / n / 1e3);
    sched_setaffinity(target_tid, sizeof cpu1, &cpu1);
    t0 = now_ns();
    for (int i = 0; i < n; i++)
        sched_yield();
    printf("sched_yield, nothing else on the CPU %.2f us\n", (now_ns() - t0) / n / 1e3);
    t0 = now_ns();
    for (int i = 0; i < n; i++)
        syscall(SYS_getpid);
    printf("getpid %.2f us\n", (now_ns() - t0) / n / 1e3);
    stop = 1;
    pthread_join(th, NULL);
    return 0;
}
