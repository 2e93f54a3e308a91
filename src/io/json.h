/*
 * json.h: a tiny strict JSON pull reader for the io layer (safetensors headers).
 *
 * Private to src/io. The reader walks a byte range in place: the caller asks for
 * the value it expects next (an object's braces, a string, an unsigned integer)
 * and skips what it does not want. Strict RFC 8259: no comments, no trailing
 * commas, no leading zeros, control characters must be escaped. The first error
 * is kept in cur->err with its byte position; every later call then fails too,
 * so a parse can be checked once at its end.
 *
 *   JsonCur c;
 *   jr_init(&c, text, n);
 *   if (jr_expect(&c, '{') && !jr_eat(&c, '}')) {
 *       do { char *key; jr_string(&c, &key, NULL); jr_expect(&c, ':'); ...
 *       } while (jr_eat(&c, ','));
 *       jr_expect(&c, '}');
 *   }
 *   jr_finish(&c);            // only whitespace may follow
 *   if (c.failed) puts(c.err);
 */
#ifndef CT_IO_JSON_H
#define CT_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct JsonCur {
    const char *begin, *p, *end;
    bool failed;
    char err[192];
} JsonCur;

#define JR_MAX_DEPTH 64 /* nesting deeper than this is an error, not a stack overflow */

void jr_init(JsonCur *c, const char *text, size_t n);
/* Records an error "<what> at byte <pos>" (the first one wins); returns false. */
bool jr_fail(JsonCur *c, const char *what);
/* Skips whitespace; true when the next byte is ch, which is then consumed. */
bool jr_eat(JsonCur *c, char ch);
/* Like jr_eat, but a different byte is an error "expected 'ch'". */
bool jr_expect(JsonCur *c, char ch);
/* Reads a string into a new NUL-terminated malloc'ed buffer (*out; free it),
 * decoding escapes to UTF-8; len (may be NULL) receives its length. Strings
 * holding U+0000 are rejected (names are C strings). */
bool jr_string(JsonCur *c, char **out, size_t *len);
/* Reads a non-negative integer (no sign, fraction or exponent) up to max. */
bool jr_uint(JsonCur *c, uint64_t max, uint64_t *out);
/* Reads the literal null; false (without an error) when the next value is not null. */
bool jr_null(JsonCur *c);
/* Skips any one value. */
bool jr_skip(JsonCur *c);
/* Only whitespace may remain. */
bool jr_finish(JsonCur *c);
/* Is s[0..n) well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF)? */
bool jr_valid_utf8(const char *s, size_t n);
/* The byte offset of the cursor (for messages). */
static inline size_t jr_pos(const JsonCur *c) { return (size_t)(c->p - c->begin); }

#endif /* CT_IO_JSON_H */
