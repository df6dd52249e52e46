/* goparse: see goparse.h. */
#include "goparse.h"
#include "err.h"

#include <stddef.h>
#include <string.h>

int go_parse_bool(const char *s, int *out) {
    static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < 6; i++) {
        if (!strcmp(s, t[i])) return *out = 1, 0;
        if (!strcmp(s, f[i])) return *out = 0, 0;
    }
    return err_set(ERR_INVALID, "invalid boolean \"%s\"", s);
}
