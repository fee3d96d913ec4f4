/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Counts allocator calls, for the tests that show a component allocates
 * nothing once created. The test binary is linked with alloc_wrap
 * (tests/unit/meson.build: --wrap=malloc,calloc,realloc,aligned_alloc,
 * posix_memalign,free), so every call lands here; while `counting` is set
 * each one adds to `alloc_calls`. Include in exactly one file of a test.
 */
#ifndef IL_TEST_ALLOC_COUNT_H
#define IL_TEST_ALLOC_COUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
int __real_posix_memalign(void **p, size_t align, size_t size);
void __real_free(void *p);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
void __wrap_free(void *p);

static bool counting;
static uint64_t alloc_calls;

void *__wrap_malloc(size_t size)
{
	alloc_calls += counting;
	return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	alloc_calls += counting;
	return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	alloc_calls += counting;
	return __real_realloc(p, size);
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
	alloc_calls += counting;
	return __real_aligned_alloc(align, size);
}

int __wrap_posix_memalign(void **p, size_t align, size_t size)
{
	alloc_calls += counting;
	return __real_posix_memalign(p, align, size);
}

void __wrap_free(void *p)
{
	alloc_calls += counting && p;
	__real_free(p);
}

#endif /* IL_TEST_ALLOC_COUNT_H */
