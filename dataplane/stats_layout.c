/* SPDX-License-Identifier: BSD-3-Clause
 * Telemetry that describes the appliance rather than measuring it: which
 * stages run (and of what type), which of each stage's values are counters,
 * and the configured group ids. /interlink/stats hands out counters and
 * state in one dict per stage; a reader that must tell them apart (the
 * Prometheus exporter types counters and gauges differently) or find the
 * stage of a given job (interlink-top looks for the sequencer, the FEC
 * decoder...) asks here instead of keeping its own copy of every stage's
 * counter list. Nothing here changes while the appliance runs.
 */
#include <errno.h>

#include <rte_telemetry.h>

#include <interlink/app.h>

static const struct il_app *layout_app;

/* /interlink/stages: {"<stage>": "<type>"} */
static int tel_stages(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	for (unsigned s = 0; s < layout_app->n_stages; s++) {
		const struct il_stage *st = layout_app->stages[s];

		rte_tel_data_add_dict_string(d, st->name, st->type->name);
	}
	return 0;
}

/* /interlink/counters: {"<stage>": ["pkts_in", "cycles", <counter names>]},
 * the keys of the stage's /interlink/stats dict that only ever grow (while
 * the appliance runs); the stage's other keys are state. */
static int tel_counters(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_dict(d);
	for (unsigned s = 0; s < layout_app->n_stages; s++) {
		const struct il_stage *st = layout_app->stages[s];
		struct rte_tel_data *c = rte_tel_data_alloc();

		if (c == NULL)
			return -ENOMEM;
		rte_tel_data_start_array(c, RTE_TEL_STRING_VAL);
		rte_tel_data_add_array_string(c, "pkts_in");
		rte_tel_data_add_array_string(c, "cycles");
		for (unsigned i = 0; i < st->type->n_counters; i++)
			rte_tel_data_add_array_string(c, st->type->counter_names[i]);
		rte_tel_data_add_dict_container(d, st->name, c, 0);
	}
	return 0;
}

/* /interlink/groups: [<group id>...] in configuration order. */
static int tel_groups(const char *cmd, const char *params, struct rte_tel_data *d)
{
	(void)cmd;
	(void)params;
	rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
	for (unsigned g = 0; g < layout_app->n_groups; g++)
		rte_tel_data_add_array_u64(d, layout_app->groups[g].id);
	return 0;
}

void il_telemetry_layout_register(const struct il_app *app)
{
	layout_app = app;
	rte_telemetry_register_cmd("/interlink/stages", tel_stages,
				   "Stage names and their types. No parameters");
	rte_telemetry_register_cmd("/interlink/counters", tel_counters,
				   "Per stage, which /interlink/stats keys are counters (the "
				   "others are state). No parameters");
	rte_telemetry_register_cmd("/interlink/groups", tel_groups,
				   "The configured group ids. No parameters");
}
