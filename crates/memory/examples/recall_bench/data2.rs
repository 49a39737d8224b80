//! A second, held-out long-conversation generator: never used to choose
//! any setting. Other templates, vocabulary, topics and people than
//! `data.rs`; a bilingual user (about a third of the sessions are in
//! Brazilian Portuguese, with Portuguese questions); questions that
//! paraphrase the fact; distractors that reuse a fact's name or its
//! rarest words, and "echo" turns with the same kind of news about
//! someone else.

use crate::data::{Dataset, Question, Rng, Turn};

/// Fact statement, question; `{n}` a person, `{m}` a second person,
/// `{x}` the slot value as in the statement | as in the question.
struct Frame {
    s: &'static str,
    q: &'static str,
    x: &'static [&'static str],
}

const EN_FRAMES: &[Frame] = &[
    Frame { s: "{n}'s band is playing their very first gig at the {x} on Friday night.", q: "Where is {n} performing with the group?", x: &["Blue Heron club", "old tram depot", "harbour warehouse", "student union bar", "botanical garden stage"] },
    Frame { s: "I keep grandma's {x} in the tin box under the stairs, {n} knows where.", q: "Where did I hide my grandmother's {x}?", x: &["pearl necklace", "pocket watch", "recipe book", "silver thimble", "wedding letters"] },
    Frame { s: "My manager {n} is leaving the company to {x}.", q: "Why is {n} quitting the job?", x: &["open a surf school|teach surfing", "look after her twins|care for children", "sail around the world|go sailing", "go back to university|study again"] },
    Frame { s: "{n} borrowed {x} euros from me to fix the car and swore to pay it back in June.", q: "How much money does {n} owe me?", x: &["three hundred", "eight hundred", "twelve hundred", "fifty"] },
    Frame { s: "Our neighbour {n} grows {x} in the greenhouse behind the fence.", q: "What does {n} cultivate next door?", x: &["chilli peppers|peppers", "giant pumpkins|pumpkins", "orchids|flowers", "heirloom tomatoes|tomatoes", "strawberries|berries"] },
    Frame { s: "My nephew {n} got accepted to study {x} at the university.", q: "What subject will {n} take at college?", x: &["marine engineering", "veterinary medicine", "astrophysics", "classical guitar", "architecture"] },
    Frame { s: "{n} told me to listen to a podcast about {x}, apparently it's addictive.", q: "Which show did {n} suggest for my commute?", x: &["unsolved shipwrecks", "the history of spices", "famous forgeries", "deep sea creatures", "cold war spies"] },
    Frame { s: "My physio {n} banned me from {x} for six weeks because of my knee.", q: "What sport am I not allowed to do according to {n}?", x: &["jogging|running", "football", "tennis", "skiing", "basketball"] },
    Frame { s: "{n} and {m} are splitting up after eleven years together.", q: "Who is {n} separating from?", x: &[""] },
    Frame { s: "The vet says {n}'s parrot has to lose weight, no more {x}.", q: "What treat is {n}'s bird not allowed anymore?", x: &["sunflower seeds", "grapes", "peanut butter", "crackers"] },
    Frame { s: "{n} is renovating an old {x} in the countryside to rent out.", q: "What kind of building is {n} fixing up?", x: &["windmill", "railway station", "chapel", "barn", "lighthouse"] },
    Frame { s: "I owe {n} a dinner because she covered my night shift in {x}.", q: "Why do I have to treat {n} to a meal?", x: &["March", "August", "December", "April"] },
];

