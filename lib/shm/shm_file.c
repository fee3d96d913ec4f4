/* SPDX-License-Identifier: BSD-3-Clause
 * A file of shared-memory rings: atomic creation, checked attach.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <interlink/err.h>
#include <interlink/shm_file.h>

#define HDR_BYTES 128u

/* At offset 0 of the file. Written once by the creator before the file
 * is linked into place; read-only afterwards. */
struct file_hdr {
	char magic[8];
	uint32_t shm_version; /* IL_SHM_FILE_VERSION */
	uint32_t version;     /* the user's layout version */
	uint32_t n_rings;
	uint32_t user_bytes;
	uint64_t user_off;
	uint64_t total_size;  /* file size */
	uint64_t created_ns;  /* CLOCK_REALTIME, for humans */
	struct {
		uint64_t off; /* struct il_shm_ring */
		uint32_t bytes;
		uint32_t unit;
	} ring[IL_SHM_MAX_RINGS];
};

_Static_assert(sizeof(struct file_hdr) <= HDR_BYTES, "file header fits its 128 bytes");

static uint64_t round_up(uint64_t v)
{
	return (v + IL_SHM_GUARD - 1) & ~(uint64_t)(IL_SHM_GUARD - 1);
}

static int pow2(uint32_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

/* Offsets and size from the geometry alone: the creator writes them, an
 * attacher recomputes and compares. */
static void layout(struct file_hdr *h, const struct il_shm_geom *g, uint32_t n,
		   uint32_t user_bytes)
{
	uint64_t off = HDR_BYTES + round_up(user_bytes);

	h->n_rings = n;
	h->user_bytes = user_bytes;
	h->user_off = HDR_BYTES;
	for (uint32_t i = 0; i < n; i++) {
		h->ring[i].off = off;
		h->ring[i].bytes = g[i].bytes;
		h->ring[i].unit = g[i].unit;
		off += round_up(sizeof(struct il_shm_ring) + (uint64_t)g[i].bytes);
	}
	h->total_size = off;
}

static int create(const char *path, const struct il_shm_spec *s, char *err, size_t errlen)
{
	static _Atomic unsigned counter;
	struct file_hdr h;
	char tmp[PATH_MAX];
	void *map;
	int fd, rc;

	for (uint32_t i = 0; i < s->n_rings; i++) {
		if (!pow2(s->ring[i].bytes) || !pow2(s->ring[i].unit) ||
		    s->ring[i].unit > s->ring[i].bytes) {
			il_err(err, errlen, "%s: ring %u: %u bytes of %u-byte units is not a ring",
				 path, i, s->ring[i].bytes, s->ring[i].unit);
			return -1;
		}
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, s->magic, sizeof(h.magic));
	h.shm_version = IL_SHM_FILE_VERSION;
	h.version = s->version;
	layout(&h, s->ring, s->n_rings, s->user_bytes);
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%u", path, (int)getpid(),
		     atomic_fetch_add(&counter, 1)) >= (int)sizeof(tmp)) {
		il_err(err, errlen, "%s: path too long", path);
		return -1;
	}
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		il_err(err, errlen, "%s: cannot create the %s (as %s): %s", path, s->what, tmp,
			 strerror(errno));
		return -1;
	}
	if (ftruncate(fd, (off_t)h.total_size) != 0) {
		il_err(err, errlen, "%s: cannot size to %llu bytes: %s", tmp,
			 (unsigned long long)h.total_size, strerror(errno));
		goto fail;
	}
	map = mmap(NULL, h.total_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		il_err(err, errlen, "%s: mmap: %s", tmp, strerror(errno));
		goto fail;
	}
	/* ftruncate zero-filled the rest: indices, counters, the user area. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	h.created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	memcpy(map, &h, sizeof(h));
	munmap(map, h.total_size);
	close(fd);
	rc = link(tmp, path);
	if (rc != 0 && errno != EEXIST) {
		il_err(err, errlen, "%s: cannot link into place: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	/* EEXIST: the peer was first; its file is as good as ours. */
	unlink(tmp);
	return 0;
fail:
	close(fd);
	unlink(tmp);
	return -1;
}

