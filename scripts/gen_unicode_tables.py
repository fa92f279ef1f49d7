#!/usr/bin/env python3
"""Generates src/tokenizer/unicode_tables.inc from Python's unicodedata module.

Usage: python3 scripts/gen_unicode_tables.py > src/tokenizer/unicode_tables.inc

Tables (all sorted by code point, searched by binary search in unicode.cpp):
  kCategoryRuns   {first code point, General_Category} for every run of equal category;
                  a run lasts until the next entry's first code point.
  kLowerMap       {code point, simple lowercase} where the two differ.
  kNfdIndex/Pool  full canonical decomposition of every code point that has one, except the
                  Hangul syllables U+AC00..U+D7A3 (decomposed algorithmically).
The category order must match geist::unicode::Category in unicode.h.
"""
import sys
import unicodedata

CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc",
              "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp",
              "Cc", "Cf", "Cs", "Co"]
MAX_CP = 0x10FFFF
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


def emit_rows(items, per_line, out):
    for i in range(0, len(items), per_line):
        out.write("    " + " ".join(items[i:i + per_line]) + "\n")


def main():
    out = sys.stdout
    cat_index = {name: i for i, name in enumerate(CATEGORIES)}

    runs = []
    prev = None
    for cp in range(MAX_CP + 1):
        cat = unicodedata.category(chr(cp))
        if cat != prev:
            runs.append((cp, cat_index[cat]))
            prev = cat

    lower = []
    for cp in range(MAX_CP + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        low = chr(cp).lower()
        # str.lower() is the full mapping; only U+0130 lowers to more than one code point, and
        # its simple mapping (UnicodeData.txt) is the first of them.
        lc = ord(low[0])
        if lc != cp:
            lower.append((cp, lc))

    nfd_index = []
    pool = []
    for cp in range(MAX_CP + 1):
        if 0xD800 <= cp <= 0xDFFF or HANGUL_FIRST <= cp <= HANGUL_LAST:
            continue
        d = unicodedata.normalize("NFD", chr(cp))
        if d != chr(cp):
            nfd_index.append((cp, len(pool), len(d)))
            pool.extend(ord(c) for c in d)

    out.write("// GENERATED FILE - DO NOT EDIT. Produced by scripts/gen_unicode_tables.py from\n")
    out.write("// Python %s's unicodedata, Unicode version %s.\n" %
              (sys.version.split()[0], unicodedata.unidata_version))
    out.write("// Included by src/tokenizer/unicode.cpp only.\n\n")
    out.write('inline constexpr const char* kUnicodeVersion = "%s";\n\n' %
              unicodedata.unidata_version)

    out.write("// {first code point, Category}; a run ends where the next begins.\n")
    out.write("inline constexpr CategoryRun kCategoryRuns[] = {\n")
    emit_rows(["{0x%X, %d}," % r for r in runs], 8, out)
    out.write("};\n\n")

    out.write("// {code point, simple lowercase mapping}.\n")
    out.write("inline constexpr CodePointPair kLowerMap[] = {\n")
    emit_rows(["{0x%X, 0x%X}," % p for p in lower], 6, out)
    out.write("};\n\n")

    out.write("// {code point, offset into kNfdPool, length}.\n")
    out.write("inline constexpr NfdEntry kNfdIndex[] = {\n")
    emit_rows(["{0x%X, %d, %d}," % e for e in nfd_index], 6, out)
    out.write("};\n\n")

    out.write("inline constexpr uint32_t kNfdPool[] = {\n")
    emit_rows(["0x%X," % c for c in pool], 10, out)
    out.write("};\n")


if __name__ == "__main__":
    main()