const PT_FRAMES: &[Frame] = &[
    Frame { s: "Minha prima {n} se mudou para {x} por causa do trabalho novo.", q: "Para qual cidade a {n} foi morar?", x: &["Recife", "Curitiba", "Belém", "Florianópolis", "Manaus", "Goiânia"] },
    Frame { s: "O {n} me emprestou {x} dele e eu ainda não devolvi.", q: "O que eu peguei emprestado com o {n}?", x: &["a furadeira", "a barraca de camping", "o violão", "a bicicleta", "o projetor"] },
    Frame { s: "A {n} começou a fazer aulas de {x} às terças à noite.", q: "Que curso a {n} está fazendo?", x: &["cerâmica", "canto", "francês", "capoeira", "fotografia"] },
    Frame { s: "O cachorro do {n} é um {x} e vive fugindo do quintal.", q: "Qual é a raça do bicho de estimação do {n}?", x: &["vira-lata caramelo", "pastor alemão", "buldogue francês", "golden retriever"] },
    Frame { s: "A {n} tem alergia a {x}, então nada disso na festa.", q: "O que a {n} não pode comer?", x: &["camarão", "amendoim", "leite", "ovo", "morango"] },
    Frame { s: "Meu chefe {n} vai se aposentar em {x}.", q: "Quando o {n} deixa de trabalhar?", x: &["dezembro", "março", "julho", "outubro"] },
];

const EN_SINGLES: &[(&str, &str)] = &[
    ("The mechanic said the gearbox is shot and the repair will cost a fortune.", "What is broken in my car?"),
    ("I've been vegetarian ever since that documentary about factory farms.", "Why did I give up eating meat?"),
    ("We finally paid off the mortgage this spring, the house is ours!", "Do we still owe the bank for our home?"),
    ("They pulled out both my wisdom teeth on Monday and my cheeks are swollen.", "What did the dentist do to me?"),
    ("A jellyfish stung me while I was snorkelling off the coast of Crete.", "What happened to me in the sea on holiday?"),
    ("The storm flooded our basement and the old piano is ruined.", "Which instrument got destroyed by water downstairs?"),
    ("I'm training for my black belt grading in judo next month.", "What martial art do I practise?"),
    ("My daughter has been terrified of clowns since that birthday party.", "What frightens my little girl?"),
    ("I started working night shifts at the hospital in March.", "When did my schedule change to evenings and nights?"),
    ("The landlord is raising the rent by ten percent from January.", "Is my flat going to get more expensive?"),
    ("My lemon tart won second prize at the village baking contest.", "How did I do in the cake competition?"),
    ("We're turning the garage into a little recording studio.", "What are we converting the car shed into?"),
    ("I lost my wedding ring swimming in the lake and I feel awful.", "Where did my ring go missing?"),
    ("Dad has been forgetting names lately and the doctor ordered a brain scan.", "Is something wrong with my father's memory?"),
    ("After the reorganisation they made me team lead of the billing squad.", "Did I get promoted at work?"),
    ("Our son refuses to eat anything green, even peas.", "Which foods does my boy reject?"),
    ("I ran the city marathon in four hours and twelve minutes.", "What was my finishing time in the long race?"),
    ("The heating bill for January was almost four hundred euros.", "How much did we pay to keep the house warm in winter?"),
    ("I'm going to be a godmother to my best friend's baby.", "What role will I have for the newborn?"),
    ("My laptop got stolen from the café while I was ordering coffee.", "How did I lose my computer?"),
];

const PT_SINGLES: &[(&str, &str)] = &[
    ("Quebrei o pulso andando de patins no parque domingo passado.", "Como foi que eu me machuquei?"),
    ("Nosso apartamento novo fica no décimo segundo andar, com vista para o mar.", "Em que andar a gente mora agora?"),
    ("Comecei a tomar remédio para pressão alta, ordem do cardiologista.", "Que tratamento o médico do coração me passou?"),
    ("Passei na prova da autoescola de primeira!", "Consegui tirar a carteira de motorista?"),
    ("Minha avó faz noventa anos em novembro e vamos dar uma festa surpresa.", "Qual é a idade que a vovó vai completar?"),
    ("Vendemos o carro velho e agora vamos de bicicleta para todo lado.", "Como a gente se locomove depois de vender o automóvel?"),
    ("Fui demitido da agência de publicidade, estou procurando emprego.", "Eu ainda trabalho com propaganda?"),
    ("Adotamos dois gatinhos pretos na feira de adoção.", "Quantos filhotes a gente trouxe para casa?"),
];

