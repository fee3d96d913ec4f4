/* SPDX-License-Identifier: BSD-3-Clause
 * The shim's replay reader (shim/ilftcp_replay.c): a replay file is refused
 * unless every size in it agrees with the file and the file its extents
 * point into (the replay file itself, as the logger writes it since the
 * shared log: the logged bytes after the lists); a read of 0 bytes in it is
 * dropped (served, it would be the server's end of file); the bytes come
 * from the extents with the logged read lengths, then as new reads; only
 * the header and the lists are read at load.
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
	uint8_t b[1024];
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
	/* Extents into a log of its own (200 bytes). */
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, f.len, 200, false, &skip, &why), 0);
	assert_int_equal(skip, 7);
	ilf_replay_release(&r);
	/* Lists past the file's end, or past what was read of it. */
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, f.len - 1, 200, false, &skip, &why),
			 -1);
	assert_non_null(strstr(why, "lists"));
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len - 1, f.len, 200, false, &skip, &why),
			 -1);
	/* An extent past the log's end. */
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, f.len, 129, false, &skip, &why), -1);
	assert_non_null(strstr(why, "extent"));
	/* Extents that do not hold data_len bytes. */
	build(&f, lens, 2, ext, 2, 51);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, f.len, 200, false, &skip, &why), -1);
	/* More read bytes than logged bytes. */
	const uint32_t big[2] = {20, 31};
	build(&f, big, 2, ext, 2, 50);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, f.len, 200, false, &skip, &why), -1);
	/* A header of 2^32 - 1 reads in a file of a few bytes. */
	build(&f, lens, 2, ext, 2, 50);
	((struct ftc_replay_hdr *)f.b)->n_reads = UINT32_MAX;
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, f.len, 200, false, &skip, &why), -1);
}

/* The file as the logger writes it: the lists, then the logged bytes,
 * which the extents point at in the same file. */
static void test_sizes_checked_one_file(void **state)
{
	const uint32_t lens[2] = {20, 30};
	struct ftc_replay_ext ext[2];
	struct ilf_replay r;
	struct file f;
	uint64_t skip, lists = sizeof(struct ftc_replay_hdr) + 2 * 4 + 2 * sizeof(ext[0]);
	const char *why;

	(void)state;
	ext[0] = (struct ftc_replay_ext){.log_off = lists + 20, .len = 30};
	ext[1] = (struct ftc_replay_ext){.log_off = lists, .len = 20};
	build(&f, lens, 2, ext, 2, 50);
	assert_int_equal(f.len, lists);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, lists + 50, lists + 50, true, &skip,
					  &why), 0);
	ilf_replay_release(&r);
	/* The bytes after the lists are not exactly data_len. */
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, lists + 51, lists + 51, true, &skip,
					  &why), -1);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, lists + 49, lists + 49, true, &skip,
					  &why), -1);
	/* An extent into the lists. */
	ext[1].log_off = lists - 1;
	ext[0].log_off = lists + 19;
	build(&f, lens, 2, ext, 2, 50);
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, lists + 50, lists + 50, true, &skip,
					  &why), -1);
	assert_non_null(strstr(why, "extent"));
	/* The same file given as a log of its own takes it. */
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, lists + 50, lists + 50, false, &skip,
					  &why), 0);
	ilf_replay_release(&r);
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
	assert_int_equal(ilf_replay_parse(&r, f.b, f.len, f.len, sizeof(log), false, &skip, &why),
			 0);
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

/* ilf_replay_load on a replay file as the logger hands it over (one file,
 * two descriptors): only the header and the lists are read; the bytes are
 * served from after the lists; a file cut short is refused. */
static void test_load_one_file(void **state)
{
	const uint32_t lens[3] = {0, 20, 25};
	uint64_t lists = sizeof(struct ftc_replay_hdr) + 3 * 4 + sizeof(struct ftc_replay_ext);
	struct ftc_replay_ext one = {.log_off = lists, .len = 50};
	uint8_t data[50], buf[64];
	struct ilf_replay r;
	struct file f;
	uint64_t skip = 0;
	const char *why = "";
	bool fresh;
	int fd = memfd_create("test_replay_file", MFD_CLOEXEC), fd2;

	(void)state;
	assert_true(fd >= 0);
	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0x40 + i);
	build(&f, lens, 3, &one, 1, 50);
	assert_int_equal(f.len, lists);
	memcpy(f.b + f.len, data, sizeof(data));
	assert_int_equal(pwrite(fd, f.b, f.len + sizeof(data), 0), (ssize_t)(f.len + sizeof(data)));
	fd2 = dup(fd);
	assert_true(fd2 >= 0);
	assert_int_equal(ilf_replay_load(&r, fd, fd2, &skip, &why), 0);
	assert_int_equal(skip, 7);
	assert_int_equal(r.log_fd, fd2);
	assert_int_equal(r.n_reads, 2);
	assert_int_equal(ilf_replay_next(&r, buf, 64, false, &fresh, &why), 20);
	assert_false(fresh);
	assert_memory_equal(buf, data, 20);
	assert_int_equal(ilf_replay_next(&r, buf, 64, false, &fresh, &why), 25);
	assert_false(fresh);
	assert_memory_equal(buf, data + 20, 25);
	assert_int_equal(ilf_replay_next(&r, buf, 64, false, &fresh, &why), 5);
	assert_true(fresh);
	assert_memory_equal(buf, data + 45, 5);
	assert_int_equal(ilf_replay_next(&r, buf, 64, false, &fresh, &why), 0);
	ilf_replay_release(&r);
	/* Cut short by a byte: refused before anything is served. */
	assert_int_equal(ftruncate(fd, (off_t)(f.len + sizeof(data) - 1)), 0);
	assert_int_equal(ilf_replay_load(&r, fd, fd2, &skip, &why), -1);
	/* Lists of 2^32 - 1 reads in a small file: refused, nothing allocated
	 * for them. */
	((struct ftc_replay_hdr *)f.b)->n_reads = UINT32_MAX;
	assert_int_equal(pwrite(fd, f.b, sizeof(struct ftc_replay_hdr), 0),
			 (ssize_t)sizeof(struct ftc_replay_hdr));
	assert_int_equal(ilf_replay_load(&r, fd, fd2, &skip, &why), -1);
	assert_non_null(strstr(why, "lists"));
	close(fd2);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_checked),
		cmocka_unit_test(test_sizes_checked_one_file),
		cmocka_unit_test(test_load_one_file),
		cmocka_unit_test(test_served_with_the_logged_lengths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
