/* SPDX-License-Identifier: BSD-3-Clause
 *
 * The project's one convention for reporting a configuration or set-up
 * error: a function that can fail takes (char *err, size_t errlen), writes
 * one line saying what is wrong (the key, the value, what is allowed) and
 * returns -1. ERR() is that, for a function whose parameters carry those
 * two names (a function that returns something else calls il_err()):
 *
 *     if (v > 64)
 *             return ERR("config: key '%s': %u is too large; allowed: 1..64", key, v);
 */
#ifndef INTERLINK_ERR_H
#define INTERLINK_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Format into err (when errlen > 0; err may be NULL when errlen is 0). */
void il_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* -1 in plain sight, so the compiler knows every error path's value. */
#define ERR(...) (il_err(err, errlen, __VA_ARGS__), -1)

#ifdef __cplusplus
}
#endif

#endif
