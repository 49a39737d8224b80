//! Deterministic long-conversation benchmark data: months of chat sessions
//! over many topics, with facts planted in old turns, questions about them
//! that paraphrase the fact (partial keyword overlap), and distractor turns
//! that share the fact's words (names, topic words) without answering it.
use std::collections::HashMap;

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next(&mut self) -> u64 {
        // SplitMix64: stable everywhere, no dependency.
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() % 10_000) as f64 / 10_000.0 < p
    }
    /// `0..n` shuffled (Fisher–Yates), the first `keep` of them.
    pub fn shuffled(&mut self, n: usize, keep: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..order.len()).rev() {
            let j = self.below(i + 1);
            order.swap(i, j);
        }
        order.truncate(keep.min(n));
        order
    }
}

pub struct Turn {
    pub id: String,
    pub human: bool,
    pub text: String,
    pub ts_ms: i64,
}

pub struct Question {
    pub query: String,
    pub evidence: String,
    pub tune: bool,
    /// Asked in Portuguese (generator B only).
    pub portuguese: bool,
}

pub struct Dataset {
    pub turns: Vec<Turn>,
    pub questions: Vec<Question>,
    pub now_ms: i64,
}

const NAMES: &[&str] = &[
    "Clara", "Tomasz", "Ingrid", "Rafael", "Yuki", "Amara", "Benedikt", "Priya", "Oskar", "Leila", "Mateo", "Sunniva",
    "Dmitri", "Fatima", "Jonas", "Aurelie", "Kwame", "Niamh", "Emil", "Ottilie", "Sanjay", "Greta", "Luca", "Marisol",
    "Henrik", "Zainab", "Felix", "Ines", "Tariq", "Solveig", "Bruno", "Chiara", "Anselm", "Wanjiru", "Pavel", "Esme",
    "Ravi", "Beatrix", "Kenji", "Ottavia", "Magnus", "Noor", "Lorenzo", "Astrid", "Hamid", "Delphine", "Jasper",
    "Mireille", "Tobias", "Anouk", "Cyrus", "Elodie", "Gunnar", "Imogen", "Lars", "Paloma", "Sebastian", "Thea",
    "Viktor", "Yara", "Alaric", "Brigitte", "Caspar", "Dagny", "Evander", "Flora", "Gideon", "Hedda", "Ivo",
    "Juno", "Kasimir", "Liesel", "Milo", "Nadia", "Orla", "Piet", "Quentin", "Rosalind", "Stellan", "Tilda",
    "Ulrich", "Vesna", "Wendell", "Xenia", "Yusuf", "Zofia", "Adelaide", "Bastian", "Cosima", "Dorian", "Elske",
    "Florian", "Gisela", "Horatio", "Isolde", "Jovan", "Katya", "Leopold", "Mathilde", "Nikolai", "Odile", "Percival",
    "Rasmus", "Saskia", "Thaddeus", "Uma", "Valentin", "Wilhelmina", "Ximena", "Yannick", "Zelda", "Ambrose",
    "Bettina", "Cornelius", "Dita", "Eamon", "Fenna", "Gustav", "Hilde", "Ignatius", "Jolene", "Konrad", "Lucinda",
    "Mortimer", "Nerys", "Octavia", "Philippa", "Reinhold", "Sigrid", "Torsten", "Ursula", "Vernon", "Winifred",
    "Aldo", "Birgit", "Clemens", "Doris", "Egon", "Frida", "Gregor", "Hanne", "Ingo", "Jette", "Knut", "Lotte",
    "Manfred", "Nele", "Olaf", "Petra", "Ruben", "Svea", "Till", "Ulla", "Volker", "Wiebke",
];

const SURNAMES: &[&str] = &[
    "Brandt", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Haddad", "Kowalski", "Fischer", "Novak", "Petrov",
    "Rossi", "Silva", "Jansen", "Dubois", "Nakamura", "Keller", "Horvat", "Larsen", "Costa", "Weber", "Ivanova",
    "Mendes", "Becker", "Schultz", "Romano", "Hughes", "Murphy", "Quinn", "Sato", "Varga", "Berg", "Holm",
    "Ferreira", "Lopes", "Marino", "Wolff", "Krause", "Lund", "Dahl", "Strand", "Engel", "Vogel", "Aalto",
    "Virtanen", "Nieminen", "Kaya", "Demir", "Yilmaz", "Ozturk", "Reyes", "Castro", "Ortiz", "Navarro", "Ramos",
    "Byrne", "Walsh", "Doyle", "Kelly", "Burke", "Lynch",
];

