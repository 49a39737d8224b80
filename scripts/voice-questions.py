#!/usr/bin/env python3
"""Spoken questions to a persona through `ledgermind voice converse`.

Each question of a set is said by espeak-ng (its own silence trimmed at
-40 dB by sox), the questions follow one another GAP seconds apart in one
microphone file, and the persona answers them in one conversation. For each
turn: end of speech -> first sound (from --json; and to the first sample
heard in the output file, sound_ms), whether the reply holds
the expected word, and what the speaker said, transcribed back with
`ledgermind voice transcribe` (Whisper) from the output file.

    voice-questions.py --ledgermind BIN --home HOME --persona NAME --set tune|held|fresh [--gap 30] [--language auto|en|pt] [--realtime] --work DIR

--realtime feeds the microphone file at the wall clock's speed (the run
takes as long as the file, about GAP seconds a question), so the model's
reading ahead between questions, the drafts and the send get the time the
tray's Talk gives them; without it the simulated clock runs a pause in a
few wall seconds.

Prints one line per turn and a summary; writes DIR/<set>.json.
"""

import argparse
import array
import json
import os
import statistics
import subprocess
import sys
import wave

# (question, accepted words in the reply). The "tune" half was looked at
# while changing the voice loop; the "held" half only measured.
SETS = {
    "tune": [
        ("What is the capital of France?", ["paris"]),
        ("How many legs does a spider have?", ["eight", "8"]),
        ("What colour is the sky on a clear day?", ["blue"]),
        ("What is the largest planet in our solar system?", ["jupiter"]),
        ("Who wrote Romeo and Juliet?", ["shakespeare"]),
        ("At what temperature in Celsius does water boil?", ["100", "hundred"]),
        ("What is the capital of Japan?", ["tokyo"]),
        ("How many days are there in a week?", ["seven", "7"]),
        ("Which gas do plants take in from the air?", ["carbon dioxide", "co2"]),
        ("What is the opposite of hot?", ["cold"]),
    ],
    "held": [
        ("What is the capital of Italy?", ["rome"]),
        ("How many continents are there?", ["seven", "7"]),
        ("At what temperature in Celsius does water freeze?", ["zero", "0"]),
        ("Which planet is called the red planet?", ["mars"]),
        ("What is the largest ocean on Earth?", ["pacific"]),
        ("How many hours are there in a day?", ["24", "twenty-four", "twenty four"]),
        ("Which animal says moo?", ["cow"]),
        ("What is the capital of Spain?", ["madrid"]),
        ("What do bees make?", ["honey"]),
        ("What is two plus three?", ["five", "5"]),
    ],
    # Written after the two above had been measured many times, to check
    # a change to the recogniser on questions nobody had heard it read.
    "fresh": [
        ("What is the capital of Canada?", ["ottawa"]),
        ("How many legs does a dog have?", ["four", "4"]),
        ("What colour are most leaves in summer?", ["green"]),
        ("Which planet do we live on?", ["earth"]),
        ("What is the boiling point of water in Fahrenheit?", ["212"]),
        ("How many days are there in a year?", ["365"]),
        ("What is the capital of Egypt?", ["cairo"]),
        ("Which animal has a very long neck?", ["giraffe"]),
        ("What do you call a baby cat?", ["kitten"]),
        ("What is three times three?", ["nine", "9"]),
        ("Which ocean lies between Europe and America?", ["atlantic"]),
        ("What is the largest country in the world?", ["russia"]),
        ("How many strings does a violin have?", ["four", "4"]),
        ("Who wrote Hamlet?", ["shakespeare"]),
        ("What is the capital of Greece?", ["athens"]),
        ("Which instrument has black and white keys?", ["piano"]),
        ("What gas do we breathe in to live?", ["oxygen"]),
        ("How many weeks are there in a year?", ["52", "fifty-two", "fifty two"]),
        ("What is the chemical symbol for gold?", ["au"]),
        ("Which bird is a symbol of peace?", ["dove"]),
    ],
}

RATE = 16_000


def read_pcm16(path):
    with wave.open(path, "rb") as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        data = array.array("h")
        data.frombytes(w.readframes(w.getnframes()))
        return data


def write_pcm16(path, samples):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(samples.tobytes())


