/* SPDX-License-Identifier: BSD-3-Clause
 * Every stage type the pipeline config can name.
 */
#include <stdio.h>
#include <string.h>

#include <interlink/stage.h>

extern const struct il_stage_type il_stage_classify;
extern const struct il_stage_type il_stage_sequencer;
extern const struct il_stage_type il_stage_nak;
extern const struct il_stage_type il_stage_impair;
extern const struct il_stage_type il_stage_fec_enc;
extern const struct il_stage_type il_stage_fec_dec;
extern const struct il_stage_type il_stage_ftcp;
extern const struct il_stage_type il_stage_control;
extern const struct il_stage_type il_stage_lec;
extern const struct il_stage_type il_stage_ha;
extern const struct il_stage_type il_stage_igmp;

static const struct il_stage_type *const types[] = {
	&il_stage_classify,
	&il_stage_sequencer,
	&il_stage_nak,
	&il_stage_impair,
	&il_stage_fec_enc,
	&il_stage_fec_dec,
	&il_stage_ftcp,
	&il_stage_control,
	&il_stage_lec,
	&il_stage_ha,
	&il_stage_igmp,
};

const struct il_stage_type *il_stage_type_find(const char *name)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(types[i]->name, name))
			return types[i];
	return NULL;
}

void il_stage_types_list(char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]) && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", types[i]->name);
}

size_t il_stage_types_count(void)
{
	return sizeof(types) / sizeof(types[0]);
}

const struct il_stage_type *il_stage_type_at(size_t i)
{
	return i < sizeof(types) / sizeof(types[0]) ? types[i] : NULL;
}
