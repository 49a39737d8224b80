//! Word classes for the detectors, as regex fragments over folded text
//! (lowercase, no accents, words separated by single spaces). Rules combine
//! a class of verbs with a class of objects inside a short window instead of
//! listing whole phrases, in English, Portuguese and Spanish.

/// "Ignore / forget / bypass …" and their pt/es forms.
pub const VERB_IGNORE: &str = r"(?:ignor\w*|disregard\w*|forget\w*|forgot|overrid\w*|overwrit\w*|bypass\w*|skip\w*|circumvent\w*|neglect\w*|discard\w*|dismiss\w*|abandon\w*|drop|drops|set aside|put aside|pay no attention to|disobey\w*|disable|disabling|deactivate|turn off|switch off|stop (?:following|obeying)|do not (?:follow|obey)|don t (?:follow|obey)|dont (?:follow|obey)|desconsider\w*|esquec\w*|esqueca\w*|desprez\w*|descart\w*|pule|pular|burl\w*|anul\w*|desativ\w*|deslig\w*|olvid\w*|omit\w*|omite|salta|saltate|pasa por alto|desactiv\w*|pare de (?:seguir|obedecer)|nao (?:siga|obedeca)|deja de (?:seguir|obedecer)|no (?:sigas|obedezcas)|deixe de (?:lado|seguir)|nao ligue para|haz caso omiso (?:a|de)|no hagas caso (?:a|de))";

/// Words allowed between the verb and its object ("ignore *all your previous* rules").
pub const FILLER: &str = r"(?:all|any|every|each|whatever|whichever|quaisquer|cualquier|of|the|these|those|your|my|our|prior|previous|above|earlier|preceding|foregoing|initial|original|old|former|existing|current|default|system|safety|security|and|o|a|os|as|de|da|do|das|dos|e|suas?|seus?|tuas?|teus?|todas?|todos?|esses|essas|estas|estes|tus|sus|las|los|el|la|y|anteriores?|acima|iniciais|originais|antigas?|atuais|previas?|previos?|arriba|iniciales|originales|mis|minhas|meus)";

/// Qualifiers that point at earlier instructions.
pub const PRIOR: &str = r"(?:previous|prior|above|earlier|preceding|foregoing|initial|original|old|former|existing|default|system|anteriores?|acima|iniciais|inicial|originais|antigas?|previas?|previos?|arriba|iniciales|originales|before|antes|de antes|until now|ate agora|hasta ahora|so far|de seguranca|de seguridad|you (?:had|have|were given|got)(?: before)?)";

/// Second-person possessives.
pub const OWN: &str = r"\b(?:your|suas?|seus?|tuas?|teus?|tus|sus)\b";

/// Quantifiers ("all", "todas").
pub const ALL: &str = r"\b(?:all|any|every|todas?|todos?)\b";

/// Objects that are clearly instructions to a model.
pub const OBJ_STRONG: &str = r"(?:instruc\w*|prompts?|guidelines?|guidance|orientac\w*|indicaciones|directives?|diretriz\w*|directriz\w*|programming|programacao|programacion|guardrails?|constitution|constituicao|constitucion|content polic\w*|politicas? de conteudo|safety (?:rules|guidelines|filters|policies|checks|measures|settings)|(?:everything|anything|all|whatever) (?:that )?you (?:were|ve been|have been|got) (?:told|taught|instructed|given)|tudo (?:o )?que (?:te |lhe )?(?:disseram|falaram|ensinaram|mandaram|foi dito)|todo lo que te (?:dijeron|han dicho|ensenaron))";

/// Objects that may be instructions, or may be board-game rules.
pub const OBJ_WEAK: &str = r"(?:rules?|regras?|reglas?|directions|orders|ordens|ordenes|commands|comandos|restrictions?|restric\w*|constraints?|polic(?:y|ies)|politicas?|filters?|filtros?|limits|limites|limitations|training|treinamento|entrenamiento|context|contexto|ethics|etica|morals|principles|principios|checks?)";

/// Identities with no limits ("DAN", "unrestricted", "sem restrições").
pub const JAIL: &str = r"\b(?:dan|do anything now|jailbr\w*|unrestricted|unfiltered|uncensored|unlocked|unbound|unchained|without (?:any )?(?:rules|restrictions|limits|filters|guidelines|censorship|ethics|boundaries)|no (?:rules|restrictions|limits|filters|guidelines|ethics|morals|boundaries)|free from (?:rules|restrictions|limits)|sem (?:nenhuma |qualquer )?(?:restricoes|restricao|limites|regras|filtros|censura|etica)|irrestrit\w*|sin (?:ninguna )?(?:restricciones|limites|reglas|filtros|censura|etica)|libre de (?:reglas|restricciones))\b";

/// Privileged identities.
pub const ROLE: &str = r"\b(?:system|sistema|root|sudo|superuser|admin\w*|operator|operador)\b";

/// Verbs that ask to see something.
pub const LEAK_VERB: &str = r"(?:reveal\w*|quot\w*|cite|what (?:exactly )?(?:does|do|did)|print\w*|show\w*|display\w*|output\w*|repeat\w*|recite\w*|dump\w*|leak\w*|expose\w*|disclose\w*|tell me|tell us|give me|share|write out|spell out|paste|copy|what (?:are|were|is|was|s)|list|revel\w*|mostr\w*|imprim\w*|repit\w*|repet\w*|diga|diz|conte|exib\w*|compartilh\w*|escreva|copie|cole|liste|quais (?:sao|foram|eram)|qual (?:e|era)|muestr\w*|ensen\w*|dime|dame|comparte|escribe|cuales (?:son|eran)|cual es)";

/// What a model was configured with.
pub const LEAK_STRONG: &str = r"(?:system (?:prompt|message|instructions?)|(?:hidden|secret|internal|confidential) (?:system )?(?:prompt|instructions?|rules|message)|pre ?prompt|(?:prompt|mensagem|instrucoes) (?:de|do) sistema|instrucoes (?:ocultas|secretas|internas)|prompt (?:oculto|secreto)|instrucciones (?:ocultas|secretas|internas|del sistema)|(?:mensaje|prompt) del sistema|prompt de sistema)";

/// What a model was configured with, when it is "yours".
pub const LEAK_OWN_OBJ: &str = r"(?:prompts?|instructions|instrucoes|instrucciones|configuration|configuracao|configuracion|constitution|constituicao|constitucion|programming|programacao|directives|system message)";

/// Softer objects for the possessive leak rule ("your rules").
pub const LEAK_OWN_WEAK: &str = r"(?:rules|regras|reglas|guidelines|diretrizes|directrices)";

pub const LEAK_ADJ: &str = r"(?:initial|original|first|hidden|secret|real|actual|exact|full|current|internal|iniciais|inicial|originais|original|ocultas|secretas|completas?|exatas?|reais|iniciales|originales|completas)";