/// People who only appear in "echo" turns (never in a question).
const ECHO_NAMES: &[&str] = &[
    "Rowena", "Bartholomew", "Celestine", "Dietrich", "Eulalia", "Fridolin", "Genoveva", "Hieronymus", "Iolanthe",
    "Jeremias", "Kunigunde", "Leonhard", "Melisande", "Norbert", "Ophelia", "Pankraz", "Roswitha", "Severin",
    "Theodora", "Urban", "Veronika", "Wolfram", "Zacharias", "Apollonia", "Balthasar", "Crescentia", "Desmond",
    "Ermengard", "Fabian", "Gwendolyn", "Hubertus", "Irmgard", "Joachim", "Kreszenz", "Lambert", "Mechthild",
];

const CITIES: &[&str] = &[
    "Lisbon", "Trondheim", "Valencia", "Krakow", "Edinburgh", "Montreal", "Osaka", "Nairobi", "Tallinn", "Porto",
    "Ghent", "Bologna", "Seville", "Gdansk", "Bergen", "Leipzig", "Lyon", "Galway", "Utrecht", "Salzburg", "Brno",
    "Cork", "Aarhus", "Turin", "Bilbao", "Ljubljana", "Riga", "Vilnius", "Tartu", "Graz", "Basel", "Malmo",
];
const MONTHS: &[&str] =
    &["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

/// A fact anchored on a person's name: statement, question; slot values are
/// "as in the statement|as in the question".
struct Frame {
    s: &'static str,
    q: &'static str,
    slot: &'static [&'static str],
}

const FRAMES: &[Frame] = &[
    Frame { s: "My {slot} {name} relocated to {city} last {month} for a new job.", q: "Where did {name} move to?", slot: &["sister", "brother", "cousin", "aunt", "uncle", "niece", "nephew"] },
    Frame { s: "{name} and I signed up for a {slot} in {city} next spring.", q: "What event am I doing together with {name}?", slot: &["half marathon|race", "triathlon|race", "charity bike ride|ride", "ten kilometre fun run|run", "open water swim|swim"] },
    Frame { s: "My dentist appointment got postponed because Dr. {name} broke a wrist while {slot}.", q: "Why did Dr. {name} cancel on me?", slot: &["skiing", "rock climbing", "ice skating", "mountain biking", "playing squash"] },
    Frame { s: "I lent {name} my {slot} in {month} and never got it back.", q: "Which of my things does {name} still have?", slot: &["cordless drill", "camping tent", "stand mixer", "projector", "pressure washer", "telescope", "kayak"] },
    Frame { s: "{name} is seriously allergic to {slot}, so the dinner menu has to avoid it.", q: "What food can {name} not eat?", slot: &["peanuts", "shellfish", "sesame", "kiwi fruit", "walnuts", "celery"] },
    Frame { s: "{name}'s wedding will be at a vineyard outside {city} in {month}.", q: "Where is {name} getting married?", slot: &[""] },
    Frame { s: "My colleague {name} got promoted to head of {slot}.", q: "What is {name}'s new position at work?", slot: &["logistics", "customer support", "the design team", "procurement", "quality assurance", "research"] },
    Frame { s: "{name} recommended the novel {slot} and said the ending is devastating.", q: "Which book did {name} tell me to read?", slot: &["The Salt Orchard", "Winter Cartographers", "A Lantern for Mira", "The Glass Apiary", "Nine Bridges Home", "The Quiet Foundry"] },
    Frame { s: "I take {slot} lessons with a tutor called {name} every Thursday evening.", q: "Who is teaching me a language?", slot: &["Portuguese", "Japanese", "Finnish", "Greek", "Turkish", "Polish"] },
    Frame { s: "My {slot} {name} just had a baby boy and they named him {name2}.", q: "What is the name of {name}'s son?", slot: &["sister", "best friend", "cousin", "neighbour", "colleague"] },
    Frame { s: "{name} keeps beating me at {slot} at the pub quiz nights.", q: "Which game does {name} always win against me?", slot: &["darts", "chess", "backgammon", "table football", "pool"] },
    Frame { s: "I first met {name} at a {slot} in {city} years ago.", q: "How did I get to know {name} originally?", slot: &["pottery workshop", "jazz festival", "hackathon", "language exchange evening", "climbing gym"] },
    Frame { s: "{name} is training a {slot} puppy to become a therapy animal.", q: "What kind of dog is {name} raising?", slot: &["golden retriever", "border collie", "labradoodle", "cocker spaniel", "dachshund", "poodle"] },
    Frame { s: "{name} opened a little online shop selling {slot}.", q: "What does {name}'s business sell?", slot: &["hand-dyed yarn", "vintage maps", "sourdough starters", "ceramic mugs", "houseplants", "leather notebooks"] },
    Frame { s: "{name} drove me to the hospital when I broke my {slot}.", q: "Who took me to the emergency room?", slot: &["collarbone", "left wrist", "big toe", "two ribs"] },
    Frame { s: "Our babysitter {name} is moving away, so we need someone new by {month}.", q: "Why are we looking for a new nanny?", slot: &[""] },
];