def spoken(text, path):
    raw = path + ".raw.wav"
    subprocess.run(["espeak-ng", "-w", raw, text], check=True)
    # 16 kHz mono, espeak-ng's own silence at both ends trimmed at -40 dB.
    subprocess.run(
        ["sox", raw, "-r", str(RATE), "-c", "1", "-b", "16", path,
         "silence", "1", "0.01", "-40d", "reverse", "silence", "1", "0.01", "-40d", "reverse"],
        check=True,
    )
    os.remove(raw)
    return read_pcm16(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ledgermind", required=True)
    ap.add_argument("--home", required=True)
    ap.add_argument("--persona", required=True)
    ap.add_argument("--set", choices=sorted(SETS), required=True)
    ap.add_argument("--gap", type=float, default=30.0)
    ap.add_argument("--work", required=True)
    ap.add_argument("--label", default="")
    # en takes Whisper tiny.en (faster, and it hears English better); auto
    # is the command's default, the multilingual model.
    ap.add_argument("--language", choices=["auto", "en", "pt"], default="auto")
    ap.add_argument("--realtime", action="store_true",
                    help="voice converse --realtime: the input at the wall clock's speed, as a microphone")
    ap.add_argument("--pinned-threads", action="store_true",
                    help="keep LEDGERMIND_THREADS from the environment (runs before this flag kept it)")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    label = args.label or args.set
    questions = SETS[args.set]
    mic = array.array("h", [0] * RATE)
    ends = []
    for i, (q, _) in enumerate(questions):
        mic.extend(spoken(q, os.path.join(args.work, f"{args.set}-q{i}.wav")))
        ends.append(len(mic) * 1000 // RATE)
        mic.extend([0] * int(args.gap * RATE))
    mic_path = os.path.join(args.work, f"{label}-mic.wav")
    out_path = os.path.join(args.work, f"{label}-out.wav")
    write_pcm16(mic_path, mic)
    env = dict(os.environ, LEDGERMIND_HOME=args.home)
    # The model on the product's threads (the cores free when it starts),
    # not the one thread the test environment pins for repeatable tests.
    if not args.pinned_threads:
        env.pop("LEDGERMIND_THREADS", None)
    run = subprocess.run(
        [args.ledgermind, "--home", args.home, "voice", "converse", args.persona,
         "--input", mic_path, "--output", out_path, "--json",
         "--language", args.language] + (["--realtime"] if args.realtime else []),
        env=env, capture_output=True, text=True,
    )
    with open(os.path.join(args.work, f"{label}-converse.log"), "w") as f:
        f.write(run.stderr)
    if run.returncode != 0:
        sys.exit(f"voice converse failed ({run.returncode}): {run.stderr[-2000:]}")
    turns = [json.loads(l) for l in run.stdout.splitlines() if l.startswith("{")]
    played = read_pcm16(out_path)
    rows = []
    for k, t in enumerate(turns):
        # The question this turn answers: the one whose end is nearest before its end of speech.
        qi = min(range(len(ends)), key=lambda i: abs(ends[i] - t["end_of_speech_ms"]))
        q, accepted = questions[qi]
        start = t["first_audio_ms"] * RATE // 1000
        stop = turns[k + 1]["first_audio_ms"] * RATE // 1000 if k + 1 < len(turns) else len(played)
        seg_path = os.path.join(args.work, f"{label}-reply{k}.wav")
        write_pcm16(seg_path, played[start:stop])
        heard_back = subprocess.run(
            [args.ledgermind, "--home", args.home, "voice", "transcribe", seg_path],
            env=env, capture_output=True, text=True,
        ).stdout.strip()
        reply = t["reply"].lower()
        # The first sound the person hears: the reply's first sample within
        # 40 dB of its loudest (what is played may begin with silence).
        segment = played[start:stop]
        peak = max((abs(x) for x in segment), default=0)
        loud = next((i for i, x in enumerate(segment) if peak and abs(x) > peak / 100), 0)
        rows.append({
            "question": q,
            "heard": t["heard"],
            "reply": t["reply"],
            "spoken": t["spoken"],
            "heard_back": heard_back,
            "latency_ms": t["first_audio_ms"] - t["end_of_speech_ms"],
            "sound_ms": t["first_audio_ms"] + loud * 1000 // RATE - t["end_of_speech_ms"],
            "speech_end_ms": ends[qi],
            "detected_end_ms": t["end_of_speech_ms"],
            "interrupted": t["interrupted"],
            "correct": any(a in reply for a in accepted),
            "correct_heard_back": any(a in heard_back.lower() for a in accepted),
        })
    for r in rows:
        print(f"{r['latency_ms']:>6} ms  {'OK ' if r['correct'] else 'BAD'} {'(cut) ' if r['interrupted'] else ''}"
              f"Q: {r['question']} | heard: {r['heard']} | reply: {r['reply']} | heard back: {r['heard_back']}")
    lat = [r["latency_ms"] for r in rows]
    sound = [r["sound_ms"] for r in rows]
    answered = {r["question"] for r in rows if r["correct"]}
    summary = {
        "label": label,
        "set": args.set,
        "clock": "realtime" if args.realtime else "simulated",
        "questions": len(questions),
        "turns": len(rows),
        "answered_correctly": len(answered),
        "correct_in_heard_back": len({r["question"] for r in rows if r["correct_heard_back"]}),
        "latency_median_ms": statistics.median(lat) if lat else None,
        "latency_p90_ms": sorted(lat)[max(0, int(round(0.9 * len(lat))) - 1)] if lat else None,
        "latency_ms": lat,
        # The same to the first sound heard in what was played.
        "sound_median_ms": statistics.median(sound) if sound else None,
    }
    print(json.dumps(summary))
    with open(os.path.join(args.work, f"{label}.json"), "w") as f:
        json.dump({"summary": summary, "turns": rows}, f, indent=1)


if __name__ == "__main__":
    main()
