/* SPDX-License-Identifier: BSD-3-Clause
 * The FT-TCP ring file, shared by the data plane and the logger (interlink-control).
 * Either side may create it; a restarted side re-attaches by name and the
 * indexes in the file carry on, so nothing queued is lost across a logger
 * restart (unlike the control channel, the up ring holds client bytes that
 * must be logged whoever consumes them).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftcp_proto.h"

static struct ftc_ring_hdr *map_checked(int fd, char *err, size_t errlen, const char *path)
{
	struct stat stb;
	struct ftc_ring_hdr *h;

	if (fstat(fd, &stb) || stb.st_size < (off_t)sizeof(*h)) {
		snprintf(err, errlen, "ftcp ring '%s': too small or unreadable", path);
		return NULL;
	}
	h = mmap(NULL, (size_t)stb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		snprintf(err, errlen, "ftcp ring '%s': mmap: %s", path, strerror(errno));
		return NULL;
	}
	if (memcmp(h->magic, FTC_RING_MAGIC, 8) || h->version != 1 ||
	    (h->up_size & (h->up_size - 1)) || (h->down_slots & (h->down_slots - 1)) ||
	    h->total != ftc_ring_bytes(h->up_size, h->down_slots) ||
	    h->total != (uint64_t)stb.st_size) {
		snprintf(err, errlen, "ftcp ring '%s': bad header (remove the file)", path);
		munmap(h, (size_t)stb.st_size);
		return NULL;
	}
	return h;
}

struct ftc_ring_hdr *ftc_ring_open(const char *path, uint32_t up_size, char *err, size_t errlen)
{
	char tmp[512];
	struct ftc_ring_hdr *h;
	uint64_t total;
	int fd;

	if (!up_size)
		up_size = FTC_UP_SIZE_DEF;
	fd = open(path, O_RDWR);
	if (fd >= 0)
		goto attach;
	if (errno != ENOENT) {
		snprintf(err, errlen, "ftcp ring '%s': %s", path, strerror(errno));
		return NULL;
	}
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "ftcp ring '%s': %s", tmp, strerror(errno));
		return NULL;
	}
	total = ftc_ring_bytes(up_size, FTC_DOWN_SLOTS);
	if (ftruncate(fd, (off_t)total)) {
		snprintf(err, errlen, "ftcp ring '%s': ftruncate: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return NULL;
	}
	h = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		snprintf(err, errlen, "ftcp ring '%s': mmap: %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return NULL;
	}
	h->version = 1;
	h->up_size = up_size;
	h->down_slots = FTC_DOWN_SLOTS;
	h->total = total;
	memcpy(h->magic, FTC_RING_MAGIC, 8);
	munmap(h, total);
	/* link() fails if the other side won the race: then use its file. */
	if (link(tmp, path) && errno != EEXIST) {
		snprintf(err, errlen, "ftcp ring '%s': link: %s", path, strerror(errno));
		close(fd);
		unlink(tmp);
		return NULL;
	}
	close(fd);
	unlink(tmp);
	fd = open(path, O_RDWR);
	if (fd < 0) {
		snprintf(err, errlen, "ftcp ring '%s': %s", path, strerror(errno));
		return NULL;
	}
attach:
	h = map_checked(fd, err, errlen, path);
	close(fd);
	return h;
}

void ftc_ring_close(struct ftc_ring_hdr *h)
{
	if (h)
		munmap(h, h->total);
}
