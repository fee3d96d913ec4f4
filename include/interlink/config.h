/* SPDX-License-Identifier: BSD-3-Clause
 * Configuration tree: YAML (libyaml) into maps, sequences and scalars,
 * with command-line overrides and typed getters whose errors name the
 * key's full path and the values allowed.
 */
#ifndef INTERLINK_CONFIG_H
#define INTERLINK_CONFIG_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>

enum il_cfg_kind { IL_CFG_SCALAR, IL_CFG_MAP, IL_CFG_SEQ };

struct il_cfg;

struct il_cfg *il_cfg_load_file(const char *path, char *err, size_t errlen);
struct il_cfg *il_cfg_load_string(const char *yaml, const char *origin, char *err, size_t errlen);
void il_cfg_free(struct il_cfg *root);

/* While on, getters add the defaults they use to the tree (marked as
 * defaults), so il_cfg_dump() prints the effective configuration. */
void il_cfg_record_defaults(bool on);
/* The tree as YAML that loads back into the same tree; defaults a getter
 * added are followed by "# default" when mark_defaults. */
void il_cfg_dump(FILE *f, const struct il_cfg *root, bool mark_defaults);

/* Set a scalar by dotted path ("groups.0.port"), creating maps on the way.
 * A value of the form "[a, b]" or "{k: v}" is parsed as YAML. */
int il_cfg_set(struct il_cfg *root, const char *path, const char *value, char *err, size_t errlen);

enum il_cfg_kind il_cfg_kind(const struct il_cfg *n);
const char *il_cfg_path(const struct il_cfg *n); /* e.g. "groups[1].port" */
const char *il_cfg_scalar(const struct il_cfg *n); /* NULL unless scalar */
unsigned il_cfg_len(const struct il_cfg *n);        /* map or seq entries */
const struct il_cfg *il_cfg_at(const struct il_cfg *n, unsigned i);
const char *il_cfg_key_at(const struct il_cfg *map, unsigned i);
const struct il_cfg *il_cfg_get(const struct il_cfg *map, const char *key);

/* Typed getters: absent key gives the default; present but invalid is an
 * error (-1) naming the key, the value and what is allowed. */
int il_cfg_u64(const struct il_cfg *map, const char *key, uint64_t def, uint64_t min,
	       uint64_t max, uint64_t *out, char *err, size_t errlen);
int il_cfg_double(const struct il_cfg *map, const char *key, double def, double min,
		  double max, double *out, char *err, size_t errlen);
int il_cfg_bool(const struct il_cfg *map, const char *key, bool def, bool *out, char *err,
		size_t errlen);
int il_cfg_str(const struct il_cfg *map, const char *key, const char *def, const char **out,
	       char *err, size_t errlen);
/* allowed: NULL-terminated list; *out = index of the match. */
int il_cfg_enum(const struct il_cfg *map, const char *key, const char *const *allowed, int def,
		int *out, char *err, size_t errlen);
/* A list of strings (absent: none) into out[0..max): the count, or -1
 * naming the key when it is not a list of strings or is longer than max. */
int il_cfg_str_list(const struct il_cfg *map, const char *key, const char **out, int max,
		    char *err, size_t errlen);
/* IPv4 dotted quad into host byte order. */
int il_cfg_ipv4(const struct il_cfg *map, const char *key, uint32_t def, uint32_t *out,
		char *err, size_t errlen);
/* Error on any key of map not in allowed (NULL-terminated). */
int il_cfg_check_keys(const struct il_cfg *map, const char *const *allowed, char *err,
		      size_t errlen);
/* The node must be of kind k (error names the path). */
int il_cfg_expect(const struct il_cfg *n, enum il_cfg_kind k, char *err, size_t errlen);

#endif
