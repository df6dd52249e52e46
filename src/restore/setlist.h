/* setlist: the store's backup sets as `etcdbrctl list` shows them: each set a full snapshot and
 * the deltas after it up to the next full snapshot (as verify and restore plan them,
 * verifier.h), oldest first, and the objects in no set: abandoned by a newer history
 * (docs/store-history.md), of another history than the set they fall in, or deltas before the
 * first full snapshot. Read-only: one listing of the store, no object is downloaded. */
#ifndef ETCDBR_SETLIST_H
#define ETCDBR_SETLIST_H

#include "../store/store.h"

#include <stdio.h>

typedef struct SetList SetList;

/* Lists store (borrowed; must outlive *out) once and plans its sets. *out owned (setlist_free).
 * 0, or the listing's ERR_* / ERR_NOMEM with a message. */
int setlist_build(Store *store, SetList **out);
void setlist_free(SetList *l);

/* Writes the list to f as JSON ({"store", "sets": [{set, latest, history, first_revision,
 * last_revision, size, full, deltas}], "other_objects": [... with "status"]}), or as a table for
 * people, with a summary line. 0, ERR_NOMEM or ERR_IO (f could not be written). */
int setlist_write_json(const SetList *l, FILE *f);
int setlist_write_table(const SetList *l, FILE *f);

#endif