/// Single facts with a paraphrased question (little or no word overlap).
const SINGLES: &[(&str, &str)] = &[
    ("We adopted a retired racing greyhound from the shelter last weekend.", "Did we get a dog from a rescue?"),
    ("The doctor said my vitamin D levels are really low and I need supplements.", "What deficiency showed up in my blood test?"),
    ("I finally quit smoking after twelve years, it's been a month without a cigarette.", "How long was I a smoker before I stopped?"),
    ("Our flight to Lisbon got cancelled because the air traffic controllers went on strike.", "Why couldn't we fly to Portugal?"),
    ("I sprained my ankle badly playing basketball on Tuesday.", "How did I hurt my foot?"),
    ("Ever since I nearly drowned as a kid I'm terrified of deep water.", "What is my biggest fear?"),
    ("We painted the nursery a pale sage green colour.", "What colour is the baby's room?"),
    ("My grandfather worked as a lighthouse keeper on the Cornish coast.", "What was my grandpa's job?"),
    ("I got a tattoo of a hummingbird on my left shoulder.", "What ink do I have on my arm?"),
    ("Coriander tastes like soap to me, I pick it out of everything.", "Which herb can I not stand?"),
    ("We're saving money to buy a narrowboat and live on the canal.", "What kind of home are we hoping to buy?"),
    ("I was born in a tiny village in the Scottish Highlands.", "Where did I grow up as a child?"),
    ("My blood type is O negative, so I donate every few months.", "Am I a universal donor?"),
    ("I've been sleepwalking again since the stressful deadline at work.", "What odd night-time habit came back?"),
    ("My car failed its inspection because of worn brake pads.", "Why didn't the vehicle pass its check?"),
    ("I switched to a standing desk to help my lower back pain.", "What did I change in my office for my spine?"),
    ("We cancelled the cable subscription and only stream things now.", "Do we still pay for television channels?"),
    ("I'm on a waiting list for a community allotment garden plot.", "Am I going to get a patch of land to grow vegetables?"),
    ("My daughter lost her first tooth at the cinema.", "Where was my kid when her baby tooth fell out?"),
    ("The landlord finally replaced the broken boiler, we have hot water again.", "Was the heating system repaired?"),
    ("I passed my motorcycle licence test on the second attempt.", "Did I get permission to ride a motorbike?"),
    ("I've been having migraines whenever I drink red wine.", "What triggers my headaches?"),
    ("My son wants to be a marine biologist and studies octopuses.", "What career does my boy dream of?"),
    ("We hosted a Ukrainian exchange student for the whole autumn term.", "Did a foreign pupil live with us?"),
    ("I ran out of petrol on the motorway and had to call roadside assistance.", "What happened on the highway?"),
    ("My phone screen shattered when I dropped it in the car park.", "How did my mobile break?"),
    ("I've started volunteering at the food bank on Saturday mornings.", "What charity work do I do at weekends?"),
    ("Our cat had to have three teeth removed at the vet.", "Why did the kitty need surgery?"),
    ("I got food poisoning from a prawn sandwich at the train station.", "What made me sick to my stomach?"),
    ("My insurance refused to cover the water damage from the burst pipe.", "Did the insurer pay for the flooding?"),
    ("I've been learning to play the cello since my fortieth birthday.", "Which instrument did I take up recently?"),
    ("We planted an apple tree in the garden in memory of my mother.", "What did we plant to remember mum?"),
    ("My passport expired so I had to cancel the trip to Canada.", "Why did the holiday abroad fall through?"),
    ("I'm colour blind and can't tell red from green.", "Do I have any problem with my eyesight?"),
    ("My neighbour's rooster wakes me up at five every morning.", "What noise disturbs my sleep?"),
    ("I failed the driving theory exam because of the road signs section.", "Which part of the test did I get wrong?"),
    ("We switched our electricity supplier to one that uses only wind power.", "Is our energy renewable now?"),
    ("I've been diagnosed with mild asthma and carry an inhaler now.", "What breathing condition do I have?"),
    ("My bicycle was stolen from outside the library.", "What happened to my bike?"),
    ("I keep bees on the roof and got eight jars of honey this summer.", "How much did my hives produce?"),
];

