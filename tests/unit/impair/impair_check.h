/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Small cmocka helpers for the impairment tests: every statistical check
 * prints what it measured, so the test log doubles as a report.
 */
#ifndef IL_TEST_IMPAIR_CHECK_H
#define IL_TEST_IMPAIR_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

/* |got - want| <= tol, with the numbers in the log either way. */
#define CHECK_NEAR(what, got, want, tol)                                                   \
	do {                                                                               \
		double g_ = (double)(got), w_ = (double)(want), t_ = (double)(tol);        \
		int ok_ = fabs(g_ - w_) <= t_;                                             \
		print_message("  %-44s measured %-12.6g configured %-12.6g tol %-10.3g %s\n", \
			      what, g_, w_, t_, ok_ ? "ok" : "FAIL");                      \
		if (!ok_)                                                                  \
			fail_msg("%s: measured %g, expected %g +- %g", what, g_, w_, t_); \
	} while (0)

/* The error text must contain needle (a key name, the allowed range). */
#define CHECK_ERR_NAMES(err, needle)                                                       \
	do {                                                                               \
		if (strstr(err, needle) == NULL)                                           \
			fail_msg("error '%s' does not name %s", err, needle);              \
	} while (0)

#define CHECK_ERR_PRINT(err, needle)                                                       \
	do {                                                                               \
		print_message("  error: %s\n", err);                                       \
		CHECK_ERR_NAMES(err, needle);                                              \
	} while (0)

#endif
