/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef IL_BENCH_FTCP_GLUE_H
#define IL_BENCH_FTCP_GLUE_H

#include <stdbool.h>
#include <stdint.h>

struct il_stage;

uint32_t ftcp_bench_populate(struct il_stage *st, uint32_t n);
uint32_t ftcp_bench_flows(struct il_stage *st);
uint64_t ftcp_bench_poll_tick(struct il_stage *st);
void ftcp_bench_all_due(struct il_stage *st, bool on);
uint64_t ftcp_bench_syns(struct il_stage *st);
uint64_t ftcp_bench_full_walk(struct il_stage *st, uint64_t *seen);

#endif