const TOPICS: &[(&str, &[&str], &[&str])] = &[
    ("cooking", &["made a big pot of lentil soup", "tried a new pasta recipe", "burned the garlic bread again", "baked cinnamon rolls", "ordered takeaway noodles", "prepared a curry with too much chilli"], &["dinner", "kitchen", "recipe", "lunch", "the oven", "leftovers"]),
    ("work", &["had back-to-back meetings", "finished the quarterly report", "argued with the project manager", "stayed late to fix a bug", "presented the budget", "cleared my inbox"], &["the office", "my team", "the deadline", "the client", "my boss", "the spreadsheet"]),
    ("weather", &["got soaked in the rain", "enjoyed the sunshine on the balcony", "shovelled snow off the driveway", "sat out a thunderstorm", "walked in thick fog", "sweated through a heatwave"], &["this morning", "all afternoon", "on the way home", "at the weekend", "yesterday", "tonight"]),
    ("fitness", &["went for a long run", "did a yoga class", "lifted weights at the gym", "cycled to work", "skipped my workout", "stretched for half an hour"], &["my knees", "my legs", "the trainer", "my heart rate", "the gym", "my back"]),
    ("travel", &["booked a train ticket", "looked at hotels by the sea", "packed for a weekend away", "missed the bus", "planned a road trip", "renewed the travel insurance"], &["the airport", "the station", "the holiday", "the coast", "the mountains", "the map"]),
    ("home", &["vacuumed the whole flat", "fixed the wobbly chair", "rearranged the living room", "washed the windows", "assembled a bookshelf", "cleaned out the fridge"], &["the hallway", "the bedroom", "the garden", "the balcony", "the garage", "the attic"]),
    ("media", &["watched a documentary about whales", "binged a detective series", "listened to an old jazz album", "started a fantasy podcast", "saw a film at the cinema", "read the news for too long"], &["the ending", "the soundtrack", "the episode", "the main actor", "the plot", "the reviews"]),
    ("family", &["called my parents", "helped the kids with homework", "visited my grandmother", "planned a birthday party", "argued about chores", "looked at old photos"], &["the children", "my mum", "my dad", "the family", "the relatives", "the weekend"]),
    ("health", &["slept badly", "had a sore throat", "drank more water", "booked a check-up", "took a long nap", "felt a bit dizzy"], &["the pharmacy", "my doctor", "the medicine", "my energy", "my headache", "my sleep"]),
    ("money", &["checked the bank balance", "paid the electricity bill", "made a budget for the month", "returned an expensive jacket", "compared phone contracts", "saved a bit for the holidays"], &["the rent", "the bills", "my savings", "the shopping", "the receipt", "the price"]),
];

const REPLIES: &[&str] = &[
    "That sounds like quite a day. How are you feeling about it?",
    "Oh, I can imagine. Did it turn out all right in the end?",
    "Thanks for telling me. What are you planning next?",
    "Ha, that made me smile. Tell me more!",
    "That must have been tiring. Do you have time to rest?",
    "Interesting! What did you like most about it?",
    "I remember you mentioning something similar before. How was it this time?",
    "That's good to hear. Anything else on your mind today?",
];

fn fill(t: &str, name: &str, name2: &str, slot: &str, city: &str, month: &str) -> String {
    t.replace("{name2}", name2).replace("{name}", name).replace("{slot}", slot).replace("{city}", city).replace("{month}", month)
}

