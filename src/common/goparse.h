/* goparse: text forms the Go tool accepts, parsed as Go parses them (Go's strconv package). */
#ifndef ETCDBR_GOPARSE_H
#define ETCDBR_GOPARSE_H

/* Go's strconv.ParseBool: "1" "t" "T" "TRUE" "true" "True" give 1, "0" "f" "F" "FALSE" "false"
 * "False" give 0 in *out. 0, or ERR_INVALID (the message names the text). */
int go_parse_bool(const char *s, int *out);

#endif
