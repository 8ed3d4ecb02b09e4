/* What a person cannot see in text (the approval prompt escapes it: approve_tty.c). The tables
 * are generated from Unicode's character database by scripts/gen/invisible.py. */
#ifndef RX_UNICODE_VIS_H
#define RX_UNICODE_VIS_H

#include <stdint.h>

/* 1 for a code point that is not visible text: controls (Cc), format characters (Cf: bidi
 * controls, zero-width characters, tags, soft hyphen, Arabic letter mark, Mongolian vowel
 * separator, musical symbol formatting), line and paragraph separators, every space but U+0020,
 * private use, surrogates, unassigned code points, variation selectors, the combining grapheme
 * joiner, Hangul fillers, Khmer inherent vowels and the braille blank. */
int rx_uni_hidden(uint32_t cp);

/* 1 for a combining mark (Mn, Me) that is not hidden: visible only on a base character, so one
 * with no base before it (at the start, after a blank or an escape) is escaped too. */
int rx_uni_combining(uint32_t cp);

#endif