/// `target_messages` turns over ~10 months; facts in the oldest 60 %.
pub fn generate(seed: u64, target_messages: usize, max_questions: usize) -> Dataset {
    let mut rng = Rng::new(seed);
    // Facts and their questions.
    let mut facts: Vec<(String, String)> = Vec::new();
    let mut names: Vec<String> = NAMES.iter().map(|n| (*n).to_owned()).collect();
    // More people: first names again, now with a surname (shares the first name with another fact).
    for (i, s) in SURNAMES.iter().enumerate() {
        names.push(format!("{} {s}", NAMES[(i * 7 + 3) % NAMES.len()]));
    }
    // Shuffle names deterministically.
    for i in (1..names.len()).rev() {
        let j = rng.below(i + 1);
        names.swap(i, j);
    }
    let mut name_at = 0;
    let mut anchors: Vec<String> = Vec::new();
    let mut frame_of: Vec<Option<usize>> = Vec::new();
    'frames: for round in 0..20 {
        for f in FRAMES {
            if name_at + 1 >= names.len() {
                break 'frames;
            }
            let value = f.slot[(round + name_at) % f.slot.len()];
            let (vs, vq) = value.split_once('|').unwrap_or((value, value));
            let (name, name2) = (names[name_at].clone(), names[name_at + 1].clone());
            let (name, name2) = (name.as_str(), name2.as_str());
            name_at += if f.s.contains("{name2}") { 2 } else { 1 };
            let city = rng.pick(CITIES);
            let month = rng.pick(MONTHS);
            facts.push((fill(f.s, name, name2, vs, city, month), fill(f.q, name, name2, vq, city, month)));
            anchors.push(name.to_owned());
            frame_of.push(FRAMES.iter().position(|g| std::ptr::eq(g, f)));
        }
    }
    for (s, q) in SINGLES {
        facts.push(((*s).to_owned(), (*q).to_owned()));
        anchors.push(String::new());
        frame_of.push(None);
    }
    // Interleave so the split sees both kinds.
    let order = rng.shuffled(facts.len(), max_questions);

    let day_ms = 86_400_000i64;
    let start_ms = 1_735_689_600_000i64; // 2025-01-01
    let days = 300i64;
    let sessions = (target_messages / 24).max(order.len() / 2 + 1);
    let per_session = (target_messages / sessions).max(4);
    let fact_sessions = (sessions as f64 * 0.6) as usize;
    // Which session each fact goes to (old ones), and its distractors (any session).
    let mut planted: Vec<Vec<usize>> = vec![Vec::new(); sessions];
    for &f in &order {
        planted[rng.below(fact_sessions.max(1))].push(f);
    }
    // Echoes: the same kind of news about someone else (semantic near misses),
    // anywhere in the timeline, two per anchored fact.
    let mut echoes: Vec<Vec<String>> = vec![Vec::new(); sessions];
    for &f in &order {
        let Some(fi) = frame_of[f] else { continue };
        let fr = &FRAMES[fi];
        for _ in 0..2 {
            let value = rng.pick(fr.slot);
            let vs = value.split_once('|').map(|v| v.0).unwrap_or(value);
            let (en, en2) = (rng.pick(ECHO_NAMES), rng.pick(ECHO_NAMES));
            let (city, month) = (rng.pick(CITIES), rng.pick(MONTHS));
            echoes[rng.below(sessions)].push(fill(fr.s, en, en2, vs, city, month));
        }
    }
    let mut turns = Vec::with_capacity(target_messages + facts.len() * 4);
    let mut questions = Vec::new();
    let mut evidence_of: Vec<Option<String>> = vec![None; facts.len()];
    let mut n = 0usize;
    let mut push = |turns: &mut Vec<Turn>, human: bool, text: String, ts: i64| -> String {
        let id = format!("m{n:07}");
        n += 1;
        turns.push(Turn { id: id.clone(), human, text, ts_ms: ts });
        id
    };
    for s in 0..sessions {
        let mut ts = start_ms + (s as i64 * days * day_ms) / sessions as i64 + rng.below(8) as i64 * 3_600_000;
        let mut todo: Vec<usize> = planted[s].clone();
        for t in 0..per_session / 2 {
            ts += 30_000 + rng.below(240) as i64 * 1_000;
            let human_text = if !todo.is_empty() && rng.chance(0.3) {
                let f = todo.remove(0);
                let id_text = facts[f].0.clone();
                let id = push(&mut turns, true, id_text, ts);
                evidence_of[f] = Some(id);
                ts += 20_000;
                push(&mut turns, false, rng.pick(REPLIES).to_owned(), ts);
                continue;
            } else if rng.chance(0.12) && !anchors.is_empty() {
                // Distractor: a fact's name in an unrelated turn, or a near miss.
                let f = order[rng.below(order.len())];
                let name = &anchors[f];
                let (topic, acts, objs) = TOPICS[rng.below(TOPICS.len())];
                let _ = topic;
                if name.is_empty() {
                    // Share words with a single fact without answering it.
                    let words: Vec<&str> = facts[f].0.split(' ').filter(|w| w.len() > 5).collect();
                    let w = if words.is_empty() { "today" } else { words[rng.below(words.len())] };
                    format!("Funny, someone mentioned {} today while I {}.", w.trim_matches(|c: char| !c.is_alphanumeric()), rng.pick(acts))
                } else {
                    match rng.below(4) {
                        0 => format!("{name} sent me a silly video about {}.", rng.pick(objs)),
                        1 => format!("I bumped into {name} near {} and we {}.", rng.pick(objs), rng.pick(acts).replace("my ", "our ")),
                        2 => format!("{name} says hello, by the way. We {} together.", rng.pick(acts).replace("my ", "our ")),
                        _ => format!("I keep thinking about what {name} said about {}.", rng.pick(objs)),
                    }
                }
            } else {
                let (_, acts, objs) = TOPICS[rng.below(TOPICS.len())];
                let opener = rng.pick(&["Today I", "This morning I", "Yesterday I", "Tonight I", "Earlier I", "So I"]);
                let tail = rng.pick(&["and it was fine", "which took forever", "and I'm exhausted", "and it felt great", "but whatever", "and laughed about it"]);
                format!("{opener} {} near {} {tail}.", rng.pick(acts), rng.pick(objs))
            };
            let _ = t;
            push(&mut turns, true, human_text, ts);
            ts += 20_000 + rng.below(60) as i64 * 1_000;
            push(&mut turns, false, rng.pick(REPLIES).to_owned(), ts);
        }
        for e in std::mem::take(&mut echoes[s]) {
            ts += 45_000;
            push(&mut turns, true, e, ts);
            ts += 20_000;
            push(&mut turns, false, rng.pick(REPLIES).to_owned(), ts);
        }
        // Facts not placed by chance go at the end of their session.
        for f in todo {
            ts += 60_000;
            let id = push(&mut turns, true, facts[f].0.clone(), ts);
            evidence_of[f] = Some(id);
            ts += 20_000;
            push(&mut turns, false, rng.pick(REPLIES).to_owned(), ts);
        }
    }
    // A question that several facts answer (a frame whose question names
    // nobody, e.g. "Why are we looking for a new nanny?" with thirteen
    // babysitters) has no one evidence turn: it is not asked. Until
    // session 7 its first instance was, with that instance's turn as the
    // only right answer, so any of the other twelve counted as a miss.
    let mut times: HashMap<&str, usize> = HashMap::new();
    for &f in &order {
        *times.entry(facts[f].1.as_str()).or_default() += 1;
    }
    for (i, &f) in order.iter().enumerate() {
        if times[facts[f].1.as_str()] > 1 {
            continue;
        }
        if let Some(e) = &evidence_of[f] {
            questions.push(Question { query: facts[f].1.clone(), evidence: e.clone(), tune: i % 2 == 0, portuguese: false });
        }
    }
    Dataset { turns, questions, now_ms: start_ms + (days + 1) * day_ms }
}

/// The import file format: a JSON array of {"id", "speaker", "text", "timestamp"}.
pub fn to_import_json(d: &Dataset, persona: &str) -> String {
    let rows: Vec<serde_json::Value> = d
        .turns
        .iter()
        .map(|t| {
            serde_json::json!({
                "id": t.id, "speaker": if t.human { "human" } else { persona }, "text": t.text,
                "timestamp": t.ts_ms as f64 / 1000.0,
            })
        })
        .collect();
    serde_json::Value::Array(rows).to_string()
}
