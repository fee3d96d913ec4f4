/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef INTERLINK_XOR_H
#define INTERLINK_XOR_H

#include <stdint.h>

/* dst ^= src over len bytes, any alignment: the plain XOR that the FEC
 * codec and the LEC repair bins fall back to (and check their vector
 * paths against). */
void il_xor(void *dst, const void *src, uint32_t len);

#endif
