//! The fusion settings both benchmarks try (`BENCH_GRID=1`), so LoCoMo's
//! tuning conversations and set A's tuning split are scored on the same
//! points and one can be chosen that suits both. Each point is ranked over
//! candidates read once per question (`Candidates` with the turns around
//! the hits), with the query embedded whole or without its names.

use memory::RecallSettings;

/// Every point of the grid, labelled (the label is the join key between
/// the two benchmarks' printouts).
pub fn points() -> Vec<(String, RecallSettings)> {
    let mut out = Vec::new();
    for names in [true, false] {
        for wv in [0.4f32, 0.5, 0.6, 0.7, 0.8] {
            for sat in [4.0f32, 8.0, 12.0] {
                for kc in [[0.0f32, 0.0], [0.25, 0.15], [0.5, 0.3]] {
                    for vc in [[0.0f32, 0.0], [0.15, 0.15], [0.3, 0.3]] {
                        for density in [0.25f32, 0.5] {
                            let s = RecallSettings {
                                vector_weight: wv,
                                keyword_weight: 1.0 - wv,
                                keyword_saturation: sat,
                                keyword_context: kc,
                                vector_context: vc,
                                density_weight: density,
                                names_by_keyword: names,
                                ..memory::DEFAULT_SETTINGS
                            };
                            out.push((label(&s), s));
                        }
                    }
                }
            }
        }
    }
    out
}

pub fn label(s: &RecallSettings) -> String {
    format!(
        "names_by_kw={} wv={:.2} sat={} kctx={:?} vctx={:?} density={}",
        s.names_by_keyword,
        s.vector_weight,
        s.keyword_saturation,
        s.keyword_context,
        s.vector_context,
        s.density_weight
    )
}

/// Settings under which a question's candidates are read for the grid:
/// the turns around the hits are read whatever the point's weights.
pub fn candidate_settings(names_by_keyword: bool) -> RecallSettings {
    RecallSettings {
        keyword_context: [0.5, 0.3],
        vector_context: [0.3, 0.3],
        names_by_keyword,
        ..memory::DEFAULT_SETTINGS
    }
}

/// The ways of embedding the query's names both benchmarks print beside
/// the defaults (each arm's candidates are read under its own settings):
/// names embedded (main's defaults before common names were left out), all
/// names left out, and, for each share in `BENCH_SHARES` (comma-separated,
/// e.g. `0.01,0.02,0.05`), the names in at least that share of the
/// viewer's items left out.
pub fn name_arms() -> Vec<(String, RecallSettings)> {
    let base = memory::DEFAULT_SETTINGS;
    let mut out = vec![
        ("names embedded".to_owned(), RecallSettings { names_by_keyword: false, common_name_share: 0.0, ..base }),
        ("all names left out".to_owned(), RecallSettings { names_by_keyword: true, ..base }),
    ];
    let shares = std::env::var("BENCH_SHARES").unwrap_or_default();
    for share in shares.split(',').filter_map(|x| x.trim().parse::<f32>().ok()) {
        out.push((
            format!("common names >= {share}"),
            RecallSettings { names_by_keyword: false, common_name_share: share, ..base },
        ));
    }
    out
}
