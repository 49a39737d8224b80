use voice::vad::{utterances, GateConfig};
use voice::wav::read_mono;

use crate::librivox_clips;

#[test]
fn the_gate_finds_each_recorded_utterance_between_silences() {
    let Some(clips) = librivox_clips() else {
        eprintln!("skipped: needs pocketsphinx-testdata (scripts/setup.sh)");
        return;
    };
    // Two clips, each after 2 s of silence, then 2 s of silence.
    let mut pcm = Vec::new();
    let mut starts = Vec::new();
    for (path, _) in clips.iter().take(2) {
        pcm.extend(std::iter::repeat_n(0.0f32, 32_000));
        starts.push(pcm.len() as u64 / 16);
        pcm.extend(read_mono(path, 16_000).expect("clip").samples);
    }
    pcm.extend(std::iter::repeat_n(0.0f32, 32_000));
    let found = utterances(&pcm, GateConfig::default());
    assert_eq!(found.len(), 2, "{found:?}");
    for ((start, end), expected) in found.iter().zip(&starts) {
        // The clips open with up to ~0.5 s of room tone before the voice.
        assert!(*start >= *expected && *start < expected + 800, "start {start} vs clip at {expected}");
        assert!(end > start);
    }
}