/* Everything a peer (or a stray file) could have got wrong, checked
 * before any pointer derived from the file is used. */
static int check(const struct file_hdr *h, uint64_t file_size, const char *path,
		 const struct il_shm_spec *s, char *err, size_t errlen)
{
	struct il_shm_geom g[IL_SHM_MAX_RINGS];
	struct file_hdr want;

	if (memcmp(h->magic, s->magic, sizeof(h->magic)) != 0) {
		il_err(err, errlen, "%s: not an Interlink %s (bad magic)", path, s->what);
		return -1;
	}
	if (h->shm_version != IL_SHM_FILE_VERSION || h->version != s->version) {
		il_err(err, errlen,
			 "%s: %s layout version %u.%u; this build speaks version %u.%u (remove the file)",
			 path, s->what, h->shm_version, h->version, IL_SHM_FILE_VERSION,
			 s->version);
		return -1;
	}
	if (h->n_rings != s->n_rings || h->user_bytes != s->user_bytes) {
		il_err(err, errlen, "%s: corrupt header (%u rings, %u user bytes)", path,
			 h->n_rings, h->user_bytes);
		return -1;
	}
	for (uint32_t i = 0; i < h->n_rings; i++) {
		if (h->ring[i].unit != s->ring[i].unit) {
			il_err(err, errlen,
				 "%s: ring %u holds %u-byte messages; this build uses %u (remove the file)",
				 path, i, h->ring[i].unit, s->ring[i].unit);
			return -1;
		}
		if (!pow2(h->ring[i].bytes) || h->ring[i].bytes < h->ring[i].unit) {
			il_err(err, errlen, "%s: corrupt header (ring %u: %u bytes)", path, i,
				 h->ring[i].bytes);
			return -1;
		}
		g[i].bytes = h->ring[i].bytes;
		g[i].unit = h->ring[i].unit;
	}
	memset(&want, 0, sizeof(want));
	layout(&want, g, h->n_rings, h->user_bytes);
	if (memcmp(want.ring, h->ring, sizeof(want.ring)) != 0 || h->user_off != want.user_off ||
	    h->total_size != want.total_size || file_size != want.total_size) {
		il_err(err, errlen, "%s: corrupt header (offsets or size disagree with ring sizes)",
			 path);
		return -1;
	}
	return 0;
}

int il_shm_file_open(const char *path, const struct il_shm_spec *spec, int create_absent,
		     struct il_shm_file *f, char *err, size_t errlen)
{
	const struct file_hdr *h;
	struct stat st;
	void *map;
	int fd;

	memset(f, 0, sizeof(*f));
	if (spec->n_rings == 0 || spec->n_rings > IL_SHM_MAX_RINGS) {
		il_err(err, errlen, "%s: %u rings asked, 1 to %u possible", path, spec->n_rings,
			 IL_SHM_MAX_RINGS);
		return -1;
	}
	if (create_absent && access(path, F_OK) != 0 && create(path, spec, err, errlen) != 0)
		return -1;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		il_err(err, errlen, "%s: cannot open the %s: %s", path, spec->what,
			 strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || (size_t)st.st_size < HDR_BYTES) {
		il_err(err, errlen, "%s: not an Interlink %s (too short)", path, spec->what);
		close(fd);
		return -1;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		il_err(err, errlen, "%s: mmap: %s", path, strerror(errno));
		return -1;
	}
	h = map;
	if (check(h, (uint64_t)st.st_size, path, spec, err, errlen) != 0) {
		munmap(map, (size_t)st.st_size);
		return -1;
	}
	f->base = map;
	f->len = (size_t)st.st_size;
	f->user = (char *)map + h->user_off;
	for (uint32_t i = 0; i < h->n_rings; i++) {
		f->ring[i] = (struct il_shm_ring *)((char *)map + h->ring[i].off);
		f->geom[i].bytes = h->ring[i].bytes;
		f->geom[i].unit = h->ring[i].unit;
	}
	return 0;
}

void il_shm_file_close(struct il_shm_file *f)
{
	if (f->base != NULL)
		munmap(f->base, f->len);
	memset(f, 0, sizeof(*f));
}
