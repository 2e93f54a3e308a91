/* json.c: the strict JSON pull reader of json.h. Never reads past c->end. */
#include "io/json.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jr_init(JsonCur *c, const char *text, size_t n) {
    c->begin = c->p = text;
    c->end = text + n;
    c->failed = false;
    c->err[0] = 0;
}

bool jr_fail(JsonCur *c, const char *what) {
    if (!c->failed) {
        c->failed = true;
        snprintf(c->err, sizeof c->err, "%s at byte %zu", what, jr_pos(c));
    }
    return false;
}

static void skip_ws(JsonCur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

bool jr_eat(JsonCur *c, char ch) {
    if (c->failed) return false;
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

bool jr_expect(JsonCur *c, char ch) {
    if (c->failed) return false;
    if (jr_eat(c, ch)) return true;
    char what[64];
    if (c->p >= c->end) snprintf(what, sizeof what, "expected '%c' but the text ended", ch);
    else snprintf(what, sizeof what, "expected '%c'", ch);
    return jr_fail(c, what);
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char h = p[i];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Scans or decodes a string body after the opening quote. With out == NULL
 * only validates (for jr_skip). The decoded text is never longer than the
 * escaped text, so a buffer of the raw length suffices. */
static bool string_body(JsonCur *c, char *out, size_t *len) {
    size_t n = 0;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '"') {
            c->p++;
            if (len) *len = n;
            return true;
        }
        if (ch < 0x20) return jr_fail(c, "unescaped control character in a string");
        if (ch != '\\') {
            if (out) out[n] = (char)ch;
            n++;
            c->p++;
            continue;
        }
        if (c->end - c->p < 2) break;
        char e = c->p[1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char repl[] = "\"\\/\b\f\n\r\t";
            if (out) out[n] = repl[simple - "\"\\/bfnrt"];
            n++;
            c->p += 2;
            continue;
        }
        if (e != 'u') return jr_fail(c, "invalid escape in a string");
        if (c->end - c->p < 6) break;
        int u = hex4(c->p + 2);
        if (u < 0) return jr_fail(c, "invalid \\u escape in a string");
        uint32_t cp = (uint32_t)u;
        size_t used = 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate needs its low half */
            if (c->end - c->p < 12 || c->p[6] != '\\' || c->p[7] != 'u')
                return jr_fail(c, "unpaired surrogate in a \\u escape");
            int lo = hex4(c->p + 8);
            if (lo < 0xDC00 || lo > 0xDFFF) return jr_fail(c, "unpaired surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            used = 12;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return jr_fail(c, "unpaired surrogate in a \\u escape");
        }
        if (cp == 0) return jr_fail(c, "\\u0000 in a string is not supported");
        char tmp[4];
        size_t k = put_utf8(tmp, cp);
        if (out) memcpy(out + n, tmp, k);
        n += k;
        c->p += used;
    }
    c->p = c->end;
    return jr_fail(c, "unterminated string");
}

bool jr_string(JsonCur *c, char **out, size_t *len) {
    *out = NULL;
    if (!jr_expect(c, '"')) return false;
    const char *start = c->p;
    size_t n = 0;
    if (!string_body(c, NULL, &n)) return false; /* measure, then decode */
    char *buf = malloc(n + 1);
    if (!buf) return jr_fail(c, "out of memory");
    c->p = start;
    string_body(c, buf, &n);
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return true;
}

bool jr_uint(JsonCur *c, uint64_t max, uint64_t *out) {
    if (c->failed) return false;
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') {
        if (c->p < c->end && *c->p == '-') return jr_fail(c, "expected a non-negative integer, got a negative number");
        return jr_fail(c, "expected a non-negative integer");
    }
    if (*c->p == '0' && c->p + 1 < c->end && c->p[1] >= '0' && c->p[1] <= '9')
        return jr_fail(c, "leading zero in a number");
    uint64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        uint64_t d = (uint64_t)(*c->p - '0');
        if (v > (max - d) / 10) return jr_fail(c, "integer too large");
        v = v * 10 + d;
        c->p++;
    }
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E'))
        return jr_fail(c, "expected an integer, got a fraction or exponent");
    *out = v;
    return true;
}

static bool literal(JsonCur *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n)) return jr_fail(c, "invalid literal");
    c->p += n;
    return true;
}

bool jr_null(JsonCur *c) {
    if (c->failed) return false;
    skip_ws(c);
    if (c->end - c->p >= 4 && !memcmp(c->p, "null", 4)) {
        c->p += 4;
        return true;
    }
    return false;
}

static bool digits(JsonCur *c) {
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return jr_fail(c, "invalid number");
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    return true;
}

static bool number(JsonCur *c) {
    if (c->p < c->end && *c->p == '-') c->p++;
    if (c->p < c->end && *c->p == '0') {
        c->p++;
        if (c->p < c->end && *c->p >= '0' && *c->p <= '9') return jr_fail(c, "leading zero in a number");
    } else if (!digits(c)) {
        return false;
    }
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!digits(c)) return false;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (!digits(c)) return false;
    }
    return true;
}

static bool skip_value(JsonCur *c, int depth) {
    if (c->failed) return false;
    if (depth > JR_MAX_DEPTH) return jr_fail(c, "nesting too deep");
    skip_ws(c);
    if (c->p >= c->end) return jr_fail(c, "expected a value but the text ended");
    switch (*c->p) {
    case '"':
        c->p++;
        return string_body(c, NULL, NULL);
    case '{':
        c->p++;
        if (jr_eat(c, '}')) return true;
        do {
            if (!jr_expect(c, '"') || !string_body(c, NULL, NULL) || !jr_expect(c, ':') ||
                !skip_value(c, depth + 1))
                return false;
        } while (jr_eat(c, ','));
        return jr_expect(c, '}');
    case '[':
        c->p++;
        if (jr_eat(c, ']')) return true;
        do {
            if (!skip_value(c, depth + 1)) return false;
        } while (jr_eat(c, ','));
        return jr_expect(c, ']');
    case 't': return literal(c, "true");
    case 'f': return literal(c, "false");
    case 'n': return literal(c, "null");
    default:
        if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) return number(c);
        return jr_fail(c, "unexpected character");
    }
}

bool jr_skip(JsonCur *c) { return skip_value(c, 0); }

bool jr_finish(JsonCur *c) {
    if (c->failed) return false;
    skip_ws(c);
    if (c->p != c->end) return jr_fail(c, "unexpected text after the end of the JSON value");
    return true;
}

bool jr_valid_utf8(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    while (p < e) {
        unsigned b = *p;
        if (b < 0x80) {
            p++;
            continue;
        }
        size_t k;
        uint32_t cp, min;
        if ((b & 0xE0) == 0xC0) k = 1, cp = b & 0x1F, min = 0x80;
        else if ((b & 0xF0) == 0xE0) k = 2, cp = b & 0x0F, min = 0x800;
        else if ((b & 0xF8) == 0xF0) k = 3, cp = b & 0x07, min = 0x10000;
        else return false;
        if ((size_t)(e - p) <= k) return false;
        for (size_t i = 1; i <= k; i++) {
            if ((p[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        p += k + 1;
    }
    return true;
}