const EN_PEOPLE: &[&str] = &[
    "Harriet", "Desmond", "Marguerite", "Ezekiel", "Philomena", "Augustin", "Rosalie", "Cedric", "Bronwyn", "Lysander",
    "Henrietta", "Barnaby", "Georgiana", "Florentin", "Maude", "Ignatz", "Clementine", "Rupert", "Winona", "Emeric",
    "Dorothea", "Lazlo", "Perpetua", "Alistair", "Seraphina", "Godfrey", "Ottoline", "Crispin", "Araminta", "Jethro",
    "Lavinia", "Montague", "Euphemia", "Bertrand", "Cordelia", "Leopoldo", "Honoria", "Fitzgerald", "Isadora", "Mungo",
    "Arabella", "Peregrine", "Tabitha", "Cuthbert", "Evangeline", "Hamish", "Marigold", "Reginald", "Sybil", "Tobiah",
];

const PT_PEOPLE: &[&str] = &[
    "Joaquim", "Benedita", "Arlindo", "Conceição", "Teodoro", "Iracema", "Juvenal", "Lindalva", "Anacleto", "Marivalda",
    "Epitácio", "Rosicleide", "Genivaldo", "Jussara", "Belarmino", "Cleonice", "Deoclécio", "Evanilde", "Florisvaldo",
    "Gildete", "Honório", "Ivonete", "Jurandir", "Leonor", "Macário", "Nazaré", "Osvaldo", "Palmira", "Quitéria",
    "Raimundo",
];

/// People who only appear in echo turns.
const ECHO_PEOPLE: &[&str] =
    &["Wilhelmine", "Casimir", "Eudora", "Thelonius", "Griselda", "Anatole", "Ermelinda", "Sebastião", "Valdirene", "Cosme"];

const EN_FILLER: &[(&[&str], &[&str])] = &[
    (&["repotted the monstera", "pulled weeds for an hour", "planted garlic bulbs", "mowed the lawn"], &["in the backyard", "before the rain", "with the new gloves", "after breakfast"]),
    (&["was stuck on the ring road", "missed the 8:15 train", "took the ferry", "cycled in a headwind"], &["on the way to work", "this morning", "again", "for forty minutes"]),
    (&["finally beat the last boss", "played co-op until midnight", "rage quit a racing game", "built a castle in the game"], &["with my cousin", "online", "all evening", "on the console"]),
    (&["returned the shoes", "bought a new kettle", "compared mattress prices", "found a cheap winter coat"], &["at the mall", "online", "in the sale", "at the market"]),
    (&["practised scales on the keyboard", "learned a new chord progression", "recorded a voice memo of a melody", "tuned the old guitar"], &["for half an hour", "before dinner", "with headphones on", "quietly"]),
    (&["revised for the accounting exam", "read two chapters of the textbook", "made flashcards", "watched a lecture online"], &["in the library", "at the kitchen table", "late at night", "with coffee"]),
    (&["watched the match at the pub", "argued about the referee", "checked the league table", "bet on the derby"], &["with friends", "on TV", "after work", "loudly"]),
    (&["fixed the dripping tap", "painted the fence", "hung new shelves", "oiled the squeaky door"], &["in the bathroom", "in the hall", "all Saturday", "with a borrowed ladder"]),
];

const PT_FILLER: &[(&[&str], &[&str])] = &[
    (&["fiz um feijão caprichado", "pedi uma pizza", "assei um bolo de fubá", "fiz café coado"], &["para o almoço", "hoje cedo", "no fim de semana", "para a visita"]),
    (&["peguei um trânsito terrível", "perdi o ônibus", "fui de metrô", "choveu no caminho"], &["na volta do trabalho", "hoje de manhã", "de novo", "na avenida"]),
    (&["assisti à novela", "vi um jogo do campeonato", "maratonei uma série", "ouvi um samba antigo"], &["com a família", "até tarde", "no sofá", "sem pressa"]),
    (&["arrumei o armário", "lavei a varanda", "consertei a torneira", "organizei a garagem"], &["o dia todo", "com calma", "depois do almoço", "sozinho"]),
];

