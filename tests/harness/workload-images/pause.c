/*
 * The test ground's pause (sandbox) image: PID 1 of a pod that holds its
 * namespaces and does nothing else. Like Kubernetes' pause: it waits for
 * signals, reaps the zombies of processes that exec'd into the pod's PID
 * namespace, and exits cleanly on SIGINT/SIGTERM (a pod stop).
 *
 * Built `gcc -static -O2` into an image FROM scratch (workload-images.sh):
 * no loader, no libc in the image, nothing to pull.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int signo) {
    (void)signo;
    _exit(0);
}

static void on_child(int signo) {
    (void)signo;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

static void handle(int signo, void (*handler)(int), int flags) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = handler;
    action.sa_flags = flags;
    /* Every other signal stays blocked while a handler runs: the handlers
     * never interleave. */
    sigfillset(&action.sa_mask);
    if (sigaction(signo, &action, NULL) < 0) {
        perror("pause: sigaction");
        exit(1);
    }
}

int main(int argc, char **argv) {
    sigset_t all;

    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("pause 3.10-gpufleet");
        return 0;
    }
    if (getpid() != 1) {
        /* Not an error: runtimes that share no PID namespace still work. */
        fputs("pause: warning: not PID 1\n", stderr);
    }
    handle(SIGINT, on_stop, 0);
    handle(SIGTERM, on_stop, 0);
    handle(SIGCHLD, on_child, SA_NOCLDSTOP);

    /* Block everything but the three signals we handle, so nothing else
     * interrupts pause() (as PID 1 the kernel drops unhandled signals
     * anyway; this also holds outside a PID namespace). */
    sigfillset(&all);
    sigdelset(&all, SIGINT);
    sigdelset(&all, SIGTERM);
    sigdelset(&all, SIGCHLD);
    sigprocmask(SIG_SETMASK, &all, NULL);

    for (;;) {
        pause();
    }
}
