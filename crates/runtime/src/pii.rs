//! PII scrubbing and data classification before anything leaves the machine
//! (seed 003 §4.3, §10.4). Scrubbing replaces e-mails, phones, CPF, CNPJ,
//! CEP, card numbers and titled names with placeholders (`[EMAIL_1]`); the
//! audit list keeps a short hash of each value, never the value itself.
//! Cloud providers may only receive text classified Public after scrubbing.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::text::{fold, short_hash};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiKind {
    Email,
    Phone,
    Cpf,
    Cnpj,
    Cep,
    Card,
    Name,
}

impl PiiKind {
    fn label(self) -> &'static str {
        match self {
            Self::Email => "EMAIL",
            Self::Phone => "PHONE",
            Self::Cpf => "CPF",
            Self::Cnpj => "CNPJ",
            Self::Cep => "CEP",
            Self::Card => "CARD",
            Self::Name => "NAME",
        }
    }
}

/// One replaced value, safe to audit: no raw value, only a short hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Removal {
    pub kind: PiiKind,
    pub placeholder: String,
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scrubbed {
    pub text: String,
    pub removed: Vec<Removal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DataClass {
    /// May go to any provider.
    Public,
    /// Contains personal data: scrub before a cloud provider sees it.
    Personal,
    /// Health, money, sexuality, religion, politics, credentials: never
    /// leaves the machine.
    Sensitive,
}

fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static EMAIL: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"));
static CPF: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"\b\d{3}\.?\d{3}\.?\d{3}-?\d{2}\b"));
static CNPJ: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"\b\d{2}\.?\d{3}\.?\d{3}/?\d{4}-?\d{2}\b"));
static CARD: LazyLock<Option<Regex>> = LazyLock::new(|| re(r"\b(?:\d[ -]?){12,18}\d\b"));
static PHONE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"(?x)
        (?:\+\d{1,3}[\s.-]?)?(?:\(\d{2,4}\)|\b\d{2,4})[\s.-]?\d{3,5}[\s.-]?\d{4}\b  # +55 (11) 98765-4321, (212) 555-0147, 11 98765 4321
        | \+\d{1,3}(?:[\s.-]?\d{2,4}){2,5}\b                                      # +44 20 7946 0958
        | \b9?\d{4}-\d{4}\b                                                       # 98765-4321
    ")
});
static CEP: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"\b\d{5}-\d{3}\b|(?i:\bcep:?\s*)\d{8}\b"));
static TITLED_NAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r"\b(?:Dr|Dra|Sr|Sra|Srta|Mr|Mrs|Ms|Miss|Prof|Profa|Dona|Don|Doña)\.?\s+(\p{Lu}[\p{L}'’-]+(?:\s+(?:(?:da|de|do|dos|das|del|van|von)\s+)?\p{Lu}[\p{L}'’-]+){0,3})",
    )
});

fn digits(s: &str) -> Vec<u32> {
    s.chars().filter_map(|c| c.to_digit(10)).collect()
}

/// CPF check digits (mod 11); all-equal digits are invalid.
pub fn valid_cpf(s: &str) -> bool {
    let d = digits(s);
    if d.len() != 11 || d.iter().all(|x| *x == d[0]) {
        return false;
    }
    let check = |n: usize| {
        let sum: u32 = (0..n).map(|i| d[i] * (n as u32 + 1 - i as u32)).sum();
        let r = sum * 10 % 11;
        if r == 10 {
            0
        } else {
            r
        }
    };
    check(9) == d[9] && check(10) == d[10]
}

/// CNPJ check digits (weights 5..2,9..2 and 6..2,9..2).
pub fn valid_cnpj(s: &str) -> bool {
    let d = digits(s);
    if d.len() != 14 || d.iter().all(|x| *x == d[0]) {
        return false;
    }
    let check = |n: usize| {
        let weights: Vec<u32> = if n == 12 {
            vec![5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]
        } else {
            vec![6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]
        };
        let sum: u32 = d.iter().zip(weights).map(|(a, w)| a * w).sum();
        let r = sum % 11;
        if r < 2 {
            0
        } else {
            11 - r
        }
    };
    check(12) == d[12] && check(13) == d[13]
}