const EN_REPLIES: &[&str] = &[
    "Sounds like a full day! What was the best part?",
    "Oh no. Are you okay?",
    "Nice one. I'd love to hear more.",
    "That's a lot to juggle. Take it easy tonight.",
    "Haha, classic. Then what happened?",
    "Noted! Anything you want me to remind you about?",
];

const PT_REPLIES: &[&str] = &[
    "Que dia, hein! E como você está?",
    "Poxa, que chato. Quer conversar sobre isso?",
    "Que legal! Me conta mais.",
    "Entendi. Descansa um pouco hoje.",
];

fn fill(t: &str, n: &str, m: &str, x: &str) -> String {
    t.replace("{n}", n).replace("{m}", m).replace("{x}", x)
}

struct Fact {
    statement: String,
    question: String,
    portuguese: bool,
    /// The person the fact is about ("" for single facts).
    person: String,
    /// The frame and language, for echoes.
    frame: Option<(bool, usize)>,
}

/// About `target_messages` turns over ~11 months; facts in the oldest 65 %.
pub fn generate(seed: u64, target_messages: usize, max_questions: usize) -> Dataset {
    let mut rng = Rng::new(seed ^ 0x5EC0_4D5E);
    let mut facts: Vec<Fact> = Vec::new();
    for (portuguese, frames, people) in [(false, EN_FRAMES, EN_PEOPLE), (true, PT_FRAMES, PT_PEOPLE)] {
        let mut at = 0;
        'rounds: for round in 0..8 {
            for (fi, f) in frames.iter().enumerate() {
                if at + 1 >= people.len() {
                    break 'rounds;
                }
                let (n, m) = (people[at], people[at + 1]);
                at += if f.s.contains("{m}") { 2 } else { 1 };
                let v = f.x[(round + fi) % f.x.len()];
                let (vs, vq) = v.split_once('|').unwrap_or((v, v));
                facts.push(Fact {
                    statement: fill(f.s, n, m, vs),
                    question: fill(f.q, n, m, vq),
                    portuguese,
                    person: n.to_owned(),
                    frame: Some((portuguese, fi)),
                });
            }
        }
    }
    for (portuguese, singles) in [(false, EN_SINGLES), (true, PT_SINGLES)] {
        for (s, q) in singles {
            facts.push(Fact {
                statement: (*s).to_owned(),
                question: (*q).to_owned(),
                portuguese,
                person: String::new(),
                frame: None,
            });
        }
    }
    let order = rng.shuffled(facts.len(), max_questions);

    let day_ms = 86_400_000i64;
    let start_ms = 1_704_067_200_000i64; // 2024-01-01
    let days = 330i64;
    let sessions = (target_messages / 30).max(order.len() / 2 + 1);
    let per_session = (target_messages / sessions).max(4);
    let fact_sessions = ((sessions as f64) * 0.65) as usize;
    // Every third session is in Portuguese; a fact goes to a session of its language.
    let is_pt = |s: usize| s % 3 == 2;
    let mut planted: Vec<Vec<usize>> = vec![Vec::new(); sessions];
    for &f in &order {
        loop {
            let s = rng.below(fact_sessions.max(3));
            if is_pt(s) == facts[f].portuguese {
                planted[s].push(f);
                break;
            }
        }
    }
    let mut echoes: Vec<Vec<String>> = vec![Vec::new(); sessions];
    for &f in &order {
        let Some((pt, fi)) = facts[f].frame else { continue };
        let fr = if pt { &PT_FRAMES[fi] } else { &EN_FRAMES[fi] };
        for _ in 0..2 {
            let v = rng.pick(fr.x);
            let vs = v.split_once('|').map_or(v, |p| p.0);
            let text = fill(fr.s, rng.pick(ECHO_PEOPLE), rng.pick(ECHO_PEOPLE), vs);
            loop {
                let s = rng.below(sessions);
                if is_pt(s) == pt {
                    echoes[s].push(text);
                    break;
                }
            }
        }
    }
    let mut turns: Vec<Turn> = Vec::with_capacity(target_messages + facts.len() * 6);
    let mut evidence_of: Vec<Option<String>> = vec![None; facts.len()];
    let push = |turns: &mut Vec<Turn>, human: bool, text: String, ts: i64| -> String {
        let id = format!("b{:07}", turns.len());
        turns.push(Turn { id: id.clone(), human, text, ts_ms: ts });
        id
    };
    for s in 0..sessions {
        let pt = is_pt(s);
        let replies = if pt { PT_REPLIES } else { EN_REPLIES };
        let mut ts = start_ms + (s as i64 * days * day_ms) / sessions as i64 + rng.below(10) as i64 * 3_600_000;
        let mut todo = planted[s].clone();
        let mut lines: Vec<String> = Vec::new();
        for _ in 0..per_session / 2 {
            if !todo.is_empty() && rng.chance(0.25) {
                lines.push(format!("\u{0}{}", todo.remove(0)));
                continue;
            }
            let text = if rng.chance(0.15) {
                // Distractor: a fact's person, or a single fact's rarest word, in passing.
                let f = &facts[order[rng.below(order.len())]];
                if f.person.is_empty() {
                    let words: Vec<&str> = f.statement.split(' ').filter(|w| w.chars().count() > 6).collect();
                    let w = words.get(rng.below(words.len().max(1))).map_or("that", |w| w.trim_matches(|c: char| !c.is_alphanumeric()));
                    if pt { format!("Lembrei de {w} hoje, nada a ver.") } else { format!("Random thought: the word {w} came up in a meeting today.") }
                } else if pt {
                    match rng.below(3) {
                        0 => format!("Encontrei o {} na padaria, mandou um abraço.", f.person),
                        1 => format!("O {} me ligou para falar do aniversário.", f.person),
                        _ => format!("Vi uma foto do {} nas redes, tá ótimo.", f.person),
                    }
                } else {
                    match rng.below(3) {
                        0 => format!("Ran into {} at the supermarket, we chatted about nothing.", f.person),
                        1 => format!("{} texted me a meme at 2am, typical.", f.person),
                        _ => format!("Had coffee with {} and talked about the weather mostly.", f.person),
                    }
                }
            } else {
                let (acts, tails) = if pt { rng_pick(&mut rng, PT_FILLER) } else { rng_pick(&mut rng, EN_FILLER) };
                let opener = if pt {
                    rng.pick(&["Hoje", "Ontem", "Agora há pouco", "De manhã"])
                } else {
                    rng.pick(&["Update:", "So today I", "Quick one, I", "Meanwhile I"])
                };
                format!("{opener} {} {}.", rng.pick(acts), rng.pick(tails))
            };
            lines.push(text);
        }
        lines.extend(std::mem::take(&mut echoes[s]));
        lines.extend(todo.into_iter().map(|f| format!("\u{0}{f}")));
        for line in lines {
            ts += 25_000 + rng.below(300) as i64 * 1_000;
            if let Some(f) = line.strip_prefix('\u{0}').and_then(|f| f.parse::<usize>().ok()) {
                evidence_of[f] = Some(push(&mut turns, true, facts[f].statement.clone(), ts));
            } else {
                push(&mut turns, true, line, ts);
            }
            ts += 15_000 + rng.below(40) as i64 * 1_000;
            push(&mut turns, false, rng.pick(replies).to_owned(), ts);
        }
    }
    let questions = order
        .iter()
        .filter_map(|&f| {
            evidence_of[f].clone().map(|e| Question {
                query: facts[f].question.clone(),
                evidence: e,
                tune: false,
                portuguese: facts[f].portuguese,
            })
        })
        .collect();
    Dataset { turns, questions, now_ms: start_ms + (days + 2) * day_ms }
}

fn rng_pick<T: Copy>(rng: &mut Rng, xs: &[T]) -> T {
    xs[rng.below(xs.len())]
}
