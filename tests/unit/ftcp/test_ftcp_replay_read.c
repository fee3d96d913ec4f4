/* SPDX-License-Identifier: BSD-3-Clause
 * The shim's replay reader (shim/ilftcp_replay.c): a replay file is refused
 * unless every size in it agrees with the file and the log; a read of 0
 * bytes in it is dropped (served, it would be the server's end of file);
 * the bytes come from the log's extents with the logged read lengths, then
 * as new reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "ilftcp_replay.h"

struct file {
	uint8_t b[512];
	size_t len;
};

static void build(struct file *f, const uint32_t *lens, unsigned nr,
		  const struct ftc_replay_ext *ext, unsigned ne, uint64_t data_len)
{
	struct ftc_replay_hdr h = { .n_reads = nr, .n_ext = ne, .data_len = data_len,
				    .out_skip = 7 };

	memcpy(h.magic, FTC_REPLAY_MAGIC, 8);
	memcpy(f->b, &h, sizeof(h));
	f->len = sizeof(h);
	memcpy(f->b + f->len, lens, 4u * nr);
	f->len += 4u * nr;
	memcpy(f->b + f->len, ext, sizeof(*ext) * ne);
	f->len += sizeof(*ext) * ne;
}

static void test_sizes_checked(void **state)
{
	const struct ftc_replay_ext ext[2] = { { .log_off = 100, .len = 30 },
					       { .log_off = 10, .len = 20 } };
	const uint32_t lens[2] = {20, 30};
	struct ilf_replay r;
	struct file f;
	uint64_t skip;
	const char *why;

	(void)state;
	build(&f, lens, 2, ext, 2, 50);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, 200, &skip, &why), 0);
	assert_int_equal(skip, 7);
	ilf_replay_release(&r);
	/* A list that does not fill the file (one byte more, one less). */
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len + 1, 200, &skip, &why), -1);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len - 1, 200, &skip, &why), -1);
	/* An extent past the log's end. */
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, 129, &skip, &why), -1);
	assert_non_null(strstr(why, "extent"));
	/* Extents that do not hold data_len bytes. */
	build(&f, lens, 2, ext, 2, 51);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, 200, &skip, &why), -1);
	/* More read bytes than logged bytes. */
	const uint32_t big[2] = {20, 31};
	build(&f, big, 2, ext, 2, 50);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, 200, &skip, &why), -1);
	/* A header of 2^32 - 1 reads in a file of a few bytes. */
	build(&f, lens, 2, ext, 2, 50);
	((struct ftc_replay_hdr *)f.b)->n_reads = UINT32_MAX;
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, 200, &skip, &why), -1);
}

static void test_served_with_the_logged_lengths(void **state)
{
	const struct ftc_replay_ext ext[2] = { { .log_off = 100, .len = 30 },
					       { .log_off = 10, .len = 20 } };
	const uint32_t lens[3] = {0, 20, 25};
	uint8_t log[200], buf[64];
	struct ilf_replay r;
	struct file f;
	uint64_t skip;
	const char *why;
	bool fresh;
	int fd = memfd_create("test_replay_log", MFD_CLOEXEC);

	(void)state;
	for (unsigned i = 0; i < sizeof(log); i++)
		log[i] = (uint8_t)i;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, log, sizeof(log)), (ssize_t)sizeof(log));
	build(&f, lens, 3, ext, 2, 50);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, sizeof(log), &skip, &why), 0);
	r.log_fd = fd;
	assert_int_equal(r.n_reads, 2); /* the read of 0 bytes is gone */
	/* A peek sees the first read's bytes and takes nothing. */
	assert_int_equal(ilf_replay_next(&r, buf, 64, true, &fresh, &why), 20);
	assert_memory_equal(buf, log + 100, 20);
	assert_int_equal(ilf_replay_next(&r, buf, 64, false, &fresh, &why), 20);
	assert_false(fresh);
	assert_memory_equal(buf, log + 100, 20);
	/* The second read spans both extents; asked in 15 bytes, then the rest:
	 * the first call crosses from one extent to the next, the second stops
	 * where the logged read ends. */
	assert_int_equal(ilf_replay_next(&r, buf, 15, false, &fresh, &why), 15);
	assert_memory_equal(buf, log + 120, 10);
	assert_memory_equal(buf + 10, log + 10, 5);
	assert_int_equal(ilf_replay_next(&r, buf, 64, false, &fresh, &why), 10);
	assert_false(fresh);
	assert_memory_equal(buf, log + 15, 10);
	/* The rest of the logged bytes: a new read. */
	assert_int_equal(ilf_replay_next(&r, buf, 64, false, &fresh, &why), 5);
	assert_true(fresh);
	assert_memory_equal(buf, log + 25, 5);
	assert_int_equal(ilf_replay_next(&r, buf, 64, false, &fresh, &why), 0);
	ilf_replay_release(&r);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_checked),
		cmocka_unit_test(test_served_with_the_logged_lengths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