/// Luhn checksum over 13–19 digits.
pub fn luhn(s: &str) -> bool {
    let d = digits(s);
    if !(13..=19).contains(&d.len()) {
        return false;
    }
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, x)| {
            if i % 2 == 1 {
                let y = x * 2;
                if y > 9 {
                    y - 9
                } else {
                    y
                }
            } else {
                *x
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// A detector: its regex, the kind it finds, and a validator for matches.
type Scan = (&'static LazyLock<Option<Regex>>, PiiKind, fn(&str) -> bool);

struct Hit {
    start: usize,
    end: usize,
    kind: PiiKind,
}

/// Ids the app itself writes (UUIDs, e.g. saved items listed in a prompt):
/// their digit groups can look like phone numbers, but they are not PII and
/// must reach the model intact.
static UUID: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
});

fn collect(text: &str) -> Vec<Hit> {
    let ids: Vec<(usize, usize)> = UUID
        .as_ref()
        .map(|r| r.find_iter(text).map(|m| (m.start(), m.end())).collect())
        .unwrap_or_default();
    let mut hits: Vec<Hit> = Vec::new();
    let mut add = |start: usize, end: usize, kind: PiiKind| {
        let in_id = ids.iter().any(|&(s, e)| start < e && s < end);
        if !in_id && !hits.iter().any(|h| start < h.end && h.start < end) {
            hits.push(Hit { start, end, kind });
        }
    };
    // Priority order: the most specific, validated kinds first.
    let scans: [Scan; 6] = [
        (&EMAIL, PiiKind::Email, |_| true),
        (&CNPJ, PiiKind::Cnpj, valid_cnpj),
        (&CPF, PiiKind::Cpf, valid_cpf),
        (&CARD, PiiKind::Card, luhn),
        (&CEP, PiiKind::Cep, |_| true),
        (&PHONE, PiiKind::Phone, |m| {
            (8..=15).contains(&digits(m).len())
        }),
    ];
    for (regex, kind, accept) in scans {
        if let Some(r) = regex.as_ref() {
            for m in r.find_iter(text) {
                if accept(m.as_str()) {
                    add(m.start(), m.end(), kind);
                }
            }
        }
    }
    if let Some(r) = TITLED_NAME.as_ref() {
        for c in r.captures_iter(text) {
            if let Some(name) = c.get(1) {
                add(name.start(), name.end(), PiiKind::Name);
            }
        }
    }
    hits.sort_by_key(|h| h.start);
    hits
}

/// Replaces PII with numbered placeholders; the same value gets the same one.
pub fn scrub(text: &str) -> Scrubbed {
    let hits = collect(text);
    let mut out = String::with_capacity(text.len());
    let mut removed = Vec::new();
    let mut seen: HashMap<(PiiKind, &str), String> = HashMap::new();
    let mut counters: HashMap<PiiKind, usize> = HashMap::new();
    let mut last = 0;
    for h in hits {
        let value = &text[h.start..h.end];
        out.push_str(&text[last..h.start]);
        let placeholder = seen
            .entry((h.kind, value))
            .or_insert_with(|| {
                let n = counters.entry(h.kind).or_insert(0);
                *n += 1;
                let p = format!("[{}_{}]", h.kind.label(), n);
                removed.push(Removal {
                    kind: h.kind,
                    placeholder: p.clone(),
                    hash: short_hash(value),
                });
                p
            })
            .clone();
        out.push_str(&placeholder);
        last = h.end;
    }
    out.push_str(&text[last..]);
    Scrubbed { text: out, removed }
}

/// Every PII value found, in order, with its kind.
pub fn find_pii(text: &str) -> Vec<(PiiKind, &str)> {
    collect(text)
        .into_iter()
        .map(|h| (h.kind, &text[h.start..h.end]))
        .collect()
}

/// Does the text contain any PII we scrub?
pub fn contains_pii(text: &str) -> bool {
    !collect(text).is_empty()
}

static SENSITIVE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let words = [
        // health
        "diagnos\\w*",
        "cancer",
        "hiv",
        "aids",
        "depression",
        "depressed",
        "anxiety",
        "medication",
        "medications",
        "therapy",
        "therapist",
        "psychiatrist",
        "pregnant",
        "pregnancy",
        "disease",
        "illness",
        "surgery",
        "prescription",
        "chemotherapy",
        "diabetes",
        "mental health",
        "disorder",
        "diagnostico",
        "depressao",
        "ansiedade",
        "remedio",
        "remedios",
        "medicamento\\w*",
        "terapia",
        "terapeuta",
        "psiquiatra",
        "gravida",
        "gravidez",
        "doenca",
        "cirurgia",
        "receita medica",
        "quimioterapia",
        "saude mental",
        // finances
        "salary",
        "bank account",
        "debt",
        "debts",
        "loan",
        "mortgage",
        "income",
        "credit card",
        "tax return",
        "iban",
        "account number",
        "net worth",
        "salario",
        "conta bancaria",
        "divida\\w*",
        "emprestimo",
        "renda",
        "cartao de credito",
        "imposto de renda",
        "financiamento",
        "extrato",
        // sexuality
        "sexual orientation",
        "gay",
        "lesbian",
        "bisexual",
        "transgender",
        "sex life",
        "orientacao sexual",
        "lesbica",
        "bissexual",
        "transgenero",
        "vida sexual",
        // religion
        "religion",
        "religious",
        "church",
        "mosque",
        "synagogue",
        "atheist",
        "christian",
        "muslim",
        "jewish",
        "buddhist",
        "hindu",
        "religiao",
        "igreja",
        "mesquita",
        "sinagoga",
        "ateu",
        "cristao",
        "muculmano",
        "judeu",
        "espirita",
        "evangelico",
        "catolico",
        "candomble",
        "umbanda",
        // politics
        "political party",
        "voted for",
        "vote for",
        "left-wing",
        "right-wing",
        "democrat",
        "republican",
        "partido politico",
        "votei",
        "voto em",
        "vou votar",
        "politica partidaria",
        "filiado",
        // credentials
        "password",
        "passwords",
        "passcode",
        "pin code",
        "api key",
        "secret key",
        "private key",
        "ssh key",
        "access token",
        "credentials",
        "senha",
        "senhas",
        "chave de api",
        "chave privada",
        "credenciais",
        "token de acesso",
    ];
    re(&format!(r"\b(?:{})\b", words.join("|")))
});

