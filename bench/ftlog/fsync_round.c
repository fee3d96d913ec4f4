/* SPDX-License-Identifier: BSD-3-Clause
 *
 * What one round of the FT-TCP logger costs on a disk. With one log per
 * connection (the logger before the shared log), a synced round appended to
 * each file written since the last and linked its fdatasync behind the
 * write, all in one io_uring submit; the round ended when every completion
 * was in: this shows how that cost grows with the number of files (each
 * fdatasync flushes the device's cache) against one file taking the same
 * bytes. The shared log's round is one pwrite and one fdatasync (synced) or
 * one pwrite (durability none): both are measured too, beside an io_uring
 * write of the same bytes waited for at once (io_uring hands a buffered
 * ext4 write to a worker thread), and the synced round written over blocks
 * the file already has (the head's zeros ahead, group and sync).
 *
 *   fsync_round DIR [FILES [ROUNDS [BYTES]]]   (defaults 50 200 200)
 *
 * Prints the median, 90th percentile and worst round in microseconds.
 * Files are created under DIR and removed.
 */
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 128

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

enum mode { URING_SYNC, PWRITE_SYNC, URING_WRITE, PWRITE, OVERWRITE_SYNC };

/* One pass of `rounds` rounds over `n` files, `bytes` appended to each. */
static int run(struct io_uring *r, const char *dir, int n, int rounds, int bytes, enum mode m)
{
	int fd[MAX_FILES];
	char path[4096], buf[65536];
	double *lat = calloc((size_t)rounds, sizeof(*lat));

	if (!lat)
		return -1;
	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/fsync_round.%d.%d", dir, (int)getpid(), i);
		fd[i] = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
		if (fd[i] < 0) {
			perror(path);
			return -1;
		}
		unlink(path);
	}
	if (m == OVERWRITE_SYNC) {
		/* As the logger's head with zeros ahead (group, sync): the
		 * blocks are there and synced before the rounds write over
		 * them, so their fdatasync commits no new size. */
		static const char zeros[65536];
		for (long o = 0; o < (long)rounds * bytes; o += (long)sizeof(zeros))
			if (pwrite(fd[0], zeros, sizeof(zeros), (off_t)o) != (ssize_t)sizeof(zeros)) {
				perror("fsync_round: zeros");
				return -1;
			}
		if (fsync(fd[0])) {
			perror("fsync_round: fsync");
			return -1;
		}
	}
	for (int k = 0; k < rounds; k++) {
		double t = now_us();
		if (m == PWRITE_SYNC || m == PWRITE || m == OVERWRITE_SYNC) {
			if (pwrite(fd[0], buf, (size_t)bytes, (off_t)k * bytes) != bytes ||
			    (m != PWRITE && fdatasync(fd[0]))) {
				perror("fsync_round: pwrite or fdatasync");
				return -1;
			}
			lat[k] = now_us() - t;
			continue;
		}
		for (int i = 0; i < n; i++) {
			struct io_uring_sqe *s = io_uring_get_sqe(r);
			io_uring_prep_write(s, fd[i], buf, (unsigned)bytes, (__u64)k * (__u64)bytes);
			if (m == URING_WRITE)
				continue;
			s->flags |= IOSQE_IO_LINK;
			s = io_uring_get_sqe(r);
			io_uring_prep_fsync(s, fd[i], IORING_FSYNC_DATASYNC);
		}
		io_uring_submit(r);
		for (int c = 0; c < (m == URING_WRITE ? n : 2 * n); c++) {
			struct io_uring_cqe *cqe;
			if (io_uring_wait_cqe(r, &cqe) || cqe->res < 0) {
				fprintf(stderr, "fsync_round: a write or fdatasync failed\n");
				return -1;
			}
			io_uring_cqe_seen(r, cqe);
		}
		lat[k] = now_us() - t;
	}
	for (int i = 0; i < n; i++)
		close(fd[i]);
	qsort(lat, (size_t)rounds, sizeof(*lat), cmp_d);
	static const char *const what[] = {"io_uring write+fdatasync", "pwrite+fdatasync",
					   "io_uring write", "pwrite", "overwrite+fdatasync"};
	printf("%-24s %3d file(s), %6d bytes each: round median %7.0f us, p90 %7.0f us, "
	       "worst %7.0f us\n", what[m], n, bytes, lat[rounds / 2], lat[rounds * 9 / 10],
	       lat[rounds - 1]);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	struct io_uring r;
	int n = argc > 2 ? atoi(argv[2]) : 50, rounds = argc > 3 ? atoi(argv[3]) : 200,
	    bytes = argc > 4 ? atoi(argv[4]) : 200;

	if (argc < 2 || n < 1 || n > MAX_FILES || rounds < 1 || bytes < 1 ||
	    (long)bytes * n > 65536) {
		fprintf(stderr, "usage: fsync_round DIR [FILES 1-%d [ROUNDS [BYTES]]] "
				"(FILES x BYTES at most 65536)\n", MAX_FILES);
		return 2;
	}
	if (io_uring_queue_init(2 * MAX_FILES, &r, 0)) {
		fprintf(stderr, "fsync_round: io_uring_queue_init failed\n");
		return 1;
	}
	if (run(&r, argv[1], n, rounds, bytes, URING_SYNC) ||
	    run(&r, argv[1], 1, rounds, bytes * n, URING_SYNC) ||
	    run(&r, argv[1], 1, rounds, bytes * n, PWRITE_SYNC) ||
	    run(&r, argv[1], 1, rounds, bytes * n, OVERWRITE_SYNC) ||
	    run(&r, argv[1], 1, rounds, bytes * n, URING_WRITE) ||
	    run(&r, argv[1], 1, rounds, bytes * n, PWRITE))
		return 1;
	io_uring_queue_exit(&r);
	return 0;
}
