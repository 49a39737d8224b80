#!/usr/bin/env python3
"""Writes a spoken-question set of scripts/voice-questions.py as clips for
the recogniser's benchmarks: each question said by espeak-ng (its silence
trimmed as voice-questions.py trims it), LEAD seconds of silence before the
words and 0.3 s after, 16 kHz mono, with a Sphinx-style `transcription`
file beside them (the format of the LibriVox clips).

    question-clips.py --set tune|held [--lead 0.3] --out DIR
"""

import argparse
import array
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("voice_questions", os.path.join(HERE, "voice-questions.py"))
vq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vq)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=sorted(vq.SETS), required=True)
    ap.add_argument("--lead", type=float, default=0.3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    lines = []
    for i, (q, _) in enumerate(vq.SETS[args.set]):
        name = f"{args.set}-{i:02}"
        path = os.path.join(args.out, name + ".wav")
        words = vq.spoken(q, path)
        clip = array.array("h", [0] * int(args.lead * vq.RATE))
        clip.extend(words)
        clip.extend([0] * int(0.3 * vq.RATE))
        vq.write_pcm16(path, clip)
        lines.append(f"<s> {q} </s> ({name})")
    with open(os.path.join(args.out, "transcription"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