/// Classifies text for where it may go. Card numbers count as Sensitive.
pub fn classify(text: &str) -> DataClass {
    let folded = fold(text);
    if SENSITIVE.as_ref().is_some_and(|r| r.is_match(&folded)) {
        return DataClass::Sensitive;
    }
    let hits = collect(text);
    if hits.iter().any(|h| h.kind == PiiKind::Card) {
        DataClass::Sensitive
    } else if hits.is_empty() {
        DataClass::Public
    } else {
        DataClass::Personal
    }
}

/// Why text may not go to a cloud provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} data never goes to a cloud provider")]
pub struct CloudRefusal(pub DataClass);

/// What a cloud provider may receive: scrubbed text that classifies Public.
pub fn prepare_for_cloud(text: &str) -> Result<Scrubbed, CloudRefusal> {
    let scrubbed = scrub(text);
    match classify(&scrubbed.text) {
        DataClass::Public => Ok(scrubbed),
        other => Err(CloudRefusal(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_ids_are_not_mistaken_for_phone_numbers() {
        // All-digit groups, as UUIDs sometimes have.
        let listed = "- 01937125-1234-7567-8901-234567890123: movie \"Ronin\"";
        assert_eq!(scrub(listed).text, listed);
        assert!(scrub(listed).removed.is_empty());
        // A real number next to an id is still removed.
        let both = "call 98765-4321 about 01937125-1234-7567-8901-234567890123";
        let s = scrub(both);
        assert!(!s.text.contains("98765-4321"), "{}", s.text);
        assert!(s.text.contains("01937125-1234-7567-8901-234567890123"), "{}", s.text);
    }

    #[test]
    fn check_digit_validators() {
        assert!(valid_cpf("529.982.247-25"));
        assert!(valid_cpf("52998224725"));
        assert!(!valid_cpf("529.982.247-24"));
        assert!(!valid_cpf("111.111.111-11"));
        assert!(valid_cnpj("11.222.333/0001-81"));
        assert!(!valid_cnpj("11.222.333/0001-80"));
        assert!(luhn("4111 1111 1111 1111"));
        assert!(!luhn("4111 1111 1111 1112"));
    }

    #[test]
    fn scrubs_each_kind_with_numbered_placeholders() {
        let text =
            "Mail ana@example.com or ANA: ana@example.com, bob@test.org. CPF 529.982.247-25, \
CNPJ 11.222.333/0001-81, CEP 01310-100, card 4111 1111 1111 1111, call +55 (11) 98765-4321 \
or (212) 555-0147 or +44 20 7946 0958. Ask Dr. João Silva, Mrs. Smith and Sr. Pedro.";
        let s = scrub(text);
        let expected = "Mail [EMAIL_1] or ANA: [EMAIL_1], [EMAIL_2]. CPF [CPF_1], CNPJ [CNPJ_1], \
CEP [CEP_1], card [CARD_1], call [PHONE_1] or [PHONE_2] or [PHONE_3]. Ask Dr. [NAME_1], Mrs. [NAME_2] and Sr. [NAME_3].";
        assert_eq!(s.text, expected);
        assert_eq!(s.removed.len(), 12);
        let audit = serde_json::to_string(&s.removed).unwrap();
        for raw in ["ana@example.com", "529.982.247-25", "João", "4111", "98765"] {
            assert!(!audit.contains(raw), "audit leaks {raw}");
        }
    }

    #[test]
    fn ordinary_numbers_are_left_alone() {
        for t in [
            "Inception (2010) runs 148 minutes",
            "version 1.2.3",
            "I have 3 cats and 2 dogs",
            "CPF-looking but invalid 123.456.789-00",
            "order 12345",
        ] {
            assert_eq!(scrub(t).text, t);
        }
    }

    #[test]
    fn classification() {
        assert_eq!(
            classify("What's a good movie for tonight?"),
            DataClass::Public
        );
        assert_eq!(classify("write to ana@example.com"), DataClass::Personal);
        assert_eq!(
            classify("I was diagnosed with diabetes"),
            DataClass::Sensitive
        );
        assert_eq!(
            classify("Minha senha do banco é 1234"),
            DataClass::Sensitive
        );
        assert_eq!(classify("Estou com depressão"), DataClass::Sensitive);
        assert_eq!(
            classify("my card is 4111 1111 1111 1111"),
            DataClass::Sensitive
        );
        assert_eq!(classify("Vou à igreja domingo"), DataClass::Sensitive);
    }

    #[test]
    fn cloud_gets_only_public_text() {
        assert_eq!(
            prepare_for_cloud("email ana@example.com").map(|s| s.text),
            Ok("email [EMAIL_1]".into())
        );
        assert_eq!(
            prepare_for_cloud("my salary is 5k"),
            Err(CloudRefusal(DataClass::Sensitive))
        );
    }
}
