/* SPDX-License-Identifier: BSD-3-Clause
 * Helpers for the control tests: unique /dev/shm paths, child processes
 * that cannot outlive the test, and clean-up that runs on failure too.
 */
#ifndef IL_TEST_CONTROL_UTIL_H
#define IL_TEST_CONTROL_UTIL_H

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TU_MAX_CHILDREN 8
#define TU_MAX_PATHS 8

struct tu {
	char chan[128];
	char extra[TU_MAX_PATHS][128]; /* sockets and other files to remove */
	unsigned n_extra;
	pid_t child[TU_MAX_CHILDREN];
	unsigned n_child;
};

static inline uint64_t tu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void tu_init(struct tu *t, const char *tag)
{
	static unsigned seq;

	memset(t, 0, sizeof(*t));
	snprintf(t->chan, sizeof(t->chan), "/dev/shm/il-test-%s-%d-%u", tag, (int)getpid(),
		 seq++);
	unlink(t->chan);
}

static inline const char *tu_extra(struct tu *t, const char *suffix)
{
	char *p = t->extra[t->n_extra++];
	size_t a = strlen(t->chan), b = strlen(suffix);

	if (a + b >= sizeof(t->extra[0]))
		abort();
	memcpy(p, t->chan, a);
	memcpy(p + a, suffix, b + 1);
	unlink(p);
	return p;
}

/* fork() whose child dies with the parent (a crashed or killed test
 * leaves no stray writer on a ring). Returns 0 in the child. */
static inline pid_t tu_fork(struct tu *t)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
		return 0;
	}
	if (pid > 0 && t->n_child < TU_MAX_CHILDREN)
		t->child[t->n_child++] = pid;
	return pid;
}

/* Wait for a child with a deadline; returns its wait status, or -1 on
 * timeout (the child is then killed). */
static inline int tu_wait(struct tu *t, pid_t pid, unsigned timeout_ms)
{
	uint64_t end = tu_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -1;
		if (tu_now_ns() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			status = -1;
			break;
		}
		usleep(1000);
	}
	for (unsigned i = 0; i < t->n_child; i++)
		if (t->child[i] == pid)
			t->child[i] = 0;
	return status;
}

static inline void tu_cleanup(struct tu *t)
{
	for (unsigned i = 0; i < t->n_child; i++) {
		if (t->child[i] > 0) {
			kill(t->child[i], SIGKILL);
			waitpid(t->child[i], NULL, 0);
			t->child[i] = 0;
		}
	}
	unlink(t->chan);
	for (unsigned i = 0; i < t->n_extra; i++)
		unlink(t->extra[i]);
}

/* Blocking pipe I/O of a whole buffer, with a timeout on reads. */
static inline bool tu_read_all(int fd, void *buf, size_t len, int timeout_ms)
{
	char *p = buf;

	while (len > 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, timeout_ms) <= 0)
			return false;
		n = read(fd, p, len);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return false;
		}
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static inline bool tu_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return false;
		}
		p += n;
		len -= (size_t)n;
	}
	return true;
}

#endif
